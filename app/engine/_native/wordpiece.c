/* WordPiece (BERT) compiled: greedy longest-match-first over a character trie, and the whole BERT path of a text
 * (normalizer, pre-tokenizer, WordPiece) in one call.
 *
 * The same algorithm and ids as the pure-Python reference (``app/engine/pipeline/models/wordpiece.py`` and
 * ``app/engine/pipeline/bert.py``):
 *
 * - WordPiece: a word longer than max_chars code points is the unknown token; otherwise from the left, the longest
 *   entry of the start trie (then of the continuation trie: entries spelled with the continuing prefix, prefix
 *   removed) that begins the rest of the word; a position where nothing matches makes the whole word unknown.
 *   The walk from one position costs at most the longest entry's length, so a text costs O(length x longest entry)
 *   whatever its content.
 * - BERT normalizer, per character, from ``bert_tables.h`` (generated from the Python reference by
 *   scripts/gen_bert_native_tables.py): clean text drops NUL, U+FFFD, controls, formats and private use and turns
 *   whitespace into a space; Chinese characters get a space on each side; strip accents and lowercase map each
 *   character as the reference does, except for NFD's canonical reordering, which crosses characters: the few
 *   characters that keep a combining character through accent stripping (flagged BERT_REORDERS) sort it into
 *   the open run of combining characters by class (``reordered``); every decomposition holding a starter
 *   (not BERT_NONSTARTERS) ends the run.
 * - BERT pre-tokenizer on the normalized characters: whitespace separates words (dropped), each punctuation
 *   character is a word of its own.
 *
 * Lone surrogates become U+FFFD and surrogate pairs one character (the service's rule, ``scrub_surrogates``).
 * Work runs with the GIL released; memory per call is the ids plus one word (at most max_chars + 1 characters are
 * kept; a longer word is only counted). Objects are immutable after construction and thread-safe.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bert_tables.h"
#include "hash_mix.h"
#include "py_items.h"

#define MAX_CP 0x110000

/* normalizer options (bit mask of ``encode_bert``) */
#define OPT_CLEAN 1
#define OPT_CHINESE 2
#define OPT_STRIP 4
#define OPT_LOWER 8

/* ---- growable buffers ------------------------------------------------------------------------------------- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} IdBuf;

static int ids_reserve(IdBuf *b, size_t more) {
    if (b->n + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + more) cap *= 2;
    int32_t *v = (int32_t *)realloc(b->v, cap * sizeof(int32_t));
    if (!v) return -1;
    b->v = v;
    b->cap = cap;
    return 0;
}

static inline int ids_push(IdBuf *b, int32_t id) {
    if (b->n == b->cap && ids_reserve(b, 1) < 0) return -1;
    b->v[b->n++] = id;
    return 0;
}

/* ---- the trie ----------------------------------------------------------------------------------------------- */

typedef struct {
    uint32_t cp, child;
} Edge;

typedef struct {
    PyObject_HEAD
    int32_t *tid;        /* per node: token id of the entry ending here, -1 if none */
    uint32_t *first;     /* per node: its edges are edges[first[n] .. first[n + 1]), sorted by code point */
    Edge *edges;
    uint32_t n_nodes;
    uint32_t roots[2];   /* 0: word starts, 1: continuations */
    int32_t ascii[2][128]; /* child of each root by ASCII character, -1 if none */
    int32_t unk_id;
    Py_ssize_t max_chars;
    PyObject **id_objs;  /* the int object of every id up to the largest entry's: lists are filled without allocating */
    int32_t n_id_objs;
} Model;

static inline int32_t child_of(const Model *m, uint32_t node, uint32_t cp) {
    uint32_t lo = m->first[node], hi = m->first[node + 1];
    const Edge *e = m->edges;
    if (hi - lo <= 8) {
        for (uint32_t i = lo; i < hi; i++) {
            if (e[i].cp == cp) return (int32_t)e[i].child;
            if (e[i].cp > cp) return -1;
        }
        return -1;
    }
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return (lo < m->first[node + 1] && e[lo].cp == cp) ? (int32_t)e[lo].child : -1;
}

