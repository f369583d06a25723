/*
 * tokcore: the compiled hot path of app.engine -- hand-written pre-tokenizers over UTF-8 for the bundled patterns
 * (gpt2, cl100k, o200k, llama3), a byte-string -> rank hash table, and rank-based BPE, all running with the GIL
 * released. Output is identical to the pure-Python reference (app/engine/pretokenize.py + bpe.py), which equals
 * tiktoken; tests/engine/test_native*.py check that differentially.
 *
 * The pre-tokenizers live in pretokenizer.h (shared with the trainer).
 *
 * Input text is valid UTF-8 (it comes from PyUnicode_AsUTF8AndSize, which rejects lone surrogates), so the
 * decoder does not validate.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sched.h>
#include <string.h>

#include "bytes_hash.h"
#include "dump_bytes.h"
#include "pretokenizer.h"
#include "utf8_put.h"
#include "fast_call.h"
#include "nfc_check.h"
#include "id_list.h"

#define NO_RANK UINT32_MAX

/* ------------------------------------------------------------------------------------------------ rank table */

/* One open-addressing slot. Keys of up to 8 bytes live in the slot itself (key = load_tail of the bytes), so a
 * lookup touches one cache line; longer keys store (hash tag << 32 | arena offset) and are compared in the arena. */
typedef struct {
    uint64_t key;
    uint32_t rank;
    uint32_t len; /* 0 = empty */
} RankSlot;

typedef struct {
    RankSlot *slots;
    size_t mask;
    uint8_t *arena; /* bytes of the keys longer than 8 */
    uint32_t byte_rank[256];
    uint32_t *pair_rank; /* 65536 entries: rank of each 2-byte token */
    uint64_t *filter;    /* FILTER_BITS bits: a blocked Bloom filter of the keys of >= 3 bytes (three bits per key,
                            all in one 64-bit word), a cache-resident pre-check that answers most failed lookups
                            (BPE candidates that are not tokens) */
    uint64_t *joined; /* 65536 bits: bit (a << 8 | b) says bytes a, b stand next to each other in some token; where
                         they stand in no token, no merge can join across them (see next_cut); NULL = no cutting */
    uint64_t *ends;   /* 65536 bits: bytes a, b are the last two of some token */
    uint64_t *triple; /* TRIPLE_BITS bits: a one-hash Bloom filter of every three bytes a, b, c side by side in a
                         token with b no continuation byte (a false positive only loses a cut) */
    struct AtomChar *atoms; /* characters BPE may start from whole (see atomic_build); NULL = none */
    uint32_t *atom_block;   /* code point >> 7 -> 1 + block index into atom_slot, 0 = none */
    uint16_t *atom_slot;    /* blocks of 128: 1 + index into atoms, 0 = none */
    size_t count, n_atoms;
    size_t arena_len, n_blocks; /* bytes used in arena; blocks of atom_slot */
    uint32_t max_rank;
} RankTable;

/* 2 Mbit (256 KiB) with three bits per key: about 1.6% false positives at 200,000 keys (o200k), and half the
 * cache footprint of the one-bit-per-key filter of 4 Mbit it replaced (about 4.9% there); 3-8% less CPU time on
 * cold 10 KB documents (o200k_base, cl100k_base, gpt2; bench/peers/RESULTS.md). A key's word is picked by hash bits
 * 46-60 and its bits in the word by bits 28-45, so they are independent of each other and of the slot index (the
 * low bits) and the tag (bits 32-63 compared only after the filter passes). */
#define FILTER_BITS ((size_t)1 << 21)
#define FILTER_WORD(h) ((size_t)((h) >> 46) & (FILTER_BITS / 64 - 1))
#define FILTER_MASK(h) ((uint64_t)1 << ((h) >> 40 & 63) | (uint64_t)1 << ((h) >> 34 & 63) | (uint64_t)1 << ((h) >> 28 & 63))

/* The rank of the token p[0..n) (n >= 3) whose hash_bytes is h, or NO_RANK. */
static inline uint32_t rank_lookup_hashed(const RankTable *t, const uint8_t *p, size_t n, uint64_t h)
{
    size_t i = (size_t)h & t->mask;
    uint64_t bits = FILTER_MASK(h);
    if ((t->filter[FILTER_WORD(h)] & bits) != bits)
        return NO_RANK;
    if (n <= 8) {
        uint64_t key = load_tail(p, n);
        for (;;) {
            const RankSlot *sl = &t->slots[i];
            if (!sl->len)
                return NO_RANK;
            if (sl->len == n && sl->key == key)
                return sl->rank;
            i = (i + 1) & t->mask;
        }
    }
    uint32_t tag = (uint32_t)(h >> 32);
    for (;;) {
        const RankSlot *sl = &t->slots[i];
        if (!sl->len)
            return NO_RANK;
        if (sl->len == n && (uint32_t)(sl->key >> 32) == tag && bytes_eq(t->arena + (uint32_t)sl->key, p, n))
            return sl->rank;
        i = (i + 1) & t->mask;
    }
}

/* The rank of the token p[0..n), or NO_RANK. likely_hit: also prefetch the slot before consulting the filter, so
 * the two cache misses of a successful lookup overlap (whole-piece lookups, which usually succeed). */
static inline uint32_t rank_lookup_hint(const RankTable *t, const uint8_t *p, size_t n, int likely_hit)
{
    if (n == 1)
        return t->byte_rank[p[0]];
    if (n == 2)
        return t->pair_rank[((uint32_t)p[0] << 8) | p[1]];
    uint64_t h = hash_bytes(p, n);
    if (likely_hit)
        __builtin_prefetch(&t->slots[(size_t)h & t->mask]);
    return rank_lookup_hashed(t, p, n, h);
}

static inline uint32_t rank_lookup(const RankTable *t, const uint8_t *p, size_t n)
{
    return rank_lookup_hint(t, p, n, 0);
}

/* Start loading what a later rank_lookup_after(t, p, n, h) reads, so that two lookups' cache misses overlap.
 * Returns the hash of p[0..n) (0 for n < 3, where none is needed), to hand to rank_lookup_after: each key is
 * hashed once. */
static inline uint64_t rank_prefetch(const RankTable *t, const uint8_t *p, size_t n)
{
    if (n < 3)
        return 0;
    uint64_t h = hash_bytes(p, n);
    __builtin_prefetch(&t->filter[FILTER_WORD(h)]);
    __builtin_prefetch(&t->slots[(size_t)h & t->mask]);
    return h;
}

/* rank_lookup(t, p, n) given h = rank_prefetch(t, p, n). */
static inline uint32_t rank_lookup_after(const RankTable *t, const uint8_t *p, size_t n, uint64_t h)
{
    if (n == 2)
        return t->pair_rank[((uint32_t)p[0] << 8) | p[1]];
    return rank_lookup_hashed(t, p, n, h);
}

#define HUGE_PAGE ((size_t)2 << 20)

/* Zeroed memory for the large lookup tables, on transparent huge pages where the kernel offers them (its default
 * "madvise" mode): BPE probes these tables at random, and with 4 KiB pages most probes of a table that is not in
 * cache also miss the TLB. Large blocks are mapped 2 MiB-aligned and committed only as they are touched. Release
 * with big_free(p, size). NULL when out of memory. */
static size_t big_rounded(size_t size) { return (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1); }

static void *big_calloc(size_t size)
{
    if (size < HUGE_PAGE / 2)
        return calloc(1, size);
    size_t rounded = big_rounded(size);
    uint8_t *raw = mmap(NULL, rounded + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + HUGE_PAGE > p)
        munmap(p + rounded, (size_t)(raw + HUGE_PAGE - p));
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE); /* advisory: on failure the pages are ordinary ones */
#endif
    return p;
}

static void big_free(void *p, size_t size)
{
    if (!p)
        return;
    if (size < HUGE_PAGE / 2)
        free(p);
    else
        munmap(p, big_rounded(size));
}

static void rank_table_free(RankTable *t)
{
    big_free(t->slots, (t->mask + 1) * sizeof(RankSlot));
    PyMem_RawFree(t->arena);
    PyMem_RawFree(t->pair_rank);
    big_free(t->filter, FILTER_BITS / 8);
    PyMem_RawFree(t->joined);
    PyMem_RawFree(t->ends);
    PyMem_RawFree(t->triple);
    PyMem_RawFree(t->atoms);
    PyMem_RawFree(t->atom_block);
    PyMem_RawFree(t->atom_slot);
    memset(t, 0, sizeof(*t));
}

/* A rank table's tokens as flat arrays: token i is ptr[i][0..len[i]) with rank rank[i]. Built from a dict[bytes, int]
 * (pointers into the dict's bytes objects) or from the compiled artifact cache's sections (pointers into the mapped
 * token blob); valid while that source is alive. Every len is >= 1 and every rank in 0..INT32_MAX-1. */
typedef struct {
    size_t n;
    const uint8_t **ptr;
    uint32_t *len;
    uint32_t *rank;
    Py_buffer views[3];
    int nviews;
} RankEntries;

static void entries_free(RankEntries *e)
{
    PyMem_RawFree((void *)e->ptr);
    PyMem_RawFree(e->len);
    PyMem_RawFree(e->rank);
    for (int k = 0; k < e->nviews; k++)
        PyBuffer_Release(&e->views[k]);
    memset(e, 0, sizeof(*e));
}

static int entries_alloc(RankEntries *e, size_t n)
{
    e->n = n;
    e->ptr = PyMem_RawMalloc((n ? n : 1) * sizeof(uint8_t *));
    e->len = PyMem_RawMalloc((n ? n : 1) * sizeof(uint32_t));
    e->rank = PyMem_RawMalloc((n ? n : 1) * sizeof(uint32_t));
    if (!e->ptr || !e->len || !e->rank) {
        entries_free(e);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int entries_from_dict(RankEntries *e, PyObject *ranks)
{
    Py_ssize_t count = PyDict_Size(ranks), pos = 0;
    PyObject *key, *value;
    size_t i = 0;
    if (count < 0 || entries_alloc(e, (size_t)count))
        return -1;
    while (PyDict_Next(ranks, &pos, &key, &value)) {
        if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) == 0 || PyBytes_GET_SIZE(key) > (Py_ssize_t)UINT32_MAX) {
            entries_free(e);
            PyErr_SetString(PyExc_TypeError, "ranks keys must be non-empty bytes");
            return -1;
        }
        long long r = PyLong_AsLongLong(value);
        if (r == -1 && PyErr_Occurred()) {
            entries_free(e);
            return -1;
        }
        if (r < 0 || r >= (long long)INT32_MAX) {
            entries_free(e);
            PyErr_Format(PyExc_ValueError, "rank %lld out of range", r);
            return -1;
        }
        e->ptr[i] = (const uint8_t *)PyBytes_AS_STRING(key);
        e->len[i] = (uint32_t)PyBytes_GET_SIZE(key);
        e->rank[i] = (uint32_t)r;
        i++;
    }
    return 0;
}

/* From (tokens, offsets, ids): the token bytes concatenated, n + 1 native uint32 offsets (0, strictly increasing,
 * the last one the blob's length: every token non-empty) and n native uint32 ids, strictly increasing (so distinct)
 * and below INT32_MAX. ValueError naming the first inconsistency. */
static int entries_from_sections(RankEntries *e, PyObject *sections)
{
    if (!PyTuple_Check(sections) || PyTuple_GET_SIZE(sections) != 3) {
        PyErr_SetString(PyExc_TypeError, "ranks must be a dict or a (tokens, offsets, ids) tuple of buffers");
        return -1;
    }
    memset(e, 0, sizeof(*e));
    for (int k = 0; k < 3; k++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(sections, k), &e->views[k], PyBUF_C_CONTIGUOUS) < 0) {
            entries_free(e);
            return -1;
        }
        e->nviews = k + 1;
    }
    const uint8_t *blob = e->views[0].buf;
    size_t blob_len = (size_t)e->views[0].len;
    if (e->views[1].len % 4 || e->views[2].len % 4 || e->views[1].len != e->views[2].len + 4) {
        entries_free(e);
        PyErr_SetString(PyExc_ValueError, "rank sections: sizes do not match");
        return -1;
    }
    size_t n = (size_t)e->views[2].len / 4;
    const uint8_t *off_raw = e->views[1].buf, *id_raw = e->views[2].buf;
    Py_buffer keep[3];
    memcpy(keep, e->views, sizeof(keep));
    e->nviews = 0; /* entries_alloc frees on failure: hand the views back below */
    if (entries_alloc(e, n)) {
        for (int k = 0; k < 3; k++)
            PyBuffer_Release(&keep[k]);
        return -1;
    }
    memcpy(e->views, keep, sizeof(keep));
    e->nviews = 3;
    uint32_t prev_off, prev_id = 0;
    memcpy(&prev_off, off_raw, 4);
    if (prev_off != 0) {
        entries_free(e);
        PyErr_SetString(PyExc_ValueError, "rank sections: offsets do not start at 0");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t next, id;
        memcpy(&next, off_raw + 4 * (i + 1), 4);
        memcpy(&id, id_raw + 4 * i, 4);
        if (next <= prev_off || next > blob_len) {
            entries_free(e);
            PyErr_SetString(PyExc_ValueError, "rank sections: offsets are not strictly increasing within the tokens");
            return -1;
        }
        if (id >= (uint32_t)INT32_MAX || (i && id <= prev_id)) {
            entries_free(e);
            PyErr_SetString(PyExc_ValueError, "rank sections: ids are not strictly increasing below 2**31-1");
            return -1;
        }
        e->ptr[i] = blob + prev_off;
        e->len[i] = next - prev_off;
        e->rank[i] = id;
        prev_off = next;
        prev_id = id;
    }
    if ((size_t)prev_off != blob_len) {
        entries_free(e);
        PyErr_SetString(PyExc_ValueError, "rank sections: offsets do not end at the tokens' length");
        return -1;
    }
    return 0;
}

static int entries_from(RankEntries *e, PyObject *ranks)
{
    memset(e, 0, sizeof(*e));
    return PyDict_Check(ranks) ? entries_from_dict(e, ranks) : entries_from_sections(e, ranks);
}

