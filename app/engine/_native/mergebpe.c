/* BPE over an ordered merge list (Hugging Face ``tokenizers``' ``BPE`` model), compiled.
 *
 * The same algorithm as the pure-Python reference ``app/engine/pipeline/models/bpe.py`` and the same ids:
 * symbols are the code points of a pre-token (looked up as one-character tokens), a character missing from the
 * vocabulary becomes its UTF-8 bytes as ``<0xNN>`` tokens with byte fallback (when all of them exist), else the
 * unknown token (runs fused with fuse_unk), else it is dropped.  Then the pair with the lowest merge rank is
 * merged, leftmost first: a linear scan below HEAP_FROM symbols, a binary heap with lazy deletion above (the
 * reference's two loops, step for step, including its stale-entry check).  A pair listed twice keeps its last
 * rank and result.  Long pre-tokens are cut where no merge can ever join two neighbouring characters (the
 * reference's ``segments``).  ``continuing_subword_prefix``, ``end_of_word_suffix`` and ``ignore_merges`` are
 * not supported here (the Python side keeps those files on the reference).
 *
 * Tables are built from the vocabulary dict and the raw merge list in one pass (no per-merge Python objects);
 * tokenizing releases the GIL.  Objects are immutable after construction and thread-safe.  ``Model.dump()`` exports
 * the built tables as one buffer and ``Model.load(buffer)`` rebuilds the model from it without the vocabulary and
 * merge list (the artifact cache's ``merge-model`` part), validating every length, id, rank and code point.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hash_mix.h"
#include "dump_bytes.h"
#include "word_cache.h"
#include "py_items.h"
#include "id_list.h"
#include "utf8_put.h"
#include "scrub_text.h"
#include "batch_threads.h"

#define HEAP_FROM 48
#define NO_RANK INT32_MAX
#define MAX_CP 0x110000

/* ---- hashing ------------------------------------------------------------------------------------------------ */


static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return mix64(h ^ (uint64_t)n);
}

static size_t pow2_at_least(size_t n) {
    size_t m = 16;
    while (m < n) m <<= 1;
    return m;
}

/* pair (a, b) -> (rank, new): open addressing, linear probing; key UINT64_MAX = empty */
typedef struct {
    uint64_t key;
    int32_t rank;
    int32_t id;
} PairSlot;

typedef struct {
    PairSlot *slots;
    size_t mask;
} PairTable;

static inline uint64_t pair_key(uint32_t a, uint32_t b) { return ((uint64_t)a << 32) | b; }

static int pair_init(PairTable *t, size_t n) {
    size_t cap = pow2_at_least(n * 2 + 1);
    t->slots = (PairSlot *)malloc(cap * sizeof(PairSlot));
    if (!t->slots) return -1;
    for (size_t i = 0; i < cap; i++) t->slots[i].key = UINT64_MAX;
    t->mask = cap - 1;
    return 0;
}

static void pair_put(PairTable *t, uint64_t key, int32_t rank, int32_t id) {
    size_t i = (size_t)mix64(key) & t->mask;
    while (t->slots[i].key != UINT64_MAX && t->slots[i].key != key) i = (i + 1) & t->mask;
    t->slots[i].key = key;
    t->slots[i].rank = rank;
    t->slots[i].id = id;
}

static inline const PairSlot *pair_get(const PairTable *t, uint64_t key) {
    size_t i = (size_t)mix64(key) & t->mask;
    for (;;) {
        const PairSlot *s = &t->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & t->mask;
    }
}

/* build-time: token UTF-8 -> id */
typedef struct {
    const char *s;
    Py_ssize_t n;
    int32_t id;
    uint64_t h;
} StrSlot;

typedef struct {
    StrSlot *slots;
    size_t mask;
} StrTable;

static void str_put(StrTable *t, const char *s, Py_ssize_t n, int32_t id) {
    uint64_t h = hash_bytes(s, n);
    size_t i = (size_t)h & t->mask;
    while (t->slots[i].s != NULL) {
        if (t->slots[i].h == h && t->slots[i].n == n && memcmp(t->slots[i].s, s, (size_t)n) == 0) break;
        i = (i + 1) & t->mask;
    }
    t->slots[i].s = s;
    t->slots[i].n = n;
    t->slots[i].id = id;
    t->slots[i].h = h;
}

static int32_t str_get(const StrTable *t, const char *s, Py_ssize_t n) {
    uint64_t h = hash_bytes(s, n);
    size_t i = (size_t)h & t->mask;
    while (t->slots[i].s != NULL) {
        if (t->slots[i].h == h && t->slots[i].n == n && memcmp(t->slots[i].s, s, (size_t)n) == 0)
            return t->slots[i].id;
        i = (i + 1) & t->mask;
    }
    return -1;
}

/* ---- the model ---------------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    int32_t *chars;       /* code point -> id of the one-character token, -1 when absent */
    int32_t bytes[256];   /* <0xNN> ids, -1 when absent */
    int byte_fallback;
    int fuse_unk;
    int32_t unk_id;       /* -1: no unknown token */
    PairTable pairs;
    Py_ssize_t n_merges;
    /* The compact pair table, when every id is below 2^20 and there are fewer than 2^24 - 1 merges (else NULL and
     * ``pairs`` above is used): one 8-byte slot per pair, (a << 20 | b) << 24 | rank, UINT64_MAX empty; the
     * merged id is merge_out[rank]. Half the bytes of a PairSlot: more of the table stays in cache. */
    uint64_t *pairs8;
    size_t mask8;
    int32_t *merge_out;
    /* junction filters (only with cuttable): class_junctions, 256 x 256 bits over character classes
     * (char_class), exact; junction_bits, JBITS bits over a hash of two code points, 1 = maybe a junction */
    uint64_t *class_junctions;
    uint64_t *junction_bits;
    Py_ssize_t n_ids; /* highest vocabulary id + 1 */
} Model;

#define COMPACT_ID_BITS 20
#define COMPACT_RANK_BITS 24
#define JBITS (1u << 20)
#define SPACE_SYMBOL 0x2581

/* A character's class for the 256 x 256 tables: its code point below U+00FF, 0xFF for U+2581 (the metaspace of
 * SentencePiece-style files), -1 for every other character. */
static inline int char_class(uint32_t cp) { return cp < 0xFF ? (int)cp : cp == SPACE_SYMBOL ? 0xFF : -1; }

static inline uint32_t junction_bit(uint32_t a, uint32_t b) {
    return (uint32_t)(mix64(((uint64_t)a << 21) | b) >> 40) & (JBITS - 1);
}

static void junction_mark(Model *m, uint32_t a, uint32_t b) {
    int x = char_class(a), y = char_class(b);
    if (x >= 0 && y >= 0) {
        unsigned bit = ((unsigned)x << 8) | (unsigned)y;
        m->class_junctions[bit >> 6] |= 1ULL << (bit & 63);
    } else {
        uint32_t bit = junction_bit(a, b);
        m->junction_bits[bit >> 6] |= 1ULL << (bit & 63);
    }
}

/* 0: no merge joins a symbol ending with a to one starting with b (1 may be a false positive: cutting less
 * changes no id) */
static inline int junction_maybe(const Model *m, uint32_t a, uint32_t b) {
    int x = char_class(a), y = char_class(b);
    if (x >= 0 && y >= 0) {
        unsigned bit = ((unsigned)x << 8) | (unsigned)y;
        return (int)((m->class_junctions[bit >> 6] >> (bit & 63)) & 1);
    }
    uint32_t bit = junction_bit(a, b);
    return (int)((m->junction_bits[bit >> 6] >> (bit & 63)) & 1);
}

/* the merge of the pair (a, b): 1 with its rank and merged id, else 0 */
typedef struct {
    int32_t rank, id;
} Found;

static inline int pair_find(const Model *m, int32_t a, int32_t b, Found *f) {
    if (m->pairs8) {
        if ((uint32_t)a >> COMPACT_ID_BITS || (uint32_t)b >> COMPACT_ID_BITS) return 0;
        uint64_t key = ((uint64_t)(uint32_t)a << COMPACT_ID_BITS) | (uint32_t)b;
        size_t i = (size_t)mix64(key) & m->mask8;
        for (;;) {
            uint64_t v = m->pairs8[i];
            if ((v >> COMPACT_RANK_BITS) == key) {
                if (v == UINT64_MAX) return 0;
                f->rank = (int32_t)(v & ((1u << COMPACT_RANK_BITS) - 1));
                f->id = m->merge_out[f->rank];
                return 1;
            }
            if (v == UINT64_MAX) return 0;
            i = (i + 1) & m->mask8;
        }
    }
    const PairSlot *s = pair_get(&m->pairs, pair_key((uint32_t)a, (uint32_t)b));
    if (!s) return 0;
    f->rank = s->rank;
    f->id = s->id;
    return 1;
}

