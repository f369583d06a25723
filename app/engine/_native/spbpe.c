/* SentencePiece's BPE model (merging by the score of the merged piece), compiled.
 *
 * The same algorithm and ids as the pure-Python reference ``app/engine/pipeline/models/sp_bpe.py``:
 *
 * - a text starts as symbols: the longest user-defined piece at each position (frozen, never merged), else one
 *   code point;
 * - every adjacent pair of unfrozen symbols whose concatenation is a mergeable piece is a candidate; the candidate
 *   whose piece has the best score rank is merged first, leftmost on ties (a linear scan below HEAP_FROM symbols,
 *   a binary heap with lazy deletion above, so a text of n symbols costs O(n log n));
 * - a merged piece whose id is an UNUSED piece is split back into the two symbols last recorded for it, recursively
 *   (SentencePiece's resegmentation, with its "last candidate wins" bookkeeping);
 * - a symbol that is no piece (or is the unknown piece) becomes one ``<0xNN>`` id per UTF-8 byte with byte
 *   fallback when all of them exist, else the unknown id; a run of such symbols is one unknown id.
 *
 * Pair lookups work on symbol ids: every mergeable piece is a symbol id (its piece id) and so is every code point
 * that occurs in a mergeable piece without being one (ids from n_pieces on); a table maps each pair of symbol ids
 * whose concatenation is a mergeable piece to that piece and its score rank.
 *
 * ``encode_text`` also does what the pipeline does before the model for a SentencePiece normalizer without a
 * precompiled charsmap (lone surrogates to U+FFFD, dummy prefix, extra-whitespace removal, spaces to U+2581) and
 * the cut before every U+2581 that follows another character, all in one call with the GIL released.
 * Objects are immutable after construction and thread-safe; memory per call is linear in the text, and a long
 * call's buffers are kept for the next one in a small, bounded, lock-free stash (see "working memory" below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "word_cache.h"
#include "hash_mix.h"
#include "dump_bytes.h"
#include "py_items.h"
#include "id_list.h"
#include "utf8_put.h"
#include "scrub_text.h"
#include "batch_threads.h"

#define HEAP_FROM 32
#define RELEASE_FROM 256 /* texts longer than this (code points) are encoded with the GIL released */
#define NO_RANK INT32_MAX
#define SPACE_SYMBOL 0x2581
#define FILTER_BITS (1u << 19)
#define LOW_CHARS 0x800u /* code points below this (one or two UTF-8 bytes) with a symbol: bigrams in a bit matrix */
#define NO_CLASS UINT16_MAX
#define BMP 0x10000

/* encode_text flags (the normalizer's options and the split) */
#define F_DUMMY 1
#define F_REMOVE 2
#define F_ESCAPE 4
#define F_SUFFIX 8
#define F_SPLIT 16

/* ---- hashing ------------------------------------------------------------------------------------------------ */


static uint64_t hash_cps(const uint32_t *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return mix64(h ^ (uint64_t)n);
}

static size_t pow2_at_least(size_t n) {
    size_t m = 16;
    while (m < n) m <<= 1;
    return m;
}

/* code-point strings -> id (first put wins); the strings are owned by the caller's pool */
typedef struct {
    const uint32_t *s;
    Py_ssize_t n;
    int32_t id;
    uint64_t h;
} StrSlot;

typedef struct {
    StrSlot *slots;
    size_t mask;
} StrTable;

static int str_init(StrTable *t, size_t n) {
    size_t cap = pow2_at_least(n * 2 + 1);
    t->slots = (StrSlot *)calloc(cap, sizeof(StrSlot));
    t->mask = cap - 1;
    return t->slots ? 0 : -1;
}

static void str_put_first(StrTable *t, const uint32_t *s, Py_ssize_t n, int32_t id) {
    uint64_t h = hash_cps(s, n);
    size_t i = (size_t)h & t->mask;
    while (t->slots[i].s != NULL) {
        if (t->slots[i].h == h && t->slots[i].n == n && memcmp(t->slots[i].s, s, (size_t)n * 4) == 0) return;
        i = (i + 1) & t->mask;
    }
    t->slots[i].s = s;
    t->slots[i].n = n;
    t->slots[i].id = id;
    t->slots[i].h = h;
}

static int32_t str_get(const StrTable *t, const uint32_t *s, Py_ssize_t n) {
    uint64_t h = hash_cps(s, n);
    size_t i = (size_t)h & t->mask;
    while (t->slots[i].s != NULL) {
        if (t->slots[i].h == h && t->slots[i].n == n && memcmp(t->slots[i].s, s, (size_t)n * 4) == 0)
            return t->slots[i].id;
        i = (i + 1) & t->mask;
    }
    return -1;
}

/* (left symbol, right symbol) -> (merged symbol, rank); key UINT64_MAX = empty */
typedef struct {
    uint64_t key;
    int32_t sym;
    int32_t rank;
} PairSlot;

static inline uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

/* code point -> (symbol id, output id) for code points outside the BMP table; cp UINT32_MAX = empty */
typedef struct {
    uint32_t cp;
    int32_t sym;
    int32_t out;
} CharSlot;

/* ---- word cache ------------------------------------------------------------------------------------------- */

/* A bounded cache from a segment (code points all in the BMP) to its ids, when both fit a slot of 64 bytes (see
 * wc_seg_fits: 12 code points and 8 ids, 20 and 4, 24 and 2): the lock-free table of word_cache.h. The ids are the
 * same with the cache on or off (a segment's ids depend on nothing but its code points). */
typedef struct {
    WCHead h; /* h.len: code points of the key, h.count: ids */
    uint16_t data[28]; /* the key's code points, then its ids (word_cache.h's segment slot) */
} WCSlot; /* 64 bytes: one cache line */
_Static_assert(sizeof(WCSlot) == 64, "a segment cache slot is one cache line");
_Static_assert(offsetof(WCSlot, data) == WC_SEG_KEY_OFF, "a segment cache slot has word_cache.h's shape");

/* ---- the model ---------------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    int32_t unk_id;
    int byte_fallback;
    int32_t bytes[256];  /* <0xNN> ids, -1 when absent */
    Py_ssize_t n_syms;   /* symbol ids: pieces (by piece id), then extra code points */
    int32_t *sym_out;    /* symbol -> output id (the first piece with its string, unless unknown), -1: fallback */
    int32_t *sym_len;    /* symbol -> length in code points (0: not a symbol) */
    uint8_t *sym_unused; /* symbol -> its output piece is UNUSED (resegmented) */
    int has_unused;
    int out_is_sym;      /* every mergeable piece's output id is its own id (no earlier piece spells it) */
    CharSlot *bmp; /* code point < BMP -> (symbol id, output id), -1 when none (cp unused) */
    CharSlot *astral;
    size_t astral_mask;
    PairSlot *pairs;   /* the table while building; kept for models with more than 65535 symbols */
    uint64_t *pairs16; /* the same with both symbols in 16 bits: (a << 16 | b) << 32 | merged, UINT64_MAX empty */
    size_t pair_mask;
    Py_ssize_t n_pairs;
    uint8_t *sym_side; /* symbol -> 1: is the left half of some pair, 2: the right half */
    uint64_t *filter;  /* FILTER_BITS bits, one per hash value of a pair: 0 = no such pair (small enough to stay
                        * in a core's cache, so most pairs that do not merge cost no miss in the big table) */
    uint64_t *bigrams; /* FILTER_BITS bits, one per hash value of two adjacent characters of a mergeable piece */
    /* bigram_has for two code points below LOW_CHARS that have a symbol, read without hashing: low_class numbers
     * them (NO_CLASS: none), low_bigrams holds one row of low_words u64 per number, bit b of row a set when a
     * mergeable piece has a then b (exact, where ``bigrams`` may answer a false 1) */
    uint16_t *low_class;
    uint64_t *low_bigrams;
    size_t low_words, n_low_words;
    /* user-defined pieces: pool of code points, per piece (start, length, output id); a hash over them; per first
     * character the distinct lengths, longest first */
    uint32_t *user_pool;
    Py_ssize_t n_user;
    Py_ssize_t *user_start, *user_len;
    int32_t *user_out;
    int32_t *user_slots; /* hash slot -> piece index, -1 empty */
    size_t user_mask;
    uint32_t *user_first; /* sorted distinct first characters */
    Py_ssize_t n_first;
    uint64_t user_first_bits[16]; /* bit c % 1024 for each first character c: most characters start none, known
                                   * without the binary search */
    Py_ssize_t *first_at; /* per first character: offset into user_lengths: count, then lengths */
    Py_ssize_t *user_lengths;
    PyObject **id_objs; /* id -> its int object, made once (n_pieces of them) */
    Py_ssize_t n_pieces;
    struct WordCache *cache;
} Model;

/* An empty table of astral code points for n of them (at most half full); -1 when out of memory. */
static int astral_alloc(Model *self, size_t n) {
    size_t cap = pow2_at_least(n * 2 + 1);
    self->astral = (CharSlot *)malloc(cap * sizeof(CharSlot));
    if (!self->astral) return -1;
    for (size_t j = 0; j < cap; j++) self->astral[j].cp = UINT32_MAX, self->astral[j].sym = -1, self->astral[j].out = -1;
    self->astral_mask = cap - 1;
    return 0;
}

static void Model_dealloc(Model *self) {
    free(self->sym_out), free(self->sym_len), free(self->sym_unused), free(self->bmp);
    free(self->astral), free(self->pairs), free(self->pairs16), free(self->sym_side), free(self->filter);
    free(self->bigrams), free(self->low_class), free(self->low_bigrams);
    free(self->user_pool), free(self->user_start), free(self->user_len);
    free(self->user_out), free(self->user_slots), free(self->user_first), free(self->first_at);
    free(self->user_lengths);
    if (self->id_objs) {
        for (Py_ssize_t i = 0; i < self->n_pieces; i++) Py_XDECREF(self->id_objs[i]);
        free(self->id_objs);
    }
    wc_free(self->cache);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline const CharSlot *astral_get(const Model *m, uint32_t cp) {
    if (!m->astral) return NULL;
    size_t i = (size_t)mix64(cp) & m->astral_mask;
    for (;;) {
        const CharSlot *s = &m->astral[i];
        if (s->cp == cp) return s;
        if (s->cp == UINT32_MAX) return NULL;
        i = (i + 1) & m->astral_mask;
    }
}

static inline int32_t char_sym(const Model *m, uint32_t cp) {
    if (cp < BMP) return m->bmp[cp].sym;
    const CharSlot *s = astral_get(m, cp);
    return s ? s->sym : -1;
}

static inline int32_t char_out(const Model *m, uint32_t cp) {
    if (cp < BMP) return m->bmp[cp].out;
    const CharSlot *s = astral_get(m, cp);
    return s ? s->out : -1;
}

static inline uint64_t pair_hash(const Model *m, int32_t a, int32_t b) {
    return m->pairs16 ? mix64(((uint32_t)a << 16) | (uint32_t)b) : mix64(pair_key(a, b));
}

static inline uint32_t bigram_bit(uint32_t a, uint32_t b) {
    return (uint32_t)(mix64(((uint64_t)a << 21) | b) >> 40) & (FILTER_BITS - 1);
}

/* the hashed table's answer for the characters a, b (a false 1 possible) */
static inline int bigram_hashed(const Model *m, uint32_t a, uint32_t b) {
    uint32_t bit = bigram_bit(a, b);
    return (int)((m->bigrams[bit >> 6] >> (bit & 63)) & 1);
}

/* the word of low_bigrams that holds the bit of the numbered characters (ca, cb) */
static inline uint64_t *low_word(const Model *m, uint32_t ca, uint32_t cb) {
    return m->low_bigrams + (size_t)ca * m->low_words + (cb >> 6);
}

/* 0: no mergeable piece has the characters a, b next to each other (1 may be a false positive, except for two code
 * points below LOW_CHARS with a symbol: their bit matrix is exact and needs no hashing) */
static inline int bigram_has(const Model *m, uint32_t a, uint32_t b) {
    if (a < LOW_CHARS && b < LOW_CHARS) {
        uint32_t ca = m->low_class[a], cb = m->low_class[b];
        if (ca != NO_CLASS && cb != NO_CLASS) return (int)((*low_word(m, ca, cb) >> (cb & 63)) & 1);
    }
    return bigram_hashed(m, a, b);
}

/* low_class from bmp (filled) and an empty low_bigrams (one word more: never a zero-size allocation); -1 when out
 * of memory */
static int low_alloc(Model *self) {
    self->low_class = (uint16_t *)malloc(LOW_CHARS * sizeof(uint16_t));
    if (!self->low_class) return -1;
    uint32_t n = 0;
    for (uint32_t c = 0; c < LOW_CHARS; c++) self->low_class[c] = self->bmp[c].sym >= 0 ? (uint16_t)n++ : NO_CLASS;
    self->low_words = (n + 63) / 64;
    self->n_low_words = (size_t)n * self->low_words;
    self->low_bigrams = (uint64_t *)calloc(self->n_low_words + 1, sizeof(uint64_t));
    return self->low_bigrams ? 0 : -1;
}

static inline int filter_has(const Model *m, uint64_t h) {
    uint32_t bit = (uint32_t)(h >> 40) & (FILTER_BITS - 1);
    return (int)((m->filter[bit >> 6] >> (bit & 63)) & 1);
}

/* the symbol that the pair (a, b) merges into, or -1; *rank gets its score rank */
static inline int32_t pair_get(const Model *m, int32_t a, int32_t b, int32_t *rank) {
    if (!((m->sym_side[a] & 1) && (m->sym_side[b] & 2))) return -1;
    uint64_t h = pair_hash(m, a, b);
    if (!filter_has(m, h)) return -1;
    if (m->pairs16) {
        uint32_t key = ((uint32_t)a << 16) | (uint32_t)b;
        size_t i = (size_t)h & m->pair_mask;
        for (;;) {
            uint64_t v = m->pairs16[i];
            if ((uint32_t)(v >> 32) == key) {
                *rank = (int32_t)(v & 0xFFFF);
                return (int32_t)((v >> 16) & 0xFFFF);
            }
            if (v == UINT64_MAX) return -1;
            i = (i + 1) & m->pair_mask;
        }
    }
    uint64_t key = pair_key(a, b);
    size_t i = (size_t)h & m->pair_mask;
    for (;;) {
        const PairSlot *s = &m->pairs[i];
        if (s->key == key) {
            *rank = s->rank;
            return s->sym;
        }
        if (s->key == UINT64_MAX) return -1;
        i = (i + 1) & m->pair_mask;
    }
}

/* start loading the slot pair_get(m, a, b) reads first, so that several lookups' cache misses overlap */
static inline void pair_prefetch(const Model *m, int32_t a, int32_t b) {
    if (a < 0 || b < 0 || !((m->sym_side[a] & 1) && (m->sym_side[b] & 2))) return;
    uint64_t h = pair_hash(m, a, b);
    if (!filter_has(m, h)) return;
    if (m->pairs16)
        __builtin_prefetch(&m->pairs16[(size_t)h & m->pair_mask]);
    else
        __builtin_prefetch(&m->pairs[(size_t)h & m->pair_mask]);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_len_desc(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x < y) - (x > y);
}

/* code points of a str into pool[at..), returns the length or -1 */
static Py_ssize_t read_cps(PyObject *s, uint32_t *pool) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; i++) pool[i] = PyUnicode_READ(kind, data, i);
    return n;
}

