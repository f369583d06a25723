/*
 * train_unigram.c: the compiled hot loops of the Unigram learner (app/engine/training/unigram.py), part of
 * app.engine._native._trainer (the module registers `unigram_methods` and `UnigramWordsType`).
 *
 * UnigramWords(words, freqs, max_len) holds the distinct words as code points with their frequencies. On it:
 *
 *   seed(space, flags, max_len, min_count, limit) the substring candidates of learn_unigram's step 1
 *   set_pieces(pieces)                             the current pieces, as a trie (node, code point) -> node
 *   e_step(scores, threads)                        _em_step: expected counts and the log-likelihood
 *   prune(scores, protected, keep, threads)        _prune: which pieces stay
 *
 * Exactness: every floating-point value is computed with the same operations in the same order as the Python
 * reference (libm exp/log/log1p, no contraction), so the results are the same bits:
 *  - the E-step computes each edge's posterior count in the word's own thread and stores it; the counts are then
 *    added into the totals in corpus order (word by word, edge by edge), exactly the order of the Python loop,
 *    so the sums do not depend on the number of threads;
 *  - the Viterbi counts of the pruning are sums of integer word frequencies (exact in doubles), so per-thread
 *    partial sums add up to the same totals in any order.
 * The lattice of a word is the Python one: edges by start, then end, pieces of at most max_len code points.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hash_mix.h"
#include "sp_rules.h"

#define UW_MAX_THREADS 8
#define UW_CHUNK_WORDS 2048


/* ------------------------------------------------------------------------------------------------ trie */

/* Open addressing on (parent node, code point). A node is its slot's index + 1 (0 = the root, never a piece), and
   the slot holds the piece id of its node too, so one probe of a walk gives both the node and its piece. Node ids
   depend on the table size, so the table is sized once per build (the build restarts larger when it fills). */
typedef struct {
    uint64_t key; /* ((parent << 21) | cp) + 1; 0 = empty */
    int32_t pid;  /* piece id of the node, or -1 */
    int32_t pad;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
    size_t used, limit;
} Trie;

#define TRIE_LOAD 0.7

static void trie_free(Trie *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* An empty trie with room for at least `expect` nodes. */
static int trie_init(Trie *t, size_t expect)
{
    size_t slots = 1024;
    while ((double)slots * TRIE_LOAD < (double)expect)
        slots <<= 1;
    t->slots = malloc(slots * sizeof *t->slots);
    if (!t->slots)
        return -1;
    for (size_t i = 0; i < slots; i++)
        t->slots[i] = (Slot){0, -1, 0};
    t->mask = slots - 1;
    t->used = 0;
    t->limit = (size_t)((double)slots * TRIE_LOAD);
    return 0;
}

/* The slot of node's child for cp, or NULL. */
static inline const Slot *trie_child(const Trie *t, int32_t node, uint32_t cp)
{
    uint64_t key = (((uint64_t)node << 21) | cp) + 1;
    size_t i = mix64(key) & t->mask;
    for (;;) {
        const Slot *sl = &t->slots[i];
        if (sl->key == key)
            return sl;
        if (!sl->key)
            return NULL;
        i = (i + 1) & t->mask;
    }
}

static inline int32_t trie_node_of(const Trie *t, const Slot *sl) { return (int32_t)(sl - t->slots) + 1; }

static inline void trie_set_pid(Trie *t, int32_t node, int32_t pid) { t->slots[node - 1].pid = pid; }

/* The child of node for cp, created if missing; -1 when the table is full (rebuild it larger), -2 when the node
   ids would not fit. */
static int32_t trie_step(Trie *t, int32_t node, uint32_t cp)
{
    uint64_t key = (((uint64_t)node << 21) | cp) + 1;
    size_t i = mix64(key) & t->mask;
    for (;;) {
        Slot *sl = &t->slots[i];
        if (sl->key == key)
            return (int32_t)i + 1;
        if (!sl->key)
            break;
        i = (i + 1) & t->mask;
    }
    if (t->used >= t->limit)
        return -1;
    if (t->mask >= (size_t)INT32_MAX - 1)
        return -2;
    t->slots[i].key = key;
    t->slots[i].pid = -1;
    t->used++;
    return (int32_t)i + 1;
}

/* ------------------------------------------------------------------------------------------------ object */

typedef struct {
    PyObject_HEAD
    uint32_t *chars; /* the words' code points, concatenated */
    int64_t *off;    /* word k is chars[off[k] .. off[k+1]) */
    double *freq;    /* frequencies (integers, as the Python code's int * float gives) */
    Py_ssize_t n_words;
    int max_len;
    int64_t longest; /* longest word */
    Trie trie;
    int have_pieces;
    Py_ssize_t n_pieces;
    uint32_t *pchars; /* the pieces' code points */
    int64_t *poff;
    /* learn() only: the words' lattices over a superset of the pieces, by store id, and store id -> piece id */
    const struct LatCache *cache;
    const int32_t *idx_of;
} UWObject;

/* Every word's edges (start, length, store id) for the pieces the cache was built with: the lattice of a subset
   of them is these edges without the dropped pieces', in the same order. */
typedef struct LatCache {
    int32_t *start;
    uint16_t *len;
    int32_t *sid;
    int64_t *woff; /* word k: edges woff[k] .. woff[k + 1] */
    size_t n, cap;
    Py_ssize_t built_for;
} LatCache;

static void uw_clear_pieces(UWObject *self)
{
    trie_free(&self->trie);
    free(self->pchars);
    free(self->poff);
    self->pchars = NULL;
    self->poff = NULL;
    self->have_pieces = 0;
    self->n_pieces = 0;
}

static void uw_dealloc(UWObject *self)
{
    uw_clear_pieces(self);
    free(self->chars);
    free(self->off);
    free(self->freq);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Copies a str's code points to dst (which has room for its length). */
static void copy_cps(PyObject *s, uint32_t *dst)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++)
        dst[i] = (uint32_t)PyUnicode_READ(kind, data, i);
}

static int uw_init(UWObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"words", "freqs", "max_len", NULL};
    PyObject *words, *freqs;
    int max_len;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!i", kwlist, &PyList_Type, &words, &PyList_Type, &freqs,
                                     &max_len))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(words);
    if (PyList_GET_SIZE(freqs) != n) {
        PyErr_SetString(PyExc_ValueError, "words and freqs differ in length");
        return -1;
    }
    if (max_len < 1) {
        PyErr_SetString(PyExc_ValueError, "max_len must be >= 1");
        return -1;
    }
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *w = PyList_GET_ITEM(words, k);
        if (!PyUnicode_Check(w)) {
            PyErr_SetString(PyExc_TypeError, "words must be str");
            return -1;
        }
        total += PyUnicode_GET_LENGTH(w);
    }
    if (total >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the compiled Unigram learner holds fewer than 2**31 characters");
        return -1;
    }
    self->chars = malloc((size_t)(total + 1) * sizeof *self->chars);
    self->off = malloc((size_t)(n + 1) * sizeof *self->off);
    self->freq = malloc((size_t)(n + 1) * sizeof *self->freq);
    if (!self->chars || !self->off || !self->freq) {
        PyErr_NoMemory();
        return -1;
    }
    int64_t pos = 0;
    self->longest = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *w = PyList_GET_ITEM(words, k);
        long long f = PyLong_AsLongLong(PyList_GET_ITEM(freqs, k));
        if (f == -1 && PyErr_Occurred())
            return -1;
        if (f < 0 || f > (1LL << 53)) {
            PyErr_SetString(PyExc_ValueError, "frequencies must be in [0, 2**53]");
            return -1;
        }
        self->off[k] = pos;
        self->freq[k] = (double)f;
        copy_cps(w, self->chars + pos);
        pos += PyUnicode_GET_LENGTH(w);
        if (PyUnicode_GET_LENGTH(w) > self->longest)
            self->longest = PyUnicode_GET_LENGTH(w);
    }
    self->off[n] = pos;
    self->n_words = n;
    self->max_len = max_len;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ seeds */

