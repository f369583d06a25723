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
#include <sched.h>
#include <string.h>

#include "pretokenizer.h"

#define NO_RANK UINT32_MAX
#define SMALL_PIECE 16 /* pieces up to this many bytes use the quadratic merge loop; longer ones the heap */

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
    uint64_t *filter;    /* FILTER_BITS bits, one per hash value of a key of >= 3 bytes: a cache-resident
                            pre-check that answers most failed lookups (BPE candidates that are not tokens) */
    size_t count;
    uint32_t max_rank;
} RankTable;

#define FILTER_BITS ((size_t)1 << 22)
#define FILTER_BIT(h) ((size_t)((h) >> 40) & (FILTER_BITS - 1))

/* The last 1..8 bytes of a key folded into 64 bits (with the length mixed in by the caller, distinct keys of the
 * same length give distinct values). Fixed-size memcpy compiles to plain loads. */
static inline uint64_t load_tail(const uint8_t *p, size_t n)
{
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + n - 4, 4);
        return ((uint64_t)a << 32) | b;
    }
    return ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull;
    while (n > 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    h = (h ^ load_tail(p, n)) * 0x94D049BB133111EBull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    return h;
}

/* a[0..n) == b[0..n) for n >= 1, without a libc call for the short keys BPE looks up. */
static inline int bytes_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
    while (n > 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    return load_tail(a, n) == load_tail(b, n); /* covers every byte of a 1..8-byte tail */
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
    size_t i = (size_t)h & t->mask;
    if (likely_hit)
        __builtin_prefetch(&t->slots[i]);
    size_t bit = FILTER_BIT(h);
    if (!(t->filter[bit >> 6] & ((uint64_t)1 << (bit & 63))))
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

static inline uint32_t rank_lookup(const RankTable *t, const uint8_t *p, size_t n)
{
    return rank_lookup_hint(t, p, n, 0);
}

/* Start loading what a later rank_lookup(t, p, n) reads, so that two lookups' cache misses overlap. */
static inline void rank_prefetch(const RankTable *t, const uint8_t *p, size_t n)
{
    if (n < 3)
        return;
    uint64_t h = hash_bytes(p, n);
    size_t bit = FILTER_BIT(h);
    __builtin_prefetch(&t->filter[bit >> 6]);
    __builtin_prefetch(&t->slots[(size_t)h & t->mask]);
}

static void rank_table_free(RankTable *t)
{
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->arena);
    PyMem_RawFree(t->pair_rank);
    PyMem_RawFree(t->filter);
    memset(t, 0, sizeof(*t));
}