/* The lookup tables of the user-defined pieces from user_pool/user_start/user_len (n_user of them, lengths >= 1):
 * the hash (first of equal pieces wins), the sorted distinct first characters and per first character the distinct
 * lengths, longest first. */
static int user_tables(Model *self) {
    Py_ssize_t n = self->n_user;
    size_t cap = pow2_at_least((size_t)n * 2 + 1);
    self->user_slots = (int32_t *)malloc(cap * sizeof(int32_t));
    self->user_first = (uint32_t *)malloc((size_t)n * sizeof(uint32_t));
    self->first_at = (Py_ssize_t *)malloc((size_t)n * sizeof(Py_ssize_t));
    self->user_lengths = (Py_ssize_t *)malloc((size_t)(2 * n) * sizeof(Py_ssize_t));
    if (!self->user_slots || !self->user_first || !self->first_at || !self->user_lengths) {
        PyErr_NoMemory();
        return -1;
    }
    memset(self->user_slots, 0xFF, cap * sizeof(int32_t));
    self->user_mask = cap - 1;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t at = self->user_start[k], len = self->user_len[k];
        size_t i = (size_t)hash_cps(self->user_pool + at, len) & self->user_mask;
        int dup = 0;
        while (self->user_slots[i] >= 0) {
            int32_t o = self->user_slots[i];
            if (self->user_len[o] == len &&
                memcmp(self->user_pool + self->user_start[o], self->user_pool + at, (size_t)len * 4) == 0) {
                dup = 1;
                break;
            }
            i = (i + 1) & self->user_mask;
        }
        if (!dup) self->user_slots[i] = (int32_t)k;
        self->user_first[k] = self->user_pool[at];
        self->user_first_bits[(self->user_pool[at] >> 6) & 15] |= 1ULL << (self->user_pool[at] & 63);
    }
    qsort(self->user_first, (size_t)n, sizeof(uint32_t), cmp_u32);
    Py_ssize_t nf = 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (nf == 0 || self->user_first[nf - 1] != self->user_first[k]) self->user_first[nf++] = self->user_first[k];
    self->n_first = nf;
    Py_ssize_t pool = 0;
    for (Py_ssize_t f = 0; f < nf; f++) {
        uint32_t c = self->user_first[f];
        self->first_at[f] = pool;
        Py_ssize_t base = pool++;
        self->user_lengths[base] = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (self->user_pool[self->user_start[k]] != c) continue;
            Py_ssize_t len = self->user_len[k], q;
            for (q = 0; q < self->user_lengths[base]; q++)
                if (self->user_lengths[base + 1 + q] == len) break;
            if (q == self->user_lengths[base]) {
                self->user_lengths[base + 1 + self->user_lengths[base]] = len;
                self->user_lengths[base]++;
                pool++;
            }
        }
        qsort(self->user_lengths + base + 1, (size_t)self->user_lengths[base], sizeof(Py_ssize_t), cmp_len_desc);
    }
    return 0;
}

/* pool, starts, lengths and output ids of n user-defined pieces (total code points); the tables are made by
 * user_tables */
static int user_alloc(Model *self, Py_ssize_t n, Py_ssize_t total) {
    self->n_user = n;
    self->user_pool = (uint32_t *)malloc((size_t)total * 4 + 4);
    self->user_start = (Py_ssize_t *)malloc((size_t)n * sizeof(Py_ssize_t) + 1);
    self->user_len = (Py_ssize_t *)malloc((size_t)n * sizeof(Py_ssize_t) + 1);
    self->user_out = (int32_t *)malloc((size_t)n * sizeof(int32_t) + 1);
    if (!self->user_pool || !self->user_start || !self->user_len || !self->user_out) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int build_user(Model *self, PyObject *user, const StrTable *all) {
    Py_ssize_t n = PyList_GET_SIZE(user), total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *p = PyList_GET_ITEM(user, k);
        if (!PyUnicode_Check(p) || PyUnicode_GET_LENGTH(p) == 0) {
            PyErr_SetString(PyExc_ValueError, "user-defined pieces must be non-empty str");
            return -1;
        }
        total += PyUnicode_GET_LENGTH(p);
    }
    if (n == 0) return 0;
    if (user_alloc(self, n, total) < 0) return -1;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t len = read_cps(PyList_GET_ITEM(user, k), self->user_pool + at);
        self->user_start[k] = at;
        self->user_len[k] = len;
        int32_t id = str_get(all, self->user_pool + at, len);
        self->user_out[k] = (id >= 0 && id != self->unk_id) ? id : -1;
        at += len;
    }
    return user_tables(self);
}

/* the pair filter of the finished pair table (pairs16 or pairs); -1: no memory */
static int fill_filter(Model *self) {
    self->filter = (uint64_t *)calloc(FILTER_BITS / 64, sizeof(uint64_t));
    if (!self->filter) return -1;
    for (size_t j = 0; j <= self->pair_mask; j++) {
        int32_t a, b;
        if (self->pairs16) {
            if (self->pairs16[j] == UINT64_MAX) continue;
            uint32_t key = (uint32_t)(self->pairs16[j] >> 32);
            a = (int32_t)(key >> 16), b = (int32_t)(key & 0xFFFF);
        } else {
            if (self->pairs[j].key == UINT64_MAX) continue;
            a = (int32_t)(self->pairs[j].key >> 32), b = (int32_t)(self->pairs[j].key & 0xFFFFFFFFu);
        }
        uint32_t bit = (uint32_t)(pair_hash(self, a, b) >> 40) & (FILTER_BITS - 1);
        self->filter[bit >> 6] |= 1ULL << (bit & 63);
    }
    return 0;
}

/* Model(pieces: list[str], ranks: list[int], unk_id: int, byte_fallback: bool, user: list[str],
 *       unused: list[int], cache_size: int = 0)
 * ranks[i] >= 0 marks piece i mergeable (one id per string) with that score rank (0 = best); user: the
 * user-defined pieces matched in text; unused: ids of UNUSED pieces. */
static PyObject *Model_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *pieces, *ranks, *user, *unused;
    int unk_id, byte_fallback;
    Py_ssize_t cache_size = 0;
    static char *kwlist[] = {"pieces", "ranks", "unk_id", "byte_fallback", "user", "unused", "cache_size", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!ipO!O!|n", kwlist, &PyList_Type, &pieces, &PyList_Type, &ranks,
                                     &unk_id, &byte_fallback, &PyList_Type, &user, &PyList_Type, &unused,
                                     &cache_size))
        return NULL;
    Py_ssize_t np = PyList_GET_SIZE(pieces);
    if (PyList_GET_SIZE(ranks) != np) {
        PyErr_SetString(PyExc_ValueError, "ranks must have one entry per piece");
        return NULL;
    }
    if (np >= (1 << 24) - 1) { /* heap entries hold a rank in 24 bits */
        PyErr_SetString(PyExc_ValueError, "too many pieces for the compiled model");
        return NULL;
    }
    if (unk_id < 0 || unk_id >= np) {
        PyErr_SetString(PyExc_ValueError, "unk_id must be a piece id");
        return NULL;
    }
    if (cache_size < 0 || cache_size > ((Py_ssize_t)1 << 26)) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be in 0..2**26");
        return NULL;
    }
    Model *self = (Model *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->unk_id = unk_id;
    self->byte_fallback = byte_fallback;
    for (int b = 0; b < 256; b++) self->bytes[b] = -1;
    uint32_t *pool = NULL;
    Py_ssize_t *start = NULL;
    int32_t *rank = NULL;
    uint8_t *is_unused_id = NULL;
    StrTable all = {NULL, 0}, merge = {NULL, 0};
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject *p = PyList_GET_ITEM(pieces, i);
        if (!PyUnicode_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "pieces must be str");
            goto fail;
        }
        total += PyUnicode_GET_LENGTH(p);
    }
    pool = (uint32_t *)malloc((size_t)total * 4 + 4);
    start = (Py_ssize_t *)malloc((size_t)(np + 1) * sizeof(Py_ssize_t));
    rank = (int32_t *)malloc((size_t)(np + 1) * sizeof(int32_t));
    is_unused_id = (uint8_t *)calloc((size_t)np + 1, 1);
    if (!pool || !start || !rank || !is_unused_id || str_init(&all, (size_t)np) < 0 ||
        str_init(&merge, (size_t)np) < 0)
        goto nomem;
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < np; i++) {
        start[i] = at;
        at += read_cps(PyList_GET_ITEM(pieces, i), pool + at);
        long r = PyLong_AsLong(PyList_GET_ITEM(ranks, i));
        if (r == -1 && PyErr_Occurred()) goto fail;
        rank[i] = r < 0 ? -1 : (r >= NO_RANK ? NO_RANK - 1 : (int32_t)r);
    }
    start[np] = at;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(unused); k++) {
        long u = PyLong_AsLong(PyList_GET_ITEM(unused, k));
        if (u == -1 && PyErr_Occurred()) goto fail;
        if (u >= 0 && u < np) is_unused_id[u] = 1;
    }
    for (Py_ssize_t i = 0; i < np; i++) {
        const uint32_t *s = pool + start[i];
        Py_ssize_t n = start[i + 1] - start[i];
        str_put_first(&all, s, n, (int32_t)i);
        if (rank[i] >= 0) {
            if (n == 0 || i == unk_id) {
                rank[i] = -1;
                continue;
            }
            str_put_first(&merge, s, n, (int32_t)i);
        }
    }
    /* the byte table must be the first piece spelling each <0xNN> (the reference looks them up in all pieces) */
    for (int b = 0; b < 256; b++) {
        uint32_t s[6] = {'<', '0', 'x', "0123456789ABCDEF"[b >> 4], "0123456789ABCDEF"[b & 15], '>'};
        self->bytes[b] = str_get(&all, s, 6);
    }

    /* symbol ids: every piece id (only mergeable ones are used), then code points of mergeable pieces that are no
     * mergeable piece themselves */
    self->bmp = (CharSlot *)malloc(BMP * sizeof(CharSlot));
    if (!self->bmp) goto nomem;
    for (uint32_t c = 0; c < BMP; c++) self->bmp[c].cp = c, self->bmp[c].sym = -1, self->bmp[c].out = -1;
    {
        /* astral code points of any piece (for both tables) */
        Py_ssize_t n_astral = 0;
        for (Py_ssize_t j = 0; j < total; j++)
            if (pool[j] >= BMP) n_astral++;
        if (n_astral) {
            if (astral_alloc(self, (size_t)n_astral)) goto nomem;
            for (Py_ssize_t j = 0; j < total; j++) {
                uint32_t cp = pool[j];
                if (cp < BMP) continue;
                size_t i = (size_t)mix64(cp) & self->astral_mask;
                while (self->astral[i].cp != UINT32_MAX && self->astral[i].cp != cp) i = (i + 1) & self->astral_mask;
                self->astral[i].cp = cp;
            }
        }
    }