/* A counted substring chars[off[word] + start ..][0 .. len), identified by its prefix without the last code point
   and that code point: prefix is the entry index of the prefix (len > 2) or the prefix's one code point (len 2).
   Equal (prefix, last, len) means an equal string, so the table compares these and never the characters. */
typedef struct {
    int64_t count;
    uint32_t word, start;
    uint32_t prefix, last;
    uint16_t len;
} SubEnt;

static inline uint64_t sub_key_hash(uint32_t prefix, uint32_t last, uint16_t len)
{
    return mix64((((uint64_t)prefix << 32) | last) + ((uint64_t)len << 21));
}

/* A sort key that carries its own string (qsort has no context argument). */
typedef struct {
    double key; /* sorted descending */
    const uint32_t *cps;
    uint32_t len;
    uint32_t idx;
} Key;

static int cmp_cps(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return na < nb ? -1 : (na > nb ? 1 : 0);
}

/* By key descending, then by code points (Python's str order). */
static int cmp_key(const void *x, const void *y)
{
    const Key *a = x, *b = y;
    if (a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return cmp_cps(a->cps, a->len, b->cps, b->len);
}

static inline int key_before(const Key *a, const Key *b)
{
    if (a->key != b->key)
        return a->key > b->key;
    const uint32_t *x = a->cps, *y = b->cps;
    uint32_t n = a->len < b->len ? a->len : b->len;
    for (uint32_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return x[i] < y[i];
    return a->len < b->len;
}

/* Sorts keys[0..n) in cmp_key's order (a total order on distinct strings: the result is qsort's). A bottom-up
   merge sort with the comparison inlined, insertion-sorted runs of 16; falls back to qsort without memory. */
static void sort_keys(Key *keys, size_t n)
{
    const size_t RUN = 16;
    for (size_t lo = 0; lo < n; lo += RUN) {
        size_t hi = lo + RUN < n ? lo + RUN : n;
        for (size_t i = lo + 1; i < hi; i++) {
            Key k = keys[i];
            size_t j = i;
            while (j > lo && key_before(&k, &keys[j - 1])) {
                keys[j] = keys[j - 1];
                j--;
            }
            keys[j] = k;
        }
    }
    if (n <= RUN)
        return;
    Key *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        qsort(keys, n, sizeof *keys, cmp_key);
        return;
    }
    Key *src = keys, *dst = tmp;
    for (size_t width = RUN; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = key_before(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        Key *t = src;
        src = dst;
        dst = t;
    }
    if (src != keys)
        memcpy(keys, src, n * sizeof *keys);
    free(tmp);
}

/* The seed candidates, best first: *ents_out (free it) and *sel_out (indices into it, n_out of them; free it).
   No GIL needed; -1 on memory error. */
static int seed_core(const UWObject *self, const SpRules *rules, long long min_count, Py_ssize_t limit,
                     SubEnt **ents_out, uint32_t **sel_out, size_t *n_out)
{
    int64_t max_len = self->max_len;
    if (rules->max_len >= 0 && rules->max_len < max_len)
        max_len = rules->max_len;
    size_t cap = 1 << 16, n_ents = 0;
    size_t slots = 1 << 17;
    SubEnt *ents = malloc(cap * sizeof *ents);
    uint32_t *table = malloc(slots * sizeof *table); /* index + 1; 0 = empty */
    if (!ents || !table) {
        free(ents);
        free(table);
        return -1;
    }
    memset(table, 0, slots * sizeof *table);
    int failed = 0;
    const uint32_t *chars = self->chars;
    /* Pass 1: a sketch of 2-bit saturating counts per hash bucket. A substring whose bucket holds less than 2 was
       counted less than twice, so pass 2 never stores it (most substrings of long words occur once). */
    int64_t occurrences = 0;
    for (Py_ssize_t k = 0; k < self->n_words; k++)
        occurrences += (self->off[k + 1] - self->off[k]) * (max_len - 1);
    size_t buckets = 1 << 16;
    while (buckets < (size_t)occurrences * 4 && buckets < ((size_t)1 << 28))
        buckets <<= 1;
    uint8_t *sketch = min_count >= 2 ? calloc(buckets / 4, 1) : NULL;
    if (min_count >= 2 && !sketch) {
        free(ents);
        free(table);
        return -1;
    }
    for (Py_ssize_t k = 0; sketch && k < self->n_words; k++) {
        const uint32_t *w = chars + self->off[k];
        int64_t n = self->off[k + 1] - self->off[k];
        unsigned add = self->freq[k] >= 2 ? 2 : (unsigned)self->freq[k];
        for (int64_t i = 0; i < n; i++) {
            SpScan st = {-1};
            if (sp_rule_step(rules, &st, 0, w[i]))
                continue;
            uint64_t h = 0x9e3779b97f4a7c15ULL ^ w[i];
            int64_t end = i + max_len < n ? i + max_len : n;
            for (int64_t j = i + 2; j <= end; j++) {
                uint32_t c = w[j - 1];
                if (sp_rule_step(rules, &st, (uint32_t)(j - 1 - i), c))
                    break;
                h = mix64(h ^ c) + (uint64_t)(j - i);
                size_t b = (size_t)(h >> 20) & (buckets - 1);
                unsigned v = (sketch[b >> 2] >> ((b & 3) * 2)) & 3;
                unsigned nv = v + add > 2 ? 2 : v + add;
                sketch[b >> 2] = (uint8_t)((sketch[b >> 2] & ~(3u << ((b & 3) * 2))) | (nv << ((b & 3) * 2)));
            }
        }
    }
    for (Py_ssize_t k = 0; k < self->n_words && !failed; k++) {
        const uint32_t *w = chars + self->off[k];
        int64_t n = self->off[k + 1] - self->off[k];
        int64_t f = (int64_t)self->freq[k];
        for (int64_t i = 0; i < n && !failed; i++) {
            SpScan st = {-1};
            if (sp_rule_step(rules, &st, 0, w[i]))
                continue;
            uint64_t h = 0x9e3779b97f4a7c15ULL ^ w[i];
            int64_t end = i + max_len < n ? i + max_len : n;
            uint32_t prev = 0; /* the entry of w[i..j-1) */
            for (int64_t j = i + 2; j <= end; j++) {
                uint32_t c = w[j - 1];
                if (sp_rule_step(rules, &st, (uint32_t)(j - 1 - i), c))
                    break;
                h = mix64(h ^ c) + (uint64_t)(j - i);
                if (sketch && f < 2) { /* (a substring of a word counted twice or more is counted that often) */
                    size_t b = (size_t)(h >> 20) & (buckets - 1);
                    if (((sketch[b >> 2] >> ((b & 3) * 2)) & 3) < 2)
                        break; /* counted < 2 times, and so is every extension */
                }
                uint16_t len = (uint16_t)(j - i);
                uint32_t prefix = len == 2 ? w[i] : prev;
                size_t s = sub_key_hash(prefix, c, len) & (slots - 1);
                for (;;) {
                    uint32_t e = table[s];
                    if (!e) {
                        if (n_ents == cap) {
                            SubEnt *grown = realloc(ents, cap * 2 * sizeof *ents);
                            if (!grown) {
                                failed = 1;
                                break;
                            }
                            ents = grown;
                            cap *= 2;
                        }
                        if (n_ents >= UINT32_MAX - 1) {
                            failed = 1;
                            break;
                        }
                        ents[n_ents] = (SubEnt){f, (uint32_t)k, (uint32_t)i, prefix, c, len};
                        prev = (uint32_t)n_ents;
                        table[s] = (uint32_t)++n_ents;
                        if (n_ents * 2 > slots) { /* rehash */
                            size_t ns = slots * 2;
                            uint32_t *nt = calloc(ns, sizeof *nt);
                            if (!nt) {
                                failed = 1;
                                break;
                            }
                            for (size_t q = 0; q < slots; q++) {
                                uint32_t x = table[q];
                                if (!x)
                                    continue;
                                const SubEnt *se = &ents[x - 1];
                                size_t z = sub_key_hash(se->prefix, se->last, se->len) & (ns - 1);
                                while (nt[z])
                                    z = (z + 1) & (ns - 1);
                                nt[z] = x;
                            }
                            free(table);
                            table = nt;
                            slots = ns;
                        }
                        break;
                    }
                    SubEnt *se = &ents[e - 1];
                    if (se->prefix == prefix && se->last == c && se->len == len) {
                        se->count += f;
                        prev = e - 1;
                        break;
                    }
                    s = (s + 1) & (slots - 1);
                }
            }
        }
    }
    free(table);
    free(sketch);
    if (failed) {
        free(ents);
        return -1;
    }
    size_t n_sel = 0;
    Key *keys = malloc((n_ents + 1) * sizeof *keys);
    uint32_t *sel = malloc((n_ents + 1) * sizeof *sel);
    if (!keys || !sel) {
        free(keys);
        free(sel);
        free(ents);
        return -1;
    }
    for (size_t e = 0; e < n_ents; e++)
        if (ents[e].count >= min_count && sp_rule_end_ok(rules, ents[e].last, ents[e].len)) {
            const SubEnt *se = &ents[e];
            /* count * length as a double: exact below 2**53, where the int64 product is too */
            keys[n_sel++] = (Key){(double)(se->count * se->len), chars + self->off[se->word] + se->start, se->len,
                                  (uint32_t)e};
        }
    sort_keys(keys, n_sel);
    if (limit < 0)
        limit = 0;
    *n_out = n_sel < (size_t)limit ? n_sel : (size_t)limit;
    for (size_t r = 0; r < *n_out; r++)
        sel[r] = keys[r].idx;
    free(keys);
    *ents_out = ents;
    *sel_out = sel;
    return 0;
}

/* seed(space, flags, max_len, min_count, limit) -> list[(score, str)] */
static PyObject *uw_seed(UWObject *self, PyObject *args)
{
    SpRules rules;
    long long min_count;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "LiLnn", &rules.marker, &rules.flags, &rules.max_len, &min_count, &limit))
        return NULL;
    if (self->max_len > 65535) {
        PyErr_SetString(PyExc_ValueError, "max_len too large for the compiled seed counter");
        return NULL;
    }
    SubEnt *ents;
    uint32_t *sel;
    size_t n_out;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = seed_core(self, &rules, min_count, limit, &ents, &sel, &n_out);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return PyErr_NoMemory();
    const uint32_t *chars = self->chars;
    PyObject *out = PyList_New((Py_ssize_t)n_out);
    for (size_t r = 0; out && r < n_out; r++) {
        const SubEnt *se = &ents[sel[r]];
        PyObject *s = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, chars + self->off[se->word] + se->start,
                                                se->len);
        PyObject *t = s ? Py_BuildValue("(LN)", (long long)(se->count * se->len), s) : NULL;
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)r, t);
    }
    free(sel);
    free(ents);
    return out;
}