/* Fill t from the entries. ValueError on a repeated token. Returns 0, or -1 with a Python exception set. */
static int rank_table_build(RankTable *t, const RankEntries *e)
{
    size_t count = e->n, total = 0;
    for (size_t k = 0; k < count; k++) {
        if (e->len[k] > 8)
            total += e->len[k];
    }
    if (total > (size_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "vocabulary too large");
        return -1;
    }
    size_t cap = 16;
    while (cap < (size_t)count * 2 + 2)
        cap <<= 1;
    t->mask = cap - 1;
    t->count = (size_t)count;
    t->arena_len = total;
    t->slots = big_calloc(cap * sizeof(RankSlot));
    t->arena = PyMem_RawMalloc((size_t)total + 16);
    t->pair_rank = PyMem_RawMalloc(sizeof(uint32_t) * 65536);
    t->filter = big_calloc(FILTER_BITS / 8);
    if (!t->slots || !t->arena || !t->pair_rank || !t->filter) {
        rank_table_free(t);
        PyErr_NoMemory();
        return -1;
    }
    for (int b = 0; b < 256; b++)
        t->byte_rank[b] = NO_RANK;
    for (int b = 0; b < 65536; b++)
        t->pair_rank[b] = NO_RANK;
    size_t off = 0;
    for (size_t k = 0; k < count; k++) {
        uint32_t r = e->rank[k];
        const uint8_t *p = e->ptr[k];
        size_t n = e->len[k];
        if ((uint32_t)r > t->max_rank)
            t->max_rank = (uint32_t)r;
        if (n == 1)
            t->byte_rank[p[0]] = (uint32_t)r;
        else if (n == 2)
            t->pair_rank[((uint32_t)p[0] << 8) | p[1]] = (uint32_t)r;
        uint64_t h = hash_bytes(p, n);
        t->filter[FILTER_WORD(h)] |= FILTER_MASK(h);
        size_t i = (size_t)h & t->mask;
        uint64_t tail = n <= 8 ? load_tail(p, n) : 0;
        while (t->slots[i].len) {
            const RankSlot *o = &t->slots[i];
            if (o->len == n && (n <= 8 ? o->key == tail
                                       : ((uint32_t)(o->key >> 32) == (uint32_t)(h >> 32) &&
                                          !memcmp(t->arena + (uint32_t)o->key, p, n)))) {
                rank_table_free(t);
                PyErr_SetString(PyExc_ValueError, "rank table: repeated token");
                return -1;
            }
            i = (i + 1) & t->mask;
        }
        RankSlot *sl = &t->slots[i];
        sl->len = (uint32_t)n;
        sl->rank = (uint32_t)r;
        if (n <= 8) {
            sl->key = tail;
        } else {
            memcpy(t->arena + off, p, n);
            sl->key = ((h >> 32) << 32) | (uint64_t)off;
            off += n;
        }
    }
    for (int b = 0; b < 256; b++) {
        if (t->byte_rank[b] == NO_RANK) {
            rank_table_free(t);
            PyErr_Format(PyExc_ValueError, "byte-level vocabulary lacks the single byte %d", b);
            return -1;
        }
    }
    return 0;
}

#define TRIPLE_BITS ((size_t)1 << 19) /* 64 KiB: 4.7% false positives at cl100k_base's 25,118 triples */

/* Bit k of the bit set m (64-bit words, bit k in word k / 64). */
static inline int bit_at(const uint64_t *m, size_t k) { return (int)((m[k >> 6] >> (k & 63)) & 1); }
static inline void bit_set(uint64_t *m, size_t k) { m[k >> 6] |= (uint64_t)1 << (k & 63); }

static inline size_t triple_bit(const uint8_t *p)
{
    uint32_t v = ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
    return (size_t)((v * 0x9E3779B1u) >> (32 - 19));
}

/* Fill t->joined, t->ends and t->triple from the entries, and keep them only when the vocabulary leaves most
 * boundaries between three-byte characters open: fewer than half of the 1,024 pairs (continuation byte, lead byte
 * 0xE0-0xEF) joined. Those are the scripts written without spaces (CJK, kana, Hangul, Thai), whose pre-tokens are
 * long and rarely tokens; when most of their boundaries are joined (o200k_base: 754 of 1,024; cl100k_base: 279;
 * gpt2: 45), next_cut seldom finds one and its scan is pure cost (2-5% more instructions on cold documents), so the
 * tables stay NULL: no cutting. Returns 0, or -1 when out of memory (no exception set). */
static int joined_build(RankTable *t, const RankEntries *e)
{
    uint64_t *joined = PyMem_RawCalloc(65536 / 64, sizeof(uint64_t));
    if (!joined)
        return -1;
    for (size_t k = 0; k < e->n; k++) {
        const uint8_t *p = e->ptr[k];
        for (size_t i = 1; i < e->len[k]; i++)
            bit_set(joined, ((size_t)p[i - 1] << 8) | p[i]);
    }
    size_t shut = 0;
    for (size_t x = 0x80; x < 0xC0; x++) {
        for (size_t y = 0xE0; y < 0xF0; y++)
            shut += (size_t)bit_at(joined, (x << 8) | y);
    }
    if (shut >= 512) {
        PyMem_RawFree(joined);
        return 0;
    }
    uint64_t *ends = PyMem_RawCalloc(65536 / 64, sizeof(uint64_t));
    uint64_t *triple = PyMem_RawCalloc(TRIPLE_BITS / 64, sizeof(uint64_t));
    if (!ends || !triple) {
        PyMem_RawFree(joined);
        PyMem_RawFree(ends);
        PyMem_RawFree(triple);
        return -1;
    }
    for (size_t k = 0; k < e->n; k++) {
        const uint8_t *p = e->ptr[k];
        size_t n = e->len[k];
        if (n >= 2)
            bit_set(ends, ((size_t)p[n - 2] << 8) | p[n - 1]);
        for (size_t i = 0; i + 2 < n; i++) {
            if ((p[i + 1] & 0xC0) != 0x80) /* (no continuation byte) */
                bit_set(triple, triple_bit(p + i));
        }
    }
    t->joined = joined;
    t->ends = ends;
    t->triple = triple;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ id vector */

typedef struct {
    uint32_t *data;
    size_t len, cap;
    PyObject *const *objs; /* the int objects these ids become right after (Core.id_objs), or NULL: encode_piece
                            * prefetches an id's entry when a whole piece is one token, so ids_to_list finds it in
                            * cache instead of missing once per first-seen id */
} IdVec;

static int vec_reserve(IdVec *v, size_t extra)
{
    if (v->len + extra <= v->cap)
        return 0;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < v->len + extra)
        cap *= 2;
    uint32_t *d = PyMem_RawRealloc(v->data, cap * sizeof(uint32_t));
    if (!d)
        return -1;
    v->data = d;
    v->cap = cap;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ atomic chars */

/* Byte-level BPE starts from single bytes, yet for most multi-byte characters the first merges only rebuild the
 * character. Let B be a token that is one complete UTF-8 character (2..4 bytes) whose bytes, merged on their own,
 * end in the single token B, and let m = the highest rank used on the way. An occurrence of B inside a piece, with
 * byte x just before it and byte y just after it (where they exist), may start BPE as one part -- with the same
 * result as starting from its bytes -- when every token that
 *
 *   (L) ends with x + a proper prefix of B, or contains x + B, and
 *   (R) starts with a proper suffix of B + y, or contains B + y,
 *
 * ranks above m. Why: starting from bytes, while such a B is incomplete it always offers an internal pair of rank
 * <= m, so a merge that crosses its boundary ((L)/(R), first halves) is never chosen before B is whole; and every
 * other merge chosen meanwhile (rank < m) is also the lowest pair when B starts whole, since the pairs that use
 * the whole B ((L)/(R), second halves) rank above m. So both runs make the same non-internal merges in the same
 * order; ties (equal ranks only for equal bytes) fall leftmost in both. Needs distinct ranks for distinct tokens;
 * with a duplicate rank no character starts whole. (L)/(R) are precomputed per character as 256-bit masks of the
 * neighbour bytes that break them. tests/engine/test_native.py checks results with and without this. */

typedef struct AtomChar {
    uint32_t rank; /* the character's token */
    uint32_t top;  /* m: highest rank used merging its bytes alone */
    uint32_t key;  /* its bytes, big-endian, left-aligned (for prefix ranges) */
    uint32_t rkey; /* its bytes reversed, left-aligned (for suffix ranges) */
    uint32_t cp;   /* its code point */
    uint8_t len;
    uint64_t bad_left[4], bad_right[4]; /* bit x: the neighbour byte x breaks (L) / (R) */
} AtomChar;

#define ATOM_BLOCK_SHIFT 7
#define ATOM_BLOCKS (0x110000 >> ATOM_BLOCK_SHIFT)

static inline size_t lead_len(uint8_t b) { return b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0; }
static inline int is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

/* Length of the valid (shortest-form, non-surrogate) UTF-8 character of 2..4 bytes at p[0..n) and its code point,
 * or 0. */
static inline size_t mb_char(const uint8_t *p, size_t n, uint32_t *cp)
{
    size_t len = lead_len(p[0]);
    if (len == 0 || len > n)
        return 0;
    uint32_t c = p[0] & (0x7F >> len);
    for (size_t k = 1; k < len; k++) {
        if (!is_cont(p[k]))
            return 0;
        c = (c << 6) | (p[k] & 0x3F);
    }
    if ((len == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)))
        return 0;
    *cp = c;
    return len;
}

/* Length (2..4) and code point of the UTF-8 character whose lead byte is p[0] (>= 0xC2), trusting that the
 * bytes form a valid, complete character: mb_char without its checks, for text already known to be valid UTF-8
 * (what the pre-tokenizers require). */