#define SET_CHAR(cp, field, value)                                            \
    do {                                                                      \
        if ((cp) < BMP) self->bmp[cp].field = (value);                        \
        else ((CharSlot *)astral_get(self, (cp)))->field = (value);           \
    } while (0)
    /* output ids of single code points: the first piece with that string, unless it is the unknown piece */
    for (Py_ssize_t i = 0; i < np; i++) {
        if (start[i + 1] - start[i] != 1) continue;
        uint32_t cp = pool[start[i]];
        int32_t id = str_get(&all, pool + start[i], 1);
        SET_CHAR(cp, out, (id >= 0 && id != unk_id) ? id : -1);
        if (rank[i] >= 0) SET_CHAR(cp, sym, (int32_t)i);
    }
    Py_ssize_t n_extra = 0;
    for (Py_ssize_t i = 0; i < np; i++) {
        if (rank[i] < 0) continue;
        for (Py_ssize_t j = start[i]; j < start[i + 1]; j++)
            if (char_sym(self, pool[j]) < 0) SET_CHAR(pool[j], sym, (int32_t)(np + n_extra++));
    }
    self->n_syms = np + n_extra;
    self->sym_out = (int32_t *)malloc((size_t)(self->n_syms + 1) * sizeof(int32_t));
    self->sym_len = (int32_t *)calloc((size_t)self->n_syms + 1, sizeof(int32_t));
    self->sym_unused = (uint8_t *)calloc((size_t)self->n_syms + 1, 1);
    if (!self->sym_out || !self->sym_len || !self->sym_unused) goto nomem;
    for (Py_ssize_t s = 0; s < self->n_syms; s++) self->sym_out[s] = -1;
    self->out_is_sym = 1;
    for (Py_ssize_t i = 0; i < np; i++) {
        if (rank[i] < 0) continue;
        int32_t id = str_get(&all, pool + start[i], start[i + 1] - start[i]);
        self->sym_out[i] = (id >= 0 && id != unk_id) ? id : -1;
        if (self->sym_out[i] != i) self->out_is_sym = 0;
        self->sym_len[i] = (int32_t)(start[i + 1] - start[i]);
        if (id >= 0 && is_unused_id[id]) self->sym_unused[i] = 1, self->has_unused = 1;
    }
    for (Py_ssize_t i = 0; i < np; i++) {
        if (rank[i] < 0) continue;
        for (Py_ssize_t j = start[i]; j < start[i + 1]; j++) {
            int32_t s = char_sym(self, pool[j]);
            if (s < np) continue;
            self->sym_out[s] = char_out(self, pool[j]);
            self->sym_len[s] = 1;
            int32_t id = str_get(&all, pool + j, 1);
            if (id >= 0 && is_unused_id[id]) self->sym_unused[s] = 1, self->has_unused = 1;
        }
    }
#undef SET_CHAR

    /* pairs: every split of every mergeable piece into two symbols */
    {
        Py_ssize_t cand = 0;
        for (Py_ssize_t i = 0; i < np; i++)
            if (rank[i] >= 0 && start[i + 1] - start[i] > 1) cand += start[i + 1] - start[i] - 1;
        size_t cap = pow2_at_least((size_t)cand * 2 + 1);
        self->pairs = (PairSlot *)malloc(cap * sizeof(PairSlot));
        if (!self->pairs) goto nomem;
        for (size_t j = 0; j < cap; j++) self->pairs[j].key = UINT64_MAX;
        self->pair_mask = cap - 1;
        for (Py_ssize_t i = 0; i < np; i++) {
            Py_ssize_t n = start[i + 1] - start[i];
            if (rank[i] < 0 || n < 2) continue;
            const uint32_t *s = pool + start[i];
            for (Py_ssize_t k = 1; k < n; k++) {
                int32_t a = k == 1 ? char_sym(self, s[0]) : str_get(&merge, s, k);
                int32_t b = n - k == 1 ? char_sym(self, s[k]) : str_get(&merge, s + k, n - k);
                if (a < 0 || b < 0) continue;
                uint64_t key = pair_key(a, b);
                size_t h = (size_t)mix64(key) & self->pair_mask;
                while (self->pairs[h].key != UINT64_MAX && self->pairs[h].key != key) h = (h + 1) & self->pair_mask;
                if (self->pairs[h].key == UINT64_MAX) self->n_pairs++;
                self->pairs[h].key = key;
                self->pairs[h].sym = (int32_t)i;
                self->pairs[h].rank = rank[i];
            }
        }
        /* again into a table sized for the pairs found (at most half full), with 8-byte slots when every symbol
         * fits in 16 bits: fewer cache misses per lookup */
        size_t tight = pow2_at_least((size_t)self->n_pairs * 2 + 1);
        PairSlot *old = self->pairs;
        size_t old_cap = cap;
        self->sym_side = (uint8_t *)calloc((size_t)self->n_syms + 1, 1);
        if (!self->sym_side) goto nomem;
        for (size_t j = 0; j < old_cap; j++) {
            if (old[j].key == UINT64_MAX) continue;
            self->sym_side[old[j].key >> 32] |= 1;
            self->sym_side[old[j].key & 0xFFFFFFFFu] |= 2;
        }
        if (self->n_syms < 0xFFFF) { /* symbols and ranks (at most one per piece) fit in 16 bits */
            self->pairs16 = (uint64_t *)malloc(tight * sizeof(uint64_t));
            if (!self->pairs16) goto nomem;
            memset(self->pairs16, 0xFF, tight * sizeof(uint64_t));
            self->pair_mask = tight - 1;
            for (size_t j = 0; j < old_cap; j++) {
                if (old[j].key == UINT64_MAX) continue;
                uint32_t key = (uint32_t)(((old[j].key >> 32) << 16) | (old[j].key & 0xFFFF));
                size_t h = (size_t)mix64(key) & self->pair_mask;
                while (self->pairs16[h] != UINT64_MAX) h = (h + 1) & self->pair_mask;
                self->pairs16[h] = ((uint64_t)key << 32) | ((uint64_t)old[j].sym << 16) | (uint64_t)old[j].rank;
            }
            free(old);
            self->pairs = NULL;
        } else if (tight < old_cap) {
            self->pairs = (PairSlot *)malloc(tight * sizeof(PairSlot));
            if (!self->pairs) {
                self->pairs = old;
            } else {
                for (size_t j = 0; j < tight; j++) self->pairs[j].key = UINT64_MAX;
                self->pair_mask = tight - 1;
                for (size_t j = 0; j < old_cap; j++) {
                    if (old[j].key == UINT64_MAX) continue;
                    size_t h = (size_t)mix64(old[j].key) & self->pair_mask;
                    while (self->pairs[h].key != UINT64_MAX) h = (h + 1) & self->pair_mask;
                    self->pairs[h] = old[j];
                }
                free(old);
            }
        }
    }
    if (fill_filter(self) < 0) goto nomem;
    self->bigrams = (uint64_t *)calloc(FILTER_BITS / 64, sizeof(uint64_t));
    if (!self->bigrams || low_alloc(self) < 0) goto nomem;
    for (Py_ssize_t i = 0; i < np; i++) {
        if (rank[i] < 0) continue;
        for (Py_ssize_t j = start[i]; j + 1 < start[i + 1]; j++) {
            uint32_t a = pool[j], b = pool[j + 1], bit = bigram_bit(a, b);
            self->bigrams[bit >> 6] |= 1ULL << (bit & 63);
            if (a < LOW_CHARS && b < LOW_CHARS && self->low_class[a] != NO_CLASS && self->low_class[b] != NO_CLASS)
                *low_word(self, self->low_class[a], self->low_class[b]) |= 1ULL << (self->low_class[b] & 63);
        }
    }
    if (build_user(self, user, &all) < 0) goto fail;
    self->id_objs = (PyObject **)calloc((size_t)np + 1, sizeof(PyObject *));
    if (!self->id_objs) goto nomem;
    self->n_pieces = np;
    for (Py_ssize_t i = 0; i < np; i++)
        if (!(self->id_objs[i] = PyLong_FromSsize_t(i))) goto fail;
    if (cache_size > 0 && !(self->cache = wc_new((size_t)cache_size, sizeof(WCSlot)))) goto nomem;
    free(pool), free(start), free(rank), free(is_unused_id), free(all.slots), free(merge.slots);
    return (PyObject *)self;
nomem:
    PyErr_NoMemory();
fail:
    free(pool), free(start), free(rank), free(is_unused_id), free(all.slots), free(merge.slots);
    Py_DECREF(self);
    return NULL;
}

/* ---- output buffer ------------------------------------------------------------------------------------------ */

#define BUF_SMALL 256
typedef struct {
    int32_t *ids;
    Py_ssize_t n, cap;
    int32_t small[BUF_SMALL]; /* the ids of a short text: no allocation */
} Buf;

static void buf_init(Buf *b) {
    b->ids = b->small;
    b->n = 0;
    b->cap = BUF_SMALL;
}

static void buf_free(Buf *b) {
    if (b->ids != b->small) free(b->ids);
}

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->n + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap;
    while (cap < b->n + extra) cap *= 2;
    int32_t *ns;
    if (b->ids == b->small) {
        ns = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
        if (ns) memcpy(ns, b->small, (size_t)b->n * sizeof(int32_t));
    } else {
        ns = (int32_t *)realloc(b->ids, (size_t)cap * sizeof(int32_t));
    }
    if (!ns) return -1;
    b->ids = ns;
    b->cap = cap;
    return 0;
}

static inline int buf_push(Buf *b, int32_t v) {
    if (b->n == b->cap && buf_reserve(b, 1) < 0) return -1;
    b->ids[b->n++] = v;
    return 0;
}

/* ---- one segment -------------------------------------------------------------------------------------------- */

typedef struct {
    int32_t sym;   /* symbol id, -1: none (frozen, or a code point in no mergeable piece) */
    int32_t out;   /* output id, -1: byte fallback / unknown */
    int32_t start; /* first code point in the segment */
    int32_t len;   /* code points */
} Sym;

/* a heap entry: score rank (24 bits) then left symbol index (40 bits), so entries order as the reference's
 * candidates (best score, then leftmost); the merge it stands for is looked up again when it is popped */
typedef uint64_t HeapItem;
#define HEAP_ITEM(rank, left) (((uint64_t)(uint32_t)(rank) << 40) | (uint64_t)(uint32_t)(left))

/* per-segment "merged unused piece -> the two symbols last recorded for it" (only for models with UNUSED) */
typedef struct {
    int32_t key; /* -1 empty */
    int32_t a, b;
} RevSlot;

typedef struct {
    RevSlot *slots;
    size_t mask;
    size_t *touched; /* occupied slots, emptied again after each segment */
    Py_ssize_t n_touched;
} Rev;

/* scratch space reused across the segments of one call (inline arrays for short segments: no allocation) */
#define SMALL 64
typedef struct {
    Sym *syms;
    int32_t *rank, *msym; /* scan: per pair */
    int32_t *nxt, *prv;   /* heap: linked list */
    HeapItem *heap;
    Py_ssize_t cap, hcap;
    Rev rev;
    Sym small_syms[SMALL];
    int32_t small_rank[SMALL], small_msym[SMALL], small_nxt[SMALL], small_prv[SMALL];
} Scratch;

static void scratch_init(Scratch *s) {
    s->syms = s->small_syms, s->rank = s->small_rank, s->msym = s->small_msym, s->nxt = s->small_nxt;
    s->prv = s->small_prv;
    s->heap = NULL;
    s->cap = SMALL, s->hcap = 0;
    s->rev.slots = NULL, s->rev.touched = NULL, s->rev.mask = 0, s->rev.n_touched = 0;
}

static void scratch_free(Scratch *s) {
    if (s->syms != s->small_syms) free(s->syms), free(s->rank), free(s->msym), free(s->nxt), free(s->prv);
    if (s->heap) free(s->heap - 3);
    free(s->rev.slots), free(s->rev.touched);
}

static int scratch_reserve(Scratch *s, Py_ssize_t n) {
    if (n <= s->cap) return 0;
    Py_ssize_t cap = s->cap;
    while (cap < n) cap *= 2;
    if (s->syms != s->small_syms) free(s->syms), free(s->rank), free(s->msym), free(s->nxt), free(s->prv);
    s->syms = (Sym *)malloc((size_t)cap * sizeof(Sym));
    s->rank = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    s->msym = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    s->nxt = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    s->prv = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    if (s->syms && s->rank && s->msym && s->nxt && s->prv) {
        s->cap = cap;
        return 0;
    }
    free(s->syms), free(s->rank), free(s->msym), free(s->nxt), free(s->prv);
    s->syms = s->small_syms, s->rank = s->small_rank, s->msym = s->small_msym, s->nxt = s->small_nxt;
    s->prv = s->small_prv;
    s->cap = SMALL;
    return -1;
}