/* ------------------------------------------------------------------------------------------------ pieces */

/* The trie of the pieces in pchars/poff (n_pieces of them); nodes_out (optional): each piece's node. -1 on memory
   error (pieces cleared). */
static int build_trie(UWObject *self, int32_t *nodes_out)
{
    trie_free(&self->trie);
    self->have_pieces = 0;
    /* every piece is a node of its own: n_pieces nodes at least (a piece of any length adds at most its length) */
    size_t expect = (size_t)self->n_pieces + (size_t)self->n_pieces / 4 + 16;
    for (;;) {
        if (trie_init(&self->trie, expect) < 0) {
            uw_clear_pieces(self);
            return -1;
        }
        int full = 0;
        for (Py_ssize_t k = 0; k < self->n_pieces && !full; k++) {
            int32_t node = 0;
            for (int64_t i = self->poff[k]; i < self->poff[k + 1]; i++) {
                uint32_t cp = self->pchars[i];
                if (cp > 0x1FFFFF) {
                    uw_clear_pieces(self);
                    return -1;
                }
                node = trie_step(&self->trie, node, cp);
                if (node == -2) {
                    uw_clear_pieces(self);
                    return -1;
                }
                if (node < 0) {
                    full = 1;
                    break;
                }
            }
            if (full)
                break;
            trie_set_pid(&self->trie, node, (int32_t)k); /* a repeated piece: the last id wins, as in the Python table */
            if (nodes_out)
                nodes_out[k] = node;
        }
        if (!full)
            break;
        expect = (self->trie.mask + 1) * 2; /* full: start again with a table twice as large */
        trie_free(&self->trie);
    }
    self->have_pieces = 1;
    return 0;
}

static PyObject *uw_set_pieces(UWObject *self, PyObject *pieces)
{
    if (!PyList_Check(pieces)) {
        PyErr_SetString(PyExc_TypeError, "pieces must be a list of str");
        return NULL;
    }
    uw_clear_pieces(self);
    Py_ssize_t n = PyList_GET_SIZE(pieces);
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *p = PyList_GET_ITEM(pieces, k);
        if (!PyUnicode_Check(p) || PyUnicode_GET_LENGTH(p) == 0) {
            PyErr_SetString(PyExc_TypeError, "pieces must be non-empty str");
            return NULL;
        }
        total += PyUnicode_GET_LENGTH(p);
    }
    self->pchars = malloc((size_t)(total + 1) * sizeof *self->pchars);
    self->poff = malloc((size_t)(n + 1) * sizeof *self->poff);
    if (!self->pchars || !self->poff) {
        uw_clear_pieces(self);
        return PyErr_NoMemory();
    }
    int64_t pos = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *p = PyList_GET_ITEM(pieces, k);
        self->poff[k] = pos;
        copy_cps(p, self->pchars + pos);
        pos += PyUnicode_GET_LENGTH(p);
    }
    self->poff[n] = pos;
    self->n_pieces = n;
    if (build_trie(self, NULL) < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------------ lattice */

typedef struct {
    int32_t *ei, *ej, *ep;
    size_t n, cap;
} Edges;

static int edges_push(Edges *e, int32_t i, int32_t j, int32_t p)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 1024;
        int32_t *a = realloc(e->ei, cap * sizeof *a);
        if (!a)
            return -1;
        e->ei = a;
        a = realloc(e->ej, cap * sizeof *a);
        if (!a)
            return -1;
        e->ej = a;
        a = realloc(e->ep, cap * sizeof *a);
        if (!a)
            return -1;
        e->ep = a;
        e->cap = cap;
    }
    e->ei[e->n] = i;
    e->ej[e->n] = j;
    e->ep[e->n] = p;
    e->n++;
    return 0;
}

static void edges_free(Edges *e)
{
    free(e->ei);
    free(e->ej);
    free(e->ep);
    memset(e, 0, sizeof *e);
}

/* The lattice of w[0..n): edges by start, then end (the Python _lattice); skip: a piece id left out. */
static int build_lattice(const UWObject *uw, const uint32_t *w, int64_t n, int32_t skip, Edges *e)
{
    e->n = 0;
    const Trie *t = &uw->trie;
    for (int64_t i = 0; i < n; i++) {
        int64_t end = i + uw->max_len < n ? i + uw->max_len : n;
        int32_t node = 0;
        for (int64_t j = i + 1; j <= end; j++) {
            const Slot *sl = trie_child(t, node, w[j - 1]);
            if (!sl)
                break;
            node = trie_node_of(t, sl);
            int32_t pid = sl->pid;
            if (pid >= 0 && pid != skip && edges_push(e, (int32_t)i, (int32_t)j, pid) < 0)
                return -1;
        }
    }
    return 0;
}

/* The lattice of word k: from the cache when there is one, else from the trie. */
static int word_lattice(const UWObject *uw, Py_ssize_t k, Edges *e)
{
    const LatCache *c = uw->cache;
    if (!c)
        return build_lattice(uw, uw->chars + uw->off[k], uw->off[k + 1] - uw->off[k], -1, e);
    e->n = 0;
    for (int64_t q = c->woff[k]; q < c->woff[k + 1]; q++) {
        int32_t pid = uw->idx_of[c->sid[q]];
        if (pid >= 0 && edges_push(e, c->start[q], c->start[q] + c->len[q], pid) < 0)
            return -1;
    }
    return 0;
}