/* Fill t from a dict[bytes, int]. Returns 0, or -1 with a Python exception set. */
static int rank_table_build(RankTable *t, PyObject *ranks)
{
    Py_ssize_t count = PyDict_Size(ranks), pos = 0, total = 0;
    PyObject *key, *value;
    if (count < 0)
        return -1;
    while (PyDict_Next(ranks, &pos, &key, &value)) {
        if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) == 0) {
            PyErr_SetString(PyExc_TypeError, "ranks keys must be non-empty bytes");
            return -1;
        }
        if (PyBytes_GET_SIZE(key) > 8)
            total += PyBytes_GET_SIZE(key);
    }
    if (total > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "vocabulary too large");
        return -1;
    }
    size_t cap = 16;
    while (cap < (size_t)count * 2 + 2)
        cap <<= 1;
    t->mask = cap - 1;
    t->count = (size_t)count;
    t->slots = PyMem_RawCalloc(cap, sizeof(RankSlot));
    t->arena = PyMem_RawMalloc((size_t)total + 16);
    t->pair_rank = PyMem_RawMalloc(sizeof(uint32_t) * 65536);
    t->filter = PyMem_RawCalloc(FILTER_BITS / 64, sizeof(uint64_t));
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
    pos = 0;
    while (PyDict_Next(ranks, &pos, &key, &value)) {
        long long r = PyLong_AsLongLong(value);
        if (r == -1 && PyErr_Occurred()) {
            rank_table_free(t);
            return -1;
        }
        if (r < 0 || r >= (long long)INT32_MAX) {
            rank_table_free(t);
            PyErr_Format(PyExc_ValueError, "rank %lld out of range", r);
            return -1;
        }
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(key);
        size_t n = (size_t)PyBytes_GET_SIZE(key);
        if ((uint32_t)r > t->max_rank)
            t->max_rank = (uint32_t)r;
        if (n == 1)
            t->byte_rank[p[0]] = (uint32_t)r;
        else if (n == 2)
            t->pair_rank[((uint32_t)p[0] << 8) | p[1]] = (uint32_t)r;
        uint64_t h = hash_bytes(p, n);
        size_t bit = FILTER_BIT(h);
        t->filter[bit >> 6] |= (uint64_t)1 << (bit & 63);
        size_t i = (size_t)h & t->mask;
        while (t->slots[i].len)
            i = (i + 1) & t->mask;
        RankSlot *sl = &t->slots[i];
        sl->len = (uint32_t)n;
        sl->rank = (uint32_t)r;
        if (n <= 8) {
            sl->key = load_tail(p, n);
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

/* ------------------------------------------------------------------------------------------------ id vector */

typedef struct {
    uint32_t *data;
    size_t len, cap;
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

/* ------------------------------------------------------------------------------------------------ BPE */

/* Merge a piece of 2..SMALL_PIECE bytes; appends the ids to out (capacity reserved by the caller). Parts form a
 * linked list: the part starting at byte i ends at nxt[i]; rk[i] is the rank of it merged with its successor. */
static void bpe_small(const RankTable *t, const uint8_t *p, size_t n, IdVec *out)
{
    uint32_t nxt[SMALL_PIECE + 1];
    uint32_t rk[SMALL_PIECE];
    uint32_t id[SMALL_PIECE]; /* token id of each part: its byte, or the rank it was merged with */
    for (size_t i = 0; i < n; i++) {
        nxt[i] = (uint32_t)(i + 1);
        id[i] = t->byte_rank[p[i]];
    }
    for (size_t i = 0; i + 1 < n; i++)
        rk[i] = t->pair_rank[((uint32_t)p[i] << 8) | p[i + 1]];
    rk[n - 1] = NO_RANK;
    for (;;) {
        uint32_t best = NO_RANK, bi = 0, bprev = UINT32_MAX, prev = UINT32_MAX;
        for (uint32_t i = 0; i < n; prev = i, i = nxt[i]) {
            if (rk[i] < best) { /* strictly less: the leftmost of equal ranks wins */
                best = rk[i];
                bi = i;
                bprev = prev;
            }
        }
        if (best == NO_RANK)
            break;
        uint32_t k = nxt[nxt[bi]]; /* merge bi with its successor; the merged part ends at k */
        nxt[bi] = k;
        id[bi] = best;
        rk[bi] = k < n ? rank_lookup(t, p + bi, nxt[k] - bi) : NO_RANK;
        if (bprev != UINT32_MAX)
            rk[bprev] = rank_lookup(t, p + bprev, k - bprev);
    }
    for (uint32_t i = 0; i < n; i = nxt[i])
        out->data[out->len++] = id[i];
}

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

static inline uint64_t heap_pop(uint64_t *heap, size_t *size)
{
    uint64_t top = heap[0];
    uint64_t last = heap[--(*size)];
    size_t n = *size, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap[c + 1] < heap[c])
            c++;
        if (heap[c] >= last)
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (n)
        heap[i] = last;
    return top;
}

/* Merge a long piece in O(n log n): a heap of (rank, start) candidates over a linked list of parts, with lazy
 * invalidation (bpe.py's _merge_heap). rk[i] is the current rank of the part at i merged with its successor, so a
 * popped candidate is current iff its part is alive and rk[i] still equals its rank. Popping the smallest
 * (rank, start) is "lowest rank, leftmost on ties". Returns 0, or -1 when out of memory. */
#define HEAP_STACK 512
static int bpe_heap(const RankTable *t, const uint8_t *p, size_t n, IdVec *out)
{
    uint32_t s_nxt[HEAP_STACK + 1], s_prv[HEAP_STACK + 1], s_rk[HEAP_STACK + 1], s_id[HEAP_STACK + 1];
    uint64_t s_heap[3 * HEAP_STACK];
    uint32_t *nxt = s_nxt, *prv = s_prv, *rk = s_rk, *id = s_id;
    uint64_t *heap = s_heap;
    size_t hsize = 0;
    if (n > HEAP_STACK) {
        nxt = PyMem_RawMalloc(sizeof(uint32_t) * (n + 1));
        prv = PyMem_RawMalloc(sizeof(uint32_t) * (n + 1));
        rk = PyMem_RawMalloc(sizeof(uint32_t) * (n + 1));
        id = PyMem_RawMalloc(sizeof(uint32_t) * (n + 1));
        heap = PyMem_RawMalloc(sizeof(uint64_t) * (3 * n));
        if (!nxt || !prv || !rk || !id || !heap) {
            PyMem_RawFree(nxt);
            PyMem_RawFree(prv);
            PyMem_RawFree(rk);
            PyMem_RawFree(id);
            PyMem_RawFree(heap);
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        nxt[i] = (uint32_t)(i + 1);
        prv[i] = (uint32_t)i - 1; /* UINT32_MAX for the first part */
        id[i] = t->byte_rank[p[i]];
        uint32_t r = i + 1 < n ? t->pair_rank[((uint32_t)p[i] << 8) | p[i + 1]] : NO_RANK;
        rk[i] = r;
        if (r != NO_RANK)
            heap[hsize++] = ((uint64_t)r << 32) | i;
    }
    for (size_t k = hsize / 2; k-- > 0;) { /* heapify */
        uint64_t v = heap[k];
        size_t i = k;
        for (;;) {
            size_t c = 2 * i + 1;
            if (c >= hsize)
                break;
            if (c + 1 < hsize && heap[c + 1] < heap[c])
                c++;
            if (heap[c] >= v)
                break;
            heap[i] = heap[c];
            i = c;
        }
        heap[i] = v;
    }
    while (hsize) {
        uint64_t key = heap_pop(heap, &hsize);
        uint32_t rank = (uint32_t)(key >> 32);
        uint32_t i = (uint32_t)key;
        if (rk[i] != rank)
            continue; /* stale: the part at i was merged away or changed since this candidate was pushed */
        uint32_t j = nxt[i], k = nxt[j];
        rk[j] = NO_RANK; /* part j disappears */
        nxt[i] = k;
        id[i] = rank;
        if (k < n)
            prv[k] = i;
        uint32_t q = prv[i];
        if (q != UINT32_MAX)
            rank_prefetch(t, p + q, k - q);
        uint32_t r = k < n ? rank_lookup(t, p + i, nxt[k] - i) : NO_RANK;
        rk[i] = r;
        if (r != NO_RANK)
            heap_push(heap, &hsize, ((uint64_t)r << 32) | i);
        if (q != UINT32_MAX) {
            r = rank_lookup(t, p + q, k - q);
            rk[q] = r;
            if (r != NO_RANK)
                heap_push(heap, &hsize, ((uint64_t)r << 32) | q);
        }
    }
    for (size_t i = 0; i < n;) {
        size_t j = nxt[i];
        out->data[out->len++] = id[i];
        i = j;
    }
    if (n > HEAP_STACK) {
        PyMem_RawFree(nxt);
        PyMem_RawFree(prv);
        PyMem_RawFree(rk);
        PyMem_RawFree(id);
        PyMem_RawFree(heap);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ piece cache */

/* A bounded cache from piece bytes to ids, shared by all threads using one Core: a direct-mapped table of slots,
 * guarded by striped spinlocks (the GIL is not held while encoding). Only pieces that are not themselves tokens,
 * of at most PC_KEY bytes and PC_IDS ids, are cached. Output is identical with the cache on or off. */
#define PC_KEY 42
#define PC_IDS 12
#define PC_STRIPES 64

typedef struct {
    uint32_t tag; /* hash >> 32 */
    uint8_t len;  /* 0 = empty */
    uint8_t nids;
    uint8_t key[PC_KEY];
    uint32_t ids[PC_IDS];
} PCSlot;

typedef struct {
    PCSlot *slots;
    size_t nslots; /* 0 = cache off */
    unsigned char locks[PC_STRIPES * 64]; /* one spinlock byte per 64-byte line */
    uint64_t hits, misses;                 /* updated with atomic adds, once per call */
    int64_t size;                          /* occupied slots (atomic) */
} PieceCache;

typedef struct {
    uint64_t hits, misses;
} CallStats;

static inline void pc_lock(PieceCache *c, size_t slot)
{
    unsigned char *l = &c->locks[(slot & (PC_STRIPES - 1)) * 64];
    unsigned spins = 0;
    while (__atomic_test_and_set(l, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
            if (++spins > 1000) {
                sched_yield();
                spins = 0;
            }
        }
    }
}

static inline void pc_unlock(PieceCache *c, size_t slot)
{
    __atomic_clear(&c->locks[(slot & (PC_STRIPES - 1)) * 64], __ATOMIC_RELEASE);
}

/* Ids of one piece appended to out: whole-piece lookup first, then the cache, then merging. Returns 0 or -1 (out
 * of memory). */
static int encode_piece(const RankTable *t, PieceCache *c, CallStats *st, const uint8_t *p, size_t n, IdVec *out)
{
    if (vec_reserve(out, n))
        return -1;
    uint32_t r = rank_lookup_hint(t, p, n, 1);
    if (r != NO_RANK) {
        out->data[out->len++] = r;
        return 0;
    }
    size_t slot = 0;
    uint32_t tag = 0;
    int cacheable = c && c->nslots && n <= PC_KEY;
    if (cacheable) {
        uint64_t h = hash_bytes(p, n);
        tag = (uint32_t)(h >> 32);
        slot = (size_t)(((uint64_t)(uint32_t)h * c->nslots) >> 32);
        PCSlot *sl = &c->slots[slot];
        pc_lock(c, slot);
        if (sl->len == n && sl->tag == tag && bytes_eq(sl->key, p, n)) {
            memcpy(out->data + out->len, sl->ids, sl->nids * sizeof(uint32_t));
            out->len += sl->nids;
            pc_unlock(c, slot);
            st->hits++;
            return 0;
        }
        pc_unlock(c, slot);
        st->misses++;
    }
    size_t before = out->len;
    if (n <= SMALL_PIECE)
        bpe_small(t, p, n, out);
    else if (bpe_heap(t, p, n, out))
        return -1;
    size_t nids = out->len - before;
    if (cacheable && nids <= PC_IDS) {
        PCSlot *sl = &c->slots[slot];
        pc_lock(c, slot);
        if (!sl->len)
            __atomic_add_fetch(&c->size, 1, __ATOMIC_RELAXED);
        sl->tag = tag;
        sl->len = (uint8_t)n;
        sl->nids = (uint8_t)nids;
        memcpy(sl->key, p, n);
        memcpy(sl->ids, out->data + before, nids * sizeof(uint32_t));
        pc_unlock(c, slot);
    }
    return 0;
}

static void pc_account(PieceCache *c, const CallStats *st)
{
    if (st->hits)
        __atomic_add_fetch(&c->hits, st->hits, __ATOMIC_RELAXED);
    if (st->misses)
        __atomic_add_fetch(&c->misses, st->misses, __ATOMIC_RELAXED);
}

/* Encode a whole UTF-8 text with a scanner. count_only: out is scratch, *ntokens gets the count. */
static int encode_text(const RankTable *t, PieceCache *c, scan_fn scan, const uint8_t *s, size_t n, IdVec *out,
                       int count_only, size_t *ntokens)
{
    size_t total = 0;
    CallStats st = {0, 0};
    int rc = 0;
    for (size_t i = 0; i < n;) {
        size_t e = scan(s, i, n);
        if (count_only)
            out->len = 0;
        if (encode_piece(t, c, &st, s + i, e - i, out)) {
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

/* ------------------------------------------------------------------------------------------------ Python type */

typedef struct {
    PyObject_HEAD RankTable table;
    int scanner_id;
    scan_fn scan;
    PyObject **id_objs; /* id -> the int object of the ranks dict (shared, so building result lists allocates
                           no ints); NULL where an id has no ordinary token */
    size_t n_ids;
    uint32_t *id_len; /* id -> length of its bytes (0 where an id has no ordinary token) */
    PieceCache cache;
} CoreObject;

static void Core_dealloc(CoreObject *self)
{
    rank_table_free(&self->table);
    PyMem_RawFree(self->cache.slots);
    self->cache.slots = NULL;
    PyMem_RawFree(self->id_len);
    self->id_len = NULL;
    if (self->id_objs) {
        for (size_t i = 0; i < self->n_ids; i++)
            Py_XDECREF(self->id_objs[i]);
        PyMem_Free(self->id_objs);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Core_init(CoreObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ranks", "scanner", "cache_size", NULL};
    PyObject *ranks;
    int scanner = SCAN_NONE;
    Py_ssize_t cache_size = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|in", kwlist, &PyDict_Type, &ranks, &scanner, &cache_size))
        return -1;
    if (cache_size < 0 || cache_size > ((Py_ssize_t)1 << 28)) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be in 0..2**28");
        return -1;
    }
    if (scanner < SCAN_NONE || scanner > SCAN_LLAMA3) {
        PyErr_Format(PyExc_ValueError, "unknown scanner id %d", scanner);
        return -1;
    }
    if (self->table.slots) {
        PyErr_SetString(PyExc_RuntimeError, "Core is already initialised");
        return -1;
    }
    if (rank_table_build(&self->table, ranks))
        return -1;
    uint32_t max_rank = self->table.max_rank;
    self->n_ids = (size_t)max_rank + 1;
    self->id_objs = PyMem_Calloc(self->n_ids, sizeof(PyObject *));
    self->id_len = PyMem_RawCalloc(self->n_ids, sizeof(uint32_t));
    if (!self->id_objs || !self->id_len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(ranks, &pos, &key, &value)) {
        size_t r = (size_t)PyLong_AsLongLong(value);
        if (PyLong_CheckExact(value) && !self->id_objs[r]) {
            Py_INCREF(value);
            self->id_objs[r] = value;
        }
        self->id_len[r] = (uint32_t)PyBytes_GET_SIZE(key);
    }
    self->scanner_id = scanner;
    self->scan = scanner_of(scanner);
    if (cache_size > 0) {
        self->cache.slots = PyMem_RawCalloc((size_t)cache_size, sizeof(PCSlot)); /* pages are touched lazily */
        if (!self->cache.slots) {
            PyErr_NoMemory();
            return -1;
        }
        self->cache.nslots = (size_t)cache_size;
    }
    return 0;
}

static PyObject *ids_to_list(CoreObject *self, const uint32_t *ids, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    PyObject **objs = self->id_objs;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = objs[ids[i]];
        if (v) {
            Py_INCREF(v);
        } else if (!(v = PyLong_FromUnsignedLong(ids[i]))) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
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

/* encode(text) / count(text): the GIL is released for the scan and the merges. */
static PyObject *core_run(CoreObject *self, PyObject *text, int count_only)
{
    if (core_ready(self, 1))
        return NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size); /* raises UnicodeEncodeError on lone surrogates */
    if (!utf8)
        return NULL;
    IdVec out = {NULL, 0, 0};
    size_t ntokens = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = encode_text(&self->table, &self->cache, self->scan, (const uint8_t *)utf8, (size_t)size, &out, count_only,
                     &ntokens);
    Py_END_ALLOW_THREADS
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
    CallStats st = {0, 0};
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
        if (encode_piece(&self->table, &self->cache, &st, (const uint8_t *)utf8, (size_t)size, &out)) {
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
static PyObject *Core_encode_with_offsets(CoreObject *self, PyObject *text)
{
    if (core_ready(self, 1))
        return NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (!utf8)
        return NULL;
    const uint8_t *s = (const uint8_t *)utf8;
    IdVec out = {NULL, 0, 0};
    size_t ntokens = 0;
    uint32_t *spans = NULL; /* start, end per token */
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = encode_text(&self->table, &self->cache, self->scan, s, (size_t)size, &out, 0, &ntokens);
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
    if (core_ready(self, 1))
        return NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (!utf8)
        return NULL;
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    const uint8_t *s = (const uint8_t *)utf8;
    for (size_t i = 0; i < (size_t)size;) {
        size_t e = self->scan(s, i, (size_t)size);
        PyObject *piece = PyUnicode_DecodeUTF8(utf8 + i, (Py_ssize_t)(e - i), "strict");
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
    CallStats st = {0, 0};
    if (encode_piece(&self->table, NULL, &st, (const uint8_t *)PyBytes_AS_STRING(piece), (size_t)PyBytes_GET_SIZE(piece),
                     &out))
        PyErr_NoMemory();
    else
        result = ids_to_list(self, out.data, out.len);
    PyMem_RawFree(out.data);
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
    for (size_t k = 0; k < PC_STRIPES; k++)
        pc_lock(c, k);
    if (c->nslots)
        memset(c->slots, 0, c->nslots * sizeof(PCSlot));
    __atomic_store_n(&c->hits, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->misses, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->size, 0, __ATOMIC_RELAXED);
    for (size_t k = 0; k < PC_STRIPES; k++)
        pc_unlock(c, k);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
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

static PyMethodDef Core_methods[] = {
    {"encode", (PyCFunction)Core_encode, METH_O,
     "encode(text: str) -> list[int]: token ids of text (native pre-tokenizer + BPE, GIL released). "
     "Raises UnicodeEncodeError on lone surrogates (callers scrub them first)."},
    {"count", (PyCFunction)Core_count, METH_O, "count(text: str) -> int: len(encode(text)) without building a list."},
    {"encode_pieces", (PyCFunction)Core_encode_pieces, METH_O,
     "encode_pieces(pieces: Sequence[str | bytes]) -> list[int]: BPE of already pre-tokenized pieces."},
    {"count_pieces", (PyCFunction)Core_count_pieces, METH_O,
     "count_pieces(pieces: Sequence[str | bytes]) -> int: number of tokens of the pieces."},
    {"split", (PyCFunction)Core_split, METH_O, "split(text: str) -> list[str]: the native pre-tokenizer's pieces."},
    {"encode_with_offsets", (PyCFunction)Core_encode_with_offsets, METH_O,
     "encode_with_offsets(text: str) -> (list[int], list[tuple[int, int]]): ids and (start, end) character offsets."},
    {"bpe", (PyCFunction)Core_bpe, METH_O, "bpe(piece: bytes) -> list[int]: ids of one piece (cache not used)."},
    {"cache_stats", (PyCFunction)Core_cache_stats, METH_NOARGS,
     "cache_stats() -> (hits, misses, size, max_size) of the piece cache."},
    {"clear_cache", (PyCFunction)Core_clear_cache, METH_NOARGS, "clear_cache(): empty the piece cache, reset counters."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Core_getset[] = {
    {"scanner", (getter)Core_get_scanner, NULL, "scanner id (0 = none)", NULL},
    {"vocab_entries", (getter)Core_get_size, NULL, "number of ordinary tokens", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._core.Core",
    .tp_basicsize = sizeof(CoreObject),
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Core(ranks: dict[bytes, int], scanner: int = 0, cache_size: int = 0): a thread-safe BPE core.",
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

static PyMethodDef module_methods[] = {
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
    if (PyType_Ready(&CoreType) < 0)
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
    if (PyModule_AddStringConstant(m, "REGEX_VERSION", UT_REGEX_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_NONE", SCAN_NONE) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_GPT2", SCAN_GPT2) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_CL100K", SCAN_CL100K) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_O200K", SCAN_O200K) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_LLAMA3", SCAN_LLAMA3) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