/* Ids of one word (w[0..n), n <= max_chars) appended to out. */
static int wordpiece(const Model *m, const uint32_t *w, size_t n, IdBuf *out) {
    size_t mark = out->n, start = 0;
    int which = 0;
    while (start < n) {
        uint32_t cp = w[start];
        int32_t node = cp < 128 ? m->ascii[which][cp] : child_of(m, m->roots[which], cp);
        int32_t best = -1;
        size_t best_end = 0, i = start + 1;
        while (node >= 0) {
            if (m->tid[node] >= 0) {
                best = m->tid[node];
                best_end = i;
            }
            if (i >= n) break;
            node = child_of(m, (uint32_t)node, w[i]);
            i++;
        }
        if (best < 0) {
            out->n = mark;
            return ids_push(out, m->unk_id);
        }
        if (ids_push(out, best) < 0) return -1;
        start = best_end;
        which = 1;
    }
    return 0;
}

/* temporary (parent, code point) -> child map used while building */
typedef struct {
    uint64_t *keys; /* UINT64_MAX = empty */
    uint32_t *vals;
    size_t mask, used;
} EdgeMap;


static int edgemap_init(EdgeMap *h, size_t cap) {
    h->keys = (uint64_t *)malloc(cap * sizeof(uint64_t));
    h->vals = (uint32_t *)malloc(cap * sizeof(uint32_t));
    if (!h->keys || !h->vals) return -1;
    memset(h->keys, 0xff, cap * sizeof(uint64_t));
    h->mask = cap - 1;
    h->used = 0;
    return 0;
}

static int edgemap_grow(EdgeMap *h) {
    EdgeMap g;
    if (edgemap_init(&g, (h->mask + 1) * 2) < 0) {
        free(g.keys);
        free(g.vals);
        return -1;
    }
    for (size_t i = 0; i <= h->mask; i++) {
        if (h->keys[i] == UINT64_MAX) continue;
        size_t j = mix64(h->keys[i]) & g.mask;
        while (g.keys[j] != UINT64_MAX) j = (j + 1) & g.mask;
        g.keys[j] = h->keys[i];
        g.vals[j] = h->vals[i];
    }
    g.used = h->used;
    free(h->keys);
    free(h->vals);
    *h = g;
    return 0;
}

typedef struct {
    EdgeMap map;
    int32_t *tid;
    uint32_t n_nodes, cap_nodes;
} Builder;

static int64_t builder_new_node(Builder *b) {
    if (b->n_nodes == b->cap_nodes) {
        uint32_t cap = b->cap_nodes ? b->cap_nodes * 2 : 1024;
        int32_t *t = (int32_t *)realloc(b->tid, cap * sizeof(int32_t));
        if (!t) return -1;
        b->tid = t;
        b->cap_nodes = cap;
    }
    b->tid[b->n_nodes] = -1;
    return b->n_nodes++;
}