static inline double lse(double x, double y)
{
    if (x < y) {
        double t = x;
        x = y;
        y = t;
    }
    if (y == -INFINITY)
        return x;
    return x + log1p(exp(y - x));
}

/* ------------------------------------------------------------------------------------------------ E-step */

typedef struct {
    const UWObject *uw;
    const double *s;
    Py_ssize_t from, to; /* words */
    Edges e;
    double *alpha, *beta;
    size_t cap_ab;
    /* output, in word order: per edge with a posterior, (pid, value); per word, f * z or NaN (no path) */
    int32_t *opid;
    double *oval;
    size_t on, ocap;
    double *wz;
    double *direct; /* one thread: the expected counts themselves (added in the same order as the fold) */
    int rc;
} EJob;

static int ab_reserve(EJob *j, size_t n)
{
    if (n <= j->cap_ab)
        return 0;
    double *a = realloc(j->alpha, n * sizeof *a), *b;
    if (!a)
        return -1;
    j->alpha = a;
    b = realloc(j->beta, n * sizeof *b);
    if (!b)
        return -1;
    j->beta = b;
    j->cap_ab = n;
    return 0;
}

static void *e_job(void *arg)
{
    EJob *J = arg;
    const UWObject *uw = J->uw;
    const double *s = J->s;
    J->on = 0;
    for (Py_ssize_t k = J->from; k < J->to; k++) {
        int64_t n = uw->off[k + 1] - uw->off[k];
        double f = uw->freq[k];
        J->wz[k - J->from] = NAN;
        if (n == 0)
            continue;
        if (word_lattice(uw, k, &J->e) < 0 || ab_reserve(J, (size_t)n + 1) < 0) {
            J->rc = -1;
            return NULL;
        }
        const Edges *e = &J->e;
        double *alpha = J->alpha, *beta = J->beta;
        for (int64_t i = 0; i <= n; i++)
            alpha[i] = beta[i] = -INFINITY;
        alpha[0] = 0.0;
        for (size_t q = 0; q < e->n; q++) {
            double a = alpha[e->ei[q]];
            if (a != -INFINITY)
                alpha[e->ej[q]] = lse(alpha[e->ej[q]], a + s[e->ep[q]]);
        }
        double z = alpha[n];
        if (z == -INFINITY)
            continue;
        beta[n] = 0.0;
        for (size_t q = e->n; q-- > 0;) {
            double b = beta[e->ej[q]];
            if (b != -INFINITY)
                beta[e->ei[q]] = lse(beta[e->ei[q]], b + s[e->ep[q]]);
        }
        if (J->direct) {
            double *out = J->direct;
            for (size_t q = 0; q < e->n; q++) {
                double a = alpha[e->ei[q]], b = beta[e->ej[q]];
                if (a != -INFINITY && b != -INFINITY) {
                    int32_t pid = e->ep[q];
                    out[pid] += f * exp(a + s[pid] + b - z);
                }
            }
            J->wz[k - J->from] = f * z;
            continue;
        }
        if (J->on + e->n > J->ocap) {
            size_t cap = J->ocap ? J->ocap : 4096;
            while (cap < J->on + e->n)
                cap *= 2;
            int32_t *p = realloc(J->opid, cap * sizeof *p);
            if (!p) {
                J->rc = -1;
                return NULL;
            }
            J->opid = p;
            double *v = realloc(J->oval, cap * sizeof *v);
            if (!v) {
                J->rc = -1;
                return NULL;
            }
            J->oval = v;
            J->ocap = cap;
        }
        for (size_t q = 0; q < e->n; q++) {
            double a = alpha[e->ei[q]], b = beta[e->ej[q]];
            if (a != -INFINITY && b != -INFINITY) {
                int32_t pid = e->ep[q];
                J->opid[J->on] = pid;
                J->oval[J->on] = f * exp(a + s[pid] + b - z);
                J->on++;
            }
        }
        J->wz[k - J->from] = f * z;
    }
    return NULL;
}

static void ejob_free(EJob *J)
{
    edges_free(&J->e);
    free(J->alpha);
    free(J->beta);
    free(J->opid);
    free(J->oval);
    free(J->wz);
}

static double *scores_array(UWObject *self, PyObject *scores)
{
    if (!self->have_pieces) {
        PyErr_SetString(PyExc_RuntimeError, "set_pieces() first");
        return NULL;
    }
    if (!PyList_Check(scores) || PyList_GET_SIZE(scores) != self->n_pieces) {
        PyErr_SetString(PyExc_ValueError, "scores must be a list of floats, one per piece");
        return NULL;
    }
    double *s = malloc(((size_t)self->n_pieces + 1) * sizeof *s);
    if (!s)
        return (double *)PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < self->n_pieces; k++) {
        s[k] = PyFloat_AsDouble(PyList_GET_ITEM(scores, k));
        if (s[k] == -1.0 && PyErr_Occurred()) {
            free(s);
            return NULL;
        }
    }
    return s;
}

static int e_step_core(const UWObject *self, const double *s, int threads, double *expected, double *ll);

/* e_step(scores, threads) -> (expected: list[float], log_likelihood: float) */
static PyObject *uw_e_step(UWObject *self, PyObject *args)
{
    PyObject *scores;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "O|i", &scores, &threads))
        return NULL;
    if (threads < 1 || threads > UW_MAX_THREADS) {
        PyErr_SetString(PyExc_ValueError, "threads must be in 1..8");
        return NULL;
    }
    double *s = scores_array(self, scores);
    if (!s)
        return NULL;
    double *expected = calloc((size_t)self->n_pieces + 1, sizeof *expected);
    double total_ll = 0.0;
    int rc = -1;
    if (expected) {
        Py_BEGIN_ALLOW_THREADS
        rc = e_step_core(self, s, threads, expected, &total_ll);
        Py_END_ALLOW_THREADS
    }
    free(s);
    if (rc) {
        free(expected);
        return PyErr_NoMemory();
    }
    PyObject *list = PyList_New(self->n_pieces);
    for (Py_ssize_t k = 0; list && k < self->n_pieces; k++) {
        PyObject *v = PyFloat_FromDouble(expected[k]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, k, v);
    }
    free(expected);
    if (!list)
        return NULL;
    return Py_BuildValue("(Nd)", list, total_ll);
}