static inline size_t mb_char_trusted(const uint8_t *p, uint32_t *cp)
{
    uint32_t b = p[0];
    if (b < 0xE0) {
        *cp = ((b & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    if (b < 0xF0) {
        *cp = ((b & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        return 3;
    }
    *cp = ((b & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) | ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    return 4;
}

static inline const AtomChar *atom_of(const RankTable *t, uint32_t cp)
{
    uint32_t k = t->atom_block[cp >> ATOM_BLOCK_SHIFT];
    if (!k)
        return NULL;
    uint16_t a = t->atom_slot[((k - 1) << ATOM_BLOCK_SHIFT) | (cp & ((1u << ATOM_BLOCK_SHIFT) - 1))];
    return a ? &t->atoms[a - 1] : NULL;
}

static inline uint32_t pack_left(const uint8_t *p, size_t n)
{
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++)
        k |= (uint32_t)p[i] << (8 * (3 - i));
    return k;
}

static inline uint32_t pack_reversed(const uint8_t *p, size_t n)
{
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++)
        k |= (uint32_t)p[n - 1 - i] << (8 * (3 - i));
    return k;
}

/* The highest rank used when BPE merges p[0..n) (n <= 4) on its own, or NO_RANK if that does not end in one part. */
static uint32_t isolated_max_rank(const RankTable *t, const uint8_t *p, size_t n)
{
    size_t start[5], parts = n;
    uint32_t top = 0;
    for (size_t i = 0; i <= n; i++)
        start[i] = i;
    while (parts > 1) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t k = 0; k + 1 < parts; k++) {
            uint32_t r = rank_lookup(t, p + start[k], start[k + 2] - start[k]);
            if (r < best) {
                best = r;
                bi = k;
            }
        }
        if (best == NO_RANK)
            return NO_RANK;
        if (best > top)
            top = best;
        memmove(start + bi + 1, start + bi + 2, (parts - bi - 1) * sizeof(size_t));
        parts--;
    }
    return top;
}

/* The first position in order (indices into atoms sorted by key, or by rkey if reversed) whose key is >= k. */
static size_t lower_bound(const AtomChar *atoms, const uint16_t *order, size_t count, int reversed, uint64_t k)
{
    size_t a = 0, b = count;
    while (a < b) {
        size_t mid = (a + b) / 2;
        if ((reversed ? atoms[order[mid]].rkey : atoms[order[mid]].key) < k)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

/* [lo, hi) of the positions in order whose key has the n-byte prefix `prefix` (left-aligned). */
static void key_range(const AtomChar *atoms, const uint16_t *order, size_t count, int reversed, uint32_t prefix,
                      size_t n, size_t *lo, size_t *hi)
{
    *lo = lower_bound(atoms, order, count, reversed, prefix);
    *hi = lower_bound(atoms, order, count, reversed, (uint64_t)prefix + ((uint64_t)1 << (8 * (4 - n))));
}

static const AtomChar *sort_base;
static int by_key(const void *a, const void *b)
{
    uint32_t x = sort_base[*(const uint16_t *)a].key, y = sort_base[*(const uint16_t *)b].key;
    return x < y ? -1 : x > y;
}
static int by_rkey(const void *a, const void *b)
{
    uint32_t x = sort_base[*(const uint16_t *)a].rkey, y = sort_base[*(const uint16_t *)b].rkey;
    return x < y ? -1 : x > y;
}

/* Fill t's atomic-character tables (see above) from the ranks dict; leaves them empty when the vocabulary does not
 * qualify. Called with the GIL held. Returns 0, or -1 with a Python exception set. */
static int atomic_build(RankTable *t, const RankEntries *e)
{
    size_t nbits = (size_t)t->max_rank + 1, count = 0, cap = 1024, nblocks = 0;
    uint8_t *seen = PyMem_RawCalloc(nbits / 8 + 1, 1);
    AtomChar *atoms = PyMem_RawMalloc(cap * sizeof(AtomChar));
    uint16_t *by_prefix = NULL, *by_suffix = NULL;
    uint32_t *block = NULL;
    uint16_t *slot = NULL;
    int dup = 0, oom = !seen || !atoms;
    /* 1. the candidates: tokens that are one character, rebuilt by merging their bytes alone */
    for (size_t e_i = 0; !oom && e_i < e->n; e_i++) {
        uint32_t r = e->rank[e_i], cp;
        const uint8_t *p = e->ptr[e_i];
        size_t n = e->len[e_i];
        if (seen[r >> 3] & (1 << (r & 7)))
            dup = 1;
        seen[r >> 3] |= (uint8_t)(1 << (r & 7));
        if (n < 2 || n > 4 || mb_char(p, n, &cp) != n || count >= 65535)
            continue;
        uint32_t top = isolated_max_rank(t, p, n);
        if (top == NO_RANK)
            continue;
        if (count == cap) {
            AtomChar *grown = PyMem_RawRealloc(atoms, 2 * cap * sizeof(AtomChar));
            if (!grown) {
                oom = 1;
                break;
            }
            atoms = grown;
            cap *= 2;
        }
        AtomChar *a = &atoms[count++];
        memset(a, 0, sizeof(*a));
        a->rank = r;
        a->top = top;
        a->cp = cp;
        a->len = (uint8_t)n;
        a->key = pack_left(p, n);
        a->rkey = pack_reversed(p, n);
    }
    if (!oom && !dup && count) {
        by_prefix = PyMem_RawMalloc(count * sizeof(uint16_t));
        by_suffix = PyMem_RawMalloc(count * sizeof(uint16_t));
        oom = !by_prefix || !by_suffix;
    }
    if (!oom && !dup && count) {
        for (size_t k = 0; k < count; k++)
            by_prefix[k] = by_suffix[k] = (uint16_t)k;
        sort_base = atoms; /* GIL held: no concurrent build */
        qsort(by_prefix, count, sizeof(uint16_t), by_key);
        qsort(by_suffix, count, sizeof(uint16_t), by_rkey);
        /* 2. every token marks the neighbour bytes that break (L) or (R) for the candidates it concerns */
        for (size_t e_i = 0; e_i < e->n; e_i++) {
            uint32_t r = e->rank[e_i], cp;
            const uint8_t *p = e->ptr[e_i];
            size_t n = e->len[e_i], lo, hi;
            for (size_t k = 1; k <= 3 && k < n; k++) { /* ends with x + a proper prefix (k bytes) of a char */
                const uint8_t *s = p + n - k;
                size_t c = 1;
                while (c < k && is_cont(s[c]))
                    c++;
                if (lead_len(s[0]) <= k || c != k)
                    continue;
                key_range(atoms, by_prefix, count, 0, pack_left(s, k), k, &lo, &hi);
                for (size_t j = lo; j < hi; j++)
                    if (atoms[by_prefix[j]].top >= r)
                        bit_set(atoms[by_prefix[j]].bad_left, s[-1]);
            }
            for (size_t k = 1; k <= 3 && k < n && is_cont(p[k - 1]); k++) { /* starts with a proper suffix + y */
                key_range(atoms, by_suffix, count, 1, pack_reversed(p, k), k, &lo, &hi);
                for (size_t j = lo; j < hi; j++)
                    if (atoms[by_suffix[j]].len > k && atoms[by_suffix[j]].top >= r)
                        bit_set(atoms[by_suffix[j]].bad_right, p[k]);
            }
            for (size_t i = 0; i < n; i++) { /* contains x + B or B + y */
                size_t len = mb_char(p + i, n - i, &cp);
                if (!len || len == n)
                    continue;
                key_range(atoms, by_prefix, count, 0, pack_left(p + i, len), len, &lo, &hi);
                for (size_t j = lo; j < hi; j++) {
                    AtomChar *a = &atoms[by_prefix[j]];
                    if (a->len != len || a->top < r)
                        continue;
                    if (i > 0)
                        bit_set(a->bad_left, p[i - 1]);
                    if (i + len < n)
                        bit_set(a->bad_right, p[i + len]);
                }
            }
        }
        /* 3. code point -> candidate: a two-level table */
        block = PyMem_RawCalloc(ATOM_BLOCKS, sizeof(uint32_t));
        oom = !block;
        for (size_t k = 0; !oom && k < count; k++) {
            uint32_t cp = atoms[k].cp;
            if (!block[cp >> ATOM_BLOCK_SHIFT])
                block[cp >> ATOM_BLOCK_SHIFT] = (uint32_t)++nblocks;
        }
        if (!oom) {
            slot = PyMem_RawCalloc(nblocks << ATOM_BLOCK_SHIFT, sizeof(uint16_t));
            oom = !slot;
        }
        for (size_t k = 0; !oom && k < count; k++) {
            uint32_t cp = atoms[k].cp;
            slot[((block[cp >> ATOM_BLOCK_SHIFT] - 1) << ATOM_BLOCK_SHIFT) | (cp & ((1u << ATOM_BLOCK_SHIFT) - 1))] =
                (uint16_t)(k + 1);
        }
    }
    PyMem_RawFree(seen);
    PyMem_RawFree(by_prefix);
    PyMem_RawFree(by_suffix);
    if (oom || dup || !count) {
        PyMem_RawFree(atoms);
        PyMem_RawFree(block);
        PyMem_RawFree(slot);
        if (oom) {
            PyErr_NoMemory();
            return -1;
        }
        return 0;
    }
    t->atoms = atoms;
    t->n_atoms = count;
    t->atom_block = block;
    t->atom_slot = slot;
    t->n_blocks = nblocks;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ table image */

/* A built RankTable as one flat image (Core.image()), which Core(..., image=) restores instead of running
 * rank_table_build and atomic_build: the compiled artifact cache keeps it in the same file as the rank sections it
 * was built from (app/engine/rank_tables.py), so a warm load copies tables instead of hashing every token and
 * analysing every character. Native byte order. The header pins the layout (struct sizes, FILTER_BITS,
 * ATOM_BLOCK_SHIFT, IMAGE_VERSION and the hash function, by a probe), so an image written by another build of this
 * file is refused, never misread:
 *
 *   u64 header[16]: magic, layout, hash probe, mask, count, max_rank, arena_len, n_atoms, n_blocks, then zeros
 *   u32 byte_rank[256], u32 pair_rank[65536], u64 filter[FILTER_BITS / 64], RankSlot slots[mask + 1],
 *   u8 arena[arena_len] zero-padded to a multiple of 8, AtomChar atoms[n_atoms], and when n_atoms > 0:
 *   u32 atom_block[ATOM_BLOCKS], u16 atom_slot[n_blocks << ATOM_BLOCK_SHIFT] zero-padded to a multiple of 8
 *
 * Bump IMAGE_VERSION when the meaning of any table changes without its size changing, and with any change here
 * bump FORMAT_VERSION in app/engine/artifact_cache.py too: a refused image is not rewritten in the cache, so the
 * tables would be built on every load until the cache file's key changes. */
#define IMAGE_MAGIC 0x31474D4945524F43ull /* "COREIMG1" read as a little-endian u64 */
#define IMAGE_VERSION 2 /* 2: the three-bit blocked filter */
#define IMAGE_HEADER 16

static const char image_probe[] = "tokenizer-service rank table image";

static uint64_t image_layout(void)
{
    return (uint64_t)sizeof(RankSlot) | (uint64_t)sizeof(AtomChar) << 8 | (uint64_t)ATOM_BLOCK_SHIFT << 16 |
           (uint64_t)IMAGE_VERSION << 24 | (uint64_t)FILTER_BITS << 32;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Byte size of an image of these counts, or 0 when they are out of range. */
static size_t image_size(uint64_t nslots, uint64_t arena_len, uint64_t n_atoms, uint64_t n_blocks)
{
    if (nslots > ((uint64_t)1 << 32) || arena_len > UINT32_MAX || n_atoms > 65535 || n_blocks > ATOM_BLOCKS)
        return 0;
    size_t size = IMAGE_HEADER * 8 + 4 * 256 + 4 * 65536 + FILTER_BITS / 8 + (size_t)nslots * sizeof(RankSlot) +
                  pad8((size_t)arena_len) + (size_t)n_atoms * sizeof(AtomChar);
    if (n_atoms)
        size += 4 * (size_t)ATOM_BLOCKS + pad8(2 * ((size_t)n_blocks << ATOM_BLOCK_SHIFT));
    return size;
}

/* The image of t as a new bytes object (NULL with an exception set). */
static PyObject *image_bytes(const RankTable *t)
{
    size_t nslots = t->mask + 1, n_atoms = t->atoms ? t->n_atoms : 0, n_blocks = n_atoms ? t->n_blocks : 0;
    size_t size = image_size(nslots, t->arena_len, n_atoms, n_blocks);
    if (!size) {
        PyErr_SetString(PyExc_ValueError, "rank table too large for an image");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!out)
        return NULL;
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(out);
    memset(w, 0, size);
    uint64_t head[IMAGE_HEADER] = {IMAGE_MAGIC, image_layout(), hash_bytes((const uint8_t *)image_probe,
                                                                           sizeof(image_probe) - 1),
                                   t->mask, t->count, t->max_rank, t->arena_len, n_atoms, n_blocks};
    memcpy(w, head, sizeof(head));
    w += sizeof(head);
    memcpy(w, t->byte_rank, sizeof(t->byte_rank));
    w += sizeof(t->byte_rank);
    memcpy(w, t->pair_rank, 4 * 65536);
    w += 4 * 65536;
    memcpy(w, t->filter, FILTER_BITS / 8);
    w += FILTER_BITS / 8;
    memcpy(w, t->slots, nslots * sizeof(RankSlot));
    w += nslots * sizeof(RankSlot);
    memcpy(w, t->arena, t->arena_len);
    w += pad8(t->arena_len);
    if (n_atoms) {
        memcpy(w, t->atoms, n_atoms * sizeof(AtomChar));
        w += n_atoms * sizeof(AtomChar);
        memcpy(w, t->atom_block, 4 * (size_t)ATOM_BLOCKS);
        w += 4 * (size_t)ATOM_BLOCKS;
        memcpy(w, t->atom_slot, 2 * (n_blocks << ATOM_BLOCK_SHIFT));
    }
    return out;
}

/* Fill t from an image (above) of the table built from e; with !atomic_chars its atoms are left out. Checks the
 * header against this build and against e (count, largest rank, arena length, exact size), every value an
 * encoder uses as an index or offset (ranks <= max_rank, arena offsets, atom indices), and the lookup of every
 * 64th token and of every single byte, so a damaged or foreign image raises ValueError and is never read out of
 * bounds. Returns 0, or -1 with a Python exception set (t left empty). */
static int image_load(RankTable *t, const uint8_t *buf, size_t len, const RankEntries *e, int atomic_chars)
{
    uint64_t head[IMAGE_HEADER];
    uint64_t total = 0;
    uint32_t max_rank = 0;
    const char *why = NULL;
    for (size_t k = 0; k < e->n; k++) {
        if (e->len[k] > 8)
            total += e->len[k];
        if (e->rank[k] > max_rank)
            max_rank = e->rank[k];
    }
    if (len < sizeof(head)) {
        why = "truncated";
    } else {
        memcpy(head, buf, sizeof(head));
        uint64_t nslots = head[3] + 1, reserved = 0;
        for (int k = 9; k < IMAGE_HEADER; k++)
            reserved |= head[k];
        if (head[0] != IMAGE_MAGIC || head[1] != image_layout() ||
            head[2] != hash_bytes((const uint8_t *)image_probe, sizeof(image_probe) - 1) || reserved)
            why = "written by another build of the core";
        else if (head[4] != e->n || head[5] != max_rank || head[6] != total)
            why = "built from other ranks";
        else if (nslots < 16 || nslots > ((uint64_t)1 << 32) || (nslots & head[3]) || nslots < 2 * (uint64_t)e->n + 2)
            why = "bad slot count";
        else if ((head[7] == 0) != (head[8] == 0) || image_size(nslots, head[6], head[7], head[8]) != len)
            why = "size does not match its header";
    }
    if (why) {
        PyErr_Format(PyExc_ValueError, "rank table image: %s", why);
        return -1;
    }
    size_t nslots = (size_t)head[3] + 1, n_atoms = atomic_chars ? (size_t)head[7] : 0;
    size_t n_blocks = n_atoms ? (size_t)head[8] : 0;
    memset(t, 0, sizeof(*t));
    t->mask = nslots - 1;
    t->count = e->n;
    t->max_rank = max_rank;
    t->arena_len = (size_t)total;
    t->slots = big_calloc(nslots * sizeof(RankSlot));
    t->arena = PyMem_RawCalloc((size_t)total + 16, 1);
    t->pair_rank = PyMem_RawMalloc(4 * 65536);
    t->filter = big_calloc(FILTER_BITS / 8);
    if (n_atoms) {
        t->atoms = PyMem_RawMalloc(n_atoms * sizeof(AtomChar));
        t->atom_block = PyMem_RawMalloc(4 * (size_t)ATOM_BLOCKS);
        t->atom_slot = PyMem_RawMalloc(2 * (n_blocks << ATOM_BLOCK_SHIFT));
        t->n_atoms = n_atoms;
        t->n_blocks = n_blocks;
    }
    if (!t->slots || !t->arena || !t->pair_rank || !t->filter ||
        (n_atoms && (!t->atoms || !t->atom_block || !t->atom_slot))) {
        rank_table_free(t);
        PyErr_NoMemory();
        return -1;
    }
    const uint8_t *r = buf + sizeof(head);
    memcpy(t->byte_rank, r, sizeof(t->byte_rank));
    r += sizeof(t->byte_rank);
    memcpy(t->pair_rank, r, 4 * 65536);
    r += 4 * 65536;
    memcpy(t->filter, r, FILTER_BITS / 8);
    r += FILTER_BITS / 8;
    memcpy(t->slots, r, nslots * sizeof(RankSlot));
    r += nslots * sizeof(RankSlot);
    memcpy(t->arena, r, (size_t)total);
    r += pad8((size_t)total);
    if (n_atoms) {
        memcpy(t->atoms, r, n_atoms * sizeof(AtomChar));
        r += n_atoms * sizeof(AtomChar);
        memcpy(t->atom_block, r, 4 * (size_t)ATOM_BLOCKS);
        r += 4 * (size_t)ATOM_BLOCKS;
        memcpy(t->atom_slot, r, 2 * (n_blocks << ATOM_BLOCK_SHIFT));
    }
    size_t used = 0;
    for (size_t i = 0; !why && i < nslots; i++) {
        const RankSlot *sl = &t->slots[i];
        if (!sl->len)
            continue;
        used++;
        if (sl->rank > max_rank || (sl->len > 8 && (uint64_t)(uint32_t)sl->key + sl->len > total))
            why = "a slot is out of range";
    }
    if (!why && used != e->n)
        why = "slot count does not match";
    for (int b = 0; !why && b < 256; b++)
        if (t->byte_rank[b] > max_rank)
            why = "a byte has no rank";
    for (size_t k = 0; !why && k < 65536; k++)
        if (t->pair_rank[k] != NO_RANK && t->pair_rank[k] > max_rank)
            why = "a pair rank is out of range";
    for (size_t k = 0; !why && k < n_atoms; k++)
        if (t->atoms[k].rank > max_rank || t->atoms[k].len < 2 || t->atoms[k].len > 4)
            why = "an atom is out of range";
    for (size_t k = 0; !why && n_atoms && k < ATOM_BLOCKS; k++)
        if (t->atom_block[k] > n_blocks)
            why = "an atom block is out of range";
    for (size_t k = 0; !why && k < (n_blocks << ATOM_BLOCK_SHIFT); k++)
        if (t->atom_slot[k] > n_atoms)
            why = "an atom slot is out of range";
    for (size_t k = 0; !why && k < e->n; k += 64)
        if (rank_lookup(t, e->ptr[k], e->len[k]) != e->rank[k])
            why = "a token's lookup does not match its ranks";
    for (size_t k = 0; !why && k < e->n; k++)
        if (e->len[k] == 1 && t->byte_rank[e->ptr[k][0]] != e->rank[k])
            why = "a byte's rank does not match its ranks";
    if (why) {
        rank_table_free(t);
        PyErr_Format(PyExc_ValueError, "rank table image: %s", why);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ BPE */

#define SMALL_PARTS 16 /* pieces of up to this many initial parts use the quadratic merge loop; more, the heap */
#define BPE_STACK 512  /* pieces of up to this many bytes work in stack buffers */

static inline void heap_push(uint64_t *heap, size_t *size, uint64_t key)
{
    size_t i = (*size)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (heap[parent] <= key)
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = key;
}

static inline void heap_sift_down(uint64_t *heap, size_t n, size_t i, uint64_t v)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap[c + 1] < heap[c])
            c++;
        if (heap[c] >= v)
            break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = v;
}

static inline uint64_t heap_pop(uint64_t *heap, size_t *size)
{
    uint64_t top = heap[0];
    size_t n = --(*size);
    if (n)
        heap_sift_down(heap, n, 0, heap[n]);
    return top;
}

/* In bpe_piece's part lists (below): merge part i with the part after it into the token rank, then rank the two candidates
 * that changed -- i with its new successor, its predecessor with i -- whose filter words and slots both start
 * loading before either is read. Returns the predecessor (UINT32_MAX: none). */
static inline uint32_t merge_part(const RankTable *t, const uint8_t *p, size_t n, uint32_t *nxt, uint32_t *prv,
                                  uint32_t *rk, uint32_t *id, uint32_t i, uint32_t rank)
{
    uint32_t j = nxt[i], k = nxt[j];
    rk[j] = NO_RANK; /* part j disappears */
    nxt[i] = k;
    id[i] = rank;
    if (k < n)
        prv[k] = i;
    uint32_t q = prv[i];
    uint64_t hq = q != UINT32_MAX ? rank_prefetch(t, p + q, k - q) : 0;
    uint64_t hi = k < n ? rank_prefetch(t, p + i, nxt[k] - i) : 0;
    rk[i] = k < n ? rank_lookup_after(t, p + i, nxt[k] - i, hi) : NO_RANK;
    if (q != UINT32_MAX)
        rk[q] = rank_lookup_after(t, p + q, k - q, hq);
    return q;
}

/* Merge the piece p[0..n) (n >= 2) from its bytes and append its ids to out (capacity reserved by the caller):
 * BPE proper, even when the piece is itself a token (the whole-token shortcut is the caller's, for whole pieces).
 * Returns 0, or -1 when out of memory.
 *
 * Parts form a linked list over byte offsets: the part starting at byte i ends at nxt[i] (prv[i]: the previous
 * part's start, UINT32_MAX for the first); id[i] is its token id and rk[i] the rank of it merged with its
 * successor (NO_RANK if that is not a token). Initial parts are single bytes, or whole atomic characters (above).
 * Each step merges the pair of lowest rank, leftmost on ties: pieces of at most SMALL_PARTS parts scan the list
 * (quadratic, but tiny); longer ones pop a heap of (rank << 32 | start) candidates, a popped candidate being
 * current iff rk[start] still equals its rank (lazy invalidation, as bpe.py's _merge_heap) -- O(n log n). */
/* valid_utf8: p[0..n) is known to be valid UTF-8 cut at character boundaries (a pre-tokenizer's piece), so
 * characters are decoded without checks; else (arbitrary bytes) mb_char checks each one. */
static int bpe_piece(const RankTable *t, const uint8_t *p, size_t n, IdVec *out, int valid_utf8)
{
    uint32_t s_nxt[BPE_STACK + 1], s_prv[BPE_STACK + 1], s_rk[BPE_STACK + 1], s_id[BPE_STACK + 1];
    uint64_t s_hs[BPE_STACK];
    uint32_t *nxt = s_nxt, *prv = s_prv, *rk = s_rk, *id = s_id;
    uint64_t *hs = s_hs, *heap = NULL; /* hs[i]: hash of the initial pair at i */
    if (n > BPE_STACK) {
        hs = PyMem_RawMalloc(sizeof(uint64_t) * n + sizeof(uint32_t) * 4 * (n + 1));
        if (!hs)
            return -1;
        nxt = (uint32_t *)(hs + n);
        prv = nxt + (n + 1);
        rk = prv + (n + 1);
        id = rk + (n + 1);
    }
    size_t parts = 0;
    uint32_t last = UINT32_MAX;
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        uint32_t r = t->byte_rank[p[i]], cp;
        if (p[i] >= 0xC2 && t->atoms) {
            size_t clen = valid_utf8 ? mb_char_trusted(p + i, &cp) : mb_char(p + i, n - i, &cp);
            const AtomChar *a = clen ? atom_of(t, cp) : NULL;
            if (a && !(i > 0 && bit_at(a->bad_left, p[i - 1])) && !(i + clen < n && bit_at(a->bad_right, p[i + clen]))) {
                len = clen;
                r = a->rank;
            }
        }
        id[i] = r;
        prv[i] = last;
        nxt[i] = (uint32_t)(i + len);
        last = (uint32_t)i;
        i += len;
        parts++;
    }
    /* The initial pairs' lookups are independent: hash them all and start loading their filter words and slots
     * first, so that their cache misses overlap instead of following one another. */
    for (uint32_t i = 0; i < n; i = nxt[i]) {
        uint32_t j = nxt[i];
        if (j >= n)
            break;
        size_t len = nxt[j] - i;
        if (len <= 2) {
            __builtin_prefetch(&t->pair_rank[((uint32_t)p[i] << 8) | p[i + 1]]);
            continue;
        }
        uint64_t h = hs[i] = hash_bytes(p + i, len);
        __builtin_prefetch(&t->filter[FILTER_WORD(h)]);
        __builtin_prefetch(&t->slots[(size_t)h & t->mask]);
    }
    for (uint32_t i = 0; i < n; i = nxt[i]) {
        uint32_t j = nxt[i];
        size_t len = j < n ? nxt[j] - i : 0;
        rk[i] = len == 0   ? NO_RANK
                : len == 2 ? t->pair_rank[((uint32_t)p[i] << 8) | p[i + 1]]
                           : rank_lookup_hashed(t, p + i, len, hs[i]);
    }
    if (parts <= SMALL_PARTS) {
        for (;;) {
            uint32_t best = NO_RANK, bi = 0;
            for (uint32_t i = 0; i < n; i = nxt[i]) {
                if (rk[i] < best) { /* strictly less: the leftmost of equal ranks wins */
                    best = rk[i];
                    bi = i;
                }
            }
            if (best == NO_RANK)
                break;
            merge_part(t, p, n, nxt, prv, rk, id, bi, best);
        }
    } else {
        uint64_t s_heap[3 * SMALL_PARTS * 8];
        heap = 3 * parts <= sizeof(s_heap) / sizeof(s_heap[0]) ? s_heap : PyMem_RawMalloc(sizeof(uint64_t) * 3 * parts);
        if (!heap) {
            if (hs != s_hs)
                PyMem_RawFree(hs);
            return -1;
        }
        size_t hsize = 0;
        for (uint32_t i = 0; i < n; i = nxt[i])
            if (rk[i] != NO_RANK)
                heap[hsize++] = ((uint64_t)rk[i] << 32) | i;
        for (size_t k = hsize / 2; k-- > 0;) /* heapify */
            heap_sift_down(heap, hsize, k, heap[k]);
        while (hsize) {
            uint64_t key = heap_pop(heap, &hsize);
            uint32_t rank = (uint32_t)(key >> 32);
            uint32_t i = (uint32_t)key;
            if (rk[i] != rank)
                continue; /* stale: the part at i was merged away or changed since this candidate was pushed */
            uint32_t q = merge_part(t, p, n, nxt, prv, rk, id, i, rank);
            if (rk[i] != NO_RANK)
                heap_push(heap, &hsize, ((uint64_t)rk[i] << 32) | i);
            if (q != UINT32_MAX && rk[q] != NO_RANK)
                heap_push(heap, &hsize, ((uint64_t)rk[q] << 32) | q);
        }
        if (heap != s_heap)
            PyMem_RawFree(heap);
    }
    for (uint32_t i = 0; i < n; i = nxt[i])
        out->data[out->len++] = id[i];
    if (hs != s_hs)
        PyMem_RawFree(hs);
    return 0;
}

/* ------------------------------------------------------------------------------------------------ piece cache */

/* A bounded cache from piece bytes to ids, shared by all threads using one Core (the GIL is not held while
 * encoding): a four-way set-associative table of slots (a piece may sit in its hashed slot i or in i ^ 1, i ^ 2,
 * i ^ 3, so a few frequent pieces that hash to the same slot do not keep evicting each other), each slot
 * guarded by a sequence lock. A reader checks the slot's tag and length, copies its key and ids and keeps the
 * copy only if the sequence number was even and unchanged around the copy, so hits write nothing shared; a
 * writer claims a slot by moving its number from even to odd (compare-and-swap) and skips the insert if another
 * thread holds it -- caching is optional. A key maps to what BPE makes of its bytes: pieces that are not themselves
 * tokens, and the stretches longer pieces are cut into (see next_cut; a stretch may be a token), are cached when
 * their bytes and ids fit a slot's PC_DATA bytes: the key, then (from the next multiple of four) its ids, so a
 * slot holds 40 bytes and 4 ids, 24 bytes and 8 ids, 12 bytes and 11 ids (a run of 16 CJK characters, which
 * byte-level patterns keep as one piece, usually not). That covers 94-96% of the occurrences of non-token pieces
 * in the bench's documents (o200k_base, cl100k_base, qwen3; whole pieces, before any cut), and every slot is one
 * cache line: the 120-byte slots with a fixed 48 bytes and 16 ids before them (98-99%) cost two lines a hit and two
 * a fill, and at 16,384 slots took 1.9 MiB to these 1 MiB (docs/performance.md has the A/B). Output is identical
 * with the cache on or off.
 *
 * A dense array of hints (hint[j]: slot j's tag, len and nids as pc_meta reads them, written after the slot) puts a
 * set's four ways in 16 bytes of one cache line: a lookup reads the slot of a way only when its hint matches, and
 * picks the way to fill from the hints, so a miss touches one line instead of four slots; way 0's slot, where most
 * hits are, is prefetched with the hints, so a hit there waits for one load, not two. A hint is only a hint: a
 * slot is always checked under its own sequence lock, so a stale hint costs a wasted slot read or a missed hit,
 * never a wrong id. */
#define PC_DATA 56
#define PC_WAYS 4 /* slots per set (a power of two) */

typedef struct {
    uint32_t seq; /* even: stable; odd: being written */
    uint16_t tag; /* hash >> 48 */
    uint8_t len;  /* 0 = empty */
    uint8_t nids;
    uint8_t data[PC_DATA]; /* the key's len bytes, then from pc_ids_at(len) its nids ids */
} PCSlot;
_Static_assert(sizeof(PCSlot) == 64, "PCSlot layout: one cache line");
_Static_assert(offsetof(PCSlot, len) == offsetof(PCSlot, tag) + 2 && offsetof(PCSlot, nids) == offsetof(PCSlot, tag) + 3,
               "pc_meta reads tag, len, nids as one word");

/* Where a slot's ids start for a key of len bytes; the piece fits when pc_ids_at(len) + 4 * nids <= PC_DATA. */
static inline size_t pc_ids_at(size_t len) { return (len + 3) & ~(size_t)3; }

typedef struct {
    PCSlot *slots;
    uint32_t *hint;        /* nslots hints, then (64-byte aligned) the slots: one big_calloc block of pc_bytes */
    size_t nslots;         /* 0 = cache off */
    uint64_t hits, misses; /* updated with atomic adds, once per call (so threads do not share a line per piece) */
    int64_t size;          /* occupied slots (atomic) */
} PieceCache;

typedef struct {
    uint64_t hits, misses, filled; /* filled: empty slots this call wrote */
} CallStats;

/* Bytes of a cache of nslots slots: the hints, padded to a cache line, then the slots, then 64 bytes that pc_lookup's
 * copy may read past the last slot. */
static size_t pc_hint_bytes(size_t nslots) { return (nslots * sizeof(uint32_t) + 63) & ~(size_t)63; }
static size_t pc_bytes(size_t nslots) { return pc_hint_bytes(nslots) + nslots * sizeof(PCSlot) + 64; }

/* The slot fields a lookup matches first, as one 32-bit word (tag, len, nids in memory order). */
static inline uint32_t pc_meta(const PCSlot *sl)
{
    uint32_t m;
    memcpy(&m, &sl->tag, 4);
    return m;
}

/* What pc_meta's low 24 bits (tag and len) hold for a slot holding a piece of n bytes with hash tag tag. */
static inline uint32_t pc_want(uint16_t tag, size_t n)
{
    return (uint32_t)tag | ((uint32_t)n << 16);
}

/* 1 if slot sl holds the piece p (n bytes; want: pc_want of its tag and n) consistently; its ids are then copied
 * to ids and their number to *nids. ids needs room for n + 3 (ids are copied two at a time, so one id past the
 * result may be written, even on a miss). The key is compared in place and the ids copied, then the sequence number
 * is read again: a slot being written, or rewritten meanwhile, is a miss. (Reads of a slot under rewrite may see a
 * mix of old and new bytes; every such result is discarded, and the bounds checks on nids keep even those reads
 * inside the slot, or the 4 bytes after it, and ids.) */
static inline int pc_lookup(const PCSlot *sl, uint32_t want, const uint8_t *p, size_t n, uint32_t *ids, size_t *nids)
{
    uint32_t s1 = __atomic_load_n(&sl->seq, __ATOMIC_ACQUIRE);
    uint32_t meta = pc_meta(sl);
    if ((s1 & 1) || (meta & 0xFFFFFF) != want)
        return 0;
    size_t k = meta >> 24, at = pc_ids_at(n);
    if (at + 4 * k > PC_DATA || k > n) /* (a consistent slot has k <= n: a piece has at most one id per byte) */
        return 0;
    if (!bytes_eq(sl->data, p, n))
        return 0;
    for (size_t j = 0; j < k; j += 2) /* fixed-size pairs: plain moves, no memcpy call */
        memcpy(ids + j, sl->data + at + 4 * j, 2 * sizeof(uint32_t));
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&sl->seq, __ATOMIC_RELAXED) != s1)
        return 0;
    *nids = k;
    return 1;
}

/* Claim slot sl for writing; returns its (even) sequence number + 1, or 0 if another thread holds it. */
static inline uint32_t pc_claim(PCSlot *sl)
{
    uint32_t s = __atomic_load_n(&sl->seq, __ATOMIC_RELAXED);
    if ((s & 1) || !__atomic_compare_exchange_n(&sl->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return 0;
    __atomic_thread_fence(__ATOMIC_RELEASE); /* the odd number is visible before the new contents */
    return s + 1;
}

static inline void pc_release(PCSlot *sl, uint32_t odd) { __atomic_store_n(&sl->seq, odd + 1, __ATOMIC_RELEASE); }

/* BPE of p[0..n) for n <= 3 (ids appended; out has room): at most two merges, the pairs' ranks compared directly. */
static inline void bpe_short(const RankTable *t, const uint8_t *p, size_t n, IdVec *out)
{
    uint32_t *o = out->data + out->len;
    if (n == 1) {
        o[0] = t->byte_rank[p[0]];
        out->len += 1;
        return;
    }
    uint32_t left = t->pair_rank[((uint32_t)p[0] << 8) | p[1]];
    if (n == 2) {
        if (left != NO_RANK) {
            o[0] = left;
            out->len += 1;
        } else {
            o[0] = t->byte_rank[p[0]];
            o[1] = t->byte_rank[p[1]];
            out->len += 2;
        }
        return;
    }
    uint32_t right = t->pair_rank[((uint32_t)p[1] << 8) | p[2]];
    if (left == NO_RANK && right == NO_RANK) {
        o[0] = t->byte_rank[p[0]];
        o[1] = t->byte_rank[p[1]];
        o[2] = t->byte_rank[p[2]];
        out->len += 3;
        return;
    }
    uint32_t whole = rank_lookup(t, p, 3); /* the only merge left after either pair merged */
    if (whole != NO_RANK) {
        o[0] = whole;
        out->len += 1;
    } else if (left <= right) { /* the lower rank merges first; the left one on a tie */
        o[0] = left;
        o[1] = t->byte_rank[p[2]];
        out->len += 2;
    } else {
        o[0] = t->byte_rank[p[0]];
        o[1] = right;
        out->len += 2;
    }
}

/* The first character boundary i of p[0..n) after from (from < i < n) that no merge can join across, else n. A merge
 * across i makes a token holding bytes p[i - 1], p[i] side by side, and either ending there or going on with
 * p[i + 1]: so i is cut when that pair stands next to each other in no token (t->joined), or when it ends no token
 * (t->ends) and the three bytes p[i - 1..i + 1] stand side by side in no token (t->triple; at the end of the piece
 * the pair alone decides). BPE of the piece is then BPE of the stretches between cuts, one after the other: the
 * stretches are shorter, and the same stretch recurs across pieces that differ (a run of CJK characters splits
 * where no token spans two of them), so it is merged once and then found in the cache. */
static inline size_t next_cut(const RankTable *t, const uint8_t *p, size_t from, size_t n)
{
    for (size_t i = from + 1; i < n; i++) {
        if (is_cont(p[i]))
            continue;
        size_t pair = ((size_t)p[i - 1] << 8) | p[i];
        if (!bit_at(t->joined, pair) ||
            (!bit_at(t->ends, pair) && (i + 1 == n || !bit_at(t->triple, triple_bit(p + i - 1)))))
            return i;
    }
    return n;
}

/* encode_piece for a piece that is not itself a token (h: its hash_bytes if n >= 3, else 0; out has room for n + 3
 * more ids): the cache, then merging -- the whole piece at once, or (may_cut, and t->joined kept) stretch by stretch
 * when next_cut finds boundaries no merge can cross: stretches of up to three bytes by bpe_short, longer ones through
 * this function again (cache, then bpe_piece; no further cut, no whole-token shortcut). On cold 10 KB documents
 * this left bpe_piece about a quarter of its instructions on gpt2 and three quarters on cl100k_base (cachegrind),
 * as CJK, kana, Hangul and Thai runs fall into characters and short runs that recur across pieces. Kept out of line,
 * so that the common case (the piece is a token) inlines into the caller's loop without this part's register saves.
 * Also called with a stretch (may_cut 0), which may itself be a token. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int encode_piece_merged(const RankTable *t, PieceCache *c, CallStats *st, const uint8_t *p, size_t n,
                               IdVec *out, int valid_utf8, uint64_t h, int may_cut)
{
    PCSlot *sl = NULL;
    size_t slot = 0;
    uint16_t tag = 0;
    if (c && c->nslots && pc_ids_at(n) + 4 <= PC_DATA) {
        if (n < 3)
            h = hash_bytes(p, n);
        tag = (uint16_t)(h >> 48);
        uint32_t want = pc_want(tag, n);
        size_t i = (size_t)(((uint64_t)(uint32_t)h * c->nslots) >> 32);
        size_t nids;
        uint32_t *dst = out->data + out->len;
        /* the piece's set: slots i, i ^ 1, i ^ 2, i ^ 3 (those below nslots; way 0 is i itself); their hints share
         * one 16-byte block */
        uint32_t hints[PC_WAYS];
        __builtin_prefetch(&c->slots[i]); /* way 0, where most hits are: its line loads while the hints do */
        for (size_t k = 0; k < PC_WAYS; k++) {
            size_t j = i ^ k;
            hints[k] = j < c->nslots ? __atomic_load_n(&c->hint[j], __ATOMIC_RELAXED) : 0xFF0000u; /* len 255: none */
            if ((hints[k] & 0xFFFFFF) == want && pc_lookup(&c->slots[j], want, p, n, dst, &nids)) {
                out->len += nids;
                st->hits++;
                return 0;
            }
        }
        st->misses++;
        /* the slot to fill: the first empty way, else one picked by two bits of the hash (i itself when that way
         * is past the end) */
        for (size_t k = 0; k < PC_WAYS && !sl; k++) {
            if (!(hints[k] & 0xFF0000))
                slot = i ^ k, sl = &c->slots[slot];
        }
        if (!sl) {
            size_t j = i ^ (size_t)((h >> 46) & (PC_WAYS - 1));
            slot = j < c->nslots ? j : i;
            sl = &c->slots[slot];
        }
    }
    size_t before = out->len;
    size_t cut = may_cut && t->joined ? next_cut(t, p, 0, n) : n;
    if (cut == n) {
        if (bpe_piece(t, p, n, out, valid_utf8))
            return -1;
    } else { /* each stretch merged as a piece of its own: short ones at once, longer ones through the cache (never
              * the whole-token shortcut, which holds for whole pieces only: a token need not be what BPE makes of
              * its bytes) */
        for (size_t a = 0; a < n; a = cut, cut = a < n ? next_cut(t, p, a, n) : n) {
            size_t len = cut - a;
            if (len <= 3)
                bpe_short(t, p + a, len, out);
            else if (encode_piece_merged(t, c, st, p + a, len, out, valid_utf8, hash_bytes(p + a, len), 0))
                return -1;
        }
    }
    size_t nids = out->len - before;
    uint32_t odd;
    if (sl && pc_ids_at(n) + 4 * nids <= PC_DATA && (odd = pc_claim(sl)) != 0) {
        if (!sl->len)
            st->filled++;
        sl->tag = tag;
        sl->len = (uint8_t)n;
        sl->nids = (uint8_t)nids;
        memcpy(sl->data, p, n);
        memcpy(sl->data + pc_ids_at(n), out->data + before, nids * sizeof(uint32_t));
        pc_release(sl, odd);
        __atomic_store_n(&c->hint[slot], pc_want(tag, n) | (uint32_t)nids << 24, __ATOMIC_RELAXED);
    }
    return 0;
}

/* Ids of one piece appended to out: whole-piece lookup first, then the cache, then merging. valid_utf8: as for
 * bpe_piece. Returns 0 or -1 (out of memory). */
static inline int encode_piece(const RankTable *t, PieceCache *c, CallStats *st, const uint8_t *p, size_t n,
                               IdVec *out, int valid_utf8)
{
    if (vec_reserve(out, n + 3)) /* (+ 3: pc_lookup's block copy) */
        return -1;
    uint64_t h = 0;
    uint32_t r;
    if (n >= 3) { /* the whole-piece lookup of rank_lookup_hint, keeping the hash for the cache */
        h = hash_bytes(p, n);
        __builtin_prefetch(&t->slots[(size_t)h & t->mask]);
        r = rank_lookup_hashed(t, p, n, h);
    } else {
        r = n == 1 ? t->byte_rank[p[0]] : t->pair_rank[((uint32_t)p[0] << 8) | p[1]];
    }
    if (r != NO_RANK) {
        if (out->objs)
            __builtin_prefetch(&out->objs[r]);
        out->data[out->len++] = r;
        return 0;
    }
    return encode_piece_merged(t, c, st, p, n, out, valid_utf8, h, 1);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; an older kernel answers EINVAL and the loop below does the work */
#endif

/* Commit this process's pages of the cache c now, contents unchanged; returns the bytes covered (0: cache off). The
 * slots are zero-filled on demand: without this, the first pieces a process caches pay the page faults -- on the
 * 2 MiB pages big_calloc asks for, one zero-fill of 2 MiB each (0.3-0.5 ms, more while the kernel compacts memory;
 * 10-16% of a fresh instance's first eight English documents), and in a forked worker a copy of every page the
 * parent wrote. One madvise(MADV_POPULATE_WRITE) does it; where the kernel lacks it, one atomic add of 0 per 4 KiB
 * page (never a lost update: safe while other threads encode). Needs no GIL. */
static size_t pc_commit(PieceCache *c)
{
    size_t size = c->nslots ? pc_bytes(c->nslots) : 0;
    if (!size)
        return 0;
    const uintptr_t page = 4096;
    uintptr_t start = (uintptr_t)c->hint & ~(page - 1), end = ((uintptr_t)c->hint + size + page - 1) & ~(page - 1);
    if (madvise((void *)start, end - start, MADV_POPULATE_WRITE) != 0) {
        uint8_t *first = (uint8_t *)c->hint, *last = first + size - 1;
        __atomic_fetch_add(first, 0, __ATOMIC_RELAXED);
        for (uintptr_t at = start + page; at <= (uintptr_t)last; at += page)
            __atomic_fetch_add((uint8_t *)at, 0, __ATOMIC_RELAXED);
    }
    return size;
}

static void pc_account(PieceCache *c, const CallStats *st)
{
    if (st->hits)
        __atomic_add_fetch(&c->hits, st->hits, __ATOMIC_RELAXED);
    if (st->misses)
        __atomic_add_fetch(&c->misses, st->misses, __ATOMIC_RELAXED);
    if (st->filled)
        __atomic_add_fetch(&c->size, (int64_t)st->filled, __ATOMIC_RELAXED);
}

/* encode_text's loop, always inlined: called with a constant scanner, the copy calls it directly (or inlines it). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int encode_text_with(const RankTable *t, PieceCache *c, scan_fn scan, const uint8_t *s, size_t n,
                                   IdVec *out, int count_only, size_t *ntokens)
{
    size_t total = 0;
    CallStats st = {0, 0, 0};
    int rc = 0;
    /* Room for about one id per two bytes at once (mixed text; English needs half that), instead of doubling from
     * 64 ids through a series of reallocs, each copying what came before; encode_piece still reserves per piece. */
    if (!count_only && vec_reserve(out, n / 2 + 64))
        return -1;
    for (size_t i = 0; i < n;) {
        size_t e = scan(s, i, n);
        if (count_only)
            out->len = 0;
        if (encode_piece(t, c, &st, s + i, e - i, out, 1)) { /* (the scanner's input is valid UTF-8) */
            rc = -1;
            break;
        }
        total += count_only ? out->len : 0;
        i = e;
    }
    pc_account(c, &st);
    *ntokens = count_only ? total : out->len;
    return rc;
}

/* Encode a whole UTF-8 text with a scanner. count_only: out is scratch, *ntokens gets the count. The gpt2 scanner
 * (gpt2, p50k) has its own copy of the loop with the scanner inlined, which saves the call and its register saves
 * per piece (-1.1% instructions on mixed documents); the same for cl100k and o200k cost instructions (+2.8%, +4.8%:
 * their larger scanners crowd the loop's registers), so they and the others go through the pointer. */
static int encode_text(const RankTable *t, PieceCache *c, scan_fn scan, const uint8_t *s, size_t n, IdVec *out,
                       int count_only, size_t *ntokens)
{
    if (scan == scan_gpt2)
        return encode_text_with(t, c, scan_gpt2, s, n, out, count_only, ntokens);
    return encode_text_with(t, c, scan, s, n, out, count_only, ntokens);
}

/* ------------------------------------------------------------------------------------------------ Python type */

typedef struct {
    PyObject_HEAD RankTable table;
    int scanner_id;
    scan_fn scan;
    PyObject **id_objs; /* id -> its int object, made on the id's first use in a result list (so later lists
                           allocate no ints), NULL until then (made at load instead, o200k_base's 200,000 took 6 MiB
                           and 7-10 ms of every load) */
    size_t n_ids;
    uint32_t *id_len; /* id -> length of its bytes (0 where an id has no ordinary token) */
    PieceCache cache;
} CoreObject;

static void Core_dealloc(CoreObject *self)
{
    rank_table_free(&self->table);
    big_free(self->cache.hint, pc_bytes(self->cache.nslots));
    self->cache.slots = NULL;
    self->cache.hint = NULL;
    PyMem_RawFree(self->id_len);
    self->id_len = NULL;
    if (self->id_objs) {
        for (size_t i = 0; i < self->n_ids; i++)
            Py_XDECREF(self->id_objs[i]);
        PyMem_RawFree(self->id_objs);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Core_init(CoreObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ranks", "scanner", "cache_size", "atomic_chars", "image", NULL};
    PyObject *ranks, *image = Py_None;
    int scanner = SCAN_NONE, atomic_chars = 1;
    Py_ssize_t cache_size = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|inpO", kwlist, &ranks, &scanner, &cache_size, &atomic_chars,
                                     &image))
        return -1;
    if (cache_size < 0 || cache_size > ((Py_ssize_t)1 << 28)) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be in 0..2**28");
        return -1;
    }
    if (scanner < SCAN_NONE || scanner > SCAN_LAST) {
        PyErr_Format(PyExc_ValueError, "unknown scanner id %d", scanner);
        return -1;
    }
    if (self->table.slots) {
        PyErr_SetString(PyExc_RuntimeError, "Core is already initialised");
        return -1;
    }
    RankEntries entries;
    if (entries_from(&entries, ranks))
        return -1;
    if (image != Py_None) { /* the tables as Core.image() wrote them for these ranks (checked) */
        Py_buffer view;
        int failed = PyObject_GetBuffer(image, &view, PyBUF_C_CONTIGUOUS) < 0;
        if (!failed) {
            failed = image_load(&self->table, view.buf, (size_t)view.len, &entries, atomic_chars) != 0;
            PyBuffer_Release(&view);
        }
        if (failed) {
            entries_free(&entries);
            return -1;
        }
    } else if (rank_table_build(&self->table, &entries) || (atomic_chars && atomic_build(&self->table, &entries))) {
        entries_free(&entries);
        return -1;
    }
    if (joined_build(&self->table, &entries)) {
        entries_free(&entries);
        PyErr_NoMemory();
        return -1;
    }
    uint32_t max_rank = self->table.max_rank;
    self->n_ids = (size_t)max_rank + 1;
    self->id_objs = PyMem_RawMalloc(self->n_ids * sizeof(PyObject *));
    self->id_len = PyMem_RawCalloc(self->n_ids, sizeof(uint32_t));
    if (!self->id_objs || !self->id_len) {
        entries_free(&entries);
        PyErr_NoMemory();
        return -1;
    }
    /* Written, not left to calloc: its pages are then faulted in here, not one by one in the first calls. */
    memset(self->id_objs, 0, self->n_ids * sizeof(PyObject *));
    for (size_t k = 0; k < entries.n; k++)
        self->id_len[entries.rank[k]] = entries.len[k];
    entries_free(&entries);
    self->scanner_id = scanner;
    self->scan = scanner_of(scanner);
    if (cache_size > 0) {
        uint8_t *block = big_calloc(pc_bytes((size_t)cache_size));
        if (!block) {
            PyErr_NoMemory();
            return -1;
        }
        self->cache.hint = (uint32_t *)block;
        self->cache.slots = (PCSlot *)(block + pc_hint_bytes((size_t)cache_size));
        self->cache.nslots = (size_t)cache_size;
        pc_commit(&self->cache); /* now, not in the first calls (a forked worker: commit_cache for its own copy) */
    }
    return 0;
}

static PyObject *ids_to_list(CoreObject *self, const uint32_t *ids, size_t n)
{
    PyObject *list = list_unfilled((Py_ssize_t)n);
    if (!list)
        return NULL;
    PyObject **items = list_items(list);
    PyObject **objs = self->id_objs;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = objs[ids[i]];
        if (v) {
            Py_INCREF(v);
        } else if ((v = PyLong_FromUnsignedLong(ids[i])) != NULL) {
            objs[ids[i]] = v; /* the array's reference; the list's is the one below */
            Py_INCREF(v);
        } else {
            list_sized(list, (Py_ssize_t)i);
            Py_DECREF(list);
            return NULL;
        }
        items[i] = v;
    }
    list_sized(list, (Py_ssize_t)n);
    return list;
}

static int core_ready(CoreObject *self, int need_scanner)
{
    if (!self->table.slots) {
        PyErr_SetString(PyExc_RuntimeError, "Core is not initialised");
        return -1;
    }
    if (need_scanner && !self->scan) {
        PyErr_SetString(PyExc_ValueError, "this Core has no native pre-tokenizer; use encode_pieces");
        return -1;
    }
    return 0;
}

/* The UTF-8 of text for a Core with a native pre-tokenizer (the str caches it), or NULL with an exception set:
 * TypeError for a non-str, UnicodeEncodeError on lone surrogates (callers scrub those and retry). */
static const uint8_t *text_utf8(CoreObject *self, PyObject *text, size_t *size)
{
    if (core_ready(self, 1))
        return NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    *size = (size_t)n;
    return (const uint8_t *)utf8;
}

/* Texts shorter than this are encoded holding the GIL: releasing and taking it back costs about as much as
 * encoding a chat line itself, and another thread waits at most a few microseconds. */
#define GIL_FROM 512

/* encode(text) / count(text): the GIL is released for the scan and the merges (of texts of GIL_FROM bytes
 * or more). */
static PyObject *core_run(CoreObject *self, PyObject *text, int count_only)
{
    size_t size;
    const uint8_t *utf8 = text_utf8(self, text, &size);
    if (!utf8)
        return NULL;
    IdVec out = {NULL, 0, 0, count_only ? NULL : self->id_objs};
    size_t ntokens = 0;
    int rc;
    if (size < GIL_FROM) {
        rc = encode_text(&self->table, &self->cache, self->scan, utf8, size, &out, count_only, &ntokens);
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = encode_text(&self->table, &self->cache, self->scan, utf8, size, &out, count_only, &ntokens);
        Py_END_ALLOW_THREADS
    }
    PyObject *result = NULL;
    if (rc)
        PyErr_NoMemory();
    else if (count_only)
        result = PyLong_FromSize_t(ntokens);
    else
        result = ids_to_list(self, out.data, out.len);
    PyMem_RawFree(out.data);
    return result;
}

static PyObject *Core_encode(CoreObject *self, PyObject *text) { return core_run(self, text, 0); }

static PyObject *Core_count(CoreObject *self, PyObject *text) { return core_run(self, text, 1); }

/* encode_pieces(pieces) / count_pieces(pieces): BPE of pre-split pieces (patterns without a native scanner). */
static PyObject *core_pieces(CoreObject *self, PyObject *pieces, int count_only)
{
    if (core_ready(self, 0))
        return NULL;
    PyObject *seq = PySequence_Fast(pieces, "pieces must be a sequence of str");
    if (!seq)
        return NULL;
    Py_ssize_t np = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    IdVec out = {NULL, 0, 0};
    size_t total = 0;
    PyObject *result = NULL;
    CallStats st = {0, 0, 0};
    for (Py_ssize_t k = 0; k < np; k++) {
        Py_ssize_t size;
        const char *utf8;
        if (PyUnicode_Check(items[k]))
            utf8 = PyUnicode_AsUTF8AndSize(items[k], &size);
        else if (PyBytes_Check(items[k])) {
            utf8 = PyBytes_AS_STRING(items[k]);
            size = PyBytes_GET_SIZE(items[k]);
        } else {
            PyErr_SetString(PyExc_TypeError, "pieces must be str or bytes");
            goto done;
        }
        if (!utf8)
            goto done;
        if (size == 0)
            continue;
        if (count_only)
            out.len = 0;
        if (encode_piece(&self->table, &self->cache, &st, (const uint8_t *)utf8, (size_t)size, &out, 0)) {
            PyErr_NoMemory();
            goto done;
        }
        total += out.len;
    }
    result = count_only ? PyLong_FromSize_t(total) : ids_to_list(self, out.data, out.len);
done:
    pc_account(&self->cache, &st);
    PyMem_RawFree(out.data);
    Py_DECREF(seq);
    return result;
}

static PyObject *Core_encode_pieces(CoreObject *self, PyObject *pieces) { return core_pieces(self, pieces, 0); }

static PyObject *Core_count_pieces(CoreObject *self, PyObject *pieces) { return core_pieces(self, pieces, 1); }

/* split(text) -> list[str]: the pieces of the native pre-tokenizer (for differential tests against regex). */
/* encode_with_offsets(text) -> (ids, spans): spans[k] = (start, end) of token k in characters (code points) of
 * text; a token that starts or ends inside a multi-byte character covers that whole character. */
/* ------------------------------------------------------------------------------------------------ batches */

/* encode_batch / count_batch: the texts are shared out among up to num_threads threads (the caller's included)
 * that take the next text from a counter, convert it to UTF-8 and encode it, all without the GIL. Python lists
 * can only be built with the GIL held, so the calling thread also turns finished results into lists as they come
 * in (taking the GIL briefly), while the other threads go on encoding: the serial part overlaps the parallel one. */

enum { ITEM_PENDING = 0, ITEM_DONE = 1, ITEM_SURROGATE = 2, ITEM_NOMEM = 3 };

typedef struct {
    const void *data; /* the str's code units (kind 1, 2 or 4 bytes each) */
    Py_ssize_t length;
    int kind, ascii;
    uint8_t *utf8; /* owned, for non-ASCII text */
    IdVec ids;
    size_t count;
    int state; /* ITEM_*, written once by the thread that encodes the item (release), read by the caller (acquire) */
} BatchItem;

typedef struct {
    CoreObject *core;
    BatchItem *items;
    size_t n, next; /* next: the counter the threads take texts from (atomic) */
    int count_only;
} Batch;

/* UTF-8 of a str's code units into a new buffer; ITEM_SURROGATE on a lone surrogate (the caller falls back to the
 * scrubbing path), ITEM_NOMEM when out of memory, else ITEM_DONE. */
static int batch_utf8(BatchItem *it, size_t *size)
{
    size_t len = 0;
    Py_ssize_t n = it->length;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(it->kind, it->data, i);
        if (c >= 0xD800 && c <= 0xDFFF)
            return ITEM_SURROGATE;
        len += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    uint8_t *out = PyMem_RawMalloc(len + 1), *o = out;
    if (!out)
        return ITEM_NOMEM;
    for (Py_ssize_t i = 0; i < n; i++) {
        o += utf8_put(o, PyUnicode_READ(it->kind, it->data, i));
    }
    it->utf8 = out;
    *size = len;
    return ITEM_DONE;
}

/* Encode (or count) one text of the batch; called without the GIL. */
static void batch_item(Batch *b, BatchItem *it)
{
    CoreObject *self = b->core;
    const uint8_t *s = it->data;
    size_t size = (size_t)it->length;
    int state = it->ascii ? ITEM_DONE : batch_utf8(it, &size);
    if (state == ITEM_DONE) {
        if (!it->ascii)
            s = it->utf8;
        if (encode_text(&self->table, &self->cache, self->scan, s, size, &it->ids, b->count_only, &it->count))
            state = ITEM_NOMEM;
    }
    if (b->count_only) {
        PyMem_RawFree(it->ids.data);
        it->ids.data = NULL;
    }
    PyMem_RawFree(it->utf8);
    it->utf8 = NULL;
    __atomic_store_n(&it->state, state, __ATOMIC_RELEASE);
}

static void *batch_worker(void *arg)
{
    Batch *b = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        if (i >= b->n)
            return NULL;
        batch_item(b, &b->items[i]);
    }
}