/* insert every (str, int) item of dict under root; 0 ok, -1 error set */
static int builder_add(Builder *b, uint32_t root, PyObject *dict) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyLong_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "vocabulary must map str to int");
            return -1;
        }
        long id = PyLong_AsLong(value);
        if (id < 0 || id > INT32_MAX) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "token id out of range");
            return -1;
        }
        int kind = PyUnicode_KIND(key);
        const void *data = PyUnicode_DATA(key);
        Py_ssize_t n = PyUnicode_GET_LENGTH(key);
        uint32_t node = root;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t cp = PyUnicode_READ(kind, data, i);
            uint64_t k = ((uint64_t)node << 21) | cp;
            size_t j = mix64(k) & b->map.mask;
            while (b->map.keys[j] != UINT64_MAX && b->map.keys[j] != k) j = (j + 1) & b->map.mask;
            if (b->map.keys[j] == k) {
                node = b->map.vals[j];
                continue;
            }
            int64_t child = builder_new_node(b);
            if (child < 0) {
                PyErr_NoMemory();
                return -1;
            }
            b->map.keys[j] = k;
            b->map.vals[j] = (uint32_t)child;
            node = (uint32_t)child;
            if (++b->map.used * 2 > b->map.mask && edgemap_grow(&b->map) < 0) {
                PyErr_NoMemory();
                return -1;
            }
        }
        if (b->tid[node] < 0) b->tid[node] = (int32_t)id; /* a dict has each key once */
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void Model_dealloc(Model *self) {
    if (self->id_objs) {
        for (int32_t i = 0; i < self->n_id_objs; i++) Py_XDECREF(self->id_objs[i]);
        free(self->id_objs);
    }
    free(self->tid);
    free(self->first);
    free(self->edges);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Model_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *starts, *cont;
    int unk_id;
    Py_ssize_t max_chars;
    if (!PyArg_ParseTuple(args, "O!O!in", &PyDict_Type, &starts, &PyDict_Type, &cont, &unk_id, &max_chars)) return NULL;
    if (unk_id < 0) {
        PyErr_SetString(PyExc_ValueError, "unk_id must be >= 0");
        return NULL;
    }
    Builder b = {{NULL, NULL, 0, 0}, NULL, 0, 0};
    uint64_t *keys = NULL;
    Model *self = NULL;
    size_t want = 64;
    while (want < (size_t)(PyDict_GET_SIZE(starts) + PyDict_GET_SIZE(cont)) * 8) want <<= 1;
    if (edgemap_init(&b.map, want) < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    if (builder_new_node(&b) < 0 || builder_new_node(&b) < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    if (builder_add(&b, 0, starts) < 0 || builder_add(&b, 1, cont) < 0) goto fail;
    if (b.n_nodes >= (1u << 31) - 1 || (uint64_t)b.n_nodes >= (1ull << 43)) {
        PyErr_SetString(PyExc_ValueError, "vocabulary too large");
        goto fail;
    }
    self = (Model *)type->tp_alloc(type, 0);
    if (!self) goto fail;
    size_t n_edges = b.map.used;
    keys = (uint64_t *)malloc((n_edges + 1) * sizeof(uint64_t));
    self->first = (uint32_t *)calloc((size_t)b.n_nodes + 1, sizeof(uint32_t));
    self->edges = (Edge *)malloc((n_edges + 1) * sizeof(Edge));
    if (!keys || !self->first || !self->edges) {
        PyErr_NoMemory();
        goto fail;
    }
    /* edges in (parent, code point) order: each parent's children are contiguous and sorted */
    size_t k = 0;
    for (size_t i = 0; i <= b.map.mask; i++)
        if (b.map.keys[i] != UINT64_MAX) keys[k++] = b.map.keys[i];
    qsort(keys, n_edges, sizeof(uint64_t), cmp_u64);
    for (size_t e = 0; e < n_edges; e++) {
        uint64_t key = keys[e];
        size_t j = mix64(key) & b.map.mask;
        while (b.map.keys[j] != key) j = (j + 1) & b.map.mask;
        self->edges[e].cp = (uint32_t)(key & 0x1FFFFF);
        self->edges[e].child = b.map.vals[j];
        self->first[(key >> 21) + 1]++;
    }
    for (uint32_t n = 0; n < b.n_nodes; n++) self->first[n + 1] += self->first[n];
    self->tid = b.tid;
    b.tid = NULL;
    self->n_nodes = b.n_nodes;
    self->roots[0] = 0;
    self->roots[1] = 1;
    for (int r = 0; r < 2; r++)
        for (uint32_t c = 0; c < 128; c++) self->ascii[r][c] = child_of(self, (uint32_t)r, c);
    self->unk_id = unk_id;
    self->max_chars = max_chars < 0 ? 0 : max_chars;
    int32_t top = unk_id;
    for (uint32_t n = 0; n < b.n_nodes; n++)
        if (self->tid[n] > top) top = self->tid[n];
    if (top < (1 << 22)) {
        self->id_objs = (PyObject **)calloc((size_t)top + 1, sizeof(PyObject *));
        if (!self->id_objs) {
            PyErr_NoMemory();
            goto fail;
        }
        self->n_id_objs = top + 1;
        for (int32_t i = 0; i <= top; i++)
            if (!(self->id_objs[i] = PyLong_FromLong(i))) goto fail;
    }
    free(keys);
    free(b.map.keys);
    free(b.map.vals);
    return (PyObject *)self;
fail:
    free(keys);
    free(b.map.keys);
    free(b.map.vals);
    free(b.tid);
    Py_XDECREF(self);
    return NULL;
}

/* ---- the BERT path ------------------------------------------------------------------------------------------ */

static inline const bert_record *record_of(uint32_t cp) {
    return &bert_records[bert_stage2[((uint32_t)bert_stage1[cp >> BERT_BLOCK_SHIFT] << BERT_BLOCK_SHIFT) |
                                     (cp & ((1u << BERT_BLOCK_SHIFT) - 1))]];
}

/* per option mask and ASCII character: its output (-1: dropped) */
static int16_t ascii_out[16][128];
/* per ASCII character as pre-tokenizer input: 0 word, 1 whitespace, 2 punctuation */
static uint8_t ascii_class[128];

/* the word being collected: w[0..min(len, keep)) stored, len counted; w[run_from..run_end) is the open run of
 * combining characters NFD may reorder (run_end == len while it is open; NO_RUN or anything else closes it) */
typedef struct {
    uint32_t *w;
    size_t len, cap, keep, run_from, run_end;
} Word;

#define NO_RUN SIZE_MAX

static inline int word_push(Word *wd, uint32_t cp) {
    if (wd->len < wd->keep) {
        if (wd->len == wd->cap) {
            size_t cap = wd->cap ? wd->cap * 2 : 128;
            if (cap > wd->keep) cap = wd->keep;
            uint32_t *w = (uint32_t *)realloc(wd->w, cap * sizeof(uint32_t));
            if (!w) return -1;
            wd->w = w;
            wd->cap = cap;
        }
        wd->w[wd->len] = cp;
    }
    wd->len++;
    return 0;
}

static inline int word_flush(const Model *m, Word *wd, IdBuf *out) {
    if (wd->len == 0) return 0;
    size_t n = wd->len;
    wd->len = 0;
    wd->run_end = NO_RUN;
    if (n > (size_t)m->max_chars) return ids_push(out, m->unk_id);
    return wordpiece(m, wd->w, n, out);
}

/* one normalized character into the pre-tokenizer */
static inline int pre_token(const Model *m, Word *wd, IdBuf *out, uint32_t o) {
    int cls;
    if (o < 128) {
        cls = ascii_class[o];
    } else {
        uint8_t f = record_of(o)->flags;
        cls = (f & BERT_WS) ? 1 : (f & BERT_PUNCT) ? 2 : 0;
    }
    if (cls == 0) return word_push(wd, o);
    if (word_flush(m, wd, out) < 0) return -1;
    if (cls == 1) return 0;
    if (word_push(wd, o) < 0) return -1;
    return word_flush(m, wd, out);
}

/* the mapped output of cp (strip accents / lowercase as opts say) into the pre-tokenizer */
static inline int mapped(const Model *m, Word *wd, IdBuf *out, uint32_t cp, const bert_record *r, int opts) {
    int which = (opts & OPT_STRIP) ? ((opts & OPT_LOWER) ? 2 : 0) : (opts & OPT_LOWER) ? 1 : -1;
    if (which >= 0 && r->n[which] != BERT_IDENTITY) {
        const uint32_t *p = bert_pool + r->off[which];
        for (int i = 0; i < r->n[which]; i++)
            if (pre_token(m, wd, out, p[i]) < 0) return -1;
        return 0;
    }
    if ((opts & OPT_STRIP) && (r->flags & BERT_HANGUL)) {
        uint32_t s = cp - 0xAC00;
        if (pre_token(m, wd, out, 0x1100 + s / 588) < 0 || pre_token(m, wd, out, 0x1161 + (s % 588) / 28) < 0)
            return -1;
        return s % 28 ? pre_token(m, wd, out, 0x11A7 + s % 28) : 0;
    }
    return pre_token(m, wd, out, cp);
}

/* the combining class of a character a REORDERS character keeps (0 for any other) */
static int class_of(uint32_t cp) {
    int lo = 0, hi = BERT_N_CLASSES;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (bert_classes[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < BERT_N_CLASSES && bert_classes[lo][0] == cp ? (int)bert_classes[lo][1] : 0;
}

/* a REORDERS character under strip accents: what it keeps (a starter first, if any, then combining characters,
 * as the table generator checks), each combining character sorted into the open run by class, stably: NFD's
 * canonical ordering restricted to the characters that survive (the dropped marks only decide where runs end) */
static int reordered(const Model *m, Word *wd, IdBuf *out, uint32_t cp, const bert_record *r, int opts) {
    if (!(r->flags & BERT_NONSTARTERS)) wd->run_end = NO_RUN;
    int which = (opts & OPT_LOWER) ? 2 : 0;
    const uint32_t *p = &cp;
    int n = 1;
    if (r->n[which] != BERT_IDENTITY) {
        p = bert_pool + r->off[which];
        n = r->n[which];
    }
    for (int i = 0; i < n; i++) {
        uint32_t k = p[i];
        int ccc = class_of(k);
        if (ccc == 0) {
            if (pre_token(m, wd, out, k) < 0) return -1;
            wd->run_from = wd->run_end = wd->len; /* a starter: the next run begins after it */
            continue;
        }
        if (wd->run_end != wd->len) wd->run_from = wd->len;
        if (word_push(wd, k) < 0) return -1;
        if (wd->len <= wd->keep) { /* (a longer word is [UNK] whatever the order) */
            size_t j = wd->len - 1;
            while (j > wd->run_from && class_of(wd->w[j - 1]) > ccc) {
                wd->w[j] = wd->w[j - 1];
                j--;
            }
            wd->w[j] = k;
        }
        wd->run_end = wd->len;
    }
    return 0;
}

/* normalize + pre-tokenize + WordPiece one stretch of text; 0 ok, -1 no memory */
static int bert_range(const Model *m, int kind, const void *data, Py_ssize_t n, int opts, Word *wd, IdBuf *out) {
    const int16_t *aout = ascii_out[opts & 15];
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t cp = PyUnicode_READ(kind, data, i);
        if (cp < 128) {
            int o = aout[cp];
            if (o < 0) continue;
            int cls = ascii_class[o];
            if (cls == 0) {
                if (word_push(wd, (uint32_t)o) < 0) return -1;
                continue;
            }
            if (word_flush(m, wd, out) < 0) return -1;
            if (cls == 2 && (word_push(wd, (uint32_t)o) < 0 || word_flush(m, wd, out) < 0)) return -1;
            continue;
        }
        if (cp >= 0xD800 && cp < 0xE000) {
            uint32_t low = i + 1 < n ? PyUnicode_READ(kind, data, i + 1) : 0;
            if (cp < 0xDC00 && low >= 0xDC00 && low < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                i++;
            } else {
                cp = 0xFFFD;
            }
        }
        const bert_record *r = record_of(cp);
        uint8_t f = r->flags;
        if (opts & OPT_CLEAN) {
            if (f & BERT_DROP) continue;
            if (f & BERT_WS) {
                if (word_flush(m, wd, out) < 0) return -1;
                continue;
            }
        }
        if ((opts & OPT_CHINESE) && (f & BERT_CJK)) {
            if (word_flush(m, wd, out) < 0 || mapped(m, wd, out, cp, r, opts) < 0 || word_flush(m, wd, out) < 0)
                return -1;
            continue;
        }
        if (opts & OPT_STRIP) {
            if (f & BERT_REORDERS) {
                if (reordered(m, wd, out, cp, r, opts) < 0) return -1;
                continue;
            }
            if (!(f & BERT_NONSTARTERS)) wd->run_end = NO_RUN; /* its decomposition has a starter: the run ends */
        }
        if (mapped(m, wd, out, cp, r, opts) < 0) return -1;
    }
    return word_flush(m, wd, out);
}

/* ---- Python methods ----------------------------------------------------------------------------------------- */

static PyObject *ids_to_list(const Model *m, IdBuf *b, int rc) {
    if (rc < 0) {
        free(b->v);
        return PyErr_NoMemory();
    }
    PyObject *list = PyList_New((Py_ssize_t)b->n);
    if (list) {
        for (size_t i = 0; i < b->n; i++) {
            int32_t id = b->v[i];
            PyObject *v;
            if (id < m->n_id_objs) {
                v = m->id_objs[id];
                Py_INCREF(v);
            } else {
                v = PyLong_FromLong(id);
            }
            if (!v) {
                Py_DECREF(list);
                list = NULL;
                break;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)i, v);
        }
    }
    free(b->v);
    return list;
}

/* ids of one pre-token given as str (kind/data/n) */
static int word_range(const Model *m, int kind, const void *data, Py_ssize_t n, Word *wd, IdBuf *out) {
    if (n == 0) return 0;
    if (n > m->max_chars) return ids_push(out, m->unk_id);
    wd->len = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (word_push(wd, PyUnicode_READ(kind, data, i)) < 0) return -1;
    return word_flush(m, wd, out);
}

PyDoc_STRVAR(tokenize_doc, "tokenize(word) -> list[int]: WordPiece ids of one pre-token.");

static PyObject *Model_tokenize(Model *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "word must be str");
        return NULL;
    }
    IdBuf b = {NULL, 0, 0};
    Word wd = {NULL, 0, 0, (size_t)self->max_chars + 1, 0, NO_RUN};
    int rc;
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    Py_BEGIN_ALLOW_THREADS rc = word_range(self, kind, data, n, &wd, &b);
    Py_END_ALLOW_THREADS free(wd.w);
    return ids_to_list(self, &b, rc);
}