/* The E-step over the current pieces with scores s: expected (zeroed, one per piece) and *ll. No GIL needed. */
static int e_step_core(const UWObject *self, const double *s, int threads, double *expected, double *ll)
{
    EJob jobs[UW_MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    int rc = 0;
    double total_ll = 0.0;
    for (int t = 0; t < threads; t++) {
        jobs[t].uw = self;
        jobs[t].s = s;
        jobs[t].direct = threads == 1 ? expected : NULL;
        jobs[t].wz = malloc(UW_CHUNK_WORDS * sizeof(double));
        if (!jobs[t].wz)
            rc = -1;
    }
    for (Py_ssize_t base = 0; base < self->n_words && !rc; base += (Py_ssize_t)threads * UW_CHUNK_WORDS) {
        pthread_t tid[UW_MAX_THREADS];
        int started[UW_MAX_THREADS] = {0};
        for (int t = 0; t < threads; t++) {
            Py_ssize_t from = base + (Py_ssize_t)t * UW_CHUNK_WORDS;
            jobs[t].from = from < self->n_words ? from : self->n_words;
            jobs[t].to = from + UW_CHUNK_WORDS < self->n_words ? from + UW_CHUNK_WORDS : self->n_words;
            if (t > 0 && jobs[t].from < jobs[t].to && pthread_create(&tid[t], NULL, e_job, &jobs[t]) == 0)
                started[t] = 1;
        }
        e_job(&jobs[0]);
        for (int t = 1; t < threads; t++) {
            if (started[t])
                pthread_join(tid[t], NULL);
            else if (jobs[t].from < jobs[t].to)
                e_job(&jobs[t]);
        }
        /* fold in, in corpus order */
        for (int t = 0; t < threads && !rc; t++) {
            EJob *J = &jobs[t];
            if (J->rc) {
                rc = -1;
                break;
            }
            if (J->from >= J->to)
                continue;
            size_t q;
            /* the Python loop adds a word's edge counts, then its f*z: the two sums are independent, so
               adding all edge counts of the chunk and then all its f*z in word order is the same arithmetic */
            for (q = 0; q < J->on; q++)
                expected[J->opid[q]] += J->oval[q];
            for (Py_ssize_t k = J->from; k < J->to; k++)
                if (!isnan(J->wz[k - J->from]))
                    total_ll += J->wz[k - J->from];
        }
    }
    for (int t = 0; t < threads; t++)
        ejob_free(&jobs[t]);
    *ll = total_ll;
    return rc;
}

/* ------------------------------------------------------------------------------------------------ prune */

/* The best path of the lattice e over w[0..n) into out (piece ids in order); returns its length, 0 if none,
   -1 on memory error. Ties keep the first path found (strictly better replaces), as _best_path does. */
static int64_t best_path(const Edges *e, int64_t n, const double *s, double *best, int32_t *back_i,
                         int32_t *back_p, int32_t *out)
{
    for (int64_t i = 0; i <= n; i++) {
        best[i] = -INFINITY;
        back_i[i] = 0;
        back_p[i] = -1;
    }
    best[0] = 0.0;
    for (size_t q = 0; q < e->n; q++) {
        double v = best[e->ei[q]] + s[e->ep[q]];
        if (v > best[e->ej[q]]) {
            best[e->ej[q]] = v;
            back_i[e->ej[q]] = e->ei[q];
            back_p[e->ej[q]] = e->ep[q];
        }
    }
    if (best[n] == -INFINITY)
        return 0;
    int64_t len = 0;
    for (int64_t j = n; j > 0; j = back_i[j])
        len++;
    int64_t k = len;
    for (int64_t j = n; j > 0; j = back_i[j])
        out[--k] = back_p[j];
    return len;
}

typedef struct {
    const UWObject *uw;
    const double *s;
    const uint8_t *protect;
    Py_ssize_t from, to; /* words (phase 1) or pieces (phase 2) */
    double *vfreq, *used_by, total_words;
    double *own; /* threads > 0: their private vfreq and used_by */
    Py_ssize_t *stamp; /* per piece: last word + 1 that counted it in used_by */
    /* phase 2 output per piece: alternative path offsets into alt (or -1: no alternative) */
    int64_t *alt_off, *alt_len;
    int32_t *alt;
    size_t an, acap;
    Edges e;
    double *best;
    int32_t *bi, *bp, *path;
    size_t cap;
    int rc;
} PJob;

static int pj_reserve(PJob *J, size_t n)
{
    if (n <= J->cap)
        return 0;
    double *b = realloc(J->best, n * sizeof *b);
    if (!b)
        return -1;
    J->best = b;
    int32_t *x = realloc(J->bi, n * sizeof *x);
    if (!x)
        return -1;
    J->bi = x;
    x = realloc(J->bp, n * sizeof *x);
    if (!x)
        return -1;
    J->bp = x;
    x = realloc(J->path, n * sizeof *x);
    if (!x)
        return -1;
    J->path = x;
    J->cap = n;
    return 0;
}

static void *p_job_words(void *arg)
{
    PJob *J = arg;
    const UWObject *uw = J->uw;
    for (Py_ssize_t k = J->from; k < J->to; k++) {
        int64_t n = uw->off[k + 1] - uw->off[k];
        double f = uw->freq[k];
        if (word_lattice(uw, k, &J->e) < 0 || pj_reserve(J, (size_t)n + 1) < 0) {
            J->rc = -1;
            return NULL;
        }
        int64_t len = best_path(&J->e, n, J->s, J->best, J->bi, J->bp, J->path);
        J->total_words += f;
        for (int64_t q = 0; q < len; q++) {
            int32_t pid = J->path[q];
            J->vfreq[pid] += f;
            if (J->stamp[pid] != k + 1) {
                J->stamp[pid] = k + 1;
                J->used_by[pid] += f;
            }
        }
    }
    return NULL;
}

static void *p_job_pieces(void *arg)
{
    PJob *J = arg;
    const UWObject *uw = J->uw;
    J->an = 0;
    for (Py_ssize_t pid = J->from; pid < J->to; pid++) {
        J->alt_off[pid] = -1;
        J->alt_len[pid] = 0;
        int64_t n = uw->poff[pid + 1] - uw->poff[pid];
        if (J->protect[pid] || n == 1 || J->vfreq[pid] == 0)
            continue;
        const uint32_t *p = uw->pchars + uw->poff[pid];
        if (build_lattice(uw, p, n, (int32_t)pid, &J->e) < 0 || pj_reserve(J, (size_t)n + 1) < 0) {
            J->rc = -1;
            return NULL;
        }
        int64_t len = best_path(&J->e, n, J->s, J->best, J->bi, J->bp, J->path);
        if (!len)
            continue;
        if (J->an + (size_t)len > J->acap) {
            size_t cap = J->acap ? J->acap * 2 : 4096;
            while (cap < J->an + (size_t)len)
                cap *= 2;
            int32_t *a = realloc(J->alt, cap * sizeof *a);
            if (!a) {
                J->rc = -1;
                return NULL;
            }
            J->alt = a;
            J->acap = cap;
        }
        memcpy(J->alt + J->an, J->path, (size_t)len * sizeof *J->path);
        J->alt_off[pid] = (int64_t)J->an;
        J->alt_len[pid] = len;
        J->an += (size_t)len;
    }
    return NULL;
}

static void pjob_free(PJob *J)
{
    edges_free(&J->e);
    free(J->best);
    free(J->bi);
    free(J->bp);
    free(J->path);
    free(J->alt);
    free(J->stamp);
}


static void run_jobs(PJob *jobs, int threads, void *(*fn)(void *))
{
    pthread_t tid[UW_MAX_THREADS];
    int started[UW_MAX_THREADS] = {0};
    for (int t = 1; t < threads; t++)
        if (jobs[t].from < jobs[t].to && pthread_create(&tid[t], NULL, fn, &jobs[t]) == 0)
            started[t] = 1;
    fn(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else if (jobs[t].from < jobs[t].to)
            fn(&jobs[t]);
    }
}

/* prune(scores, protected: bytes, keep, threads) -> bytes (1 = the piece stays); see _prune. */
/* _prune over the current pieces with scores s: kept[k] = 1 for each piece that stays (kept zeroed, one per
   piece). No GIL needed; -1 on memory error. */
static int prune_core(const UWObject *self, const double *s, const uint8_t *protect, Py_ssize_t keep, int threads,
                      int hf_loss, uint8_t *kept)
{
    Py_ssize_t np = self->n_pieces;
    PJob jobs[UW_MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    int rc = 0;
    double *vfreq = calloc((size_t)np + 1, sizeof *vfreq), *used_by = calloc((size_t)np + 1, sizeof *used_by);
    int64_t *alt_off = malloc(((size_t)np + 1) * sizeof *alt_off), *alt_len = malloc(((size_t)np + 1) * sizeof *alt_len);
    Key *cand = malloc(((size_t)np + 1) * sizeof *cand);
    if (!vfreq || !used_by || !alt_off || !alt_len || !cand)
        rc = -1;
    for (int t = 0; t < threads && !rc; t++) {
        PJob *J = &jobs[t];
        J->uw = self;
        J->s = s;
        J->protect = protect;
        J->from = self->n_words * t / threads;
        J->to = self->n_words * (t + 1) / threads;
        J->own = t == 0 ? NULL : calloc(2 * ((size_t)np + 1), sizeof(double));
        J->vfreq = t == 0 ? vfreq : J->own;
        J->used_by = t == 0 ? used_by : (J->own ? J->own + np + 1 : NULL);
        J->stamp = calloc((size_t)np + 1, sizeof *J->stamp);
        J->alt_off = alt_off;
        J->alt_len = alt_len;
        if (!J->vfreq || !J->used_by || !J->stamp)
            rc = -1;
    }
    double total_words = 0.0;
    Py_ssize_t n_cand = 0;
    if (!rc) {
        run_jobs(jobs, threads, p_job_words);
        for (int t = 0; t < threads; t++)
            if (jobs[t].rc)
                rc = -1;
    }
    if (!rc) {
        /* integer-valued sums: exact, so the order of the threads does not matter */
        for (int t = 1; t < threads; t++)
            for (Py_ssize_t k = 0; k < np; k++) {
                vfreq[k] += jobs[t].vfreq[k];
                used_by[k] += jobs[t].used_by[k];
            }
        for (int t = 0; t < threads; t++)
            total_words += jobs[t].total_words;
        for (int t = 0; t < threads; t++) {
            jobs[t].vfreq = vfreq;
            jobs[t].from = np * t / threads;
            jobs[t].to = np * (t + 1) / threads;
        }
        run_jobs(jobs, threads, p_job_pieces);
        for (int t = 0; t < threads; t++)
            if (jobs[t].rc)
                rc = -1;
    }
    if (!rc) {
        double vsum = 0.0;
        for (Py_ssize_t k = 0; k < np; k++)
            vsum += vfreq[k];
        if (vsum == 0.0)
            vsum = 1.0;
        double logsum = log(vsum);
        Py_ssize_t n_fixed = 0;
        for (Py_ssize_t pid = 0; pid < np; pid++) {
            int64_t n = self->poff[pid + 1] - self->poff[pid];
            if (protect[pid] || n == 1) {
                kept[pid] = 1;
                n_fixed++;
                continue;
            }
            double loss;
            if (vfreq[pid] == 0) {
                loss = -INFINITY;
            } else if (alt_off[pid] < 0) {
                loss = INFINITY;
            } else {
                int t = 0;
                while (t + 1 < threads && pid >= jobs[t + 1].from)
                    t++;
                const int32_t *alt = jobs[t].alt + alt_off[pid];
                int64_t na = alt_len[pid];
                double logprob_sp = log(vfreq[pid]) - logsum;
                /* hf_loss: Hugging Face's renormalization (the number of pieces where SentencePiece has the
                   number of alternatives) */
                double logsum_alt = log(vsum + vfreq[pid] * (double)((hf_loss ? np : na) - 1));
                double logprob_alt = 0.0;
                for (int64_t q = 0; q < na; q++)
                    logprob_alt += log(vfreq[alt[q]] + vfreq[pid]) - logsum_alt;
                double share = total_words != 0.0 ? used_by[pid] / total_words : 0.0;
                loss = share * (logprob_sp - logprob_alt);
            }
            cand[n_cand++] = (Key){loss, self->pchars + self->poff[pid], (uint32_t)n, (uint32_t)pid};
        }
        sort_keys(cand, (size_t)n_cand);
        Py_ssize_t n_keep = keep - n_fixed;
        if (n_keep < 0)
            n_keep = 0;
        for (Py_ssize_t r = 0; r < n_cand && r < n_keep; r++)
            if (cand[r].key != -INFINITY)
                kept[cand[r].idx] = 1;
    }
    for (int t = 0; t < threads; t++) {
        free(jobs[t].own);
        pjob_free(&jobs[t]);
    }
    free(vfreq);
    free(used_by);
    free(alt_off);
    free(alt_len);
    free(cand);
    return rc;
}

static PyObject *uw_prune(UWObject *self, PyObject *args)
{
    PyObject *scores;
    Py_buffer prot;
    Py_ssize_t keep;
    int threads = 1;
    int hf_loss = 0;
    if (!PyArg_ParseTuple(args, "Oy*n|ip", &scores, &prot, &keep, &threads, &hf_loss))
        return NULL;
    if (threads < 1 || threads > UW_MAX_THREADS || prot.len != self->n_pieces) {
        PyBuffer_Release(&prot);
        PyErr_SetString(PyExc_ValueError, "threads must be in 1..8 and protected one byte per piece");
        return NULL;
    }
    double *s = scores_array(self, scores);
    if (!s) {
        PyBuffer_Release(&prot);
        return NULL;
    }
    uint8_t *kept = calloc((size_t)self->n_pieces + 1, 1);
    int rc = -1;
    if (kept) {
        Py_BEGIN_ALLOW_THREADS
        rc = prune_core(self, s, prot.buf, keep, threads, hf_loss, kept);
        Py_END_ALLOW_THREADS
    }
    PyObject *out = rc ? PyErr_NoMemory() : PyBytes_FromStringAndSize((const char *)kept, self->n_pieces);
    free(kept);
    free(s);
    PyBuffer_Release(&prot);
    return out;
}

/* ------------------------------------------------------------------------------------------------ learn */

#define MIN_COUNT 1e-3

/* The digamma function of learn_unigram's Python digamma(), operation for operation. */
static double digamma(double x)
{
    double result = 0.0;
    while (x < 6.0) {
        result -= 1.0 / x;
        x += 1.0;
    }
    double inv = 1.0 / x;
    double inv2 = inv * inv;
    return result + log(x) - 0.5 * inv -
           inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 / 240)));
}