/* The result of item i (GIL held): its id list or count, None for the caller's surrogate fallback, NULL on error. */
static PyObject *batch_result(Batch *b, size_t i)
{
    BatchItem *it = &b->items[i];
    PyObject *r;
    if (it->state == ITEM_SURROGATE) {
        Py_INCREF(Py_None);
        r = Py_None;
    } else if (it->state == ITEM_NOMEM) {
        r = PyErr_NoMemory();
    } else {
        r = b->count_only ? PyLong_FromSize_t(it->count) : ids_to_list(b->core, it->ids.data, it->ids.len);
    }
    PyMem_RawFree(it->ids.data);
    it->ids.data = NULL;
    return r;
}

#define BATCH_MAX_THREADS 256
#define BATCH_CONVERT_EVERY 8 /* finished results the caller lets pile up before it takes the GIL to convert them */

static PyObject *core_batch(CoreObject *self, PyObject *args, int count_only)
{
    PyObject *texts;
    int num_threads = 1;
    if (!PyArg_ParseTuple(args, "O|i", &texts, &num_threads) || core_ready(self, 1))
        return NULL;
    PyObject *seq = PySequence_Tuple(texts); /* a private tuple: other threads may change a list meanwhile */
    if (!seq)
        return NULL;
    size_t n = (size_t)PyTuple_GET_SIZE(seq);
    PyObject **objs = &PyTuple_GET_ITEM(seq, 0);
    Batch b = {self, PyMem_RawCalloc(n ? n : 1, sizeof(BatchItem)), n, 0, count_only};
    PyObject *result = PyList_New((Py_ssize_t)n);
    if (!b.items || !result) {
        PyMem_RawFree(b.items);
        Py_XDECREF(result);
        Py_DECREF(seq);
        return b.items ? NULL : PyErr_NoMemory();
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        PyObject *s = objs[i];
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "texts[%zu] must be str, not %.100s", i, Py_TYPE(s)->tp_name);
            PyMem_RawFree(b.items);
            Py_DECREF(result);
            Py_DECREF(seq);
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(s) < 0) {
            PyMem_RawFree(b.items);
            Py_DECREF(result);
            Py_DECREF(seq);
            return NULL;
        }