static void Model_dealloc(Model *self) {
    free(self->chars);
    free(self->pairs8), free(self->merge_out), free(self->class_junctions), free(self->junction_bits);
    free(self->pairs.slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Last / first code point of a UTF-8 string (valid UTF-8, n > 0). */
static uint32_t utf8_first(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) return u[0];
    if (u[0] < 0xE0) return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    if (u[0] < 0xF0) return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
           (u[3] & 0x3F);
}

static uint32_t utf8_last(const char *s, Py_ssize_t n) {
    Py_ssize_t i = n - 1;
    while (i > 0 && (((unsigned char)s[i]) & 0xC0) == 0x80) i--;
    return utf8_first(s + i);
}

static PyObject *merge_error(Py_ssize_t rank, const char *kind) {
    /* (rank, kind): the Python side words the message from the raw entry */
    PyObject *args = Py_BuildValue("(ns)", rank, kind);
    if (args) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* Switch to the compact pair table when every id is below 2^20 and there are fewer than 2^24 - 1 merges (the
 * same pairs, each with its last rank, and the merged id of each rank kept); else keep ``pairs``. -1: no memory. */
static int model_compact(Model *self) {
    Py_ssize_t nm = self->n_merges;
    if (!(self->n_ids <= ((Py_ssize_t)1 << COMPACT_ID_BITS) && nm < ((Py_ssize_t)1 << COMPACT_RANK_BITS) - 1))
        return 0;
    Py_ssize_t n_pairs = 0;
    for (size_t j = 0; j <= self->pairs.mask; j++) n_pairs += self->pairs.slots[j].key != UINT64_MAX;
    size_t cap = pow2_at_least((size_t)n_pairs * 2 + 1);
    self->pairs8 = (uint64_t *)malloc(cap * sizeof(uint64_t));
    self->merge_out = (int32_t *)malloc(((size_t)nm + 1) * sizeof(int32_t));
    if (!self->pairs8 || !self->merge_out) return -1;
    memset(self->pairs8, 0xFF, cap * sizeof(uint64_t));
    memset(self->merge_out, 0xFF, ((size_t)nm + 1) * sizeof(int32_t));
    self->mask8 = cap - 1;
    for (size_t j = 0; j <= self->pairs.mask; j++) {
        const PairSlot *ps = &self->pairs.slots[j];
        if (ps->key == UINT64_MAX) continue;
        uint64_t key = ((ps->key >> 32) << COMPACT_ID_BITS) | (ps->key & 0xFFFFFFFFu);
        size_t i = (size_t)mix64(key) & self->mask8;
        while (self->pairs8[i] != UINT64_MAX) i = (i + 1) & self->mask8;
        self->pairs8[i] = (key << COMPACT_RANK_BITS) | (uint64_t)ps->rank;
        self->merge_out[ps->rank] = ps->id;
    }
    free(self->pairs.slots);
    self->pairs.slots = NULL;
    self->pairs.mask = 0;
    return 0;
}

/* Model(vocab: dict[str, int], merges: list[str | list[str] | tuple[str, str]], byte_fallback: bool,
 *       unk_id: int, fuse_unk: bool, cuttable: bool) */
static PyObject *Model_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *vocab, *merges;
    int byte_fallback, fuse_unk, cuttable;
    int unk_id;
    static char *kwlist[] = {"vocab", "merges", "byte_fallback", "unk_id", "fuse_unk", "cuttable", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!pipp", kwlist, &PyDict_Type, &vocab, &PyList_Type, &merges,
                                     &byte_fallback, &unk_id, &fuse_unk, &cuttable))
        return NULL;
    Model *self = (Model *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->byte_fallback = byte_fallback;
    self->fuse_unk = fuse_unk;
    self->unk_id = unk_id;
    self->chars = (int32_t *)malloc(MAX_CP * sizeof(int32_t));
    StrTable vt = {NULL, 0};
    char *buf = NULL;
    Py_ssize_t bufcap = 0;
    if (!self->chars) goto nomem;
    memset(self->chars, 0xFF, MAX_CP * sizeof(int32_t));
    for (int b = 0; b < 256; b++) self->bytes[b] = -1;

    Py_ssize_t nv = PyDict_Size(vocab);
    size_t vcap = pow2_at_least((size_t)nv * 2 + 1);
    vt.slots = (StrSlot *)calloc(vcap, sizeof(StrSlot));
    if (!vt.slots) goto nomem;
    vt.mask = vcap - 1;
    {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(vocab, &pos, &k, &v)) {
            if (!PyUnicode_Check(k) || !PyLong_Check(v)) {
                PyErr_SetString(PyExc_TypeError, "vocab must map str to int");
                goto fail;
            }
            long id = PyLong_AsLong(v);
            if (id < 0 || id > INT32_MAX) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "vocab id out of range");
                goto fail;
            }
            Py_ssize_t n;
            const char *s = PyUnicode_AsUTF8AndSize(k, &n); /* owned by k, which vocab keeps alive here */
            if (!s) goto fail;
            str_put(&vt, s, n, (int32_t)id);
            if (id + 1 > self->n_ids) self->n_ids = id + 1;
            if (PyUnicode_GET_LENGTH(k) == 1) self->chars[PyUnicode_READ_CHAR(k, 0)] = (int32_t)id;
            if (n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>') {
                int hi = s[3], lo = s[4];
                int vh = (hi >= '0' && hi <= '9') ? hi - '0' : (hi >= 'A' && hi <= 'F') ? hi - 'A' + 10 : -1;
                int vl = (lo >= '0' && lo <= '9') ? lo - '0' : (lo >= 'A' && lo <= 'F') ? lo - 'A' + 10 : -1;
                if (vh >= 0 && vl >= 0) self->bytes[vh * 16 + vl] = (int32_t)id;
            }
        }
    }

    Py_ssize_t nm = PyList_GET_SIZE(merges);
    self->n_merges = nm;
    if (pair_init(&self->pairs, (size_t)nm) < 0) goto nomem;
    if (cuttable) {
        self->class_junctions = (uint64_t *)calloc(65536 / 64, sizeof(uint64_t));
        self->junction_bits = (uint64_t *)calloc(JBITS / 64, sizeof(uint64_t));
        if (!self->class_junctions || !self->junction_bits) goto nomem;
    }
    for (Py_ssize_t r = 0; r < nm; r++) {
        PyObject *item = PyList_GET_ITEM(merges, r);
        const char *ls, *rs;
        Py_ssize_t ln, rn;
        if (PyUnicode_Check(item)) {
            Py_ssize_t n;
            const char *s = PyUnicode_AsUTF8AndSize(item, &n);
            if (!s) goto fail;
            const char *sp = memchr(s, ' ', (size_t)n);
            if (!sp) {
                merge_error(r, "format");
                goto fail;
            }
            ls = s;
            ln = sp - s;
            rs = sp + 1;
            rn = n - ln - 1;
        } else if ((PyList_Check(item) || PyTuple_Check(item)) && PySequence_Fast_GET_SIZE(item) == 2 &&
                   PyUnicode_Check(PySequence_Fast_GET_ITEM(item, 0)) &&
                   PyUnicode_Check(PySequence_Fast_GET_ITEM(item, 1))) {
            ls = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(item, 0), &ln);
            if (!ls) goto fail;
            rs = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(item, 1), &rn);
            if (!rs) goto fail;
        } else {
            merge_error(r, "format");
            goto fail;
        }
        int32_t a = str_get(&vt, ls, ln), b = str_get(&vt, rs, rn);
        if (ln + rn > bufcap) {
            bufcap = (ln + rn) * 2 + 64;
            char *nb = (char *)realloc(buf, (size_t)bufcap);
            if (!nb) goto nomem;
            buf = nb;
        }
        memcpy(buf, ls, (size_t)ln);
        memcpy(buf + ln, rs, (size_t)rn);
        int32_t c = str_get(&vt, buf, ln + rn);
        if (a < 0 || b < 0 || c < 0) {
            merge_error(r, "vocab");
            goto fail;
        }
        pair_put(&self->pairs, pair_key((uint32_t)a, (uint32_t)b), (int32_t)r, c);
        if (cuttable && ln > 0 && rn > 0) junction_mark(self, utf8_last(ls, ln), utf8_first(rs));
    }
    if (model_compact(self) < 0) goto nomem;
    free(vt.slots);
    free(buf);
    return (PyObject *)self;
nomem:
    PyErr_NoMemory();
fail:
    free(vt.slots);
    free(buf);
    Py_DECREF(self);
    return NULL;
}

/* ---- tokenizing --------------------------------------------------------------------------------------------- */

typedef struct {
    int32_t *syms;
    Py_ssize_t n, cap;
} Buf;