/* encode() and encode_bert(): the ids of a list of items; str items through bert_range with ``opts`` (``bert``)
 * or word_range (each one pre-token), int ids passed through. */
static PyObject *encode_items(Model *self, PyObject *items, int bert, int opts) {
    Items it;
    if (items_read(items, &it) < 0) return NULL;
    IdBuf b = {NULL, 0, 0};
    Word wd = {NULL, 0, 0, (size_t)self->max_chars + 1, 0, NO_RUN};
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t t = 0; t < it.count && rc == 0; t++) {
        if (it.passed[t] >= 0) {
            rc = ids_push(&b, it.passed[t]);
            continue;
        }
        PyObject *s = PyList_GET_ITEM(it.held, t);
        int kind = PyUnicode_KIND(s);
        const void *data = PyUnicode_DATA(s);
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        rc = bert ? bert_range(self, kind, data, n, opts, &wd, &b) : word_range(self, kind, data, n, &wd, &b);
    }
    Py_END_ALLOW_THREADS items_free(&it);
    free(wd.w);
    return ids_to_list(self, &b, rc);
}

PyDoc_STRVAR(encode_doc, "encode(items) -> list[int]: ids of pre-tokens (str) and ids (int, passed through), in order.");

static PyObject *Model_encode(Model *self, PyObject *items) {
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "items must be a list");
        return NULL;
    }
    return encode_items(self, items, 0, 0);
}