#endif
        BatchItem *it = &b.items[i];
        it->data = PyUnicode_DATA(s);
        it->length = PyUnicode_GET_LENGTH(s);
        it->kind = PyUnicode_KIND(s);
        it->ascii = PyUnicode_IS_ASCII(s);
        total += (size_t)it->length;
    }
    /* a thread is worth starting for about 32 KiB of text */
    size_t want = num_threads < 1 ? 1 : num_threads > BATCH_MAX_THREADS ? BATCH_MAX_THREADS : (size_t)num_threads;
    if (want > n)
        want = n ? n : 1;
    if (want > total / 32768 + 1)
        want = total / 32768 + 1;
    pthread_t threads[BATCH_MAX_THREADS];
    size_t started = 0, converted = 0;
    int failed = 0;
    PyThreadState *ts = PyEval_SaveThread();
    for (size_t k = 1; k < want; k++)
        if (pthread_create(&threads[started], NULL, batch_worker, &b) == 0)
            started++;
    for (;;) {
        size_t ready = converted;
        while (ready < n && __atomic_load_n(&b.items[ready].state, __ATOMIC_ACQUIRE) != ITEM_PENDING)
            ready++;
        size_t next = __atomic_load_n(&b.next, __ATOMIC_RELAXED);
        if (ready > converted && (ready - converted >= BATCH_CONVERT_EVERY || next >= n || !started)) {
            PyEval_RestoreThread(ts);
            for (; converted < ready; converted++) {
                PyObject *r = failed ? NULL : batch_result(&b, converted);
                if (!r) {
                    failed = 1;
                    PyMem_RawFree(b.items[converted].ids.data);
                    b.items[converted].ids.data = NULL;
                    continue;
                }
                PyList_SET_ITEM(result, (Py_ssize_t)converted, r);
            }
            ts = PyEval_SaveThread();
            continue;
        }
        if (converted == n)
            break;
        size_t i = __atomic_fetch_add(&b.next, 1, __ATOMIC_RELAXED);
        if (i < n)
            batch_item(&b, &b.items[i]);
        else
            sched_yield(); /* the other threads are finishing their last texts */
    }
    for (size_t k = 0; k < started; k++)
        pthread_join(threads[k], NULL);
    PyEval_RestoreThread(ts);
    PyMem_RawFree(b.items);
    Py_DECREF(seq);
    if (failed) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *Core_encode_batch(CoreObject *self, PyObject *args) { return core_batch(self, args, 0); }