static int buf_push(Buf *b, int32_t v) {
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 64;
        int32_t *ns = (int32_t *)realloc(b->syms, (size_t)cap * sizeof(int32_t));
        if (!ns) return -1;
        b->syms = ns;
        b->cap = cap;
    }
    b->syms[b->n++] = v;
    return 0;
}

typedef struct {
    int32_t rank;
    int32_t pos;
    int32_t id;
} HeapItem;

static inline int heap_less(const HeapItem *x, const HeapItem *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_up(HeapItem *h, Py_ssize_t i) {
    HeapItem it = h[i];
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!heap_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static void heap_down(HeapItem *h, Py_ssize_t n, Py_ssize_t i) {
    HeapItem it = h[i];
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &it)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = it;
}

/* Merge syms[0..n) in place; returns the new length, -1 on memory failure. */
static Py_ssize_t merge_scan(const Model *m, int32_t *syms, Py_ssize_t n) {
    if (n < 2) return n;
    int32_t rank[HEAP_FROM], id[HEAP_FROM];
    Py_ssize_t np = n - 1;
    for (Py_ssize_t i = 0; i < np; i++) {
        Found f;
        int ok = pair_find(m, syms[i], syms[i + 1], &f);
        rank[i] = ok ? f.rank : NO_RANK;
        id[i] = ok ? f.id : -1;
    }
    while (np > 0) {
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 1; i < np; i++)
            if (rank[i] < rank[at]) at = i;
        if (rank[at] == NO_RANK) break;
        int32_t nw = id[at];
        syms[at] = nw;
        memmove(syms + at + 1, syms + at + 2, (size_t)(n - at - 2) * sizeof(int32_t));
        n--;
        memmove(rank + at, rank + at + 1, (size_t)(np - at - 1) * sizeof(int32_t));
        memmove(id + at, id + at + 1, (size_t)(np - at - 1) * sizeof(int32_t));
        np--;
        if (at > 0) {
            Found f;
            int ok = pair_find(m, syms[at - 1], nw, &f);
            rank[at - 1] = ok ? f.rank : NO_RANK;
            id[at - 1] = ok ? f.id : -1;
        }
        if (at < np) {
            Found f;
            int ok = pair_find(m, nw, syms[at + 1], &f);
            rank[at] = ok ? f.rank : NO_RANK;
            id[at] = ok ? f.id : -1;
        }
    }
    return n;
}

static Py_ssize_t merge_heap(const Model *m, int32_t *syms, Py_ssize_t n) {
    int32_t *nxt = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    int32_t *prv = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    char *alive = (char *)malloc((size_t)n);
    Py_ssize_t hcap = n + 16, hn = 0;
    HeapItem *heap = (HeapItem *)malloc((size_t)hcap * sizeof(HeapItem));
    if (!nxt || !prv || !alive || !heap) {
        free(nxt), free(prv), free(alive), free(heap);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        nxt[i] = (int32_t)(i + 1);
        prv[i] = (int32_t)(i - 1);
        alive[i] = 1;
    }
    nxt[n - 1] = -1;
    for (Py_ssize_t i = 0; i + 1 < n; i++) {
        Found f;
        if (pair_find(m, syms[i], syms[i + 1], &f)) heap[hn++] = (HeapItem){f.rank, (int32_t)i, f.id};
    }
    for (Py_ssize_t i = hn / 2 - 1; i >= 0; i--) heap_down(heap, hn, i);
    while (hn > 0) {
        HeapItem top = heap[0];
        heap[0] = heap[--hn];
        if (hn > 0) heap_down(heap, hn, 0);
        int32_t i = top.pos;
        if (!alive[i]) continue;
        int32_t j = nxt[i];
        if (j < 0) continue;
        Found cur;
        if (!pair_find(m, syms[i], syms[j], &cur) || cur.id != top.id) continue;
        int32_t nw = top.id;
        syms[i] = nw;
        alive[j] = 0;
        int32_t k = nxt[j];
        nxt[i] = k;
        if (k >= 0) prv[k] = i;
        int32_t p = prv[i];
        for (int side = 0; side < 2; side++) {
            Found f;
            int ok = 0;
            int32_t at = 0;
            if (side == 0 && p >= 0) {
                ok = pair_find(m, syms[p], nw, &f);
                at = p;
            } else if (side == 1 && k >= 0) {
                ok = pair_find(m, nw, syms[k], &f);
                at = i;
            }
            if (!ok) continue;
            if (hn == hcap) {
                hcap *= 2;
                HeapItem *nh = (HeapItem *)realloc(heap, (size_t)hcap * sizeof(HeapItem));
                if (!nh) {
                    free(nxt), free(prv), free(alive), free(heap);
                    return -1;
                }
                heap = nh;
            }
            heap[hn] = (HeapItem){f.rank, at, f.id};
            heap_up(heap, hn++);
        }
    }
    Py_ssize_t out = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (alive[i]) syms[out++] = syms[i];
    free(nxt), free(prv), free(alive), free(heap);
    return out;
}

/* Tokenize text[start..end) (code points read through kind/data) and append the ids to out. -1: no memory,
 * -2: a surrogate code point (the caller scrubs them first). */
static int tokenize_range(const Model *m, int kind, const void *data, Py_ssize_t start, Py_ssize_t end, Buf *out) {
    Py_ssize_t base = out->n;
    int32_t unk_pending = 0; /* 1 when an unknown is pending */
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        int32_t id = m->chars[ch];
        if (id >= 0) {
            if (unk_pending) {
                if (buf_push(out, m->unk_id) < 0) return -1;
                unk_pending = 0;
            }
            if (buf_push(out, id) < 0) return -1;
            continue;
        }
        if (m->byte_fallback) {
            if (ch >= 0xD800 && ch <= 0xDFFF) return -2; /* the reference cannot encode it either */
            unsigned char u[4];
            int nb = utf8_put(u, ch);
            int all = 1;
            for (int q = 0; q < nb; q++)
                if (m->bytes[u[q]] < 0) all = 0;
            if (all) {
                for (int q = 0; q < nb; q++)
                    if (buf_push(out, m->bytes[u[q]]) < 0) return -1;
                continue;
            }
        }
        if (m->unk_id >= 0) {
            if (unk_pending && m->fuse_unk) continue;
            if (unk_pending && buf_push(out, m->unk_id) < 0) return -1;
            unk_pending = 1;
        }
    }
    if (unk_pending && buf_push(out, m->unk_id) < 0) return -1;
    Py_ssize_t n = out->n - base;
    Py_ssize_t got = n >= HEAP_FROM ? merge_heap(m, out->syms + base, n) : merge_scan(m, out->syms + base, n);
    if (got < 0) return -1;
    out->n = base + got;
    return 0;
}

/* text[start..end), cut where the reference's ``segments`` cuts when longer than segment_from */
static int encode_range(const Model *m, int kind, const void *data, Py_ssize_t start, Py_ssize_t end,
                        Py_ssize_t segment_from, Buf *out) {
    if (m->class_junctions == NULL || end - start <= segment_from || end - start < 2)
        return tokenize_range(m, kind, data, start, end, out);
    Py_ssize_t seg = start;
    Py_UCS4 prev = PyUnicode_READ(kind, data, start);
    int known_prev = m->chars[prev] >= 0;
    for (Py_ssize_t i = start + 1; i < end; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        int known = m->chars[ch] >= 0;
        if (known && known_prev && !junction_maybe(m, prev, ch)) {
            int rc = tokenize_range(m, kind, data, seg, i, out);
            if (rc < 0) return rc;
            seg = i;
        }
        prev = ch;
        known_prev = known;
    }
    return tokenize_range(m, kind, data, seg, end, out);
}

static PyObject *finish(Buf *b, int rc) {
    if (rc == -1) {
        free(b->syms);
        return PyErr_NoMemory();
    }
    if (rc == -2) {
        free(b->syms);
        PyErr_SetString(PyExc_ValueError, "surrogate code point in text");
        return NULL;
    }
    PyObject *list = PyList_New(b->n);
    if (list) {
        for (Py_ssize_t i = 0; i < b->n; i++) {
            PyObject *v = PyLong_FromLong(b->syms[i]);
            if (!v) {
                Py_DECREF(list);
                list = NULL;
                break;
            }
            PyList_SET_ITEM(list, i, v);
        }
    }
    free(b->syms);
    return list;
}

PyDoc_STRVAR(tokenize_doc, "tokenize(text) -> list[int]: ids of one pre-token, never cut.");

static PyObject *Model_tokenize(Model *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Buf b = {NULL, 0, 0};
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = tokenize_range(self, kind, data, 0, n, &b);
    Py_END_ALLOW_THREADS return finish(&b, rc);
}

PyDoc_STRVAR(encode_doc,
             "encode(items, segment_from) -> list[int]: ids of ``items`` (a list of pre-tokens as str, and of ids "
             "as int, which pass through) in order; a pre-token longer than segment_from characters is cut where no "
             "merge can cross (exact).");