/* an empty table with room for the candidates of a segment of n symbols (at most 3n distinct keys) */
static int rev_reset(Rev *r, Py_ssize_t n) {
    for (Py_ssize_t j = 0; j < r->n_touched; j++) r->slots[r->touched[j]].key = -1;
    r->n_touched = 0;
    size_t cap = pow2_at_least((size_t)n * 6 + 16);
    if (!r->slots || r->mask + 1 < cap) {
        free(r->slots), free(r->touched);
        r->slots = (RevSlot *)malloc(cap * sizeof(RevSlot));
        r->touched = (size_t *)malloc(cap * sizeof(size_t));
        if (!r->slots || !r->touched) {
            free(r->slots), free(r->touched);
            r->slots = NULL, r->touched = NULL, r->mask = 0;
            return -1;
        }
        r->mask = cap - 1;
        for (size_t i = 0; i < cap; i++) r->slots[i].key = -1;
    }
    return 0;
}

/* ---- working memory kept across calls ---------------------------------------------------------------------- *
 *
 * A long call's buffers (its text, its ids, the scratch arrays, the heap and the split-back table) are megabytes:
 * glibc serves them with fresh pages (mmap, or heap top it trimmed at the last free), and touching those pages for
 * the first time costs a page fault per 4 KB, on every call. So a call longer than RELEASE_FROM code points takes
 * a Work from a small process-wide stash and puts it back when it is done: the next long call finds its pages
 * already mapped. The stash is lock-free (one atomic exchange to take a slot, one compare-and-swap to give it
 * back; a call that finds every slot empty makes its own Work, one that finds every slot full frees it), shared by
 * every model (the buffers hold no model data) and bounded: at most WORK_SLOTS Works of at most WORK_KEEP bytes
 * of capacity each, so 64 MiB in all whatever the number of models or threads. WORK_KEEP covers every buffer of a
 * 400,000-character call with byte fallback or a run of one character (about 26 MiB of capacity, much of it never
 * touched); before a Work goes back its largest buffers are freed until it fits. Calls of at most RELEASE_FROM
 * code points use stack buffers and small allocations, as before. */
#define WORK_SLOTS 2
#define WORK_KEEP ((size_t)32 << 20)

typedef struct {
    Buf b;
    Scratch sc;
    uint32_t *text; /* room for text_cap code points */
    size_t text_cap;
} Work;

static Work *work_stash[WORK_SLOTS];

static Work *work_take(void) {
    for (int k = 0; k < WORK_SLOTS; k++) {
        if (!__atomic_load_n(&work_stash[k], __ATOMIC_RELAXED)) continue;
        Work *w = __atomic_exchange_n(&work_stash[k], NULL, __ATOMIC_ACQUIRE);
        if (w) return w;
    }
    Work *w = (Work *)malloc(sizeof(Work));
    if (!w) return NULL;
    buf_init(&w->b);
    scratch_init(&w->sc);
    w->text = NULL, w->text_cap = 0;
    return w;
}

/* bytes of capacity in each of a Work's buffers: text, ids, scratch arrays, heap, split-back table */
#define WORK_PARTS 5
static void work_sizes(const Work *w, size_t *sz) {
    sz[0] = w->text_cap * sizeof(uint32_t);
    sz[1] = w->b.ids != w->b.small ? (size_t)w->b.cap * sizeof(int32_t) : 0;
    sz[2] = w->sc.syms != w->sc.small_syms ? (size_t)w->sc.cap * (sizeof(Sym) + 4 * sizeof(int32_t)) : 0;
    sz[3] = w->sc.heap ? (size_t)(w->sc.hcap + 4) * sizeof(HeapItem) : 0;
    sz[4] = w->sc.rev.slots ? (w->sc.rev.mask + 1) * (sizeof(RevSlot) + sizeof(size_t)) : 0;
}

static void work_drop(Work *w, int part) {
    Scratch *s = &w->sc;
    switch (part) {
    case 0:
        free(w->text), w->text = NULL, w->text_cap = 0;
        break;
    case 1:
        if (w->b.ids != w->b.small) free(w->b.ids);
        w->b.ids = w->b.small, w->b.cap = BUF_SMALL;
        break;
    case 2:
        if (s->syms != s->small_syms) free(s->syms), free(s->rank), free(s->msym), free(s->nxt), free(s->prv);
        s->syms = s->small_syms, s->rank = s->small_rank, s->msym = s->small_msym, s->nxt = s->small_nxt;
        s->prv = s->small_prv, s->cap = SMALL;
        break;
    case 3:
        if (s->heap) free(s->heap - 3);
        s->heap = NULL, s->hcap = 0;
        break;
    default:
        free(s->rev.slots), free(s->rev.touched);
        s->rev.slots = NULL, s->rev.touched = NULL, s->rev.mask = 0, s->rev.n_touched = 0;
    }
}

static void work_free(Work *w) {
    for (int p = 0; p < WORK_PARTS; p++) work_drop(w, p);
    free(w);
}