/* Every piece the learner may hold: the required characters (ids 0..n_req-1, in the caller's order), then the seeds. */
typedef struct {
    uint32_t *cps;
    int64_t *off;
    Py_ssize_t n;
} Store;

/* _normalize (log) or _m_step (digamma) of counts val[0..n) into out. */
static void scores_from_counts(const double *val, Py_ssize_t n, double *out, int use_digamma)
{
    double total = 0.0;
    for (Py_ssize_t k = 0; k < n; k++)
        total += val[k] < MIN_COUNT ? MIN_COUNT : val[k];
    double lt = use_digamma ? digamma(total) : log(total);
    for (Py_ssize_t k = 0; k < n; k++) {
        double c = val[k] < MIN_COUNT ? MIN_COUNT : val[k];
        out[k] = (use_digamma ? digamma(c) : log(c)) - lt;
    }
}

/* Sorts (cur, val) by val descending, then piece code points (_ordered). */
static int order_pieces(const Store *st, int32_t *cur, double *val, Py_ssize_t n, Key *keys)
{
    for (Py_ssize_t k = 0; k < n; k++)
        keys[k] = (Key){val[k], st->cps + st->off[cur[k]], (uint32_t)(st->off[cur[k] + 1] - st->off[cur[k]]),
                        (uint32_t)cur[k]};
    sort_keys(keys, (size_t)n);
    for (Py_ssize_t k = 0; k < n; k++) {
        cur[k] = (int32_t)keys[k].idx;
        val[k] = keys[k].key;
    }
    return 0;
}

/* The lattice pieces := store pieces cur[0..n); -1 on memory error. The trie of a superset of them is kept (only
   its piece ids change: nodes of dropped pieces are left as prefixes, which adds lookups, never edges) until the
   pieces are fewer than half of those it was built for; node_of[store id] is the node of a piece in the trie. */