PyDoc_STRVAR(encode_bert_doc,
             "encode_bert(items, options) -> list[int]: ids of text stretches (str: BERT-normalized with the options "
             "CLEAN|CHINESE|STRIP|LOWER, pre-tokenized, WordPiece) and ids (int, passed through), in order.");

static PyObject *Model_encode_bert(Model *self, PyObject *args) {
    PyObject *items;
    int opts;
    if (!PyArg_ParseTuple(args, "O!i", &PyList_Type, &items, &opts)) return NULL;
    return encode_items(self, items, 1, opts);
}

/* normalized text of one str under opts (no pre-tokenization): for tests of the tables */
static int push_normalized(uint32_t **buf, size_t *n, size_t *cap, uint32_t c) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        uint32_t *v = (uint32_t *)realloc(*buf, nc * sizeof(uint32_t));
        if (!v) return -1;
        *buf = v;
        *cap = nc;
    }
    (*buf)[(*n)++] = c;
    return 0;
}

PyDoc_STRVAR(normalize_doc,
             "normalize(text, options) -> str | None: the BERT normalizer's output per character, from the tables "
             "(for tests of the tables); None when accent stripping would reorder across characters (BERT_REORDERS).");

static PyObject *Model_normalize(PyObject *cls, PyObject *args) {
    PyObject *text;
    int opts;
    if (!PyArg_ParseTuple(args, "Ui", &text, &opts)) return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    uint32_t *buf = NULL;
    size_t len = 0, cap = 0;
    int which = (opts & OPT_STRIP) ? ((opts & OPT_LOWER) ? 2 : 0) : (opts & OPT_LOWER) ? 1 : -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t cp = PyUnicode_READ(kind, data, i);
        if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
        const bert_record *r = record_of(cp);
        int rc = 0;
        if ((opts & OPT_STRIP) && (r->flags & BERT_REORDERS)) {
            free(buf);
            Py_RETURN_NONE;
        }
        if ((opts & OPT_CLEAN) && (r->flags & BERT_DROP)) continue;
        if ((opts & OPT_CLEAN) && (r->flags & BERT_WS)) {
            rc = push_normalized(&buf, &len, &cap, ' ');
        } else {
            int cjk = (opts & OPT_CHINESE) && (r->flags & BERT_CJK);
            if (cjk) rc |= push_normalized(&buf, &len, &cap, ' ');
            if (which >= 0 && r->n[which] != BERT_IDENTITY) {
                for (int k = 0; k < r->n[which]; k++) rc |= push_normalized(&buf, &len, &cap, bert_pool[r->off[which] + k]);
            } else if ((opts & OPT_STRIP) && (r->flags & BERT_HANGUL)) {
                uint32_t s = cp - 0xAC00;
                rc |= push_normalized(&buf, &len, &cap, 0x1100 + s / 588);
                rc |= push_normalized(&buf, &len, &cap, 0x1161 + (s % 588) / 28);
                if (s % 28) rc |= push_normalized(&buf, &len, &cap, 0x11A7 + s % 28);
            } else {
                rc |= push_normalized(&buf, &len, &cap, cp);
            }
            if (cjk) rc |= push_normalized(&buf, &len, &cap, ' ');
        }
        if (rc) {
            free(buf);
            return PyErr_NoMemory();
        }
    }
    PyObject *out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf ? (void *)buf : (void *)"", (Py_ssize_t)len);
    free(buf);
    return out;
}