static PyObject *Core_count_batch(CoreObject *self, PyObject *args) { return core_batch(self, args, 1); }

/* count_utf8(data, offsets, wide) -> list[int] and encode_utf8(...) -> (ids, offsets): the count (the ids) of each
 * text of a batch laid out as Arrow lays out a string array: every text's UTF-8 back to back in one buffer, text
 * i = data[offsets[i]:offsets[i + 1]] (offsets: n + 1 int32 values, or int64 when wide). No str objects are made;
 * the GIL is released for the whole batch. Every text must be valid UTF-8 (as strict as Python's decoder):
 * ValueError naming the first that is not. */

/* Length of the valid UTF-8 prefix of s[0:n] (n when all of it is valid); overlongs, surrogates and code points
 * past U+10FFFF are invalid, as in Python's strict decoder. */
static size_t utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n)
            return i;
        uint8_t c1 = s[i + 1];
        uint8_t lo = 0x80, hi = 0xBF;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
        else if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
        if (c1 < lo || c1 > hi)
            return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
        i += len;
    }
    return n;
}

static PyObject *core_utf8(CoreObject *self, PyObject *args, int count_only)
{
    PyObject *data_obj, *offsets_obj;
    int wide = 1;
    if (!PyArg_ParseTuple(args, "OO|p", &data_obj, &offsets_obj, &wide) || core_ready(self, 1))
        return NULL;
    Py_buffer data, offs;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(offsets_obj, &offs, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *result = NULL;
    size_t width = wide ? 8 : 4;
    size_t n = offs.len >= (Py_ssize_t)width ? (size_t)offs.len / width - 1 : 0;
    size_t *counts = PyMem_RawMalloc((n ? n : 1) * sizeof(size_t));
    IdVec ids = {NULL, 0, 0}; /* encode: every text's ids back to back */
    if (!counts) {
        PyErr_NoMemory();
        goto done;
    }
    if (offs.len % (Py_ssize_t)width || (n == 0 && offs.len < (Py_ssize_t)width)) {
        PyErr_SetString(PyExc_ValueError, "offsets must hold n + 1 values of the given width");
        goto done;
    }
    const uint8_t *base = data.buf;
    size_t bad = (size_t)-1, range_bad = (size_t)-1;
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        int64_t a, b;
        if (wide) {
            memcpy(&a, (const uint8_t *)offs.buf + 8 * i, 8);
            memcpy(&b, (const uint8_t *)offs.buf + 8 * (i + 1), 8);
        } else {
            int32_t a32, b32;
            memcpy(&a32, (const uint8_t *)offs.buf + 4 * i, 4);
            memcpy(&b32, (const uint8_t *)offs.buf + 4 * (i + 1), 4);
            a = a32;
            b = b32;
        }
        if (a < 0 || b < a || b > (int64_t)data.len) {
            range_bad = i;
            break;
        }
        const uint8_t *s = base + a;
        size_t len = (size_t)(b - a);
        if (utf8_valid_prefix(s, len) != len) {
            bad = i;
            break;
        }
        size_t before = ids.len;
        if (encode_text(&self->table, &self->cache, self->scan, s, len, &ids, count_only, &counts[i])) {
            nomem = 1;
            break;
        }
        if (!count_only)
            counts[i] = ids.len - before;
    }
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    if (range_bad != (size_t)-1) {
        PyErr_Format(PyExc_ValueError, "offsets of text %zu lie outside the data buffer", range_bad);
        goto done;
    }
    if (bad != (size_t)-1) {
        PyErr_Format(PyExc_ValueError, "text %zu is not valid UTF-8", bad);
        goto done;
    }
    if (!count_only) {
        if (ids.len > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "more than 2**31 - 1 ids in one batch");
            goto done;
        }
        /* (ids as native uint32, n + 1 int32 offsets): an Arrow list<int32> array's two buffers */
        PyObject *id_bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(ids.len * sizeof(uint32_t)));
        PyObject *off_bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((n + 1) * sizeof(int32_t)));
        if (id_bytes && off_bytes) {
            if (ids.len)
                memcpy(PyBytes_AS_STRING(id_bytes), ids.data, ids.len * sizeof(uint32_t));
            int32_t *o = (int32_t *)PyBytes_AS_STRING(off_bytes), at = 0;
            o[0] = 0;
            for (size_t i = 0; i < n; i++)
                o[i + 1] = at += (int32_t)counts[i];
            result = PyTuple_Pack(2, id_bytes, off_bytes);
        }
        Py_XDECREF(id_bytes);
        Py_XDECREF(off_bytes);
        goto done;
    }
    result = PyList_New((Py_ssize_t)n);
    if (!result)
        goto done;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromSize_t(counts[i]);
        if (!v) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, (Py_ssize_t)i, v);
    }