static PyObject *Model_encode(Model *self, PyObject *args) {
    PyObject *items;
    Py_ssize_t segment_from;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &items, &segment_from)) return NULL;
    Items it;
    if (items_read(items, &it) < 0) return NULL;
    Buf b = {NULL, 0, 0};
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t t = 0; t < it.count && rc == 0; t++) {
        if (it.passed[t] >= 0) {
            rc = buf_push(&b, it.passed[t]);
            continue;
        }
        PyObject *s = PyList_GET_ITEM(it.held, t);
        rc = encode_range(self, PyUnicode_KIND(s), PyUnicode_DATA(s), 0, PyUnicode_GET_LENGTH(s), segment_from, &b);
    }
    Py_END_ALLOW_THREADS items_free(&it);
    return finish(&b, rc);
}

/* ---- dump / load -------------------------------------------------------------------------------------------- */

/* The built tables as one little-endian buffer (``Model.dump``), rebuilt by ``Model.load``:
 *   header   "MBPEDUMP", u32 version (DUMP_VERSION), u32 flags (1 byte_fallback, 2 fuse_unk, 4 cuttable),
 *            i32 unk_id, u32 0, u64 n_ids, u64 n_merges, u64 n_chars, u64 n_pairs, i32 bytes[256]
 *   chars    n_chars x (u32 code point, i32 id): the one-character tokens
 *   pairs    n_pairs x (u32 a, u32 b, i32 rank, i32 merged id): each pair once, with its last rank, by rank
 *   filters  with cuttable: class_junctions (1024 u64), junction_bits (JBITS / 64 u64)
 *   checksum u64 over all the bytes before it
 * The pair table is rebuilt from the pairs (the compact one directly when the model qualifies, as at construction). */
#define DUMP_VERSION 1
#define DUMP_HEADER (8 + 4 + 4 + 4 + 4 + 8 * 4 + 4 * 256)
#define CLASS_WORDS (65536 / 64)
#define JBIT_WORDS (JBITS / 64)

#define DUMP_SEED 0x6D65726765627065ULL /* this format's checksum seed (dump_bytes.h) */

PyDoc_STRVAR(dump_doc, "dump() -> bytes: the built tables, for Model.load (a versioned little-endian layout).");

static PyObject *Model_dump(Model *self, PyObject *unused) {
    size_t n_chars = 0, n_pairs = 0;
    for (uint32_t cp = 0; cp < MAX_CP; cp++) n_chars += self->chars[cp] >= 0;
    if (self->pairs8) {
        for (size_t i = 0; i <= self->mask8; i++) n_pairs += self->pairs8[i] != UINT64_MAX;
    } else {
        for (size_t j = 0; j <= self->pairs.mask; j++) n_pairs += self->pairs.slots[j].key != UINT64_MAX;
    }
    int cuttable = self->class_junctions != NULL;
    size_t total = DUMP_HEADER + 8 * n_chars + 16 * n_pairs + (cuttable ? 8 * (CLASS_WORDS + JBIT_WORDS) : 0) + 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out), *q = p;
    memcpy(q, "MBPEDUMP", 8), q += 8;
    put_u32(q, DUMP_VERSION), q += 4;
    put_u32(q, (uint32_t)(self->byte_fallback ? 1 : 0) | (self->fuse_unk ? 2 : 0) | (cuttable ? 4 : 0)), q += 4;
    put_u32(q, (uint32_t)self->unk_id), q += 4;
    put_u32(q, 0), q += 4;
    put_u64(q, (uint64_t)self->n_ids), q += 8;
    put_u64(q, (uint64_t)self->n_merges), q += 8;
    put_u64(q, (uint64_t)n_chars), q += 8;
    put_u64(q, (uint64_t)n_pairs), q += 8;
    for (int b = 0; b < 256; b++) put_u32(q, (uint32_t)self->bytes[b]), q += 4;
    for (uint32_t cp = 0; cp < MAX_CP; cp++)
        if (self->chars[cp] >= 0) put_u32(q, cp), put_u32(q + 4, (uint32_t)self->chars[cp]), q += 8;
    /* each pair at its rank (ranks are distinct: one per merge-list entry), so the dump is canonical */
    uint32_t *by_rank = (uint32_t *)malloc(((size_t)self->n_merges + 1) * 3 * sizeof(uint32_t));
    unsigned char *seen = (unsigned char *)calloc((size_t)self->n_merges + 1, 1);
    if (!by_rank || !seen) {
        free(by_rank), free(seen);
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    if (self->pairs8) {
        for (size_t i = 0; i <= self->mask8; i++) {
            uint64_t v = self->pairs8[i];
            if (v == UINT64_MAX) continue;
            uint64_t key = v >> COMPACT_RANK_BITS;
            uint32_t rank = (uint32_t)(v & ((1u << COMPACT_RANK_BITS) - 1));
            by_rank[3 * rank] = (uint32_t)(key >> COMPACT_ID_BITS);
            by_rank[3 * rank + 1] = (uint32_t)(key & ((1u << COMPACT_ID_BITS) - 1));
            by_rank[3 * rank + 2] = (uint32_t)self->merge_out[rank];
            seen[rank] = 1;
        }
    } else {
        for (size_t j = 0; j <= self->pairs.mask; j++) {
            const PairSlot *ps = &self->pairs.slots[j];
            if (ps->key == UINT64_MAX) continue;
            by_rank[3 * ps->rank] = (uint32_t)(ps->key >> 32);
            by_rank[3 * ps->rank + 1] = (uint32_t)(ps->key & 0xFFFFFFFFu);
            by_rank[3 * ps->rank + 2] = (uint32_t)ps->id;
            seen[ps->rank] = 1;
        }
    }
    for (Py_ssize_t r = 0; r < self->n_merges; r++) {
        if (!seen[r]) continue;
        put_u32(q, by_rank[3 * r]), put_u32(q + 4, by_rank[3 * r + 1]);
        put_u32(q + 8, (uint32_t)r), put_u32(q + 12, by_rank[3 * r + 2]), q += 16;
    }
    free(by_rank), free(seen);
    if (cuttable) {
        for (size_t i = 0; i < CLASS_WORDS; i++) put_u64(q, self->class_junctions[i]), q += 8;
        for (size_t i = 0; i < JBIT_WORDS; i++) put_u64(q, self->junction_bits[i]), q += 8;
    }
    put_u64(q, dump_checksum(p, (size_t)(q - p), DUMP_SEED));
    return out;
}

static PyObject *dump_error(const char *what) {
    PyErr_Format(PyExc_ValueError, "damaged merge model dump: %s", what);
    return NULL;
}

/* The model of a dump (validated: the layout, lengths, checksum, every id below n_ids, every rank below n_merges,
 * every code point below 0x110000); ValueError for anything else. */