static void work_give(Work *w) {
    size_t sz[WORK_PARTS];
    for (;;) { /* largest buffer first, until the capacity kept is at most WORK_KEEP */
        work_sizes(w, sz);
        size_t total = 0;
        int big = 0;
        for (int p = 0; p < WORK_PARTS; p++) {
            total += sz[p];
            if (sz[p] > sz[big]) big = p;
        }
        if (total <= WORK_KEEP) break;
        work_drop(w, big);
    }
    w->b.n = 0;
    for (int k = 0; k < WORK_SLOTS; k++) {
        Work *expected = NULL;
        if (__atomic_compare_exchange_n(&work_stash[k], &expected, w, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) return;
    }
    work_free(w);
}

/* the output and scratch space of one call: a Work's for a long call, else on the caller's stack */
typedef struct {
    Work *w;
    Buf *b;
    Scratch *sc;
    Buf own_b;
    Scratch own_sc;
} Call;

static void call_begin(Call *c, Py_ssize_t length) {
    c->w = length > RELEASE_FROM ? work_take() : NULL; /* no Work (no memory): the call allocates its own */
    if (c->w) {
        c->b = &c->w->b, c->sc = &c->w->sc;
    } else {
        buf_init(&c->own_b), scratch_init(&c->own_sc);
        c->b = &c->own_b, c->sc = &c->own_sc;
    }
}

static void call_end(Call *c) {
    if (c->w) {
        work_give(c->w);
    } else {
        scratch_free(&c->own_sc);
        buf_free(&c->own_b);
    }
}

/* room for need code points: the stack buffer (STACK_TEXT of them) when it is enough, else the Work's, else a new
 * one; NULL when out of memory. Give it back with call_text_done. */
#define STACK_TEXT 256
static uint32_t *call_text(Call *c, Py_ssize_t need, uint32_t *stack) {
    if (need <= STACK_TEXT) return stack;
    if (!c->w) return (uint32_t *)malloc((size_t)need * sizeof(uint32_t));
    if (c->w->text_cap < (size_t)need) {
        size_t cap = pow2_at_least((size_t)need);
        free(c->w->text);
        c->w->text = (uint32_t *)malloc(cap * sizeof(uint32_t));
        c->w->text_cap = c->w->text ? cap : 0;
    }
    return c->w->text;
}

static void call_text_done(Call *c, uint32_t *t, const uint32_t *stack) {
    if (t != stack && (!c->w || t != c->w->text)) free(t);
}

static inline void rev_put(Rev *r, int32_t key, int32_t a, int32_t b) {
    size_t i = (size_t)mix64((uint64_t)key) & r->mask;
    while (r->slots[i].key != -1 && r->slots[i].key != key) i = (i + 1) & r->mask;
    if (r->slots[i].key == -1) r->touched[r->n_touched++] = i;
    r->slots[i].key = key;
    r->slots[i].a = a;
    r->slots[i].b = b;
}

static inline const RevSlot *rev_get(const Rev *r, int32_t key) {
    size_t i = (size_t)mix64((uint64_t)key) & r->mask;
    for (;;) {
        if (r->slots[i].key == key) return &r->slots[i];
        if (r->slots[i].key == -1) return NULL;
        i = (i + 1) & r->mask;
    }
}

/* the symbol two symbols merge into (none: -1) and its rank; records it for resegmentation as the reference
 * does */
static inline int32_t candidate(const Model *m, Scratch *sc, const Sym *l, const Sym *r, int32_t *rank) {
    if (l->sym < 0 || r->sym < 0) return -1;
    int32_t p = pair_get(m, l->sym, r->sym, rank);
    if (p >= 0 && m->has_unused && m->sym_unused[p]) rev_put(&sc->rev, p, l->sym, r->sym);
    return p;
}


typedef struct {
    Buf *out;
    int prev_unk;
} Emit;

/* one final symbol: its id, else its UTF-8 bytes as <0xNN> ids (all present), else the unknown id (runs fused) */
static int emit(const Model *m, Emit *e, int32_t out, const uint32_t *text, Py_ssize_t start, Py_ssize_t len) {
    if (out >= 0) {
        e->prev_unk = 0;
        return buf_push(e->out, out);
    }
    if (m->byte_fallback) {
        int all = 1;
        Py_ssize_t nb = 0;
        for (Py_ssize_t i = 0; i < len && all; i++) {
            unsigned char u[4];
            int k = utf8_put(u, text[start + i]);
            for (int q = 0; q < k; q++)
                if (m->bytes[u[q]] < 0) all = 0;
            nb += k;
        }
        if (all) {
            if (buf_reserve(e->out, nb) < 0) return -1;
            for (Py_ssize_t i = 0; i < len; i++) {
                unsigned char u[4];
                int k = utf8_put(u, text[start + i]);
                for (int q = 0; q < k; q++) e->out->ids[e->out->n++] = m->bytes[u[q]];
            }
            e->prev_unk = 0;
            return 0;
        }
    }
    if (e->prev_unk) return 0;
    e->prev_unk = 1;
    return buf_push(e->out, m->unk_id);
}

/* a merged UNUSED piece: split back into the symbols recorded for it, recursively */
static int emit_sym(const Model *m, Scratch *sc, Emit *e, int32_t sym, const uint32_t *text, Py_ssize_t start,
                    int depth) {
    if (m->has_unused && m->sym_unused[sym] && depth < 4096) {
        const RevSlot *r = rev_get(&sc->rev, sym);
        if (r) {
            int32_t a = r->a, b = r->b;
            if (emit_sym(m, sc, e, a, text, start, depth + 1) < 0) return -1;
            return emit_sym(m, sc, e, b, text, start + m->sym_len[a], depth + 1);
        }
    }
    return emit(m, e, m->sym_out[sym], text, start, m->sym_len[sym]);
}

/* one final symbol of a segment; the common case (a piece with an id, nothing to split back) inline */
static inline int emit_one(const Model *m, Scratch *sc, Emit *e, const Sym *s, const uint32_t *text) {
    int32_t out = s->out; /* = sym_out[sym] for a symbol with one */
    if (out >= 0 && !(s->sym >= 0 && m->has_unused && m->sym_unused[s->sym])) {
        e->prev_unk = 0;
        return buf_push(e->out, out);
    }
    return s->sym >= 0 ? emit_sym(m, sc, e, s->sym, text, s->start, 0) : emit(m, e, s->out, text, s->start, s->len);
}

static inline Py_ssize_t user_match(const Model *m, const uint32_t *t, Py_ssize_t i, Py_ssize_t n) {
    uint32_t c = t[i];
    if (!((m->user_first_bits[(c >> 6) & 15] >> (c & 63)) & 1)) return -1;
    Py_ssize_t lo = 0, hi = m->n_first;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (m->user_first[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    if (lo == m->n_first || m->user_first[lo] != c) return -1;
    const Py_ssize_t *ls = m->user_lengths + m->first_at[lo];
    for (Py_ssize_t q = 0; q < ls[0]; q++) {
        Py_ssize_t len = ls[1 + q];
        if (i + len > n) continue;
        size_t h = (size_t)hash_cps(t + i, len) & m->user_mask;
        while (m->user_slots[h] >= 0) {
            int32_t k = m->user_slots[h];
            if (m->user_len[k] == len && memcmp(m->user_pool + m->user_start[k], t + i, (size_t)len * 4) == 0)
                return k;
            h = (h + 1) & m->user_mask;
        }
    }
    return -1;
}

static inline int heap_less(const HeapItem *x, const HeapItem *y) { return *x < *y; }

/* A 4-ary heap of 8-byte entries (half the levels of a binary one; the four children of a node share 32 bytes of
 * one cache line: the array is 64-byte aligned and starts 3 entries in), so a long run's heap costs few cache
 * misses per operation. */
static int heap_push(Scratch *sc, Py_ssize_t *hn, HeapItem it) {
    if (*hn == sc->hcap) {
        Py_ssize_t cap = sc->hcap ? sc->hcap * 2 : 256;
        HeapItem *raw = (HeapItem *)aligned_alloc(64, ((size_t)(cap + 4) * sizeof(HeapItem) + 63) & ~(size_t)63);
        if (!raw) return -1;
        if (sc->heap) {
            memcpy(raw + 3, sc->heap, (size_t)*hn * sizeof(HeapItem));
            free(sc->heap - 3);
        }
        sc->heap = raw + 3;
        sc->hcap = cap;
    }
    HeapItem *h = sc->heap;
    Py_ssize_t i = (*hn)++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 4;
        if (!heap_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
    return 0;
}

static HeapItem heap_pop(Scratch *sc, Py_ssize_t *hn) {
    HeapItem *h = sc->heap;
    HeapItem top = h[0];
    HeapItem it = h[--(*hn)];
    Py_ssize_t n = *hn, i = 0;
    for (;;) {
        Py_ssize_t c = 4 * i + 1;
        if (c >= n) break;
        Py_ssize_t best = c, end = c + 4 < n ? c + 4 : n;
        for (Py_ssize_t k = c + 1; k < end; k++)
            if (heap_less(&h[k], &h[best])) best = k;
        if (!heap_less(&h[best], &it)) break;
        h[i] = h[best];
        i = best;
    }
    if (n > 0) h[i] = it;
    return top;
}

/* Merge syms[0..ns) (initial symbols of text) and emit the result through e. */
static int merge_emit(const Model *m, Scratch *sc, Sym *syms, Py_ssize_t ns, const uint32_t *text, Emit *e0) {
    if (ns <= 0) return 0;
    if (m->has_unused && rev_reset(&sc->rev, ns) < 0) return -1;
    Emit e = *e0;
    if (ns < HEAP_FROM) {
        int32_t *rank = sc->rank, *msym = sc->msym;
        Py_ssize_t np = ns - 1;
        for (Py_ssize_t i = 0; i < np; i++) pair_prefetch(m, syms[i].sym, syms[i + 1].sym);
        for (Py_ssize_t i = 0; i < np; i++) {
            int32_t rk;
            int32_t p = candidate(m, sc, &syms[i], &syms[i + 1], &rk);
            rank[i] = p >= 0 ? rk : NO_RANK;
            msym[i] = p;
        }
        while (np > 0) {
            /* the lowest (rank, position): branch-free, the loop is short and its outcome unpredictable */
            uint64_t best = UINT64_MAX;
            for (Py_ssize_t i = 0; i < np; i++) {
                uint64_t k = ((uint64_t)(uint32_t)rank[i] << 32) | (uint64_t)i;
                best = k < best ? k : best;
            }
            if ((int32_t)(best >> 32) == NO_RANK) break;
            Py_ssize_t at = (Py_ssize_t)(uint32_t)best;
            int32_t nw = msym[at];
            syms[at].sym = nw;
            syms[at].out = m->out_is_sym ? nw : m->sym_out[nw];
            syms[at].len += syms[at + 1].len;
            /* close the gap with plain loops: fewer than HEAP_FROM items, where a memmove call costs more than
             * the copying (and its size dispatch mispredicts) */
            for (Py_ssize_t k = at + 1; k < ns - 1; k++) syms[k] = syms[k + 1];
            ns--;
            for (Py_ssize_t k = at; k < np - 1; k++) {
                rank[k] = rank[k + 1];
                msym[k] = msym[k + 1];
            }
            np--;
            if (at > 0) pair_prefetch(m, syms[at - 1].sym, nw);
            if (at < np) pair_prefetch(m, nw, syms[at + 1].sym);
            if (at > 0) {
                int32_t rk;
                int32_t p = candidate(m, sc, &syms[at - 1], &syms[at], &rk);
                rank[at - 1] = p >= 0 ? rk : NO_RANK;
                msym[at - 1] = p;
            }
            if (at < np) {
                int32_t rk;
                int32_t p = candidate(m, sc, &syms[at], &syms[at + 1], &rk);
                rank[at] = p >= 0 ? rk : NO_RANK;
                msym[at] = p;
            }
        }
        for (Py_ssize_t i = 0; i < ns; i++)
            if (emit_one(m, sc, &e, &syms[i], text) < 0) return -1;
        *e0 = e;
        return 0;
    }
    int32_t *nxt = sc->nxt, *prv = sc->prv;
    Py_ssize_t hn = 0;
    for (Py_ssize_t i = 0; i < ns; i++) {
        nxt[i] = (int32_t)(i + 1);
        prv[i] = (int32_t)(i - 1);
    }
    nxt[ns - 1] = -1;
    for (Py_ssize_t i = 0; i + 1 < ns && i < 64; i++) pair_prefetch(m, syms[i].sym, syms[i + 1].sym);
    for (Py_ssize_t i = 0; i + 1 < ns; i++) {
        if (i + 64 + 1 < ns) pair_prefetch(m, syms[i + 64].sym, syms[i + 65].sym);
        int32_t rk;
        int32_t p = candidate(m, sc, &syms[i], &syms[i + 1], &rk);
        if (p >= 0) {
            HeapItem it = HEAP_ITEM(rk, i);
            if (heap_push(sc, &hn, it) < 0) return -1;
        }
    }
    while (hn > 0) {
        HeapItem it = heap_pop(sc, &hn);
        int32_t l = (int32_t)(it & 0xFFFFFFFFFFULL), r = nxt[l];
        /* An entry is acted on when the pair now at its position merges with its rank: then that pair is a
         * candidate with the smallest (rank, position) there is (its own entry is in the heap), exactly what the
         * reference merges next; otherwise it is stale (the symbols changed since it was pushed). */
        if (r < 0 || syms[l].len == 0 || syms[l].sym < 0 || syms[r].sym < 0) continue;
        int32_t rk, ms = pair_get(m, syms[l].sym, syms[r].sym, &rk);
        if (ms < 0 || (uint64_t)(uint32_t)rk != (it >> 40)) continue;
        syms[l].sym = ms;
        syms[l].out = m->out_is_sym ? ms : m->sym_out[ms];
        syms[l].len += syms[r].len;
        syms[r].len = 0;
        nxt[l] = nxt[r];
        if (nxt[r] >= 0) prv[nxt[r]] = l;
        int32_t p = prv[l];
        if (p >= 0) pair_prefetch(m, syms[p].sym, ms);
        if (nxt[l] >= 0) pair_prefetch(m, ms, syms[nxt[l]].sym);
        if (p >= 0) {
            int32_t rk;
            int32_t c = candidate(m, sc, &syms[p], &syms[l], &rk);
            if (c >= 0) {
                HeapItem ni = HEAP_ITEM(rk, p);
                if (heap_push(sc, &hn, ni) < 0) return -1;
            }
        }
        if (nxt[l] >= 0) {
            int32_t q = nxt[l];
            int32_t rk;
            int32_t c = candidate(m, sc, &syms[l], &syms[q], &rk);
            if (c >= 0) {
                HeapItem ni = HEAP_ITEM(rk, l);
                if (heap_push(sc, &hn, ni) < 0) return -1;
            }
        }
    }
    for (int32_t i = 0; i >= 0; i = nxt[i])
        if (emit_one(m, sc, &e, &syms[i], text) < 0) return -1;
    *e0 = e;
    return 0;
}

/* merge_emit of syms[0..ns), a piece cut out of a longer segment, through the word cache (st: the call's counters,
 * NULL = no cache). The same piece recurs across segments that differ (a run of CJK or Thai characters cut where no
 * mergeable piece spans two of them), so it is merged once. A piece of two or more symbols holds only code points
 * of mergeable pieces (anything else is cut off on its own), so its ids depend on its code points alone; it is
 * stored only when no unknown id came out (and none was pending before it): a run of unknowns fuses into one id
 * across pieces. */
static int merge_cut(const Model *m, Scratch *sc, Sym *syms, Py_ssize_t ns, const uint32_t *text, Emit *e,
                     CallStats *st) {
    if (ns < 2 || !st || e->prev_unk) return merge_emit(m, sc, syms, ns, text, e);
    Py_ssize_t start = syms[0].start, len = syms[ns - 1].start + syms[ns - 1].len - start;
    WCSlot copy;
    WCSeg seg;
    int got = wc_seg_get(m->cache, text + start, len, &copy, sizeof copy, &seg, st);
    if (got > 0) {
        if (buf_reserve(e->out, copy.h.count) < 0) return -1;
        memcpy(e->out->ids + e->out->n, wc_seg_ids(&copy, len), (size_t)copy.h.count * sizeof(int32_t));
        e->out->n += copy.h.count;
        return 0;
    }
    Py_ssize_t before = e->out->n;
    if (merge_emit(m, sc, syms, ns, text, e) < 0) return -1;
    if (got == 0 && !e->prev_unk) {
        for (Py_ssize_t i = before; i < e->out->n; i++)
            if (e->out->ids[i] == m->unk_id) return 0;
        wc_seg_put(&seg, text + start, len, sizeof(WCSlot), e->out->ids + before, e->out->n - before, st);
    }
    return 0;
}

/* One piece cut out of a segment, syms[0..ns): a single symbol (most of them) emitted at once, without the call of
 * merge_cut, else merge_cut. */
static inline int emit_cut(const Model *m, Scratch *sc, Sym *syms, Py_ssize_t ns, const uint32_t *text, Emit *e,
                           CallStats *st) {
    return ns == 1 ? emit_one(m, sc, e, &syms[0], text) : merge_cut(m, sc, syms, ns, text, e, st);
}

/* BPE over text[0..n) (one segment); ids appended to out. A segment is merged in pieces cut where no merge can
 * ever cross (two neighbouring initial symbols that are no two adjacent characters of any mergeable piece, or one
 * that never merges): the pieces merge independently (no candidate spans a cut), one after the other into the
 * same output, so a long run of such text needs memory for its longest uncut piece only; when the segment is cut,
 * its pieces go through the word cache (merge_cut; st NULL: not), but for pieces of one symbol, emitted at once
 * without a call (a cold pass over the bench's documents has 193,663 of them for mistral-v1). Models with UNUSED
 * pieces are not cut (their split-back bookkeeping spans the whole segment, as the reference's does). */
static int bpe_segment(const Model *m, Scratch *sc, const uint32_t *text, Py_ssize_t n, Buf *out, CallStats *st) {
    if (n <= 0) return 0;
    if (n > INT32_MAX - 1) return -1;
    if (scratch_reserve(sc, n) < 0) return -1; /* address space only: pages are touched as they are used */
    Sym *syms = sc->syms;
    int cut = !m->has_unused, was_cut = 0;
    Emit e = {out, 0};
    Py_ssize_t ns = 0;
    uint32_t prev_cp = 0; /* syms[ns - 1]'s first code point, and whether it is a character with a symbol */
    int prev_mergeable = 0;
    for (Py_ssize_t i = 0; i < n;) {
        Sym cur;
        uint32_t cp = text[i];
        cur.start = (int32_t)i;
        Py_ssize_t k = m->n_user ? user_match(m, text, i, n) : -1;
        if (k >= 0) {
            cur.sym = -1;
            cur.out = m->user_out[k];
            cur.len = (int32_t)m->user_len[k];
            i += m->user_len[k];
        } else {
            if (cp < BMP) {
                cur.sym = m->bmp[cp].sym;
                cur.out = m->bmp[cp].out;
            } else {
                const CharSlot *c = astral_get(m, cp);
                cur.sym = c ? c->sym : -1;
                cur.out = c ? c->out : -1;
            }
            cur.len = 1;
            i++;
        }
        int mergeable = cur.sym >= 0;
        if (cut && ns > 0 && (!mergeable || !prev_mergeable || !bigram_has(m, prev_cp, cp))) {
            if (emit_cut(m, sc, syms, ns, text, &e, st) < 0) return -1;
            ns = 0;
            was_cut = 1;
        }
        syms[ns++] = cur;
        prev_cp = cp;
        prev_mergeable = mergeable;
    }
    if (!was_cut) return merge_emit(m, sc, syms, ns, text, &e);
    return emit_cut(m, sc, syms, ns, text, &e, st);
}

/* bpe_segment through the word cache (segments whose code points, all in the BMP, and ids fit a slot); cacheable:
 * the cache exists and wc_seg_hash returned 1 for the segment, with its hash h */
static int cached_segment_hashed(const Model *m, Scratch *sc, const uint32_t *text, Py_ssize_t n, int cacheable,
                                 uint64_t h, Buf *out, CallStats *st) {
    WCSlot copy;
    WCSeg seg;
    int got = cacheable ? wc_seg_get_hashed(m->cache, text, n, h, &copy, sizeof copy, &seg, st) : -1;
    if (got > 0) {
        if (buf_reserve(out, copy.h.count) < 0) return -1;
        memcpy(out->ids + out->n, wc_seg_ids(&copy, n), (size_t)copy.h.count * sizeof(int32_t));
        out->n += copy.h.count;
        return 0;
    }
    Py_ssize_t before = out->n;
    if (bpe_segment(m, sc, text, n, out, st) < 0) return -1;
    if (got == 0) wc_seg_put(&seg, text, n, sizeof(WCSlot), out->ids + before, out->n - before, st);
    return 0;
}

static int cached_segment(const Model *m, Scratch *sc, const uint32_t *text, Py_ssize_t n, Buf *out,
                          CallStats *st) {
    uint64_t h = 0;
    int cacheable = m->cache && wc_seg_hash(text, n, sizeof(WCSlot), &h);
    return cached_segment_hashed(m, sc, text, n, cacheable, h, out, st);
}

/* The end of the segment of text[0..n) that starts at seg (seg < n): the next U+2581 after seg that follows another
 * character, else n. In the same pass, *h gets the segment's wc_seg_hash and *any the OR of its code points (for
 * wc_seg_cacheable). */
static inline Py_ssize_t segment_scan(const uint32_t *text, Py_ssize_t seg, Py_ssize_t n, uint64_t *h, uint32_t *any) {
    uint32_t or_all = text[seg];
    uint64_t x = wc_seg_step(WC_SEG_BASIS, text[seg]);
    Py_ssize_t i = seg + 1;
    for (; i < n; i++) {
        uint32_t c = text[i];
        if (c == SPACE_SYMBOL && text[i - 1] != SPACE_SYMBOL) break;
        or_all |= c;
        x = wc_seg_step(x, c);
    }
    *h = wc_seg_done(x, i - seg);
    *any = or_all;
    return i;
}

/* segment_scan from ``at``, and in *cacheable whether the cache may hold that segment (then its first slot starts
 * loading) */
static inline Py_ssize_t segment_ahead(const Model *m, const uint32_t *text, Py_ssize_t at, Py_ssize_t n, uint64_t *h,
                                       int *cacheable) {
    uint32_t any;
    Py_ssize_t end = segment_scan(text, at, n, h, &any);
    *cacheable = m->cache && wc_seg_cacheable(sizeof(WCSlot), end - at, any);
    if (*cacheable) wc_seg_prefetch(m->cache, *h);
    return end;
}

/* segments of text[0..n): cut before every U+2581 that follows another character (split), else one. The next
 * segment is found and hashed, and its cache slot prefetched, before this one is looked up and merged. */
static int bpe_text(const Model *m, Scratch *sc, const uint32_t *text, Py_ssize_t n, int split, Buf *out,
                    CallStats *st) {
    if (!split || n <= 0) return cached_segment(m, sc, text, n, out, st);
    uint64_t h, next_h = 0;
    int cacheable, next_cacheable = 0;
    Py_ssize_t seg = 0, end = segment_ahead(m, text, 0, n, &h, &cacheable);
    while (seg < n) {
        Py_ssize_t next_end = n;
        if (end < n) next_end = segment_ahead(m, text, end, n, &next_h, &next_cacheable);
        if (cached_segment_hashed(m, sc, text + seg, end - seg, cacheable, h, out, st) < 0) return -1;
        seg = end;
        end = next_end;
        h = next_h;
        cacheable = next_cacheable;
    }
    return 0;
}

/* ---- Python entry points ------------------------------------------------------------------------------------ */

/* code points of a str; with scrub, lone surrogates become U+FFFD and surrogate pairs one character (the
 * pipeline's scrub_surrogates), else as they are; room for ``extra`` more (the buffer comes from call_text);
 * returns the length or -1 (memory) */
static Py_ssize_t load_text(PyObject *s, uint32_t **dst, Py_ssize_t extra, int scrub, uint32_t *stack, Call *c) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    uint32_t *base = call_text(c, n + extra + 1, stack);
    if (!base) return -1;
    uint32_t *t = base + (extra > 0); /* one code point of room in front (the dummy prefix) */
    Py_ssize_t k = n;
    if (scrub || kind == PyUnicode_1BYTE_KIND) { /* (a 1-byte str has no surrogate to scrub) */
        k = scrub_code_points(kind, data, n, t);
    } else {
        for (Py_ssize_t i = 0; i < n; i++) t[i] = PyUnicode_READ(kind, data, i);
    }
    *dst = base;
    return k;
}

/* ids[0..n) as a list */
static PyObject *ids_list(const Model *m, const int32_t *ids, Py_ssize_t n) {
    PyObject *list = list_unfilled(n);
    if (!list) return NULL;
    PyObject **items = list_items(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        PyObject *v = id < m->n_pieces ? m->id_objs[id] : NULL;
        if (v) Py_INCREF(v);
        else v = PyLong_FromLong(id);
        if (!v) {
            list_sized(list, i);
            Py_DECREF(list);
            return NULL;
        }
        items[i] = v;
    }
    list_sized(list, n);
    return list;
}

/* the ids as a list (the buffer stays the caller's) */
static PyObject *finish(const Model *m, const Buf *b, int rc) {
    if (rc < 0) return PyErr_NoMemory();
    return ids_list(m, b->ids, b->n);
}

/* SentencePiece's normalizer without a charsmap over t[1..n + 1) (room for one more in front and one after), in
 * place, the result from t[0]; returns its length */
static Py_ssize_t normalize(uint32_t *t, Py_ssize_t n, int flags) {
    int remove = flags & F_REMOVE, suffix = flags & F_SUFFIX;
    uint32_t ws = (flags & F_ESCAPE) ? SPACE_SYMBOL : ' ';
    Py_ssize_t i = 1;
    n++;
    if (remove)
        while (i < n && t[i] == ' ') i++;
    if (i >= n) return 0;
    /* the output (from t[0]) never gets ahead of the input (from t[1]) but for the dummy prefix, which t[0] holds */
    Py_ssize_t k = 0;
    if ((flags & F_DUMMY) && !suffix) t[k++] = ws;
    int prev_space = remove;
    for (; i < n; i++) {
        uint32_t c = t[i];
        if (c == ' ') {
            if (remove && prev_space) continue;
            prev_space = remove;
            t[k++] = ws;
        } else {
            prev_space = 0;
            t[k++] = c;
        }
    }
    if (remove)
        while (k > 0 && t[k - 1] == ws) k--;
    if ((flags & F_DUMMY) && suffix) t[k++] = ws;
    return k;
}

PyDoc_STRVAR(encode_text_doc,
             "encode_text(flags, text) -> list[int]: ids of a whole text: lone surrogates to U+FFFD, SentencePiece's "
             "normalizer without a charsmap (flags: 1 dummy prefix, 2 remove extra whitespaces, 4 escape "
             "whitespaces, 8 whitespace as suffix), cut before every U+2581 after another character (16), BPE.");

static PyObject *Model_encode_text(Model *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyLong_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "encode_text(flags: int, text: str)");
        return NULL;
    }
    int flags = (int)PyLong_AsLong(args[0]);
    Call c;
    call_begin(&c, PyUnicode_GET_LENGTH(args[1]));
    uint32_t stack[STACK_TEXT], *t = NULL;
    Py_ssize_t n = load_text(args[1], &t, 2, 1, stack, &c);
    if (n < 0) {
        call_end(&c);
        return PyErr_NoMemory();
    }
    CallStats st = {0, 0, 0};
    int rc = 0;
    if (n > RELEASE_FROM) {
        Py_BEGIN_ALLOW_THREADS
        n = normalize(t, n, flags);
        rc = bpe_text(self, c.sc, t, n, flags & F_SPLIT, c.b, &st);
        Py_END_ALLOW_THREADS
    } else { /* chat-sized: releasing the GIL would cost more than encoding */
        n = normalize(t, n, flags);
        rc = bpe_text(self, c.sc, t, n, flags & F_SPLIT, c.b, &st);
    }
    wc_account(self->cache, &st);
    call_text_done(&c, t, stack);
    PyObject *list = finish(self, c.b, rc);
    call_end(&c);
    return list;
}

PyDoc_STRVAR(encode_texts_doc,
             "encode_texts(flags, texts, counts, num_threads=1) -> list: encode_text(flags, text) of each text of the "
             "list ``texts`` (with ``counts`` true, the number of ids of each), in one call: the texts are read with "
             "the GIL held, then encoded with it released, chat-sized ones included (which encode_text encodes "
             "holding it), on up to num_threads threads (the caller's included, about one per 32 KiB of text) that "
             "take the next text as they finish one; the lists are built at the end, by the caller.");

/* An encode_texts call's texts, shared by the threads that encode them. */
typedef struct {
    Model *m;
    uint32_t *all;              /* every text's code points, text i from starts[i] (room around it as load_text) */
    const Py_ssize_t *starts;
    const Py_ssize_t *lens;     /* code points of text i */
    int flags;
    BatchTexts bt;              /* where text i's ids went (a worker's Call buffer); failed: out of memory */
} Texts;

/* One thread's share: its own output buffer and scratch (a Call), its cache counts. */
typedef struct {
    Texts *t;
    int k;
    Call c;
    CallStats st;
} TextsWorker;

/* Encode texts taken from the counter until none is left (batch_threads.h; called without the GIL). */
static void *texts_worker(void *arg) {
    TextsWorker *w = (TextsWorker *)arg;
    Texts *t = w->t;
    for (Py_ssize_t i; (i = batch_next(&t->bt)) >= 0;) {
        uint32_t *s = t->all + t->starts[i];
        Py_ssize_t n = normalize(s, t->lens[i], t->flags);
        t->bt.who[i] = w->k;
        t->bt.from[i] = w->c.b->n;
        if (bpe_text(t->m, w->c.sc, s, n, t->flags & F_SPLIT, w->c.b, &w->st) < 0) {
            batch_fail(&t->bt, 1);
            break;
        }
        t->bt.to[i] = w->c.b->n;
    }
    return NULL;
}

static PyObject *Model_encode_texts(Model *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4 || !PyLong_Check(args[0]) || !PyList_Check(args[1]) ||
        (nargs == 4 && !PyLong_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "encode_texts(flags: int, texts: list[str], counts: bool, num_threads: int = 1)");
        return NULL;
    }
    int flags = (int)PyLong_AsLong(args[0]);
    int counts = PyObject_IsTrue(args[2]);
    if (counts < 0) return NULL;
    long num_threads = nargs == 4 ? PyLong_AsLong(args[3]) : 1;
    if (num_threads == -1 && PyErr_Occurred()) return NULL;
    PyObject *texts = args[1];
    Py_ssize_t count = PyList_GET_SIZE(texts), total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *x = PyList_GET_ITEM(texts, i);
        if (!PyUnicode_Check(x)) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] must be str", i);
            return NULL;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(x);
        if (n > PY_SSIZE_T_MAX / 8 - 3 - total) return PyErr_NoMemory();
        total += n + 3; /* as load_text: one code point of room in front, one after, one more */
    }
    long want = batch_threads_wanted(num_threads, count, total);
    Texts t = {self, NULL, NULL, NULL, flags, {0}};
    uint32_t *all = (uint32_t *)malloc(((size_t)total + 1) * sizeof(uint32_t));
    Py_ssize_t *starts = (Py_ssize_t *)malloc(((size_t)count + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *lens = (Py_ssize_t *)malloc(((size_t)count + 1) * sizeof(Py_ssize_t));
    TextsWorker *workers = (TextsWorker *)malloc((size_t)want * sizeof(TextsWorker)); /* Calls are kilobytes */
    if (!all || !starts || !lens || !workers || batch_texts_init(&t.bt, count) < 0) {
        free(all), free(starts), free(lens), free(workers);
        return PyErr_NoMemory();
    }
    t.all = all, t.starts = starts, t.lens = lens;
    starts[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *x = PyList_GET_ITEM(texts, i);
        Py_ssize_t n = PyUnicode_GET_LENGTH(x);
        lens[i] = scrub_code_points(PyUnicode_KIND(x), PyUnicode_DATA(x), n, all + starts[i] + 1);
        starts[i + 1] = starts[i] + n + 3;
    }
    Py_BEGIN_ALLOW_THREADS
    for (long k = 0; k < want; k++) {
        workers[k].t = &t, workers[k].k = (int)k;
        workers[k].st = (CallStats){0, 0, 0};
        call_begin(&workers[k].c, total / want);
    }
    batch_threads_run(texts_worker, workers, sizeof *workers, want);
    Py_END_ALLOW_THREADS
    free(all);
    free(starts);
    free(lens);
    for (long k = 0; k < want; k++) wc_account(self->cache, &workers[k].st);
    PyObject *out = t.bt.failed ? PyErr_NoMemory() : PyList_New(count);
    for (Py_ssize_t i = 0; out && i < count; i++) {
        Py_ssize_t n = t.bt.to[i] - t.bt.from[i];
        PyObject *v = counts ? PyLong_FromSsize_t(n) : ids_list(self, workers[t.bt.who[i]].c.b->ids + t.bt.from[i], n);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
    for (long k = 0; k < want; k++) call_end(&workers[k].c);
    free(workers);
    batch_texts_free(&t.bt);
    return out;
}

PyDoc_STRVAR(tokenize_doc, "tokenize(text) -> list[int]: ids of one normalized text, never cut.");

static PyObject *Model_tokenize(Model *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Call c;
    call_begin(&c, PyUnicode_GET_LENGTH(arg));
    uint32_t stack[STACK_TEXT], *t = NULL;
    Py_ssize_t n = load_text(arg, &t, 0, 0, stack, &c);
    if (n < 0) {
        call_end(&c);
        return PyErr_NoMemory();
    }
    int rc;
    if (n > RELEASE_FROM) {
        Py_BEGIN_ALLOW_THREADS
        rc = bpe_segment(self, c.sc, t, n, c.b, NULL);
        Py_END_ALLOW_THREADS
    } else {
        rc = bpe_segment(self, c.sc, t, n, c.b, NULL);
    }
    call_text_done(&c, t, stack);
    PyObject *list = finish(self, c.b, rc);
    call_end(&c);
    return list;
}

PyDoc_STRVAR(encode_doc,
             "encode(items) -> list[int]: ids of ``items`` in order: each str is one normalized pre-token (merged on "
             "its own), each int an id that passes through.");

static PyObject *Model_encode(Model *self, PyObject *arg) {
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "items must be a list");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(arg), length = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *it = PyList_GET_ITEM(arg, i);
        length += PyUnicode_Check(it) ? PyUnicode_GET_LENGTH(it) : 1;
    }
    Call c;
    call_begin(&c, length);
    CallStats st = {0, 0, 0};
    int rc = 0;
    for (Py_ssize_t i = 0; i < count && rc == 0; i++) {
        PyObject *it = PyList_GET_ITEM(arg, i);
        if (PyLong_Check(it)) {
            int32_t id;
            if (item_id(it, &id) < 0) {
                call_end(&c);
                return NULL;
            }
            rc = buf_push(c.b, id);
            continue;
        }
        if (!PyUnicode_Check(it)) {
            call_end(&c);
            PyErr_SetString(PyExc_TypeError, "items must be str or int");
            return NULL;
        }
        uint32_t stack[STACK_TEXT], *t = NULL;
        Py_ssize_t n = load_text(it, &t, 0, 0, stack, &c);
        if (n < 0) {
            rc = -1;
            break;
        }
        if (n > RELEASE_FROM) {
            Py_BEGIN_ALLOW_THREADS
            rc = cached_segment(self, c.sc, t, n, c.b, &st);
            Py_END_ALLOW_THREADS
        } else {
            rc = cached_segment(self, c.sc, t, n, c.b, &st);
        }
        call_text_done(&c, t, stack);
    }
    wc_account(self->cache, &st);
    PyObject *list = finish(self, c.b, rc);
    call_end(&c);
    return list;
}