done:
    PyMem_RawFree(ids.data);
    PyMem_RawFree(counts);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *Core_count_utf8(CoreObject *self, PyObject *args) { return core_utf8(self, args, 1); }

static PyObject *Core_encode_utf8(CoreObject *self, PyObject *args) { return core_utf8(self, args, 0); }

/* count_framed(text, names): the tokens of text read as parts -- every occurrence of one of names (non-empty
 * bytes, at most 64; at each position the first listed name that occurs there wins, so callers list longer names
 * first) is one token, and each stretch between occurrences is counted on its own as count(stretch) counts it.
 * The same cuts as a regex split on the alternation of the names in that order (UTF-8 names start with a lead
 * byte, so a byte match starts and ends on character boundaries). One call and one GIL release per text. Raises
 * UnicodeEncodeError on lone surrogates (callers fall back), TypeError/ValueError for bad names. */
#define FRAMED_MAX_NAMES 64
static PyObject *Core_count_framed(CoreObject *self, PyObject *args)
{
    PyObject *text, *names;
    if (!PyArg_ParseTuple(args, "OO!:count_framed", &text, &PyTuple_Type, &names))
        return NULL;
    Py_ssize_t nn = PyTuple_GET_SIZE(names);
    if (nn > FRAMED_MAX_NAMES) {
        PyErr_Format(PyExc_ValueError, "count_framed takes at most %d names", FRAMED_MAX_NAMES);
        return NULL;
    }
    const uint8_t *name[FRAMED_MAX_NAMES];
    size_t name_len[FRAMED_MAX_NAMES];
    uint8_t first[256];
    memset(first, 0, sizeof first);
    int distinct_first = 0;
    uint8_t only_first = 0;
    for (Py_ssize_t k = 0; k < nn; k++) {
        PyObject *b = PyTuple_GET_ITEM(names, k);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) == 0) {
            PyErr_SetString(PyExc_TypeError, "count_framed names must be non-empty bytes");
            return NULL;
        }
        name[k] = (const uint8_t *)PyBytes_AS_STRING(b);
        name_len[k] = (size_t)PyBytes_GET_SIZE(b);
        if (!first[name[k][0]]) {
            first[name[k][0]] = 1;
            distinct_first++;
            only_first = name[k][0];
        }
    }
    size_t size;
    const uint8_t *utf8 = text_utf8(self, text, &size);
    if (!utf8)
        return NULL;
    IdVec out = {NULL, 0, 0};
    size_t total = 0;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    size_t start = 0, i = 0;
    while (i < size) {
        if (distinct_first == 1) { /* the usual case ('<' of <|...|>): jump with memchr */
            const uint8_t *hit = memchr(utf8 + i, only_first, size - i);
            if (!hit)
                break;
            i = (size_t)(hit - utf8);
        } else if (distinct_first == 0) {
            break;
        } else if (!first[utf8[i]]) {
            i++;
            continue;
        }
        Py_ssize_t found = -1;
        for (Py_ssize_t k = 0; k < nn; k++) {
            if (name_len[k] <= size - i && memcmp(utf8 + i, name[k], name_len[k]) == 0) {
                found = k;
                break;
            }
        }
        if (found < 0) {
            i++;
            continue;
        }
        if (i > start) {
            size_t n = 0;
            if (encode_text(&self->table, &self->cache, self->scan, utf8 + start, i - start, &out, 1, &n)) {
                rc = -1;
                break;
            }
            total += n;
        }
        total += 1;
        i += name_len[found];
        start = i;
    }
    if (!rc && size > start) {
        size_t n = 0;
        rc = encode_text(&self->table, &self->cache, self->scan, utf8 + start, size - start, &out, 1, &n);
        total += n;
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(out.data);
    if (rc)
        return PyErr_NoMemory();
    return PyLong_FromSize_t(total);
}

static PyObject *Core_encode_with_offsets(CoreObject *self, PyObject *text)
{
    size_t size;
    const uint8_t *s = text_utf8(self, text, &size);
    if (!s)
        return NULL;
    IdVec out = {NULL, 0, 0};
    size_t ntokens = 0;
    uint32_t *spans = NULL; /* start, end per token */
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = encode_text(&self->table, &self->cache, self->scan, s, size, &out, 0, &ntokens);
    if (!rc && out.len) {
        spans = PyMem_RawMalloc(out.len * 2 * sizeof(uint32_t));
        if (!spans) {
            rc = -1;
        } else {
            /* lead(x) = number of character starts in s[0..x]; one forward counter serves the nondecreasing
             * sequence start_1, last_1, start_2, last_2, ... of token start / last-byte offsets. */
            size_t scanned = 0, leads = 0, byte = 0;
            for (size_t k = 0; k < out.len; k++) {
                size_t len = self->id_len[out.data[k]];
                size_t marks[2] = {byte, byte + len - 1};
                for (int m = 0; m < 2; m++) {
                    while (scanned <= marks[m]) {
                        leads += (s[scanned] & 0xC0) != 0x80;
                        scanned++;
                    }
                    spans[2 * k + m] = (uint32_t)(m == 0 ? leads - 1 : leads);
                }
                byte += len;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL, *ids = NULL, *offsets = NULL;
    if (rc) {
        PyErr_NoMemory();
        goto done;
    }
    ids = ids_to_list(self, out.data, out.len);
    offsets = ids ? PyList_New((Py_ssize_t)out.len) : NULL;
    if (!offsets)
        goto done;
    for (size_t k = 0; k < out.len; k++) {
        PyObject *span = PyTuple_New(2);
        if (!span)
            goto done;
        PyList_SET_ITEM(offsets, (Py_ssize_t)k, span);
        for (int m = 0; m < 2; m++) {
            PyObject *v = PyLong_FromUnsignedLong(spans[2 * k + m]);
            if (!v)
                goto done;
            PyTuple_SET_ITEM(span, m, v);
        }
    }
    result = PyTuple_Pack(2, ids, offsets);
done:
    Py_XDECREF(ids);
    Py_XDECREF(offsets);
    PyMem_RawFree(spans);
    PyMem_RawFree(out.data);
    return result;
}

static PyObject *Core_split(CoreObject *self, PyObject *text)
{
    size_t size;
    const uint8_t *s = text_utf8(self, text, &size);
    if (!s)
        return NULL;
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    for (size_t i = 0; i < size;) {
        size_t e = self->scan(s, i, size);
        PyObject *piece = PyUnicode_DecodeUTF8((const char *)s + i, (Py_ssize_t)(e - i), "strict");
        if (!piece || PyList_Append(list, piece)) {
            Py_XDECREF(piece);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(piece);
        i = e;
    }
    return list;
}

/* bpe(piece: bytes) -> list[int]: whole-piece lookup then merging of one byte string. */
static PyObject *Core_bpe(CoreObject *self, PyObject *piece)
{
    if (core_ready(self, 0))
        return NULL;
    if (!PyBytes_Check(piece) || PyBytes_GET_SIZE(piece) == 0) {
        PyErr_SetString(PyExc_TypeError, "piece must be non-empty bytes");
        return NULL;
    }
    IdVec out = {NULL, 0, 0};
    PyObject *result = NULL;
    CallStats st = {0, 0, 0};
    if (encode_piece(&self->table, NULL, &st, (const uint8_t *)PyBytes_AS_STRING(piece), (size_t)PyBytes_GET_SIZE(piece),
                     &out, 0))
        PyErr_NoMemory();
    else
        result = ids_to_list(self, out.data, out.len);
    PyMem_RawFree(out.data);
    return result;
}

/* The last merge of rank BPE on the bytes of one token p[0..n) (n >= 2) from single bytes, without whole-piece
 * lookup: the run is stopped when two parts remain (the only pair left then forms the token itself, the one
 * product that can span the whole token). Returns the length of the left part, or 0 if merging stops earlier
 * (with three or more parts). Quadratic; for load-time checks of a vocabulary, not for encoding. */
static size_t last_merge_split(const RankTable *t, const uint8_t *p, size_t n, uint32_t *start)
{
    size_t parts = n;
    for (size_t i = 0; i <= n; i++)
        start[i] = (uint32_t)i;
    while (parts > 2) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t k = 0; k + 1 < parts; k++) {
            uint32_t r = rank_lookup(t, p + start[k], start[k + 2] - start[k]);
            if (r < best) { /* strictly less: the leftmost of equal ranks wins */
                best = r;
                bi = k;
            }
        }
        if (best == NO_RANK)
            return 0;
        memmove(start + bi + 1, start + bi + 2, (parts - bi - 1) * sizeof(uint32_t));
        parts--;
    }
    return start[1];
}

/* last_merges(tokens: list[bytes]) -> list[int]: per token, last_merge_split (0 when it stops with more than two
 * parts; 0 for tokens shorter than two bytes). */
static PyObject *Core_last_merges(CoreObject *self, PyObject *tokens)
{
    if (core_ready(self, 0))
        return NULL;
    if (!PyList_Check(tokens)) {
        PyErr_SetString(PyExc_TypeError, "tokens must be a list of bytes");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(tokens);
    size_t longest = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PyList_GET_ITEM(tokens, k);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "tokens must be a list of bytes");
            return NULL;
        }
        if ((size_t)PyBytes_GET_SIZE(item) > longest)
            longest = (size_t)PyBytes_GET_SIZE(item);
    }
    uint32_t *start = PyMem_RawMalloc((longest + 1) * sizeof(uint32_t));
    PyObject *result = PyList_New(count);
    if (!start || !result) {
        PyMem_RawFree(start);
        Py_XDECREF(result);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PyList_GET_ITEM(tokens, k);
        size_t n = (size_t)PyBytes_GET_SIZE(item);
        size_t left = n < 2 ? 0 : last_merge_split(&self->table, (const uint8_t *)PyBytes_AS_STRING(item), n, start);
        PyObject *v = PyLong_FromSize_t(left);
        if (!v) {
            PyMem_RawFree(start);
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, k, v);
    }
    PyMem_RawFree(start);
    return result;
}

/* cache_stats() -> (hits, misses, size, max_size) */
static PyObject *Core_cache_stats(CoreObject *self, PyObject *unused)
{
    (void)unused;
    PieceCache *c = &self->cache;
    return Py_BuildValue("(KKnn)", (unsigned long long)__atomic_load_n(&c->hits, __ATOMIC_RELAXED),
                         (unsigned long long)__atomic_load_n(&c->misses, __ATOMIC_RELAXED),
                         (Py_ssize_t)__atomic_load_n(&c->size, __ATOMIC_RELAXED), (Py_ssize_t)c->nslots);
}

/* clear_cache(): drop every entry and reset the counters (safe while other threads encode). */
static PyObject *Core_clear_cache(CoreObject *self, PyObject *unused)
{
    (void)unused;
    PieceCache *c = &self->cache;
    Py_BEGIN_ALLOW_THREADS
    for (size_t k = 0; k < c->nslots; k++) {
        PCSlot *sl = &c->slots[k];
        uint32_t odd;
        while (!(odd = pc_claim(sl)))
            sched_yield(); /* another thread is writing this slot */
        memset((uint8_t *)sl + sizeof(sl->seq), 0, sizeof(PCSlot) - sizeof(sl->seq));
        pc_release(sl, odd);
        __atomic_store_n(&c->hint[k], 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&c->hits, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->misses, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->size, 0, __ATOMIC_RELAXED);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* commit_cache() -> int: commit this process's pages of the piece cache now, contents unchanged, and return the
 * bytes covered (see pc_commit). Core() does it once; a forked worker calls it for its own copy. */
static PyObject *Core_commit_cache(CoreObject *self, PyObject *unused)
{
    (void)unused;
    size_t size;
    Py_BEGIN_ALLOW_THREADS
    size = pc_commit(&self->cache);
    Py_END_ALLOW_THREADS
    return PyLong_FromSize_t(size);
}

static PyObject *Core_get_scanner(CoreObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->scanner_id);
}

static PyObject *Core_get_size(CoreObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(self->table.count);
}

static PyObject *Core_get_cuts(CoreObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->table.joined != NULL);
}

static PyObject *Core_get_atomic(CoreObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(self->table.n_atoms);
}

static PyObject *Core_image(CoreObject *self, PyObject *Py_UNUSED(ignored))
{
    if (core_ready(self, 0))
        return NULL;
    return image_bytes(&self->table);
}