static PyObject *Model_n_nodes(Model *self, void *closure) { return PyLong_FromUnsignedLong(self->n_nodes); }

static PyMethodDef Model_methods[] = {
    {"tokenize", (PyCFunction)Model_tokenize, METH_O, tokenize_doc},
    {"encode", (PyCFunction)Model_encode, METH_O, encode_doc},
    {"encode_bert", (PyCFunction)Model_encode_bert, METH_VARARGS, encode_bert_doc},
    {"normalize", (PyCFunction)Model_normalize, METH_VARARGS | METH_STATIC, normalize_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Model_getset[] = {
    {"n_nodes", (getter)Model_n_nodes, NULL, "trie nodes (both tries)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._wordpiece.Model",
    .tp_basicsize = sizeof(Model),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WordPiece: Model(starts: dict[str, int], continuations: dict[str, int], unk_id, max_chars).",
    .tp_methods = Model_methods,
    .tp_getset = Model_getset,
    .tp_new = Model_new,
};

static void init_ascii(void) {
    for (uint32_t c = 0; c < 128; c++) {
        uint8_t f = record_of(c)->flags;
        ascii_class[c] = (f & BERT_WS) ? 1 : (f & BERT_PUNCT) ? 2 : 0;
    }
    for (int opts = 0; opts < 16; opts++) {
        int which = (opts & OPT_STRIP) ? ((opts & OPT_LOWER) ? 2 : 0) : (opts & OPT_LOWER) ? 1 : -1;
        for (uint32_t c = 0; c < 128; c++) {
            const bert_record *r = record_of(c);
            int16_t o = (int16_t)c;
            if ((opts & OPT_CLEAN) && (r->flags & BERT_DROP)) o = -1;
            else if ((opts & OPT_CLEAN) && (r->flags & BERT_WS)) o = ' ';
            else if (which >= 0 && r->n[which] != BERT_IDENTITY) o = r->n[which] ? (int16_t)bert_pool[r->off[which]] : -1;
            ascii_out[opts][c] = o;
        }
    }
}

static struct PyModuleDef wordpiece_module = {
    PyModuleDef_HEAD_INIT, "_wordpiece", "Compiled WordPiece and the BERT normalizer and pre-tokenizer.", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__wordpiece(void) {
    /* every ASCII character maps to at most one ASCII character under every option (the fast path's premise) */
    for (uint32_t c = 0; c < 128; c++) {
        const bert_record *r = record_of(c);
        for (int k = 0; k < 3; k++)
            if (r->n[k] != BERT_IDENTITY && (r->n[k] > 1 || (r->n[k] == 1 && bert_pool[r->off[k]] >= 128))) {
                PyErr_SetString(PyExc_ImportError, "bert_tables.h: an ASCII character maps outside ASCII");
                return NULL;
            }
        if (r->flags & (BERT_CJK | BERT_REORDERS | BERT_HANGUL)) {
            PyErr_SetString(PyExc_ImportError, "bert_tables.h: unexpected flags on an ASCII character");
            return NULL;
        }
    }
    init_ascii();
    if (PyType_Ready(&ModelType) < 0) return NULL;
    PyObject *m = PyModule_Create(&wordpiece_module);
    if (!m) return NULL;
    Py_INCREF(&ModelType);
    if (PyModule_AddObject(m, "Model", (PyObject *)&ModelType) < 0) {
        Py_DECREF(&ModelType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "CLEAN", OPT_CLEAN);
    PyModule_AddIntConstant(m, "CHINESE", OPT_CHINESE);
    PyModule_AddIntConstant(m, "STRIP", OPT_STRIP);
    PyModule_AddIntConstant(m, "LOWER", OPT_LOWER);
    PyModule_AddStringConstant(m, "UNIDATA_VERSION", BERT_UNIDATA_VERSION);
    return m;
}