static int load_pieces(UWObject *self, const Store *st, const int32_t *cur, Py_ssize_t n, int32_t *node_of,
                       Py_ssize_t *built_for, int32_t *scratch)
{
    free(self->pchars);
    free(self->poff);
    self->pchars = NULL;
    self->poff = NULL;
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++)
        total += st->off[cur[k] + 1] - st->off[cur[k]];
    self->pchars = malloc((size_t)(total + 1) * sizeof *self->pchars);
    self->poff = malloc((size_t)(n + 1) * sizeof *self->poff);
    if (!self->pchars || !self->poff) {
        uw_clear_pieces(self);
        return -1;
    }
    int64_t pos = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t len = st->off[cur[k] + 1] - st->off[cur[k]];
        self->poff[k] = pos;
        memcpy(self->pchars + pos, st->cps + st->off[cur[k]], (size_t)len * sizeof *self->pchars);
        pos += len;
    }
    self->poff[n] = pos;
    self->n_pieces = n;
    if (!self->have_pieces || n * 2 < *built_for) {
        if (build_trie(self, scratch) < 0)
            return -1;
        for (Py_ssize_t k = 0; k < n; k++)
            node_of[cur[k]] = scratch[k];
        *built_for = n;
        return 0;
    }
    for (size_t q = 0; q <= self->trie.mask; q++)
        self->trie.slots[q].pid = -1;
    for (Py_ssize_t k = 0; k < n; k++)
        trie_set_pid(&self->trie, node_of[cur[k]], (int32_t)k);
    return 0;
}

static void cache_free(LatCache *c)
{
    free(c->start);
    free(c->len);
    free(c->sid);
    free(c->woff);
    memset(c, 0, sizeof *c);
}

/* The cache of every word's lattice over the current pieces (cur: piece id -> store id); -1 on memory error. */
static int cache_build(UWObject *self, LatCache *c, const int32_t *cur)
{
    cache_free(c);
    c->woff = malloc(((size_t)self->n_words + 1) * sizeof *c->woff);
    if (!c->woff)
        return -1;
    const UWObject *plain = self; /* the lattice from the trie, not from a cache */
    Edges e = {0};
    self->cache = NULL;
    for (Py_ssize_t k = 0; k < self->n_words; k++) {
        c->woff[k] = (int64_t)c->n;
        if (build_lattice(plain, self->chars + self->off[k], self->off[k + 1] - self->off[k], -1, &e) < 0)
            goto fail;
        if (c->n + e.n > c->cap) {
            size_t cap = c->cap ? c->cap : 1 << 16;
            while (cap < c->n + e.n)
                cap *= 2;
            int32_t *st = realloc(c->start, cap * sizeof *st);
            if (!st)
                goto fail;
            c->start = st;
            uint16_t *ln = realloc(c->len, cap * sizeof *ln);
            if (!ln)
                goto fail;
            c->len = ln;
            int32_t *sd = realloc(c->sid, cap * sizeof *sd);
            if (!sd)
                goto fail;
            c->sid = sd;
            c->cap = cap;
        }
        for (size_t q = 0; q < e.n; q++) {
            c->start[c->n] = e.ei[q];
            c->len[c->n] = (uint16_t)(e.ej[q] - e.ei[q]);
            c->sid[c->n] = cur[e.ep[q]];
            c->n++;
        }
    }
    c->woff[self->n_words] = (int64_t)c->n;
    c->built_for = self->n_pieces;
    edges_free(&e);
    return 0;
fail:
    edges_free(&e);
    cache_free(c);
    return -1;
}

/* Before an E-step or pruning of learn(): idx_of for the current pieces, and the lattice cache (built from the
   second E-step on, rebuilt once the pieces are fewer than half of those it holds). -1 on memory error. */
static int prepare_lattices(UWObject *self, LatCache *cache, const int32_t *cur, Py_ssize_t n, Py_ssize_t N,
                            int32_t *idx_of, int build)
{
    for (Py_ssize_t k = 0; k < N; k++)
        idx_of[k] = -1;
    for (Py_ssize_t k = 0; k < n; k++)
        idx_of[cur[k]] = (int32_t)k;
    self->idx_of = idx_of;
    if (build && (!cache->woff || n * 2 < cache->built_for) && cache_build(self, cache, cur) < 0)
        return -1;
    self->cache = cache->woff ? cache : NULL;
    return 0;
}