static PyMethodDef Core_methods[] = {
    {"encode", (PyCFunction)Core_encode, METH_O,
     "encode(text: str) -> list[int]: token ids of text (native pre-tokenizer + BPE, GIL released). "
     "Raises UnicodeEncodeError on lone surrogates (callers scrub them first)."},
    {"count", (PyCFunction)Core_count, METH_O, "count(text: str) -> int: len(encode(text)) without building a list."},
    {"encode_pieces", (PyCFunction)Core_encode_pieces, METH_O,
     "encode_pieces(pieces: Sequence[str | bytes]) -> list[int]: BPE of already pre-tokenized pieces."},
    {"count_pieces", (PyCFunction)Core_count_pieces, METH_O,
     "count_pieces(pieces: Sequence[str | bytes]) -> int: number of tokens of the pieces."},
    {"encode_batch", (PyCFunction)Core_encode_batch, METH_VARARGS,
     "encode_batch(texts: Sequence[str], num_threads: int = 1) -> list[list[int] | None]: encode of each text, "
     "over up to num_threads threads (GIL released); None where a text holds a lone surrogate."},
    {"count_batch", (PyCFunction)Core_count_batch, METH_VARARGS,
     "count_batch(texts: Sequence[str], num_threads: int = 1) -> list[int | None]: count of each text, likewise."},
    {"count_utf8", (PyCFunction)Core_count_utf8, METH_VARARGS,
     "count_utf8(data: Buffer, offsets: Buffer, wide: bool = True) -> list[int]: count of each UTF-8 text "
     "data[offsets[i]:offsets[i + 1]] (offsets int64, or int32 unless wide: Arrow's string layout), GIL released; "
     "ValueError for a text that is not valid UTF-8."},
    {"encode_utf8", (PyCFunction)Core_encode_utf8, METH_VARARGS,
     "encode_utf8(data: Buffer, offsets: Buffer, wide: bool = True) -> (bytes, bytes): the ids of those texts back "
     "to back (native uint32) and n + 1 int32 offsets into them (an Arrow list<int32> array's buffers)."},
    {"count_framed", (PyCFunction)Core_count_framed, METH_VARARGS,
     "count_framed(text: str, names: tuple[bytes, ...]) -> int: tokens of text with every occurrence of a name "
     "(first listed wins at a position) one token and the stretches between counted on their own."},
    {"split", (PyCFunction)Core_split, METH_O, "split(text: str) -> list[str]: the native pre-tokenizer's pieces."},
    {"encode_with_offsets", (PyCFunction)Core_encode_with_offsets, METH_O,
     "encode_with_offsets(text: str) -> (list[int], list[tuple[int, int]]): ids and (start, end) character offsets."},
    {"bpe", (PyCFunction)Core_bpe, METH_O, "bpe(piece: bytes) -> list[int]: ids of one piece (cache not used)."},
    {"last_merges", (PyCFunction)Core_last_merges, METH_O,
     "last_merges(tokens: list[bytes]) -> list[int]: per token, the byte length of the left part of the last merge "
     "of rank BPE on its bytes (no whole-piece lookup); 0 if merging stops with more than two parts."},
    {"cache_stats", (PyCFunction)Core_cache_stats, METH_NOARGS,
     "cache_stats() -> (hits, misses, size, max_size) of the piece cache."},
    {"clear_cache", (PyCFunction)Core_clear_cache, METH_NOARGS, "clear_cache(): empty the piece cache, reset counters."},
    {"image", (PyCFunction)Core_image, METH_NOARGS,
     "image() -> bytes: the built lookup tables, which Core(ranks, ..., image=) restores for the same ranks instead of "
     "building them (ValueError there for an image of other ranks or another build of the core)."},
    {"commit_cache", (PyCFunction)Core_commit_cache, METH_NOARGS,
     "commit_cache() -> int: fault in this process's pages of the piece cache now (contents unchanged); bytes."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Core_getset[] = {
    {"scanner", (getter)Core_get_scanner, NULL, "scanner id (0 = none)", NULL},
    {"vocab_entries", (getter)Core_get_size, NULL, "number of ordinary tokens", NULL},
    {"atomic_chars", (getter)Core_get_atomic, NULL, "number of characters BPE may start from whole (0 = off)", NULL},
    {"cuts", (getter)Core_get_cuts, NULL, "whether pieces are merged in stretches cut where no token joins two bytes",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._core.Core",
    .tp_basicsize = sizeof(CoreObject),
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Core(ranks: dict[bytes, int] | (tokens, offsets, ids), scanner: int = 0, cache_size: int = 0, "
              "atomic_chars: bool = True, image: Buffer | None = None): a thread-safe BPE core; image: what image() "
              "returned for the same ranks (its tables are copied, not built).",
    .tp_methods = Core_methods,
    .tp_getset = Core_getset,
    .tp_init = (initproc)Core_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------------ module */

static PyObject *mod_unicode_flags(PyObject *module, PyObject *arg)
{
    (void)module;
    long cp = PyLong_AsLong(arg);
    if (cp == -1 && PyErr_Occurred())
        return NULL;
    if (cp < 0 || cp > 0x10FFFF) {
        PyErr_SetString(PyExc_ValueError, "code point out of range");
        return NULL;
    }
    return PyLong_FromLong(ut_flags((uint32_t)cp));
}

/* all_unicode_flags() -> bytes: the flags of every code point, little-endian uint16, 0..0x10FFFF. */
static PyObject *mod_all_unicode_flags(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 0x110000 * 2);
    if (!out)
        return NULL;
    uint8_t *d = (uint8_t *)PyBytes_AS_STRING(out);
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        uint16_t f = cp < 128 ? ascii_flags[cp] : ut_flags(cp);
        d[2 * cp] = (uint8_t)(f & 0xFF);
        d[2 * cp + 1] = (uint8_t)(f >> 8);
    }
    return out;
}

/* utf8_size(text): the UTF-8 length of text, through the UTF-8 copy CPython keeps inside the str (made here when it
 * is missing), so the encode or count that follows reads that copy instead of encoding the text again.
 * UnicodeEncodeError for a lone surrogate. */
static PyObject *mod_utf8_size(PyObject *mod, PyObject *text)
{
    (void)mod;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t n;
    if (!PyUnicode_AsUTF8AndSize(text, &n))
        return NULL;
    return PyLong_FromSsize_t(n);
}

static PyObject *is_normalized_fn; /* unicodedata.is_normalized, taken at module init */

/* nfc_verify(text) -> bool: unicodedata.is_normalized("NFC", text), the compiled quick check answering for every
 * stretch it is sure of and unicodedata for the others (nfc_check.h), so always the same answer. */
static PyObject *mod_nfc_verify(PyObject *mod, PyObject *text)
{
    (void)mod;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    int r = nfc_verify(text, is_normalized_fn);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* nfc_apply(text, normalize) -> str: normalize(text) for an NFC normalize, computed stretch by stretch
 * (nfc_check.h): text itself when it is NFC. */
static PyObject *mod_nfc_apply(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *text, *normalize;
    if (!PyArg_ParseTuple(args, "UO:nfc_apply", &text, &normalize))
        return NULL;
    return nfc_apply(text, is_normalized_fn, normalize);
}

/* nfc_quick(text) -> bool: the compiled quick check alone (True: certainly NFC; False: not sure). */
static PyObject *mod_nfc_quick(PyObject *mod, PyObject *text)
{
    (void)mod;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    return PyBool_FromLong(nfc_quick_yes(text));
}

/* check_rank_sections((tokens, offsets, ids)) -> (n, max id): the checks Core makes of the compiled artifact cache's
 * rank sections (layout, strictly increasing ids, no repeated token), without keeping a core. ValueError naming the
 * first inconsistency. */
static PyObject *mod_check_rank_sections(PyObject *mod, PyObject *sections)
{
    (void)mod;
    RankEntries e;
    if (entries_from_sections(&e, sections))
        return NULL;
    /* every single byte a token (as rank_table_build requires), ids already strictly increasing: the largest is
     * the last; no repeated token: an open-addressing set of entry indices (4 bytes a slot, a quarter of the
     * core's table, so this costs a fraction of building it) */
    uint8_t seen_byte[256] = {0};
    size_t cap = 16;
    while (cap < e.n * 2 + 2)
        cap <<= 1;
    uint32_t *set = PyMem_RawCalloc(cap, sizeof(uint32_t));
    if (!set) {
        entries_free(&e);
        return PyErr_NoMemory();
    }
    const char *bad = NULL;
    for (size_t k = 0; k < e.n && !bad; k++) {
        const uint8_t *p = e.ptr[k];
        uint32_t n = e.len[k];
        if (n == 1)
            seen_byte[p[0]] = 1;
        size_t i = (size_t)hash_bytes(p, n) & (cap - 1);
        while (set[i]) {
            size_t j = set[i] - 1;
            if (e.len[j] == n && !memcmp(e.ptr[j], p, n)) {
                bad = "rank table: repeated token";
                break;
            }
            i = (i + 1) & (cap - 1);
        }
        set[i] = (uint32_t)(k + 1);
    }
    PyMem_RawFree(set);
    for (int b = 0; b < 256 && !bad; b++)
        if (!seen_byte[b])
            bad = "byte-level vocabulary lacks a single byte";
    size_t n = e.n;
    uint32_t max_rank = n ? e.rank[n - 1] : 0;
    entries_free(&e);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad);
        return NULL;
    }
    return Py_BuildValue("(nk)", (Py_ssize_t)n, (unsigned long)max_rank);
}

/* check_packed_vocab(keys, ids, count) -> (min id, max id): the checks of a vocabulary stored as packed strings
 * (count strings joined by NUL) and count little-endian u32 ids, without building the dict: ValueError unless keys
 * holds count strings, none repeated, and ids count ids. (0, -1) for an empty vocabulary. */
static PyObject *mod_check_packed_vocab(PyObject *mod, PyObject *args)
{
    (void)mod;
    Py_buffer keys, ids;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*y*n", &keys, &ids, &count))
        return NULL;
    const char *bad = NULL;
    uint32_t lo = 0, hi = 0;
    const uint8_t *k = keys.buf, *d = ids.buf;
    size_t nk = (size_t)keys.len, n = count < 0 ? 0 : (size_t)count;
    uint32_t *start = NULL, *set = NULL;
    if (count < 0 || (size_t)ids.len != n * 4 || n > 0xFFFFFFFEu || nk > 0xFFFFFFFEu) {
        bad = "vocabulary sections do not hold that many entries";
        goto done;
    }
    if (n == 0) {
        if (nk)
            bad = "vocabulary sections do not hold that many entries";
        goto done;
    }
    /* the start of each string (n + 1 entries: the last is one past the end) */
    start = PyMem_RawMalloc((n + 1) * sizeof(uint32_t));
    size_t cap = 16;
    while (cap < n * 2 + 2)
        cap <<= 1;
    set = PyMem_RawCalloc(cap, sizeof(uint32_t));
    if (!start || !set) {
        PyMem_RawFree(start);
        PyMem_RawFree(set);
        PyBuffer_Release(&keys);
        PyBuffer_Release(&ids);
        return PyErr_NoMemory();
    }
    size_t m = 0;
    start[m++] = 0;
    for (const uint8_t *p = k, *end = k + nk; (p = memchr(p, 0, (size_t)(end - p))) != NULL; p++) {
        if (m == n) {
            bad = "vocabulary sections do not hold that many entries";
            goto done;
        }
        start[m++] = (uint32_t)(p - k + 1);
    }
    if (m != n) {
        bad = "vocabulary sections do not hold that many entries";
        goto done;
    }
    start[n] = (uint32_t)(nk + 1);
    for (size_t i = 0; i < n && !bad; i++) {
        const uint8_t *p = k + start[i];
        size_t len = start[i + 1] - 1 - start[i];
        size_t h = (size_t)(len ? hash_bytes(p, len) : 0) & (cap - 1); /* (hash_bytes needs len >= 1) */
        while (set[h]) {
            size_t j = set[h] - 1;
            if (start[j + 1] - 1 - start[j] == len && !memcmp(k + start[j], p, len)) {
                bad = "cached vocabulary has repeated tokens";
                break;
            }
            h = (h + 1) & (cap - 1);
        }
        set[h] = (uint32_t)(i + 1);
        uint32_t v = get_u32(d + 4 * i);
        if (i == 0 || v < lo)
            lo = v;
        if (i == 0 || v > hi)
            hi = v;
    }
done:
    PyMem_RawFree(start);
    PyMem_RawFree(set);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&ids);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad);
        return NULL;
    }
    if (n == 0)
        return Py_BuildValue("(ii)", 0, -1);
    return Py_BuildValue("(kk)", (unsigned long)lo, (unsigned long)hi);
}

/* u32_range(ids) -> (min, max) of a buffer of little-endian u32 ids ((0, -1) when empty); ValueError when its
 * length is not a multiple of 4. */
static PyObject *mod_u32_range(PyObject *mod, PyObject *arg)
{
    (void)mod;
    Py_buffer ids;
    if (PyObject_GetBuffer(arg, &ids, PyBUF_SIMPLE) < 0)
        return NULL;
    size_t n = (size_t)ids.len / 4;
    const uint8_t *d = ids.buf;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = get_u32(d + 4 * i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    int odd = ids.len % 4 != 0;
    PyBuffer_Release(&ids);
    if (odd) {
        PyErr_SetString(PyExc_ValueError, "u32 section length is not a multiple of 4");
        return NULL;
    }
    if (n == 0)
        return Py_BuildValue("(ii)", 0, -1);
    return Py_BuildValue("(kk)", (unsigned long)lo, (unsigned long)hi);
}

static PyMethodDef module_methods[] = {
    {"check_rank_sections", mod_check_rank_sections, METH_O,
     "check_rank_sections((tokens, offsets, ids)) -> (n, max_id): ValueError unless the rank sections are "
     "consistent (offsets strictly increasing to len(tokens), ids strictly increasing, no repeated token)."},
    {"check_packed_vocab", mod_check_packed_vocab, METH_VARARGS,
     "check_packed_vocab(keys: Buffer, ids: Buffer, count: int) -> (min_id, max_id): ValueError unless keys holds "
     "count NUL-separated strings, none repeated, and ids count little-endian u32 ids; (0, -1) when empty."},
    {"u32_range", mod_u32_range, METH_O,
     "u32_range(ids: Buffer) -> (min, max): extremes of little-endian u32 ids, (0, -1) when empty; ValueError "
     "when the length is not a multiple of 4."},
    {"utf8_size", mod_utf8_size, METH_O,
     "utf8_size(text: str) -> int: UTF-8 length of text (kept in the str for the next encode); "
     "UnicodeEncodeError for a lone surrogate."},
    {"nfc_verify", mod_nfc_verify, METH_O,
     "nfc_verify(text: str) -> bool: unicodedata.is_normalized('NFC', text), the compiled quick check answering "
     "for every stretch it is sure of."},
    {"nfc_apply", mod_nfc_apply, METH_VARARGS,
     "nfc_apply(text: str, normalize) -> str: normalize(text) for an NFC normalize, only the stretches of text that "
     "are not NFC handed to it (text itself when it is NFC)."},
    {"nfc_quick", mod_nfc_quick, METH_O,
     "nfc_quick(text: str) -> bool: True when the compiled NFC quick check is sure text is NFC (else not sure)."},
    {"unicode_flags", mod_unicode_flags, METH_O, "unicode_flags(cp: int) -> int: class flags of one code point."},
    {"all_unicode_flags", mod_all_unicode_flags, METH_NOARGS,
     "all_unicode_flags() -> bytes: flags of every code point as little-endian uint16."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_core", "Compiled pre-tokenizers and BPE for app.engine.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__core(void)
{
    pretok_init();
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&FastCallType) < 0)
        return NULL;
    PyObject *unicodedata = PyImport_ImportModule("unicodedata");
    if (!unicodedata)
        return NULL;
    is_normalized_fn = PyObject_GetAttrString(unicodedata, "is_normalized");
    Py_DECREF(unicodedata);
    if (!is_normalized_fn)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastCallType);
    if (PyModule_AddObject(m, "FastCall", (PyObject *)&FastCallType) < 0) {
        Py_DECREF(&FastCallType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "REGEX_VERSION", UT_REGEX_VERSION) < 0 ||
        PyModule_AddStringConstant(m, "NFC_UNICODE_VERSION", NFC_UNICODE_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_NONE", SCAN_NONE) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_GPT2", SCAN_GPT2) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_CL100K", SCAN_CL100K) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_O200K", SCAN_O200K) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_LLAMA3", SCAN_LLAMA3) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_QWEN2", SCAN_QWEN2) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_DEEPSEEK_V3", SCAN_DEEPSEEK_V3) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_TEKKEN", SCAN_TEKKEN) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