PyDoc_STRVAR(cache_stats_doc, "cache_stats() -> (hits, misses, size, max_size) of the word cache.");

static PyObject *Model_cache_stats(Model *self, PyObject *unused) {
    return wc_stats_tuple(self->cache);
}

PyDoc_STRVAR(clear_cache_doc, "clear_cache(): drop every entry of the word cache and reset its counters.");

static PyObject *Model_clear_cache(Model *self, PyObject *unused) {
    WordCache *c = self->cache;
    if (!c) Py_RETURN_NONE;
    Py_BEGIN_ALLOW_THREADS wc_clear(c);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* ---- dump / load -------------------------------------------------------------------------------------------- */

/* The built tables as one little-endian buffer (``Model.dump``), rebuilt by ``Model.load`` without the pieces:
 *   header   "SPBPDUMP", u32 version (DUMP_VERSION), u32 flags (1 byte_fallback, 2 out_is_sym), i32 unk_id, u32 0,
 *            u64 n_pieces, u64 n_syms, u64 n_chars, u64 n_pairs, u64 n_user, u64 user_total, i32 bytes[256]
 *   symbols  n_syms x (i32 output id, u32 length | unused << 31)
 *   chars    n_chars x (u32 code point, i32 symbol, i32 output id), by code point: the BMP ones with a symbol or an
 *            output id, and every code point of the astral table
 *   pairs    n_pairs x (u32 left, u32 right, u32 merged, u32 rank), by (left, right)
 *   bigrams  FILTER_BITS / 64 u64
 *   user     n_user x (u32 length, i32 output id), then user_total u32 code points (the pieces in order)
 *   low      u64 count, then count u64: low_bigrams (count: one row per code point below LOW_CHARS with a symbol)
 *   checksum u64 over all the bytes before it
 * The pair table, its filter and the per-symbol sides are rebuilt from the pairs, the user-defined lookup from the
 * user pieces; the dump of a loaded model is the same bytes. */
#define DUMP_VERSION 2
#define DUMP_HEADER (8 + 4 + 4 + 4 + 4 + 8 * 6 + 4 * 256)
#define BIGRAM_WORDS (FILTER_BITS / 64)
#define MAX_CP 0x110000u

#define DUMP_SEED 0x7370627065646D70ULL /* this format's checksum seed (dump_bytes.h) */

typedef struct {
    uint64_t key; /* pair_key(left, right) */
    int32_t sym, rank;
} PairEntry;

static int cmp_pair_entry(const void *a, const void *b) {
    uint64_t x = ((const PairEntry *)a)->key, y = ((const PairEntry *)b)->key;
    return (x > y) - (x < y);
}

PyDoc_STRVAR(dump_doc, "dump() -> bytes: the built tables, for Model.load (a versioned little-endian layout).");

static PyObject *Model_dump(Model *self, PyObject *unused) {
    size_t n_astral = 0, n_chars = 0, n_pairs = 0, k = 0;
    for (uint32_t c = 0; c < BMP; c++) n_chars += self->bmp[c].sym >= 0 || self->bmp[c].out >= 0;
    if (self->astral)
        for (size_t j = 0; j <= self->astral_mask; j++) n_astral += self->astral[j].cp != UINT32_MAX;
    n_chars += n_astral;
    if (self->pairs16) {
        for (size_t j = 0; j <= self->pair_mask; j++) n_pairs += self->pairs16[j] != UINT64_MAX;
    } else {
        for (size_t j = 0; j <= self->pair_mask; j++) n_pairs += self->pairs[j].key != UINT64_MAX;
    }
    uint64_t user_total = 0;
    for (Py_ssize_t u = 0; u < self->n_user; u++) user_total += (uint64_t)self->user_len[u];
    uint32_t *astral = (uint32_t *)malloc(n_astral * sizeof(uint32_t) + 4);
    PairEntry *pe = (PairEntry *)malloc(n_pairs * sizeof(PairEntry) + 1);
    if (!astral || !pe) {
        free(astral), free(pe);
        return PyErr_NoMemory();
    }
    if (self->astral)
        for (size_t j = 0; j <= self->astral_mask; j++)
            if (self->astral[j].cp != UINT32_MAX) astral[k++] = self->astral[j].cp;
    qsort(astral, n_astral, sizeof(uint32_t), cmp_u32);
    k = 0;
    for (size_t j = 0; j <= self->pair_mask; j++) {
        if (self->pairs16) {
            uint64_t v = self->pairs16[j];
            if (v == UINT64_MAX) continue;
            uint32_t key = (uint32_t)(v >> 32);
            pe[k].key = pair_key((int32_t)(key >> 16), (int32_t)(key & 0xFFFF));
            pe[k].sym = (int32_t)((v >> 16) & 0xFFFF);
            pe[k].rank = (int32_t)(v & 0xFFFF);
        } else {
            if (self->pairs[j].key == UINT64_MAX) continue;
            pe[k].key = self->pairs[j].key;
            pe[k].sym = self->pairs[j].sym;
            pe[k].rank = self->pairs[j].rank;
        }
        k++;
    }
    qsort(pe, n_pairs, sizeof(PairEntry), cmp_pair_entry);
    size_t total = DUMP_HEADER + 8 * (size_t)self->n_syms + 12 * n_chars + 16 * n_pairs + 8 * BIGRAM_WORDS +
                   8 * (size_t)self->n_user + 4 * (size_t)user_total + 8 + 8 * self->n_low_words + 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) {
        free(astral), free(pe);
        return NULL;
    }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out), *q = p;
    memcpy(q, "SPBPDUMP", 8), q += 8;
    put_u32(q, DUMP_VERSION), q += 4;
    put_u32(q, (uint32_t)(self->byte_fallback ? 1 : 0) | (self->out_is_sym ? 2 : 0)), q += 4;
    put_u32(q, (uint32_t)self->unk_id), q += 4;
    put_u32(q, 0), q += 4;
    put_u64(q, (uint64_t)self->n_pieces), q += 8;
    put_u64(q, (uint64_t)self->n_syms), q += 8;
    put_u64(q, (uint64_t)n_chars), q += 8;
    put_u64(q, (uint64_t)n_pairs), q += 8;
    put_u64(q, (uint64_t)self->n_user), q += 8;
    put_u64(q, user_total), q += 8;
    for (int b = 0; b < 256; b++) put_u32(q, (uint32_t)self->bytes[b]), q += 4;
    for (Py_ssize_t s = 0; s < self->n_syms; s++) {
        put_u32(q, (uint32_t)self->sym_out[s]);
        put_u32(q + 4, (uint32_t)self->sym_len[s] | (self->sym_unused[s] ? 0x80000000u : 0)), q += 8;
    }
    for (uint32_t c = 0; c < BMP; c++) {
        const CharSlot *cs = &self->bmp[c];
        if (cs->sym < 0 && cs->out < 0) continue;
        put_u32(q, c), put_u32(q + 4, (uint32_t)cs->sym), put_u32(q + 8, (uint32_t)cs->out), q += 12;
    }
    for (size_t j = 0; j < n_astral; j++) {
        const CharSlot *cs = astral_get(self, astral[j]);
        put_u32(q, astral[j]), put_u32(q + 4, (uint32_t)cs->sym), put_u32(q + 8, (uint32_t)cs->out), q += 12;
    }
    for (size_t j = 0; j < n_pairs; j++) {
        put_u32(q, (uint32_t)(pe[j].key >> 32)), put_u32(q + 4, (uint32_t)(pe[j].key & 0xFFFFFFFFu));
        put_u32(q + 8, (uint32_t)pe[j].sym), put_u32(q + 12, (uint32_t)pe[j].rank), q += 16;
    }
    free(astral), free(pe);
    for (size_t j = 0; j < BIGRAM_WORDS; j++) put_u64(q, self->bigrams[j]), q += 8;
    for (Py_ssize_t u = 0; u < self->n_user; u++)
        put_u32(q, (uint32_t)self->user_len[u]), put_u32(q + 4, (uint32_t)self->user_out[u]), q += 8;
    for (Py_ssize_t u = 0; u < self->n_user; u++)
        for (Py_ssize_t c = 0; c < self->user_len[u]; c++) put_u32(q, self->user_pool[self->user_start[u] + c]), q += 4;
    put_u64(q, (uint64_t)self->n_low_words), q += 8;
    for (size_t j = 0; j < self->n_low_words; j++) put_u64(q, self->low_bigrams[j]), q += 8;
    put_u64(q, dump_checksum(p, (size_t)(q - p), DUMP_SEED));
    return out;
}