static PyObject *model_from_dump(PyTypeObject *type, const unsigned char *p, size_t n) {
    if (n < DUMP_HEADER + 8) return dump_error("too short");
    if (memcmp(p, "MBPEDUMP", 8) != 0) return dump_error("bad magic");
    if (get_u32(p + 8) != DUMP_VERSION) return dump_error("unsupported version");
    uint32_t flags = get_u32(p + 12);
    int32_t unk_id = (int32_t)get_u32(p + 16);
    if (flags & ~7u || get_u32(p + 20) != 0) return dump_error("bad flags");
    uint64_t n_ids = get_u64(p + 24), n_merges = get_u64(p + 32), n_chars = get_u64(p + 40), n_pairs = get_u64(p + 48);
    int cuttable = (flags & 4) != 0;
    if (n_ids > ((uint64_t)1 << 31) || n_merges > (uint64_t)INT32_MAX || n_chars > MAX_CP || n_pairs > n / 16)
        return dump_error("counts out of range");
    uint64_t need = DUMP_HEADER + 8 * n_chars + 16 * n_pairs + (cuttable ? 8 * (CLASS_WORDS + JBIT_WORDS) : 0) + 8;
    if (need != n) return dump_error("length does not match the counts");
    if (get_u64(p + n - 8) != dump_checksum(p, n - 8, DUMP_SEED)) return dump_error("checksum mismatch");
    const unsigned char *q = p + 56;
    int32_t bytes[256];
    for (int b = 0; b < 256; b++, q += 4) {
        bytes[b] = (int32_t)get_u32(q);
        if (bytes[b] < -1 || (int64_t)bytes[b] >= (int64_t)n_ids) return dump_error("byte id out of range");
    }
    Model *self = (Model *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->byte_fallback = (flags & 1) != 0;
    self->fuse_unk = (flags & 2) != 0;
    self->unk_id = unk_id;
    self->n_ids = (Py_ssize_t)n_ids;
    self->n_merges = (Py_ssize_t)n_merges;
    memcpy(self->bytes, bytes, sizeof(bytes));
    const char *bad = NULL;
    /* the compact table is filled directly when the model qualifies (model_compact's condition), else ``pairs`` */
    int compact = n_ids <= ((uint64_t)1 << COMPACT_ID_BITS) && n_merges < ((uint64_t)1 << COMPACT_RANK_BITS) - 1;
    self->chars = (int32_t *)malloc(MAX_CP * sizeof(int32_t));
    if (!self->chars) goto nomem;
    if (compact) {
        size_t cap = pow2_at_least((size_t)n_pairs * 2 + 1);
        self->pairs8 = (uint64_t *)malloc(cap * sizeof(uint64_t));
        self->merge_out = (int32_t *)malloc(((size_t)n_merges + 1) * sizeof(int32_t));
        if (!self->pairs8 || !self->merge_out) goto nomem;
        memset(self->pairs8, 0xFF, cap * sizeof(uint64_t));
        memset(self->merge_out, 0xFF, ((size_t)n_merges + 1) * sizeof(int32_t));
        self->mask8 = cap - 1;
    } else if (pair_init(&self->pairs, (size_t)n_pairs) < 0)
        goto nomem;
    memset(self->chars, 0xFF, MAX_CP * sizeof(int32_t));
    for (uint64_t i = 0; i < n_chars; i++, q += 8) {
        uint32_t cp = get_u32(q);
        int32_t id = (int32_t)get_u32(q + 4);
        if (cp >= MAX_CP || id < 0 || (uint64_t)id >= n_ids) {
            bad = "character entry out of range";
            goto fail;
        }
        self->chars[cp] = id;
    }
    for (uint64_t i = 0; i < n_pairs; i++, q += 16) {
        uint32_t a = get_u32(q), b = get_u32(q + 4);
        int32_t rank = (int32_t)get_u32(q + 8), id = (int32_t)get_u32(q + 12);
        if (a >= n_ids || b >= n_ids || rank < 0 || (uint64_t)rank >= n_merges || id < 0 || (uint64_t)id >= n_ids) {
            bad = "pair entry out of range";
            goto fail;
        }
        if (compact) {
            uint64_t key = ((uint64_t)a << COMPACT_ID_BITS) | b;
            size_t j = (size_t)mix64(key) & self->mask8;
            while (self->pairs8[j] != UINT64_MAX && (self->pairs8[j] >> COMPACT_RANK_BITS) != key)
                j = (j + 1) & self->mask8;
            self->pairs8[j] = (key << COMPACT_RANK_BITS) | (uint64_t)rank;
            self->merge_out[rank] = id;
        } else
            pair_put(&self->pairs, pair_key(a, b), rank, id);
    }
    if (cuttable) {
        self->class_junctions = (uint64_t *)malloc(CLASS_WORDS * sizeof(uint64_t));
        self->junction_bits = (uint64_t *)malloc(JBIT_WORDS * sizeof(uint64_t));
        if (!self->class_junctions || !self->junction_bits) goto nomem;
        for (size_t i = 0; i < CLASS_WORDS; i++, q += 8) self->class_junctions[i] = get_u64(q);
        for (size_t i = 0; i < JBIT_WORDS; i++, q += 8) self->junction_bits[i] = get_u64(q);
    }
    return (PyObject *)self;
nomem:
    Py_DECREF(self);
    return PyErr_NoMemory();
fail:
    Py_DECREF(self);
    return dump_error(bad);
}

PyDoc_STRVAR(load_doc, "Model.load(buffer) -> Model: the model of a Model.dump() buffer (any bytes-like object); "
                       "ValueError when it is damaged (layout, lengths, checksum, ids, ranks).");

static PyObject *Model_load(PyObject *cls, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *out = model_from_dump((PyTypeObject *)cls, (const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *Model_n_merges(Model *self, void *closure) { return PyLong_FromSsize_t(self->n_merges); }

static PyMethodDef Model_methods[] = {
    {"tokenize", (PyCFunction)Model_tokenize, METH_O, tokenize_doc},
    {"encode", (PyCFunction)Model_encode, METH_VARARGS, encode_doc},
    {"dump", (PyCFunction)Model_dump, METH_NOARGS, dump_doc},
    {"load", (PyCFunction)Model_load, METH_O | METH_CLASS, load_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Model_getset[] = {
    {"n_merges", (getter)Model_n_merges, NULL, "merge list length", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._mergebpe.Model",
    .tp_basicsize = sizeof(Model),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "BPE over a merge list: Model(vocab, merges, byte_fallback, unk_id, fuse_unk, cuttable); "
              "Model.load(Model.dump()) is the same model.",
    .tp_methods = Model_methods,
    .tp_getset = Model_getset,
    .tp_new = Model_new,
};


/* ---- added-token finder ------------------------------------------------------------------------------------- */

/* Matcher(patterns: list[str]): the non-overlapping leftmost-longest matches of a fixed set of patterns, the
 * algorithm of ``AddedMatcher._find`` (at the leftmost position whose character starts some pattern, the
 * longest pattern that matches there wins; none: move on by one character; after a match, go on at its end). */
typedef struct {
    PyObject_HEAD
    Py_UCS4 *text;        /* all patterns, concatenated */
    Py_ssize_t *start;    /* pattern k = text[start[k] .. start[k] + len[k]) */
    Py_ssize_t *len;
    Py_ssize_t count;
    int32_t *slots;       /* hash of pattern -> k, -1 = empty */
    size_t mask;
    int32_t *first;       /* code point -> offset into lengths (-1: starts no pattern) */
    Py_ssize_t *lengths;  /* per first character: n, then n lengths, longest first */
    /* a trie of the patterns: edges (node << 21 | code point) -> child in an open-addressing table (key
     * UINT64_MAX empty); per node the pattern that ends there (the first listed), -1 none; node 0 is the root.
     * A walk from a position finds its longest match in one pass over at most the longest pattern. */
    uint64_t *edge_keys;
    int32_t *edge_child;
    size_t edge_mask;
    int32_t *ends;
} Matcher;

static inline int32_t trie_child(const Matcher *m, int32_t node, uint32_t cp) {
    uint64_t key = ((uint64_t)(uint32_t)node << 21) | cp;
    size_t i = (size_t)mix64(key) & m->edge_mask;
    for (;;) {
        uint64_t k = m->edge_keys[i];
        if (k == key) return m->edge_child[i];
        if (k == UINT64_MAX) return -1;
        i = (i + 1) & m->edge_mask;
    }
}

/* the longest pattern that matches t[at..n) at at (index, length in *len), or -1 */
static inline Py_ssize_t trie_longest(const Matcher *m, const uint32_t *t, Py_ssize_t at, Py_ssize_t n,
                                      Py_ssize_t *len) {
    int32_t node = 0;
    Py_ssize_t hit = -1;
    for (Py_ssize_t i = at; i < n; i++) {
        node = trie_child(m, node, t[i]);
        if (node < 0) break;
        if (m->ends[node] >= 0) {
            hit = m->ends[node];
            *len = i + 1 - at;
        }
    }
    return hit;
}

static void Matcher_dealloc(Matcher *self) {
    free(self->text), free(self->start), free(self->len), free(self->slots), free(self->first), free(self->lengths);
    free(self->edge_keys), free(self->edge_child), free(self->ends);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static uint64_t hash_ucs4_kind(int kind, const void *data, Py_ssize_t at, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (uint64_t)PyUnicode_READ(kind, data, at + i);
        h *= 1099511628211ULL;
    }
    return mix64(h ^ (uint64_t)n);
}

static int cmp_len_desc(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x < y) - (x > y);
}

static PyObject *Matcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *patterns;
    static char *kwlist[] = {"patterns", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!", kwlist, &PyList_Type, &patterns)) return NULL;
    Matcher *self = (Matcher *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(patterns), total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *p = PyList_GET_ITEM(patterns, k);
        if (!PyUnicode_Check(p) || PyUnicode_GET_LENGTH(p) == 0) {
            PyErr_SetString(PyExc_ValueError, "patterns must be non-empty str");
            Py_DECREF(self);
            return NULL;
        }
        total += PyUnicode_GET_LENGTH(p);
    }
    size_t cap = pow2_at_least((size_t)n * 2 + 1);
    self->count = n;
    self->text = (Py_UCS4 *)malloc((size_t)(total + 1) * sizeof(Py_UCS4));
    self->start = (Py_ssize_t *)malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    self->len = (Py_ssize_t *)malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    self->slots = (int32_t *)malloc(cap * sizeof(int32_t));
    self->first = (int32_t *)malloc(MAX_CP * sizeof(int32_t));
    self->lengths = (Py_ssize_t *)malloc((size_t)(2 * n + 1) * sizeof(Py_ssize_t));
    int32_t *count_by_first = NULL;
    if (!self->text || !self->start || !self->len || !self->slots || !self->first || !self->lengths) goto nomem;
    memset(self->slots, 0xFF, cap * sizeof(int32_t));
    memset(self->first, 0xFF, MAX_CP * sizeof(int32_t));
    self->mask = cap - 1;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *p = PyList_GET_ITEM(patterns, k);
        Py_ssize_t len = PyUnicode_GET_LENGTH(p);
        if (!PyUnicode_AsUCS4(p, self->text + at, len, 0)) goto fail;
        self->start[k] = at;
        self->len[k] = len;
        at += len;
        uint64_t h = hash_ucs4_kind(PyUnicode_4BYTE_KIND, self->text + self->start[k], 0, len);
        size_t i = (size_t)h & self->mask;
        int dup = 0;
        while (self->slots[i] >= 0) {
            int32_t o = self->slots[i];
            if (self->len[o] == len &&
                memcmp(self->text + self->start[o], self->text + self->start[k], (size_t)len * sizeof(Py_UCS4)) == 0) {
                dup = 1; /* the first listed wins */
                break;
            }
            i = (i + 1) & self->mask;
        }
        if (!dup) self->slots[i] = (int32_t)k;
    }
    /* lengths per first character: distinct, longest first */
    Py_ssize_t pool = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_UCS4 c = self->text[self->start[k]];
        if (self->first[c] >= 0) continue;
        self->first[c] = (int32_t)pool;
        Py_ssize_t base = pool++;
        self->lengths[base] = 0;
        for (Py_ssize_t j = k; j < n; j++) {
            if (self->text[self->start[j]] != c) continue;
            Py_ssize_t len = self->len[j], q;
            for (q = 0; q < self->lengths[base]; q++)
                if (self->lengths[base + 1 + q] == len) break;
            if (q == self->lengths[base]) {
                self->lengths[base + 1 + self->lengths[base]] = len;
                self->lengths[base]++;
                pool++;
            }
        }
        qsort(self->lengths + base + 1, (size_t)self->lengths[base], sizeof(Py_ssize_t), cmp_len_desc);
    }
    {
        size_t ecap = pow2_at_least((size_t)total * 2 + 2);
        self->edge_keys = (uint64_t *)malloc(ecap * sizeof(uint64_t));
        self->edge_child = (int32_t *)malloc(ecap * sizeof(int32_t));
        self->ends = (int32_t *)malloc(((size_t)total + 1) * sizeof(int32_t));
        if (!self->edge_keys || !self->edge_child || !self->ends) goto nomem;
        memset(self->edge_keys, 0xFF, ecap * sizeof(uint64_t));
        self->edge_mask = ecap - 1;
        self->ends[0] = -1;
        int32_t nodes = 1;
        for (Py_ssize_t k = 0; k < n; k++) {
            int32_t node = 0;
            for (Py_ssize_t q = 0; q < self->len[k]; q++) {
                uint64_t key = ((uint64_t)(uint32_t)node << 21) | self->text[self->start[k] + q];
                size_t i = (size_t)mix64(key) & self->edge_mask;
                while (self->edge_keys[i] != UINT64_MAX && self->edge_keys[i] != key) i = (i + 1) & self->edge_mask;
                if (self->edge_keys[i] == UINT64_MAX) {
                    self->edge_keys[i] = key;
                    self->edge_child[i] = nodes;
                    self->ends[nodes] = -1;
                    nodes++;
                }
                node = self->edge_child[i];
            }
            if (self->ends[node] < 0) self->ends[node] = (int32_t)k; /* the first listed wins */
        }
    }
    free(count_by_first);
    return (PyObject *)self;
nomem:
    PyErr_NoMemory();
fail:
    free(count_by_first);
    Py_DECREF(self);
    return NULL;
}

static Py_ssize_t matcher_lookup(const Matcher *m, int kind, const void *data, Py_ssize_t at, Py_ssize_t len) {
    uint64_t h = hash_ucs4_kind(kind, data, at, len);
    size_t i = (size_t)h & m->mask;
    while (m->slots[i] >= 0) {
        int32_t k = m->slots[i];
        if (m->len[k] == len) {
            const Py_UCS4 *p = m->text + m->start[k];
            Py_ssize_t q = 0;
            while (q < len && p[q] == PyUnicode_READ(kind, data, at + q)) q++;
            if (q == len) return k;
        }
        i = (i + 1) & m->mask;
    }
    return -1;
}

PyDoc_STRVAR(find_doc, "find(text) -> list[tuple[int, int, int]]: (start, stop, pattern index) of each match.");

static PyObject *Matcher_find(Matcher *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    Py_ssize_t at = 0;
    while (at < n) {
        Py_UCS4 c = PyUnicode_READ(kind, data, at);
        int32_t f = self->first[c];
        if (f < 0) {
            at++;
            continue;
        }
        const Py_ssize_t *ls = self->lengths + f;
        Py_ssize_t hit = -1, hit_len = 0;
        for (Py_ssize_t q = 0; q < ls[0]; q++) {
            Py_ssize_t len = ls[1 + q];
            if (at + len > n) continue;
            Py_ssize_t k = matcher_lookup(self, kind, data, at, len);
            if (k >= 0) {
                hit = k;
                hit_len = len;
                break;
            }
        }
        if (hit < 0) {
            at++;
            continue;
        }
        PyObject *t = Py_BuildValue("(nnn)", at, at + hit_len, hit);
        if (!t || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
        at += hit_len;
    }
    return out;
}

static PyMethodDef Matcher_methods[] = {
    {"find", (PyCFunction)Matcher_find, METH_O, find_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._mergebpe.Matcher",
    .tp_basicsize = sizeof(Matcher),
    .tp_dealloc = (destructor)Matcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Leftmost-longest matches of fixed patterns: Matcher(patterns).",
    .tp_methods = Matcher_methods,
    .tp_new = Matcher_new,
};

/* ---- one call per text -------------------------------------------------------------------------------------- */

/* TextEncoder(model, matcher, token_ids, replace_from, replace_to, cache_size): the whole ordinary-text path of a
 * pipeline whose steps the Python side planned (``app/engine/pipeline/text_plan.py``) in one call, GIL released
 * for long texts:
 *
 * 1. lone surrogates become U+FFFD and surrogate pairs one character (``scrub_surrogates``);
 * 2. the matcher's leftmost-longest matches are found (``AddedMatcher._find``); a match whose ``token_ids`` entry
 *    is -1 (a special token) is skipped and its text stays ordinary text, any other is that id;
 * 3. each stretch between matches has every ``replace_from`` character replaced by ``replace_to`` (a Replace
 *    normalizer with a one-character pattern; -1: none); the pre-tokenizer is a no-op (the plan checks it);
 * 4. the stretch is cut where no merge can cross (as ``Model.encode`` cuts: exact) and each segment goes through
 *    a bounded word cache (segments of characters all in the BMP, when they and their ids fit a slot) to the model.
 *
 * Immutable after construction; the cache is lock-free (word_cache.h), so several threads may encode at once. */
#define TC_RELEASE_FROM 512 /* code points: longer texts are encoded with the GIL released */
#define TC_STACK 512

/* One cache line: a segment and its ids when both fit (wc_seg_fits: 12 code points and 8 ids, 20 and 4). The
 * 128-byte slots with a fixed 20 code points and 20 ids before them read and wrote two lines an entry: 1.03-1.05x
 * cold, 1.05-1.06x warm and 0.94-0.97x the time a line without them (gemma3; docs/performance.md). */
typedef struct {
    WCHead h; /* h.len: code points of the key, h.count: ids */
    uint16_t data[28]; /* the key's code points, then its ids (word_cache.h's segment slot) */
} TCSlot;
_Static_assert(sizeof(TCSlot) == 64, "a segment cache slot is one cache line");
_Static_assert(offsetof(TCSlot, data) == WC_SEG_KEY_OFF, "a segment cache slot has word_cache.h's shape");

typedef struct {
    PyObject_HEAD
    Model *model;       /* strong reference */
    Matcher *matcher;   /* strong reference, NULL: no added token to find */
    int32_t *token_ids; /* per matcher pattern: its id, -1: skipped (special) */
    int32_t replace_from;
    uint32_t *replace_to;
    Py_ssize_t replace_len;
    WordCache *cache;
    PyObject **id_objs; /* id -> its int object, made on first use (GIL held) */
} TextEncoder;

static void TextEncoder_dealloc(TextEncoder *self) {
    Py_XDECREF(self->model);
    Py_XDECREF(self->matcher);
    free(self->token_ids), free(self->replace_to);
    if (self->id_objs && self->model) {
        for (Py_ssize_t i = 0; i < self->model->n_ids; i++) Py_XDECREF(self->id_objs[i]);
    }
    free(self->id_objs);
    wc_free(self->cache);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *TextEncoder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *model, *matcher, *ids, *replace_to;
    int replace_from;
    Py_ssize_t cache_size;
    static char *kwlist[] = {"model", "matcher", "token_ids", "replace_from", "replace_to", "cache_size", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO!iUn", kwlist, &ModelType, &model, &matcher, &PyList_Type,
                                     &ids, &replace_from, &replace_to, &cache_size))
        return NULL;
    if (matcher != Py_None && !PyObject_TypeCheck(matcher, &MatcherType)) {
        PyErr_SetString(PyExc_TypeError, "matcher must be a Matcher or None");
        return NULL;
    }
    Py_ssize_t count = matcher == Py_None ? 0 : ((Matcher *)matcher)->count;
    if (PyList_GET_SIZE(ids) != count) {
        PyErr_SetString(PyExc_ValueError, "token_ids must have one entry per matcher pattern");
        return NULL;
    }
    if (cache_size < 0 || cache_size > ((Py_ssize_t)1 << 26)) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be in 0..2**26");
        return NULL;
    }
    TextEncoder *self = (TextEncoder *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    Py_INCREF(model);
    self->model = (Model *)model;
    if (matcher != Py_None) {
        Py_INCREF(matcher);
        self->matcher = (Matcher *)matcher;
    }
    self->replace_from = replace_from;
    self->replace_len = PyUnicode_GET_LENGTH(replace_to);
    self->token_ids = (int32_t *)malloc(((size_t)count + 1) * sizeof(int32_t));
    self->replace_to = (uint32_t *)malloc(((size_t)self->replace_len + 1) * sizeof(uint32_t));
    self->id_objs = (PyObject **)calloc((size_t)self->model->n_ids + 1, sizeof(PyObject *));
    if (!self->token_ids || !self->replace_to || !self->id_objs) goto nomem;
    for (Py_ssize_t k = 0; k < count; k++) {
        long v = PyLong_AsLong(PyList_GET_ITEM(ids, k));
        if (v == -1 && PyErr_Occurred()) goto fail;
        if (v < -1 || v > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "token id out of range");
            goto fail;
        }
        self->token_ids[k] = (int32_t)v;
    }
    for (Py_ssize_t k = 0; k < self->replace_len; k++) self->replace_to[k] = PyUnicode_READ_CHAR(replace_to, k);
    if (cache_size > 0 && !(self->cache = wc_new((size_t)cache_size, sizeof(TCSlot)))) goto nomem;
    return (PyObject *)self;
nomem:
    PyErr_NoMemory();
fail:
    Py_DECREF(self);
    return NULL;
}

/* one segment t[0..n) through the cache; cacheable: the cache exists and wc_seg_hash returned 1 for the segment,
 * with its hash h */
static int tc_segment(const TextEncoder *te, const uint32_t *t, Py_ssize_t n, int cacheable, uint64_t h, Buf *out,
                      CallStats *st) {
    TCSlot copy;
    WCSeg seg;
    int got = cacheable ? wc_seg_get_hashed(te->cache, t, n, h, &copy, sizeof copy, &seg, st) : -1;
    if (got > 0) {
        const int32_t *ids = wc_seg_ids(&copy, n);
        for (int k = 0; k < copy.h.count; k++)
            if (buf_push(out, ids[k]) < 0) return -1;
        return 0;
    }
    Py_ssize_t before = out->n;
    int rc = tokenize_range(te->model, PyUnicode_4BYTE_KIND, t, 0, n, out);
    if (rc < 0 || got < 0) return rc;
    wc_seg_put(&seg, t, n, sizeof(TCSlot), out->syms + before, out->n - before, st);
    return 0;
}

/* The first cut of t[0..n) after from (Model.encode's cut: two known characters no merge joins), else n. */
static inline Py_ssize_t stretch_cut(const Model *m, const uint32_t *t, Py_ssize_t from, Py_ssize_t n) {
    int known_prev = m->chars[t[from]] >= 0;
    for (Py_ssize_t i = from + 1; i < n; i++) {
        int known = m->chars[t[i]] >= 0;
        if (known && known_prev && !junction_maybe(m, t[i - 1], t[i])) return i;
        known_prev = known;
    }
    return n;
}

/* one normalized stretch t[0..n): cut where no merge can cross (Model.encode's cut, at every length); the next
 * segment is found and hashed, and its cache slot prefetched, before this one is looked up and merged */
static int tc_stretch(const TextEncoder *te, const uint32_t *t, Py_ssize_t n, Buf *out, CallStats *st) {
    const Model *m = te->model;
    if (n <= 0) return 0;
    if (m->class_junctions == NULL) return tokenize_range(m, PyUnicode_4BYTE_KIND, t, 0, n, out);
    Py_ssize_t seg = 0, end = stretch_cut(m, t, 0, n);
    uint64_t h = 0;
    int cacheable = wc_seg_ahead(te->cache, t, end, sizeof(TCSlot), &h);
    while (seg < n) {
        Py_ssize_t next_end = end < n ? stretch_cut(m, t, end, n) : n;
        uint64_t next_h = 0;
        int next_cacheable = end < n && wc_seg_ahead(te->cache, t + end, next_end - end, sizeof(TCSlot), &next_h);
        int rc = tc_segment(te, t + seg, end - seg, cacheable, h, out, st);
        if (rc < 0) return rc;
        seg = end;
        end = next_end;
        h = next_h;
        cacheable = next_cacheable;
    }
    return 0;
}

/* t[s..e) normalized into norm (room for (e - s) * max(1, replace_len)), then tc_stretch */
static int tc_ordinary(const TextEncoder *te, const uint32_t *t, Py_ssize_t s, Py_ssize_t e, uint32_t *norm,
                       Buf *out, CallStats *st) {
    if (te->replace_from < 0) return tc_stretch(te, t + s, e - s, out, st);
    Py_ssize_t k = 0;
    uint32_t from = (uint32_t)te->replace_from;
    for (Py_ssize_t i = s; i < e; i++) {
        if (t[i] == from) {
            for (Py_ssize_t q = 0; q < te->replace_len; q++) norm[k++] = te->replace_to[q];
        } else {
            norm[k++] = t[i];
        }
    }
    return tc_stretch(te, norm, k, out, st);
}

/* the whole text t[0..n) (scrubbed) */
static int tc_text(const TextEncoder *te, const uint32_t *t, Py_ssize_t n, uint32_t *norm, Buf *out,
                   CallStats *st) {
    const Matcher *mt = te->matcher;
    if (!mt) return tc_ordinary(te, t, 0, n, norm, out, st);
    Py_ssize_t at = 0, taken = 0;
    while (at < n) {
        int32_t f = mt->first[t[at]];
        if (f < 0) {
            at++;
            continue;
        }
        Py_ssize_t hit_len = 0, hit = trie_longest(mt, t, at, n, &hit_len);
        if (hit < 0) {
            at++;
            continue;
        }
        int32_t id = te->token_ids[hit];
        if (id >= 0) { /* a token: the ordinary text before it, then its id */
            int rc = tc_ordinary(te, t, taken, at, norm, out, st);
            if (rc < 0) return rc;
            if (buf_push(out, id) < 0) return -1;
            taken = at + hit_len;
        }
        at += hit_len;
    }
    return tc_ordinary(te, t, taken, n, norm, out, st);
}

/* a list of the ids syms[0..n), small ids' int objects shared through id_objs; NULL with an error set */
static PyObject *te_ids_list(TextEncoder *self, const int32_t *syms, Py_ssize_t n) {
    PyObject *list = list_unfilled(n);
    if (!list) return NULL;
    PyObject **items = list_items(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t id = syms[i];
        PyObject *v;
        if (id < self->model->n_ids) {
            v = self->id_objs[id];
            if (!v && !(v = self->id_objs[id] = PyLong_FromLong(id))) {
                list_sized(list, i);
                Py_DECREF(list);
                return NULL;
            }
            Py_INCREF(v);
        } else if (!(v = PyLong_FromLong(id))) {
            list_sized(list, i);
            Py_DECREF(list);
            return NULL;
        }
        items[i] = v;
    }
    list_sized(list, n);
    return list;
}

PyDoc_STRVAR(te_encode_doc, "encode(text) -> list[int]: ids of an ordinary text (see the type's docstring).");

static PyObject *TextEncoder_encode(TextEncoder *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    Py_ssize_t widen = self->replace_len > 1 ? self->replace_len : 1;
    if (n > (PY_SSIZE_T_MAX / 4 - 1) / (widen + 1)) return PyErr_NoMemory();
    uint32_t stack[TC_STACK];
    Py_ssize_t need = n * (1 + widen) + 2;
    uint32_t *t = need <= TC_STACK ? stack : (uint32_t *)malloc((size_t)need * sizeof(uint32_t));
    if (!t) return PyErr_NoMemory();
    uint32_t *norm = t + n + 1;
    Py_ssize_t k = scrub_code_points(kind, data, n, t);
    Buf b = {NULL, 0, 0};
    CallStats st = {0, 0, 0};
    int rc;
    if (k > TC_RELEASE_FROM) {
        Py_BEGIN_ALLOW_THREADS rc = tc_text(self, t, k, norm, &b, &st);
        Py_END_ALLOW_THREADS
    } else {
        rc = tc_text(self, t, k, norm, &b, &st);
    }
    if (t != stack) free(t);
    wc_account(self->cache, &st);
    if (rc < 0) {
        free(b.syms);
        if (rc == -2) {
            PyErr_SetString(PyExc_ValueError, "surrogate code point in text");
            return NULL;
        }
        return PyErr_NoMemory();
    }
    PyObject *list = te_ids_list(self, b.syms, b.n);
    free(b.syms);
    return list;
}

PyDoc_STRVAR(te_encode_batch_doc,
             "encode_batch(texts, counts, num_threads=1) -> list: encode() of each text of the list ``texts`` (with "
             "``counts`` true, the number of ids of each), in one call: the texts are read with the GIL held, then "
             "encoded with it released, chat-sized ones included (which encode() encodes holding it), on up to "
             "num_threads threads (the caller's included, about one per 32 KiB of text) that take the next text as "
             "they finish one; the lists are built at the end, by the caller.");

/* An encode_batch call's texts, shared by the threads that encode them. */
typedef struct {
    const TextEncoder *te;
    const uint32_t *t;          /* every text's code points, text i from starts[i] to starts[i + 1] */
    const Py_ssize_t *starts;
    BatchTexts bt;              /* where text i's ids went (a worker's out); failed: -1 memory, -2 surrogate */
} TeTexts;

/* One thread's share: its output buffer, its normalization scratch, its cache counts. */
typedef struct {
    TeTexts *b;
    int k;
    Buf out;
    uint32_t *norm;
    CallStats st;
} TeWorker;

/* Encode texts taken from the counter until none is left (batch_threads.h; called without the GIL). */
static void *te_worker(void *arg) {
    TeWorker *w = (TeWorker *)arg;
    TeTexts *b = w->b;
    for (Py_ssize_t i; (i = batch_next(&b->bt)) >= 0;) {
        b->bt.who[i] = w->k;
        b->bt.from[i] = w->out.n;
        int rc = tc_text(b->te, b->t + b->starts[i], b->starts[i + 1] - b->starts[i], w->norm, &w->out, &w->st);
        if (rc < 0) {
            batch_fail(&b->bt, rc);
            break;
        }
        b->bt.to[i] = w->out.n;
    }
    return NULL;
}

static PyObject *TextEncoder_encode_batch(TextEncoder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 3 || !PyList_Check(args[0]) || (nargs == 3 && !PyLong_Check(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "encode_batch(texts: list[str], counts: bool, num_threads: int = 1)");
        return NULL;
    }
    int counts = PyObject_IsTrue(args[1]);
    if (counts < 0) return NULL;
    long num_threads = nargs == 3 ? PyLong_AsLong(args[2]) : 1;
    if (num_threads == -1 && PyErr_Occurred()) return NULL;
    PyObject *texts = args[0];
    Py_ssize_t count = PyList_GET_SIZE(texts), total = 0, longest = 0;
    Py_ssize_t widen = self->replace_len > 1 ? self->replace_len : 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *x = PyList_GET_ITEM(texts, i);
        if (!PyUnicode_Check(x)) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] must be str", i);
            return NULL;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(x);
        if (n > (PY_SSIZE_T_MAX / 4 - 1) / (widen + 1) - total) return PyErr_NoMemory();
        total += n;
        if (n > longest) longest = n;
    }
    long want = batch_threads_wanted(num_threads, count, total);
    TeTexts b = {self, NULL, NULL, {0}};
    uint32_t *t = (uint32_t *)malloc(((size_t)total + 1) * sizeof(uint32_t));
    Py_ssize_t *starts = (Py_ssize_t *)malloc(((size_t)count + 1) * sizeof(Py_ssize_t));
    TeWorker *workers = (TeWorker *)calloc((size_t)want, sizeof(TeWorker));
    int nomem = !t || !starts || !workers;
    for (long k = 0; !nomem && k < want; k++)
        nomem = !(workers[k].norm = (uint32_t *)malloc(((size_t)longest * (size_t)widen + 1) * sizeof(uint32_t)));
    if (nomem || batch_texts_init(&b.bt, count) < 0) {
        for (long k = 0; workers && k < want; k++) free(workers[k].norm);
        free(t), free(starts), free(workers);
        return PyErr_NoMemory();
    }
    b.t = t, b.starts = starts;
    starts[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *x = PyList_GET_ITEM(texts, i);
        starts[i + 1] = starts[i] + scrub_code_points(PyUnicode_KIND(x), PyUnicode_DATA(x), PyUnicode_GET_LENGTH(x),
                                                      t + starts[i]);
    }
    for (long k = 0; k < want; k++) workers[k].b = &b, workers[k].k = (int)k;
    Py_BEGIN_ALLOW_THREADS
    batch_threads_run(te_worker, workers, sizeof *workers, want);
    Py_END_ALLOW_THREADS
    free(t);
    free(starts);
    for (long k = 0; k < want; k++) wc_account(self->cache, &workers[k].st);
    PyObject *out = NULL;
    if (b.bt.failed == -2)
        PyErr_SetString(PyExc_ValueError, "surrogate code point in text");
    else if (b.bt.failed < 0)
        PyErr_NoMemory();
    else
        out = PyList_New(count);
    for (Py_ssize_t i = 0; out && i < count; i++) {
        Py_ssize_t n = b.bt.to[i] - b.bt.from[i];
        const int32_t *ids = workers[b.bt.who[i]].out.syms + b.bt.from[i];
        PyObject *v = counts ? PyLong_FromSsize_t(n) : te_ids_list(self, ids, n);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
    for (long k = 0; k < want; k++) free(workers[k].out.syms), free(workers[k].norm);
    free(workers);
    batch_texts_free(&b.bt);
    return out;
}

PyDoc_STRVAR(te_cache_stats_doc, "cache_stats() -> (hits, misses, size, max_size) of the segment cache.");

static PyObject *TextEncoder_cache_stats(TextEncoder *self, PyObject *unused) { return wc_stats_tuple(self->cache); }

PyDoc_STRVAR(te_clear_cache_doc, "clear_cache(): drop every entry of the segment cache and reset its counters.");

static PyObject *TextEncoder_clear_cache(TextEncoder *self, PyObject *unused) {
    if (self->cache) {
        Py_BEGIN_ALLOW_THREADS wc_clear(self->cache);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyMethodDef TextEncoder_methods[] = {
    {"encode", (PyCFunction)TextEncoder_encode, METH_O, te_encode_doc},
    {"encode_batch", (PyCFunction)(void (*)(void))TextEncoder_encode_batch, METH_FASTCALL, te_encode_batch_doc},
    {"cache_stats", (PyCFunction)TextEncoder_cache_stats, METH_NOARGS, te_cache_stats_doc},
    {"clear_cache", (PyCFunction)TextEncoder_clear_cache, METH_NOARGS, te_clear_cache_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TextEncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._mergebpe.TextEncoder",
    .tp_basicsize = sizeof(TextEncoder),
    .tp_dealloc = (destructor)TextEncoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A whole ordinary text in one call: TextEncoder(model, matcher, token_ids, replace_from, replace_to, "
              "cache_size).",
    .tp_methods = TextEncoder_methods,
    .tp_new = TextEncoder_new,
};


static struct PyModuleDef mergebpe_module = {
    PyModuleDef_HEAD_INIT, "_mergebpe", "Compiled BPE over an ordered merge list.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mergebpe(void) {
    if (PyType_Ready(&ModelType) < 0 || PyType_Ready(&MatcherType) < 0 || PyType_Ready(&TextEncoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&mergebpe_module);
    if (!m) return NULL;
    Py_INCREF(&ModelType);
    if (PyModule_AddObject(m, "Model", (PyObject *)&ModelType) < 0) {
        Py_DECREF(&ModelType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&MatcherType);
    if (PyModule_AddObject(m, "Matcher", (PyObject *)&MatcherType) < 0) {
        Py_DECREF(&MatcherType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&TextEncoderType);
    if (PyModule_AddObject(m, "TextEncoder", (PyObject *)&TextEncoderType) < 0) {
        Py_DECREF(&TextEncoderType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "HEAP_FROM", HEAP_FROM);
    PyModule_AddIntConstant(m, "COMPACT_ID_BITS", COMPACT_ID_BITS);
    return m;
}