static int call_progress(PyObject *progress, long done, long total)
{
    if (progress == Py_None)
        return 0;
    PyObject *r = PyObject_CallFunction(progress, "ll", done, total);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* learn(required, required_counts, space, flags, max_len, limit, vocab_size, shrinking_factor, em_iterations,
         threads, progress, hf_loss=False) -> (pieces, scores, seed_pieces, rounds, log_likelihood): learn_unigram. */
static PyObject *uw_learn(UWObject *self, PyObject *args)
{
    PyObject *required, *req_counts, *progress;
    SpRules rules;
    int em_iterations, threads;
    Py_ssize_t limit, vocab_size;
    double shrinking;
    int hf_loss = 0;
    if (!PyArg_ParseTuple(args, "O!O!LiLnndiiO|p", &PyList_Type, &required, &PyList_Type, &req_counts, &rules.marker,
                          &rules.flags, &rules.max_len, &limit, &vocab_size, &shrinking, &em_iterations, &threads,
                          &progress, &hf_loss))
        return NULL;
    Py_ssize_t n_req = PyList_GET_SIZE(required);
    if (PyList_GET_SIZE(req_counts) != n_req || threads < 1 || threads > UW_MAX_THREADS || self->max_len > 65535 ||
        vocab_size < n_req) {
        PyErr_SetString(PyExc_ValueError, "bad learn() arguments");
        return NULL;
    }
    int64_t req_chars = 0;
    for (Py_ssize_t k = 0; k < n_req; k++) {
        PyObject *c = PyList_GET_ITEM(required, k);
        if (!PyUnicode_Check(c) || PyUnicode_GET_LENGTH(c) == 0) {
            PyErr_SetString(PyExc_TypeError, "required pieces must be non-empty str");
            return NULL;
        }
        req_chars += PyUnicode_GET_LENGTH(c);
    }
    uw_clear_pieces(self); /* node ids below refer to tries this call builds */
    SubEnt *ents = NULL;
    uint32_t *sel = NULL;
    size_t n_seed = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = seed_core(self, &rules, 2, limit, &ents, &sel, &n_seed);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return PyErr_NoMemory();
    Store st = {0};
    st.n = n_req + (Py_ssize_t)n_seed;
    int64_t seed_chars = 0;
    for (size_t r = 0; r < n_seed; r++)
        seed_chars += ents[sel[r]].len;
    Py_ssize_t N = st.n;
    st.cps = malloc((size_t)(req_chars + seed_chars + 1) * sizeof *st.cps);
    st.off = malloc((size_t)(N + 1) * sizeof *st.off);
    int32_t *cur = malloc((size_t)(N + 1) * sizeof *cur);
    double *val = malloc((size_t)(N + 1) * sizeof *val), *sc = malloc((size_t)(N + 1) * sizeof *sc);
    double *by_id = malloc((size_t)(N + 1) * sizeof *by_id);
    int32_t *node_of = malloc((size_t)(N + 1) * sizeof *node_of), *scratch = malloc((size_t)(N + 1) * sizeof *scratch);
    int32_t *idx_of = malloc((size_t)(N + 1) * sizeof *idx_of);
    Py_ssize_t built_for = 0;
    LatCache cache = {0};
    int e_steps = 0;
    Key *keys = malloc((size_t)(N + 1) * sizeof *keys);
    uint8_t *protect = malloc((size_t)N + 1), *kept = malloc((size_t)N + 1);
    PyObject *result = NULL;
    if (!st.cps || !st.off || !cur || !val || !sc || !by_id || !node_of || !scratch || !idx_of || !keys || !protect || !kept) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t pos = 0;
    for (Py_ssize_t k = 0; k < n_req; k++) {
        PyObject *c = PyList_GET_ITEM(required, k);
        st.off[k] = pos;
        copy_cps(c, st.cps + pos);
        pos += PyUnicode_GET_LENGTH(c);
        val[k] = PyFloat_AsDouble(PyList_GET_ITEM(req_counts, k));
        if (val[k] == -1.0 && PyErr_Occurred())
            goto done;
        cur[k] = (int32_t)k;
    }
    for (size_t r = 0; r < n_seed; r++) {
        const SubEnt *se = &ents[sel[r]];
        Py_ssize_t k = n_req + (Py_ssize_t)r;
        st.off[k] = pos;
        memcpy(st.cps + pos, self->chars + self->off[se->word] + se->start, se->len * sizeof *st.cps);
        pos += se->len;
        val[k] = (double)(se->count * se->len);
        cur[k] = (int32_t)k;
    }
    st.off[N] = pos;
    free(ents);
    free(sel);
    ents = NULL;
    sel = NULL;

    Py_ssize_t n = N;
    order_pieces(&st, cur, val, n, keys);
    long seed_pieces = (long)n;
    scores_from_counts(val, n, sc, 0);
    Py_ssize_t target = (Py_ssize_t)((double)vocab_size * 1.1);
    double ratio = (double)n / (double)(target > 1 ? target : 1);
    long total_steps = (long)ceil(log(ratio > 1.0 ? ratio : 1.0) / -log(shrinking)); /* progress only */
    if (total_steps < 1)
        total_steps = 1;
    long rounds = 0;
    double ll = -INFINITY;
    for (;;) {
        for (int it = 0; it < em_iterations; it++) {
            if (load_pieces(self, &st, cur, n, node_of, &built_for, scratch) < 0) {
                PyErr_NoMemory();
                goto done;
            }
            memset(val, 0, (size_t)n * sizeof *val);
            Py_BEGIN_ALLOW_THREADS
            rc = prepare_lattices(self, &cache, cur, n, N, idx_of, e_steps > 0);
            if (!rc)
                rc = e_step_core(self, sc, threads, val, &ll);
            Py_END_ALLOW_THREADS
            e_steps++;
            if (rc < 0) {
                PyErr_NoMemory();
                goto done;
            }
            Py_ssize_t m = 0;
            for (Py_ssize_t k = 0; k < n; k++)
                if (val[k] >= 0.5 || cur[k] < n_req) {
                    cur[m] = cur[k];
                    val[m] = val[k];
                    m++;
                }
            n = m;
            order_pieces(&st, cur, val, n, keys);
            scores_from_counts(val, n, sc, 1);
        }
        rounds++;
        if (call_progress(progress, rounds < total_steps ? rounds : total_steps, total_steps) < 0)
            goto done;
        if (n <= target)
            break;
        Py_ssize_t keep = (Py_ssize_t)((double)n * shrinking);
        if (keep < target)
            keep = target;
        if (load_pieces(self, &st, cur, n, node_of, &built_for, scratch) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < n; k++)
            protect[k] = cur[k] < n_req;
        memset(kept, 0, (size_t)n);
        Py_BEGIN_ALLOW_THREADS
        rc = prepare_lattices(self, &cache, cur, n, N, idx_of, 1);
        if (!rc)
            rc = prune_core(self, sc, protect, keep, threads, hf_loss, kept);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t m = 0;
        for (Py_ssize_t k = 0; k < n; k++)
            if (kept[k]) {
                cur[m] = cur[k];
                val[m] = exp(sc[k]);
                m++;
            }
        n = m;
        scores_from_counts(val, n, sc, 0);
    }
    if (n > vocab_size) {
        /* required characters (in their order), then the best-scoring others */
        for (Py_ssize_t k = 0; k < n; k++)
            by_id[cur[k]] = sc[k];
        Py_ssize_t m = 0;
        for (Py_ssize_t k = 0; k < n; k++)
            if (cur[k] >= n_req)
                keys[m++] = (Key){sc[k], st.cps + st.off[cur[k]], (uint32_t)(st.off[cur[k] + 1] - st.off[cur[k]]),
                                  (uint32_t)cur[k]};
        sort_keys(keys, (size_t)m);
        Py_ssize_t take = vocab_size - n_req;
        for (Py_ssize_t k = 0; k < take; k++)
            cur[n_req + k] = (int32_t)keys[k].idx;
        for (Py_ssize_t k = 0; k < n_req; k++)
            cur[k] = (int32_t)k;
        n = vocab_size;
        for (Py_ssize_t k = 0; k < n; k++)
            val[k] = exp(by_id[cur[k]]);
        order_pieces(&st, cur, val, n, keys);
        for (Py_ssize_t k = 0; k < n; k++)
            val[k] = exp(by_id[cur[k]]);
        scores_from_counts(val, n, sc, 0);
        if (load_pieces(self, &st, cur, n, node_of, &built_for, scratch) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        memset(val, 0, (size_t)n * sizeof *val);
        Py_BEGIN_ALLOW_THREADS
        rc = prepare_lattices(self, &cache, cur, n, N, idx_of, 1);
        if (!rc)
            rc = e_step_core(self, sc, threads, val, &ll);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    uw_clear_pieces(self);
    scores_from_counts(val, n, sc, 0);
    for (Py_ssize_t k = 0; k < n; k++)
        keys[k] = (Key){sc[k], st.cps + st.off[cur[k]], (uint32_t)(st.off[cur[k] + 1] - st.off[cur[k]]),
                        (uint32_t)cur[k]};
    sort_keys(keys, (size_t)n);
    PyObject *names = PyList_New(n), *scores = PyList_New(n);
    if (!names || !scores) {
        Py_XDECREF(names);
        Py_XDECREF(scores);
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *u = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, keys[k].cps, keys[k].len);
        PyObject *f = PyFloat_FromDouble(keys[k].key);
        if (!u || !f) {
            Py_XDECREF(u);
            Py_XDECREF(f);
            Py_DECREF(names);
            Py_DECREF(scores);
            goto done;
        }
        PyList_SET_ITEM(names, k, u);
        PyList_SET_ITEM(scores, k, f);
    }
    result = Py_BuildValue("(NNlld)", names, scores, seed_pieces, rounds, ll);
done:
    self->cache = NULL;
    self->idx_of = NULL;
    cache_free(&cache);
    free(idx_of);
    uw_clear_pieces(self);
    free(ents);
    free(sel);
    free(st.cps);
    free(st.off);
    free(cur);
    free(val);
    free(sc);
    free(by_id);
    free(node_of);
    free(scratch);
    free(keys);
    free(protect);
    free(kept);
    return result;
}

/* ------------------------------------------------------------------------------------------------ type */

static Py_ssize_t uw_len(UWObject *self) { return self->n_words; }

static PyMethodDef uw_methods[] = {
    {"seed", (PyCFunction)uw_seed, METH_VARARGS,
     "seed(space, flags, max_len, min_count, limit) -> list[(count * length, substring)]: every substring of 2..max_len\n"
     "code points that the piece rules (space, flags, max_len) = PieceRules.native() allow (sp_rules.h),\n"
     "counted with the word frequencies; those counted at least min_count times, best first (score, then code\n"
     "points), at most limit."},
    {"set_pieces", (PyCFunction)uw_set_pieces, METH_O, "set_pieces(pieces: list[str]) -> None: the lattice pieces."},
    {"e_step", (PyCFunction)uw_e_step, METH_VARARGS,
     "e_step(scores, threads=1) -> (expected counts per piece, corpus log-likelihood) (GIL released)."},
    {"learn", (PyCFunction)uw_learn, METH_VARARGS,
     "learn(required, required_counts, space, flags, max_len, limit, vocab_size, shrinking_factor, em_iterations,\n"
     "      threads, progress, hf_loss=False) -> (pieces, scores, seed_pieces, rounds, log_likelihood): the whole of\n"
     "learn_unigram (seeds, EM rounds, pruning, the final cut and refit), pieces best first."},
    {"prune", (PyCFunction)uw_prune, METH_VARARGS,
     "prune(scores, protected, keep, threads=1, hf_loss=False) -> bytes: 1 for each piece that stays (GIL released)."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods uw_as_sequence = {.sq_length = (lenfunc)uw_len};

PyTypeObject UnigramWordsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._trainer.UnigramWords",
    .tp_basicsize = sizeof(UWObject),
    .tp_dealloc = (destructor)uw_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "UnigramWords(words: list[str], freqs: list[int], max_len: int): the Unigram learner's corpus.",
    .tp_methods = uw_methods,
    .tp_as_sequence = &uw_as_sequence,
    .tp_init = (initproc)uw_init,
    .tp_new = PyType_GenericNew,
};