static PyObject *dump_error(const char *what) {
    PyErr_Format(PyExc_ValueError, "damaged SentencePiece BPE model dump: %s", what);
    return NULL;
}

/* The model of a dump, validated (layout, counts, length and checksum first; then every id below n_pieces, every
 * symbol below n_syms, every code point below 0x110000 and in order, every rank below n_pieces, one entry per
 * pair, a single-character symbol for each character, each pair's merged length the sum of its halves', so
 * splitting a piece back never leaves its text, and one bigram row per character below LOW_CHARS with a symbol);
 * ValueError for anything else. Time and memory are linear in the buffer (plus fixed tables). */
static PyObject *model_from_dump(PyTypeObject *type, const unsigned char *p, size_t n, Py_ssize_t cache_size) {
    if (n < DUMP_HEADER + 8) return dump_error("too short");
    if (memcmp(p, "SPBPDUMP", 8) != 0) return dump_error("bad magic");
    if (get_u32(p + 8) != DUMP_VERSION) return dump_error("unsupported version");
    uint32_t flags = get_u32(p + 12);
    int32_t unk_id = (int32_t)get_u32(p + 16);
    if (flags & ~3u || get_u32(p + 20) != 0) return dump_error("bad flags");
    uint64_t n_pieces = get_u64(p + 24), n_syms = get_u64(p + 32), n_chars = get_u64(p + 40);
    uint64_t n_pairs = get_u64(p + 48), n_user = get_u64(p + 56), user_total = get_u64(p + 64);
    if (n_pieces < 1 || n_pieces >= (1 << 24) - 1 || n_syms < n_pieces || n_syms > n / 8 || n_chars > MAX_CP ||
        n_chars > n / 12 || n_pairs > n / 16 || n_user > n / 8 || user_total > n / 4)
        return dump_error("counts out of range");
    uint64_t low_at = DUMP_HEADER + 8 * n_syms + 12 * n_chars + 16 * n_pairs + 8 * (uint64_t)BIGRAM_WORDS +
                      8 * n_user + 4 * user_total;
    if (low_at + 16 > n) return dump_error("length does not match the counts");
    uint64_t n_low_words = get_u64(p + low_at);
    if (n_low_words > n / 8 || low_at + 8 + 8 * n_low_words + 8 != n)
        return dump_error("length does not match the counts");
    if (get_u64(p + n - 8) != dump_checksum(p, n - 8, DUMP_SEED)) return dump_error("checksum mismatch");
    if (unk_id < 0 || (uint64_t)unk_id >= n_pieces) return dump_error("unknown id out of range");
    const unsigned char *q = p + 72;
    int32_t bytes[256];
    for (int b = 0; b < 256; b++, q += 4) {
        bytes[b] = (int32_t)get_u32(q);
        if (bytes[b] < -1 || (int64_t)bytes[b] >= (int64_t)n_pieces) return dump_error("byte id out of range");
    }
    Model *self = (Model *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    const char *bad = NULL;
    self->unk_id = unk_id;
    self->byte_fallback = (flags & 1) != 0;
    self->out_is_sym = (flags & 2) != 0;
    memcpy(self->bytes, bytes, sizeof(bytes));
    self->n_syms = (Py_ssize_t)n_syms;
    self->sym_out = (int32_t *)malloc((size_t)(n_syms + 1) * sizeof(int32_t));
    self->sym_len = (int32_t *)calloc((size_t)n_syms + 1, sizeof(int32_t));
    self->sym_unused = (uint8_t *)calloc((size_t)n_syms + 1, 1);
    self->sym_side = (uint8_t *)calloc((size_t)n_syms + 1, 1);
    self->bmp = (CharSlot *)malloc(BMP * sizeof(CharSlot));
    self->bigrams = (uint64_t *)malloc(BIGRAM_WORDS * sizeof(uint64_t));
    if (!self->sym_out || !self->sym_len || !self->sym_unused || !self->sym_side || !self->bmp || !self->bigrams)
        goto nomem;
    for (uint64_t s = 0; s < n_syms; s++, q += 8) {
        int32_t out = (int32_t)get_u32(q);
        uint32_t lf = get_u32(q + 4);
        if (out < -1 || (int64_t)out >= (int64_t)n_pieces) {
            bad = "symbol output id out of range";
            goto fail;
        }
        self->sym_out[s] = out;
        self->sym_len[s] = (int32_t)(lf & 0x7FFFFFFFu);
        self->sym_unused[s] = (uint8_t)(lf >> 31);
        if (lf >> 31) self->has_unused = 1;
    }
    for (uint32_t c = 0; c < BMP; c++) self->bmp[c].cp = c, self->bmp[c].sym = -1, self->bmp[c].out = -1;
    {
        const unsigned char *cq = q;
        uint64_t n_astral = 0;
        int64_t last = -1;
        for (uint64_t i = 0; i < n_chars; i++, cq += 12) {
            uint32_t cp = get_u32(cq);
            int32_t sym = (int32_t)get_u32(cq + 4), out = (int32_t)get_u32(cq + 8);
            if (cp >= MAX_CP || (int64_t)cp <= last) {
                bad = "character entries out of order or range";
                goto fail;
            }
            last = cp;
            if (sym < -1 || (int64_t)sym >= (int64_t)n_syms || (sym >= 0 && self->sym_len[sym] != 1) || out < -1 ||
                (int64_t)out >= (int64_t)n_pieces) {
                bad = "character entry out of range";
                goto fail;
            }
            if (cp < BMP) {
                self->bmp[cp].sym = sym;
                self->bmp[cp].out = out;
            } else {
                n_astral++;
            }
        }
        if (n_astral) {
            if (astral_alloc(self, (size_t)n_astral)) goto nomem;
            cq = q;
            for (uint64_t i = 0; i < n_chars; i++, cq += 12) {
                uint32_t cp = get_u32(cq);
                if (cp < BMP) continue;
                size_t j = (size_t)mix64(cp) & self->astral_mask;
                while (self->astral[j].cp != UINT32_MAX) j = (j + 1) & self->astral_mask;
                self->astral[j].cp = cp;
                self->astral[j].sym = (int32_t)get_u32(cq + 4);
                self->astral[j].out = (int32_t)get_u32(cq + 8);
            }
        }
        q = cq;
    }
    {
        size_t cap = pow2_at_least((size_t)n_pairs * 2 + 1);
        int compact = n_syms < 0xFFFF; /* as at construction: symbols and ranks fit in 16 bits */
        if (compact) {
            self->pairs16 = (uint64_t *)malloc(cap * sizeof(uint64_t));
            if (!self->pairs16) goto nomem;
            memset(self->pairs16, 0xFF, cap * sizeof(uint64_t));
        } else {
            self->pairs = (PairSlot *)malloc(cap * sizeof(PairSlot));
            if (!self->pairs) goto nomem;
            for (size_t j = 0; j < cap; j++) self->pairs[j].key = UINT64_MAX;
        }
        self->pair_mask = cap - 1;
        for (uint64_t i = 0; i < n_pairs; i++, q += 16) {
            uint32_t a = get_u32(q), b = get_u32(q + 4), ms = get_u32(q + 8), rank = get_u32(q + 12);
            if (a >= n_syms || b >= n_syms || ms >= n_pieces || rank >= n_pieces) {
                bad = "pair entry out of range";
                goto fail;
            }
            int64_t la = self->sym_len[a], lb = self->sym_len[b];
            if (la < 1 || lb < 1 || la + lb != (int64_t)self->sym_len[ms] ||
                (self->out_is_sym && self->sym_out[ms] != (int32_t)ms)) {
                bad = "pair entry inconsistent with its symbols";
                goto fail;
            }
            if (compact) {
                uint32_t key = (a << 16) | b;
                size_t j = (size_t)mix64(key) & self->pair_mask;
                for (; self->pairs16[j] != UINT64_MAX; j = (j + 1) & self->pair_mask)
                    if ((uint32_t)(self->pairs16[j] >> 32) == key) {
                        bad = "pair listed twice";
                        goto fail;
                    }
                self->pairs16[j] = ((uint64_t)key << 32) | ((uint64_t)ms << 16) | (uint64_t)rank;
            } else {
                uint64_t key = pair_key((int32_t)a, (int32_t)b);
                size_t j = (size_t)mix64(key) & self->pair_mask;
                for (; self->pairs[j].key != UINT64_MAX; j = (j + 1) & self->pair_mask)
                    if (self->pairs[j].key == key) {
                        bad = "pair listed twice";
                        goto fail;
                    }
                self->pairs[j].key = key;
                self->pairs[j].sym = (int32_t)ms;
                self->pairs[j].rank = (int32_t)rank;
            }
            self->sym_side[a] |= 1;
            self->sym_side[b] |= 2;
        }
        self->n_pairs = (Py_ssize_t)n_pairs;
    }
    if (fill_filter(self) < 0) goto nomem;
    for (size_t j = 0; j < BIGRAM_WORDS; j++, q += 8) self->bigrams[j] = get_u64(q);
    if (n_user) {
        if (user_alloc(self, (Py_ssize_t)n_user, (Py_ssize_t)user_total) < 0) goto error;
        uint64_t at = 0;
        for (uint64_t u = 0; u < n_user; u++, q += 8) {
            uint32_t len = get_u32(q);
            int32_t out = (int32_t)get_u32(q + 4);
            if (len < 1 || len > user_total - at || out < -1 || (int64_t)out >= (int64_t)n_pieces) {
                bad = "user-defined piece out of range";
                goto fail;
            }
            self->user_start[u] = (Py_ssize_t)at;
            self->user_len[u] = (Py_ssize_t)len;
            self->user_out[u] = out;
            at += len;
        }
        if (at != user_total) {
            bad = "user-defined pieces do not fill their pool";
            goto fail;
        }
        for (uint64_t c = 0; c < user_total; c++, q += 4) {
            uint32_t cp = get_u32(q);
            if (cp >= MAX_CP) {
                bad = "user-defined code point out of range";
                goto fail;
            }
            self->user_pool[c] = cp;
        }
        if (user_tables(self) < 0) goto error;
    } else if (user_total) {
        bad = "user-defined code points without pieces";
        goto fail;
    }
    if (low_alloc(self) < 0) goto nomem;
    if (get_u64(q) != self->n_low_words) {
        bad = "bigram rows do not match the characters";
        goto fail;
    }
    q += 8;
    for (size_t j = 0; j < self->n_low_words; j++, q += 8) self->low_bigrams[j] = get_u64(q);
    self->id_objs = (PyObject **)calloc((size_t)n_pieces + 1, sizeof(PyObject *));
    if (!self->id_objs) goto nomem;
    self->n_pieces = (Py_ssize_t)n_pieces;
    for (uint64_t i = 0; i < n_pieces; i++)
        if (!(self->id_objs[i] = PyLong_FromSsize_t((Py_ssize_t)i))) goto error;
    if (cache_size > 0 && !(self->cache = wc_new((size_t)cache_size, sizeof(WCSlot)))) goto nomem;
    return (PyObject *)self;
nomem:
    PyErr_NoMemory();
error:
    Py_DECREF(self);
    return NULL;
fail:
    Py_DECREF(self);
    return dump_error(bad);
}

PyDoc_STRVAR(load_doc, "Model.load(buffer, cache_size=0) -> Model: the model of a Model.dump() buffer (any bytes-like "
                       "object) with a word cache of cache_size slots; ValueError when it is damaged (layout, "
                       "lengths, checksum, ids, symbols, ranks, code points).");

static PyObject *Model_load(PyObject *cls, PyObject *args, PyObject *kwds) {
    Py_buffer view;
    Py_ssize_t cache_size = 0;
    static char *kwlist[] = {"buffer", "cache_size", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*|n", kwlist, &view, &cache_size)) return NULL;
    if (cache_size < 0 || cache_size > ((Py_ssize_t)1 << 26)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "cache_size must be in 0..2**26");
        return NULL;
    }
    PyObject *out = model_from_dump((PyTypeObject *)cls, (const unsigned char *)view.buf, (size_t)view.len,
                                    cache_size);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *Model_n_pieces(Model *self, void *closure) { return PyLong_FromSsize_t(self->n_pieces); }

static PyObject *Model_n_pairs(Model *self, void *closure) { return PyLong_FromSsize_t(self->n_pairs); }

static PyMethodDef Model_methods[] = {
    {"encode_text", (PyCFunction)(void (*)(void))Model_encode_text, METH_FASTCALL, encode_text_doc},
    {"encode_texts", (PyCFunction)(void (*)(void))Model_encode_texts, METH_FASTCALL, encode_texts_doc},
    {"tokenize", (PyCFunction)Model_tokenize, METH_O, tokenize_doc},
    {"encode", (PyCFunction)Model_encode, METH_O, encode_doc},
    {"cache_stats", (PyCFunction)Model_cache_stats, METH_NOARGS, cache_stats_doc},
    {"clear_cache", (PyCFunction)Model_clear_cache, METH_NOARGS, clear_cache_doc},
    {"dump", (PyCFunction)Model_dump, METH_NOARGS, dump_doc},
    {"load", (PyCFunction)(void (*)(void))Model_load, METH_VARARGS | METH_KEYWORDS | METH_CLASS, load_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Model_getset[] = {
    {"n_pairs", (getter)Model_n_pairs, NULL, "number of (left, right) symbol pairs that merge", NULL},
    {"n_pieces", (getter)Model_n_pieces, NULL, "number of pieces (ids)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._spbpe.Model",
    .tp_basicsize = sizeof(Model),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SentencePiece BPE by piece score: Model(pieces, ranks, unk_id, byte_fallback, user, unused, cache_size=0); "
              "Model.load(Model.dump(), cache_size) is the same model.",
    .tp_methods = Model_methods,
    .tp_getset = Model_getset,
    .tp_new = Model_new,
};

static struct PyModuleDef spbpe_module = {
    PyModuleDef_HEAD_INIT, "_spbpe", "Compiled SentencePiece BPE (merging by piece score).", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__spbpe(void) {
    if (PyType_Ready(&ModelType) < 0) return NULL;
    PyObject *m = PyModule_Create(&spbpe_module);
    if (!m) return NULL;
    Py_INCREF(&ModelType);
    if (PyModule_AddObject(m, "Model", (PyObject *)&ModelType) < 0) {
        Py_DECREF(&ModelType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "HEAP_FROM", HEAP_FROM);
    PyModule_AddIntConstant(m, "DUMMY_PREFIX", F_DUMMY);
    PyModule_AddIntConstant(m, "REMOVE_EXTRA_WHITESPACES", F_REMOVE);
    PyModule_AddIntConstant(m, "ESCAPE_WHITESPACES", F_ESCAPE);
    PyModule_AddIntConstant(m, "WHITESPACE_AS_SUFFIX", F_SUFFIX);
    PyModule_AddIntConstant(m, "SPLIT", F_SPLIT);
    return m;
}
