/*
 * trainer.c: the compiled half of the BPE trainer (app.engine._native._trainer).
 *
 * Two parts, both optional accelerations of pure-Python reference code that stays the specification:
 *
 * PretokenCounter  counts the pieces of a bundled pre-tokenizer pattern (the hand-written scanners of
 *                  pretokenizer.h) in a C hash table bytes -> count. Entries live in an array in order of first
 *                  appearance, so exporting them gives exactly what `Counter(regex.findall(...))` gives in
 *                  app/engine/training/corpus.py (UTF-8 keys). feed()/feed_many() release the GIL; feed_many can
 *                  count in two threads: the first half of the chunks goes straight into the table, the second
 *                  into a private table that is then folded in, in its own order, which keeps first-appearance
 *                  order exact.
 *
 * learn()          the incremental merge learner of app/engine/training/merges.py (`learn_merges`) on flat arrays:
 *                  the words as one array of slots (one per base unit, see "learner" below), a pair hash table
 *                  (count, first position, the slots where the pair occurs), a binary max-heap with lazy
 *                  invalidation, both tie-break rules. A merge visits only the merged occurrences and their
 *                  neighbours, not the words that hold them. It produces the same merges and stop reason (the
 *                  tests compare it with the Python learner on random corpora). Symbols are
 *                  identified by their sequence of base symbols, which is how a merge that produces an existing
 *                  symbol (two splits of the same text) reuses it. The lexicographic rule compares per-symbol
 *                  "order units" (the Python order_key of a base symbol without its terminator), concatenated.
 *
 * wordpiece_learn the WordPiece merge learner (train_wordpiece.c, compiled into this module).
 * UnigramWords    the Unigram learner's hot loops (train_unigram.c, compiled into this module): substring seeds, the
 *                  E-step (forward-backward) and the pruning (Viterbi, likelihood loss), optionally in threads.
 *
 * Positions (first-seen) are slot indices: the same order as the Python word << 40 | offset (the words hold fewer
 * than 2**32 - 2 units and words in all, checked).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes_hash.h"
#include "pretokenizer.h"
#include "hash_mix.h"
#include "sp_rules.h"

/* ------------------------------------------------------------------------------------------------ hashing */


/* ------------------------------------------------------------------------------------------------ piece table */

typedef struct {
    uint64_t hash;
    uint64_t off; /* into the arena */
    int64_t count;
    uint32_t len;
} PieceEntry;

typedef struct {
    uint64_t *slots; /* (hash >> 32) << 32 | (entry index + 1); 0 = empty */
    size_t mask;
    PieceEntry *ent; /* in order of first appearance */
    size_t n, cap;
    uint8_t *arena;
    size_t arena_len, arena_cap;
} PieceTable;

static void pt_free(PieceTable *t)
{
    free(t->slots);
    free(t->ent);
    free(t->arena);
    memset(t, 0, sizeof(*t));
}

static int pt_rehash(PieceTable *t, size_t nslots)
{
    uint64_t *slots = calloc(nslots, sizeof(uint64_t));
    if (!slots)
        return -1;
    size_t mask = nslots - 1;
    for (size_t k = 0; k < t->n; k++) {
        uint64_t h = t->ent[k].hash;
        size_t i = h & mask;
        while (slots[i])
            i = (i + 1) & mask;
        slots[i] = (h >> 32) << 32 | (uint64_t)(k + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* Add count c to the piece s[0..len) (hash h); inserts it at the end of the order if new. -1 on OOM. */
static int pt_add(PieceTable *t, const uint8_t *s, uint32_t len, uint64_t h, int64_t c)
{
    if (!t->slots || (t->n + 1) * 2 > t->mask + 1) {
        if (pt_rehash(t, t->slots ? (t->mask + 1) * 2 : 1024))
            return -1;
    }
    uint64_t tag = (h >> 32) << 32;
    size_t i = h & t->mask;
    for (;;) {
        uint64_t sl = t->slots[i];
        if (!sl)
            break;
        if ((sl & 0xFFFFFFFF00000000ULL) == tag) {
            PieceEntry *e = &t->ent[(uint32_t)sl - 1];
            if (e->len == len && bytes_eq(t->arena + e->off, s, len)) {
                e->count += c;
                return 0;
            }
        }
        i = (i + 1) & t->mask;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        PieceEntry *ent = realloc(t->ent, cap * sizeof(PieceEntry));
        if (!ent)
            return -1;
        t->ent = ent;
        t->cap = cap;
    }
    if (t->arena_len + len > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 1 << 16;
        while (cap < t->arena_len + len)
            cap *= 2;
        uint8_t *arena = realloc(t->arena, cap);
        if (!arena)
            return -1;
        t->arena = arena;
        t->arena_cap = cap;
    }
    memcpy(t->arena + t->arena_len, s, len);
    PieceEntry *e = &t->ent[t->n];
    e->hash = h;
    e->off = t->arena_len;
    e->count = c;
    e->len = len;
    t->arena_len += len;
    t->n++;
    t->slots[i] = tag | (uint64_t)t->n;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ word scanners */

/* Two scanners of the trainers' whitespace word splitting (app/engine/training/word_counter.py turns their pieces
   into words). Lines end at "\n"; a "\r" right before it is part of the line end (the Python lines_of strips it).
   Every piece holding "\n", and every piece of spaces only, is ignored there. */
enum { SCAN_SP_WORDS = 100, SCAN_METASPACE_WORDS = 101 };

static inline int is_line_end(const uint8_t *s, size_t i, size_t n)
{
    return s[i] == '\n' || (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n');
}

static inline size_t word_end(const uint8_t *s, size_t j, size_t n)
{
    while (j < n && s[j] != ' ' && !is_line_end(s, j, n))
        j++;
    return j;
}

/* SentencePiece with remove_extra_whitespaces: runs of spaces separate words and are dropped at both ends of a
   line. Pieces: "word" (the first of its line), " word" (after a space), runs of spaces, line ends. */
static size_t scan_sp_words(const uint8_t *s, size_t i, size_t n)
{
    if (s[i] == '\n')
        return i + 1;
    if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')
        return i + 2;
    if (s[i] != ' ')
        return word_end(s, i, n);
    size_t j = i;
    while (j < n && s[j] == ' ')
        j++;
    int line_start = i == 0 || s[i - 1] == '\n';
    if (line_start || j == n || is_line_end(s, j, n))
        return j; /* leading or trailing spaces */
    if (j - i > 1)
        return j - 1; /* the extra spaces; the last one starts the next word */
    return word_end(s, j, n);
}

/* Hugging Face's Metaspace (prepend always, split): every space starts a word, runs are not collapsed. Pieces:
   "word" (the first of its line, not after a space), " word" or " " (a space and what follows it), line ends. */
static size_t scan_metaspace_words(const uint8_t *s, size_t i, size_t n)
{
    if (s[i] == '\n')
        return i + 1;
    if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')
        return i + 2;
    return word_end(s, s[i] == ' ' ? i + 1 : i, n);
}

static scan_fn trainer_scanner_of(int id)
{
    if (id == SCAN_SP_WORDS)
        return scan_sp_words;
    if (id == SCAN_METASPACE_WORDS)
        return scan_metaspace_words;
    return scanner_of(id);
}

/* Count the pieces of one UTF-8 text. */
static int pt_count_text(PieceTable *t, scan_fn scan, const uint8_t *s, size_t n, int64_t *pieces)
{
    int64_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t e = scan(s, i, n);
        if (e - i > UINT32_MAX)
            return -1;
        if (pt_add(t, s + i, (uint32_t)(e - i), hash_bytes(s + i, e - i), 1))
            return -1;
        k++;
        i = e;
    }
    *pieces += k;
    return 0;
}

/* Fold src into dst in src's order (entries new to dst go to its end). */
static int pt_merge(PieceTable *dst, const PieceTable *src)
{
    for (size_t k = 0; k < src->n; k++) {
        const PieceEntry *e = &src->ent[k];
        if (pt_add(dst, src->arena + e->off, e->len, e->hash, e->count))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ counter type */

typedef struct {
    PyObject_HEAD
    scan_fn scan;
    int scanner;
    int busy;
    PieceTable table;
    int64_t pieces;
} CounterObject;

static int counter_init(CounterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"scanner", NULL};
    int scanner;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i", kwlist, &scanner))
        return -1;
    scan_fn scan = trainer_scanner_of(scanner);
    if (!scan) {
        PyErr_Format(PyExc_ValueError, "unknown scanner id %d", scanner);
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return -1;
    }
    pt_free(&self->table);
    self->scan = scan;
    self->scanner = scanner;
    self->pieces = 0;
    return 0;
}

static void counter_dealloc(CounterObject *self)
{
    pt_free(&self->table);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int counter_enter(CounterObject *self)
{
    if (!self->scan) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is not initialised");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return -1;
    }
    self->busy = 1;
    return 0;
}

/* Whether s[0..n) is well-formed UTF-8 as Python's strict decoder reads it (no overlong forms, surrogates or code
   points above U+10FFFF) without U+2581 (which the whitespace counters leave to Python). Whole sequences are
   matched in a little-endian word of four bytes (ASCII four at a time). */
static int utf8_plain(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i + 4 <= n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint32_t w;
        memcpy(&w, s + i, 4);
#else
        uint32_t w = (uint32_t)s[i] | (uint32_t)s[i + 1] << 8 | (uint32_t)s[i + 2] << 16 | (uint32_t)s[i + 3] << 24;
#endif
        if (!(w & 0x80808080u)) {
            i += 4;
        } else if (!(w & 0x80u)) {
            i++;
        } else if ((w & 0xC0E0u) == 0x80C0u) {
            if (s[i] < 0xC2)
                return 0; /* overlong */
            i += 2;
        } else if ((w & 0xC0C0F0u) == 0x8080E0u) {
            if ((s[i] == 0xE0 && s[i + 1] < 0xA0) || (s[i] == 0xED && s[i + 1] >= 0xA0) || (w & 0xFFFFFFu) == 0x8196E2u)
                return 0; /* overlong, a surrogate, or U+2581 */
            i += 3;
        } else if ((w & 0xC0C0C0F8u) == 0x808080F0u) {
            if ((s[i] == 0xF0 && s[i + 1] < 0x90) || s[i] > 0xF4 || (s[i] == 0xF4 && s[i + 1] >= 0x90))
                return 0; /* overlong, or above U+10FFFF */
            i += 4;
        } else {
            return 0;
        }
    }
    while (i < n) { /* the last one to three bytes: ASCII, or one two- or three-byte sequence */
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c < 0xE0 && i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
            i += 2;
        } else if (c >= 0xE0 && c < 0xF0 && i + 2 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
                   !(c == 0xE0 && s[i + 1] < 0xA0) && !(c == 0xED && s[i + 1] >= 0xA0) &&
                   !(c == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81)) {
            i += 3;
        } else {
            return 0;
        }
    }
    return 1;
}

/* feed_utf8(data): feed(data.decode()) without decoding, for utf8_plain data; False (nothing counted) otherwise. */
static PyObject *counter_feed_utf8(CounterObject *self, PyObject *data)
{
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "data must be bytes, not %.100s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(data);
    size_t n = (size_t)PyBytes_GET_SIZE(data);
    if (counter_enter(self))
        return NULL;
    int rc = 1;
    Py_BEGIN_ALLOW_THREADS
    if (utf8_plain(s, n))
        rc = pt_count_text(&self->table, self->scan, s, n, &self->pieces);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc < 0)
        return PyErr_NoMemory();
    return PyBool_FromLong(rc == 0);
}

static PyObject *counter_feed(CounterObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size); /* raises UnicodeEncodeError on lone surrogates */
    if (!utf8 || counter_enter(self))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pt_count_text(&self->table, self->scan, (const uint8_t *)utf8, (size_t)size, &self->pieces);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

typedef struct {
    PieceTable *table;
    scan_fn scan;
    const uint8_t **text;
    const size_t *len;
    size_t from, to;
    int64_t pieces;
    int rc;
} CountJob;

static void *count_job(void *arg)
{
    CountJob *j = arg;
    for (size_t k = j->from; k < j->to && !j->rc; k++)
        j->rc = pt_count_text(j->table, j->scan, j->text[k], j->len[k], &j->pieces);
    return NULL;
}

/* feed_many(texts, threads=1): count a list of chunks; with threads=2 the second half is counted concurrently. */
static PyObject *counter_feed_many(CounterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"texts", "threads", NULL};
    PyObject *texts;
    int threads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|i", kwlist, &texts, &threads))
        return NULL;
    PyObject *seq = PySequence_Fast(texts, "texts must be a sequence of str");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const uint8_t **ptr = PyMem_Calloc((size_t)n + 1, sizeof(*ptr));
    size_t *len = PyMem_Calloc((size_t)n + 1, sizeof(*len));
    if (!ptr || !len) {
        PyErr_NoMemory();
        goto fail;
    }
    size_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyUnicode_Check(t)) {
            PyErr_Format(PyExc_TypeError, "texts must be str, not %.100s", Py_TYPE(t)->tp_name);
            goto fail;
        }
        Py_ssize_t size;
        const char *u = PyUnicode_AsUTF8AndSize(t, &size);
        if (!u)
            goto fail;
        ptr[k] = (const uint8_t *)u;
        len[k] = (size_t)size;
        total += (size_t)size;
    }
    if (counter_enter(self))
        goto fail;
    /* Split point: the first half by bytes goes to the shared table, the rest to a private one. */
    size_t split = (size_t)n, acc = 0;
    if (threads >= 2 && n >= 2) {
        for (split = 0; split < (size_t)n - 1 && acc + len[split] / 2 < total / 2; split++)
            acc += len[split];
        if (split == 0)
            split = 1;
    }
    PieceTable local = {0};
    CountJob j0 = {&self->table, self->scan, ptr, len, 0, split, 0, 0};
    CountJob j1 = {&local, self->scan, ptr, len, split, (size_t)n, 0, 0};
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_t th;
    int spawned = split < (size_t)n && pthread_create(&th, NULL, count_job, &j1) == 0;
    count_job(&j0);
    if (split < (size_t)n) {
        if (spawned)
            pthread_join(th, NULL);
        else
            count_job(&j1);
    }
    rc = j0.rc || j1.rc || pt_merge(&self->table, &local);
    pt_free(&local);
    Py_END_ALLOW_THREADS
    self->pieces += j0.pieces + j1.pieces;
    self->busy = 0;
    PyMem_Free(ptr);
    PyMem_Free(len);
    Py_DECREF(seq);
    if (rc)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
fail:
    PyMem_Free(ptr);
    PyMem_Free(len);
    Py_DECREF(seq);
    return NULL;
}

static PyObject *counter_items(CounterObject *self, PyObject *unused)
{
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return NULL;
    }
    PieceTable *t = &self->table;
    PyObject *list = PyList_New((Py_ssize_t)t->n);
    if (!list)
        return NULL;
    for (size_t k = 0; k < t->n; k++) {
        PieceEntry *e = &t->ent[k];
        PyObject *item = Py_BuildValue("(y#L)", (const char *)t->arena + e->off, (Py_ssize_t)e->len,
                                       (long long)e->count);
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)k, item);
    }
    return list;
}

/* words(dummy_prefix, collapse) -> dict[str, int]: the whitespace words the pieces stand for (the Unigram and
   SentencePiece kinds, app/engine/training/word_counter.py): a piece holding a line end is skipped, and with
   collapse so is a piece of spaces only; a piece starting with a space becomes U+2581 + the rest, any other
   piece gets U+2581 in front when dummy_prefix; equal words have their counts summed, in first-appearance order. */
static PyObject *counter_words(CounterObject *self, PyObject *args)
{
    int dummy, collapse;
    if (!PyArg_ParseTuple(args, "pp", &dummy, &collapse))
        return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return NULL;
    }
    PieceTable *t = &self->table;
    PyObject *out = PyDict_New();
    uint8_t *buf = NULL;
    size_t cap = 0;
    if (!out)
        return NULL;
    for (size_t k = 0; k < t->n; k++) {
        const PieceEntry *e = &t->ent[k];
        const uint8_t *s = t->arena + e->off;
        uint32_t len = e->len;
        if (memchr(s, '\n', len))
            continue;
        if (collapse) {
            uint32_t j = 0;
            while (j < len && s[j] == ' ')
                j++;
            if (j == len)
                continue;
        }
        int lead = len && s[0] == ' ';
        size_t n = (size_t)len - (size_t)lead + ((lead || dummy) ? 3 : 0);
        if (n > cap) {
            size_t c = cap ? cap * 2 : 256;
            while (c < n)
                c *= 2;
            uint8_t *b = realloc(buf, c);
            if (!b) {
                PyErr_NoMemory();
                goto fail;
            }
            buf = b;
            cap = c;
        }
        size_t at = 0;
        if (lead || dummy) {
            buf[0] = 0xE2; /* U+2581 */
            buf[1] = 0x96;
            buf[2] = 0x81;
            at = 3;
        }
        memcpy(buf + at, s + lead, (size_t)len - (size_t)lead);
        PyObject *word = PyUnicode_DecodeUTF8((const char *)buf, (Py_ssize_t)n, "strict");
        if (!word)
            goto fail;
        PyObject *old = PyDict_GetItemWithError(out, word);
        long long prev = 0;
        if (old) {
            prev = PyLong_AsLongLong(old);
            if (prev == -1 && PyErr_Occurred()) {
                Py_DECREF(word);
                goto fail;
            }
        } else if (PyErr_Occurred()) {
            Py_DECREF(word);
            goto fail;
        }
        PyObject *v = PyLong_FromLongLong(prev + e->count);
        int rc = v ? PyDict_SetItem(out, word, v) : -1;
        Py_XDECREF(v);
        Py_DECREF(word);
        if (rc < 0)
            goto fail;
    }
    free(buf);
    return out;
fail:
    free(buf);
    Py_DECREF(out);
    return NULL;
}

/* ---- the SentencePiece / Metaspace words of the pieces without Python objects (see counter_words) */

/* Whether piece e stands for a word (0: a line end, or with collapse spaces only); *rest / *rest_len: its bytes
   after a leading space, *marker: whether the word starts with U+2581 (a leading space, or dummy). */
static int piece_word(const PieceTable *t, const PieceEntry *e, int dummy, int collapse, const uint8_t **rest,
                      uint32_t *rest_len, int *marker)
{
    const uint8_t *s = t->arena + e->off;
    uint32_t len = e->len;
    if (memchr(s, '\n', len))
        return 0;
    if (collapse) {
        uint32_t j = 0;
        while (j < len && s[j] == ' ')
            j++;
        if (j == len)
            return 0;
    }
    int lead = len && s[0] == ' ';
    *rest = s + lead;
    *rest_len = len - (uint32_t)lead;
    *marker = lead || dummy;
    return 1;
}

/* The code point at s[*i] (valid UTF-8: the pieces come from str), *i moved past it. */
static inline uint32_t utf8_next(const uint8_t *s, uint32_t *i)
{
    uint32_t c = s[*i];
    if (c < 0x80) {
        *i += 1;
        return c;
    }
    if (c < 0xE0) {
        c = (c & 0x1F) << 6 | (s[*i + 1] & 0x3F);
        *i += 2;
        return c;
    }
    if (c < 0xF0) {
        c = (c & 0x0F) << 12 | (uint32_t)(s[*i + 1] & 0x3F) << 6 | (s[*i + 2] & 0x3F);
        *i += 3;
        return c;
    }
    c = (c & 0x07) << 18 | (uint32_t)(s[*i + 1] & 0x3F) << 12 | (uint32_t)(s[*i + 2] & 0x3F) << 6 | (s[*i + 3] & 0x3F);
    *i += 4;
    return c;
}

extern void *cpcount_new(void);
extern int cpcount_add(void *counter, uint32_t cp, int64_t n);
extern PyObject *cpcount_dict(void *counter);
extern void cpcount_free(void *counter);

/* char_counts(dummy_prefix, collapse) -> (dict[str, int], int): the character counts of words(dummy_prefix,
   collapse) (each character times its word's count) and the number of distinct words, without making them. */
static PyObject *counter_char_counts(CounterObject *self, PyObject *args)
{
    int dummy, collapse;
    if (!PyArg_ParseTuple(args, "pp", &dummy, &collapse))
        return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return NULL;
    }
    const PieceTable *t = &self->table;
    void *cc = cpcount_new();
    size_t slots = 1024;
    while (slots < t->n * 2 + 2)
        slots <<= 1;
    uint32_t *seen = calloc(slots, sizeof *seen); /* distinct words: entry index + 1 */
    PyObject *result = NULL;
    if (!cc || !seen) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t distinct = 0;
    for (size_t k = 0; k < t->n; k++) {
        const PieceEntry *e = &t->ent[k];
        const uint8_t *rest;
        uint32_t rlen;
        int marker;
        if (!piece_word(t, e, dummy, collapse, &rest, &rlen, &marker))
            continue;
        if (marker && cpcount_add(cc, 0x2581, e->count) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        for (uint32_t i = 0; i < rlen;)
            if (cpcount_add(cc, utf8_next(rest, &i), e->count) < 0) {
                PyErr_NoMemory();
                goto done;
            }
        /* the word is (marker, rest): two pieces make the same word only as "x" (dummy) and " x" */
        size_t h = (hash_bytes(rest, rlen) ^ (uint64_t)marker) & (slots - 1);
        for (;;) {
            uint32_t x = seen[h];
            if (!x) {
                seen[h] = (uint32_t)k + 1;
                distinct++;
                break;
            }
            const uint8_t *r2 = NULL;
            uint32_t l2 = 0;
            int m2 = -1;
            piece_word(t, &t->ent[x - 1], dummy, collapse, &r2, &l2, &m2);
            if (m2 == marker && l2 == rlen && !memcmp(r2, rest, rlen))
                break;
            h = (h + 1) & (slots - 1);
        }
    }
    PyObject *d = cpcount_dict(cc);
    if (d)
        result = Py_BuildValue("(Nn)", d, distinct);
done:
    free(seen);
    cpcount_free(cc);
    return result;
}

static PyObject *counter_clear(CounterObject *self, PyObject *unused)
{
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return NULL;
    }
    pt_free(&self->table);
    self->pieces = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t counter_len(CounterObject *self)
{
    return (Py_ssize_t)self->table.n;
}

static PyObject *counter_get_pieces(CounterObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(self->pieces);
}

static PyObject *counter_get_scanner(CounterObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->scanner);
}

static PyMethodDef counter_methods[] = {
    {"feed", (PyCFunction)counter_feed, METH_O, "feed(text: str) -> None: count the pieces of text (GIL released)."},
    {"feed_utf8", (PyCFunction)counter_feed_utf8, METH_O,
     "feed_utf8(data: bytes) -> bool: feed(data.decode()) if data is well-formed UTF-8 without U+2581 (then\n"
     "True), else count nothing and return False (GIL released)."},
    {"feed_many", (PyCFunction)(void (*)(void))counter_feed_many, METH_VARARGS | METH_KEYWORDS,
     "feed_many(texts: list[str], threads: int = 1) -> None: count each text in order; threads=2 counts the second "
     "half concurrently and keeps first-appearance order."},
    {"items", (PyCFunction)counter_items, METH_NOARGS,
     "items() -> list[tuple[bytes, int]]: distinct pieces (UTF-8) and counts in order of first appearance."},
    {"words", (PyCFunction)counter_words, METH_VARARGS,
     "words(dummy_prefix: bool, collapse: bool) -> dict[str, int]: the whitespace words of the pieces (line ends\n"
     "dropped; with collapse, runs of spaces too; a leading space or, with dummy_prefix, nothing becomes U+2581)."},
    {"char_counts", (PyCFunction)counter_char_counts, METH_VARARGS,
     "char_counts(dummy_prefix: bool, collapse: bool) -> (dict[str, int], int): the character counts of\n"
     "words(dummy_prefix, collapse) and the number of those words, without making them."},
    {"clear", (PyCFunction)counter_clear, METH_NOARGS, "clear() -> None: forget every piece (frees the memory)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef counter_getset[] = {
    {"pieces", (getter)counter_get_pieces, NULL, "pieces counted in total (with repetitions)", NULL},
    {"scanner", (getter)counter_get_scanner, NULL, "the scanner id", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods counter_as_sequence = {
    .sq_length = (lenfunc)counter_len,
};

static PyTypeObject CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._trainer.PretokenCounter",
    .tp_basicsize = sizeof(CounterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PretokenCounter(scanner: int): pre-token frequencies of a bundled pattern, in first-appearance order.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)counter_init,
    .tp_dealloc = (destructor)counter_dealloc,
    .tp_methods = counter_methods,
    .tp_getset = counter_getset,
    .tp_as_sequence = &counter_as_sequence,
};

/* ------------------------------------------------------------------------------------------------ learner */

/* The words live in one array of slots, one per base unit, each word followed by an end slot. A symbol sits in the
 * slot of its first unit; its other units are interior slots, and the last of them records where the symbol
 * starts. So the symbol after the one at slot s is at s + slen[sym], the one before it is found at s - 1, and a
 * slot index orders occurrences exactly as the Python learner's positions (word, offset in units) do: the slot is
 * the learner's position. Every symbol's slot knows the pair it starts, and every pair keeps the slots where it
 * occurs (a superset: an entry goes stale when its occurrence is merged away and is dropped lazily), so a merge
 * visits only the merged occurrences and their neighbours, never a whole word. An entry is current exactly while
 * its slot still starts that pair: the symbol at a slot only grows (or the slot becomes interior), so a pair that
 * left a slot never returns to it, and no slot is listed twice for one pair. A slot's word (for its count) is the
 * number of end slots before it, read from a bitmap with a running count per 64 slots.
 *
 * The choice of each merge is the Python learner's (count, then the tie rule); the bookkeeping that leads to it
 * (lower-bound positions, the lazy heap) may differ in order from the Python learner's, which is why the limits
 * are checked only once the heap's top is a pair that can be merged (see learner_run). */

#define NONE UINT32_MAX
#define SYM_INTERIOR (-1)
#define SYM_END (-2)
#define STAMP_MAX ((1u << 30) - 1)
#define SCAN_UNKNOWN INT32_MIN
#define SCAN_FAILED (INT32_MIN + 1)
#define PREFETCH 8 /* occurrences ahead whose slots a merge prefetches */

typedef struct {
    int32_t sym;   /* the symbol starting here (>= 0), SYM_INTERIOR (a later unit of one) or SYM_END (after a word) */
    uint32_t pair; /* at a symbol: the pair it starts with the next symbol, NONE if none (or refused); at the last
                      interior unit of a symbol: the slot where the symbol starts; unused elsewhere */
} Slot;

typedef struct {
    uint64_t bits;   /* which of these 64 slots end a word */
    uint64_t before; /* end slots before them */
} EndRank;

typedef struct {
    int64_t count;  /* 0: absent (the Python learner deletes the pair) */
    uint64_t off;   /* its occurrence slots: occ[off .. off + n), in a block of cap entries */
    uint32_t n, cap;
    uint32_t first; /* first-seen: earliest occurrence (slot), exact unless dirty (then a lower bound) */
    uint32_t stamp : 30; /* merge step that last put the pair into `changed` */
    uint32_t dirty : 1;
    uint32_t refused : 1; /* the gate (pair_admissible: the piece rules) refused the pair: never counted,
                             so never a candidate */
} Pair;

typedef struct {
    int64_t count;
    uint32_t key; /* first-seen position at push time (unused for lexicographic) */
    uint32_t pair;
} HeapEnt;

typedef struct {
    uint64_t key;
    uint32_t idx; /* pair index + 1; 0 = empty */
} PairSlot;

typedef struct {
    uint32_t stamp, idx; /* pair index, valid while stamp is the current merge's */
} Recent;

typedef struct {
    int first_seen;
    int64_t min_frequency;
    /* words as the loaders give them: units in sym[wstart[i] ..], then (learner_start) as slots */
    int32_t *sym;
    uint64_t *wstart; /* after learner_start: the slot of each word's first unit */
    uint32_t *wlen;
    int64_t *wcount;
    size_t nwords;
    Slot *slots;
    EndRank *ends;
    size_t nslots;
    /* symbols: sequence of base ids (units) and order units */
    size_t nsym, symcap;
    uint32_t *slen;   /* length in units */
    uint64_t *soff;   /* into upool */
    uint64_t *shash;  /* hash of the unit sequence */
    int32_t *upool;
    size_t upool_len, upool_cap;
    uint64_t *ooff;   /* into opool (lexicographic only) */
    uint32_t *olen;
    uint32_t *opool;
    size_t opool_len, opool_cap;
    uint32_t *symslots; /* symbol id + 1 */
    size_t symmask;
    /* pairs: records, keys (left << 32 | right) and the table key -> index */
    Pair *pairs;
    uint64_t *pkey;
    size_t npairs, paircap;
    PairSlot *pslots;
    size_t pmask;
    size_t indexed; /* records 0 .. indexed - 1 are in the table (a merge into a new symbol makes pairs that no
                       search can ask for until a merge reuses that symbol; they are put in the table then) */
    int64_t live;
    /* every pair's occurrence slots, in blocks of 2**c entries; occfree[c]: a free block's offset + 1 */
    uint32_t *occ;
    size_t occ_len, occ_cap;
    uint64_t occfree[32];
    /* heap */
    HeapEnt *heap;
    size_t hn, hcap;
    /* output */
    int32_t *merges;
    size_t nmerges, mcap;
    /* per merge: pairs that gained, and the pairs (s, new) / (new, s) met so far, by s */
    uint32_t *changed;
    size_t nchanged, chcap;
    uint32_t stamp;
    Recent *left_of, *right_of;
    size_t recent_cap;
    /* piece rules (sp_rules.h), when given: the code point of each base unit, and by symbol the scan state after
       its units (SCAN_UNKNOWN until asked, SCAN_FAILED if the rules fail within it) */
    uint32_t *unit_cp;
    SpRules rules;
    int32_t *scan_end;
    size_t scan_cap;
} Learner;

static void learner_free(Learner *L)
{
    free(L->sym);
    free(L->wstart);
    free(L->wlen);
    free(L->wcount);
    free(L->slots);
    free(L->ends);
    free(L->slen);
    free(L->soff);
    free(L->shash);
    free(L->upool);
    free(L->ooff);
    free(L->olen);
    free(L->opool);
    free(L->symslots);
    free(L->pairs);
    free(L->pkey);
    free(L->pslots);
    free(L->occ);
    free(L->heap);
    free(L->merges);
    free(L->changed);
    free(L->left_of);
    free(L->right_of);
    free(L->unit_cp);
    free(L->scan_end);
    memset(L, 0, sizeof(*L));
}

/* realloc ptr to n elements of type, or return -1 from the calling function (ptr unchanged). */
#define RESIZE(ptr, n, type)                                                                                          \
    do {                                                                                                              \
        type *p_ = realloc((ptr), (n) * sizeof(type));                                                                \
        if (!p_)                                                                                                      \
            return -1;                                                                                                \
        (ptr) = p_;                                                                                                   \
    } while (0)

/* Room for need elements in ptr (capacity cap, doubled from 16), or return -1. */
#define GROW(ptr, cap, need, type)                                                                                    \
    do {                                                                                                              \
        if ((need) > (cap)) {                                                                                         \
            size_t c_ = (cap) ? (cap) : 16;                                                                           \
            while (c_ < (need))                                                                                       \
                c_ *= 2;                                                                                              \
            RESIZE(ptr, c_, type);                                                                                    \
            (cap) = c_;                                                                                               \
        }                                                                                                             \
    } while (0)

/* ---- symbols */

static int sym_rehash(Learner *L, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof(uint32_t));
    if (!slots)
        return -1;
    size_t mask = nslots - 1;
    for (size_t s = 0; s < L->nsym; s++) {
        size_t i = L->shash[s] & mask;
        while (slots[i])
            i = (i + 1) & mask;
        slots[i] = (uint32_t)s + 1;
    }
    free(L->symslots);
    L->symslots = slots;
    L->symmask = mask;
    return 0;
}

/* The symbol whose units are units(a) + units(b): an existing one, or a new one appended. -1 on OOM. */
static int64_t sym_concat(Learner *L, int32_t a, int32_t b)
{
    uint32_t la = L->slen[a], lb = L->slen[b], ln = la + lb;
    GROW(L->upool, L->upool_cap, L->upool_len + ln, int32_t);
    int32_t *u = L->upool + L->upool_len;
    memcpy(u, L->upool + L->soff[a], la * sizeof(int32_t));
    memcpy(u + la, L->upool + L->soff[b], lb * sizeof(int32_t));
    uint64_t h = hash_bytes((const uint8_t *)u, (size_t)ln * sizeof(int32_t));
    size_t i = h & L->symmask;
    for (uint32_t s; (s = L->symslots[i]); i = (i + 1) & L->symmask) {
        s--;
        if (L->shash[s] == h && L->slen[s] == ln && memcmp(L->upool + L->soff[s], u, ln * sizeof(int32_t)) == 0)
            return s;
    }
    size_t id = L->nsym;
    if (id >= INT32_MAX)
        return -1;
    if (id == L->symcap) {
        size_t cap = L->symcap * 2;
        RESIZE(L->slen, cap, uint32_t);
        RESIZE(L->soff, cap, uint64_t);
        RESIZE(L->shash, cap, uint64_t);
        if (!L->first_seen) {
            RESIZE(L->ooff, cap, uint64_t);
            RESIZE(L->olen, cap, uint32_t);
        }
        L->symcap = cap;
    }
    L->slen[id] = ln;
    L->soff[id] = L->upool_len;
    L->shash[id] = h;
    L->upool_len += ln;
    if (!L->first_seen) {
        uint32_t oa = L->olen[a], ob = L->olen[b];
        GROW(L->opool, L->opool_cap, L->opool_len + oa + ob, uint32_t);
        memcpy(L->opool + L->opool_len, L->opool + L->ooff[a], oa * sizeof(uint32_t));
        memcpy(L->opool + L->opool_len + oa, L->opool + L->ooff[b], ob * sizeof(uint32_t));
        L->ooff[id] = L->opool_len;
        L->olen[id] = oa + ob;
        L->opool_len += oa + ob;
    }
    L->nsym++;
    if (L->nsym * 2 > L->symmask + 1) {
        if (sym_rehash(L, (L->symmask + 1) * 2))
            return -1;
    } else {
        L->symslots[i] = (uint32_t)id + 1;
    }
    return (int64_t)id;
}

/* Order of two symbols' keys (units + terminator, the terminator above every unit): <0 if x's key is smaller, i.e.
 * x is the lexicographically greater symbol. */
static int sym_cmp(const Learner *L, int32_t x, int32_t y)
{
    if (x == y)
        return 0;
    const uint32_t *ux = L->opool + L->ooff[x], *uy = L->opool + L->ooff[y];
    uint32_t lx = L->olen[x], ly = L->olen[y], m = lx < ly ? lx : ly;
    for (uint32_t i = 0; i < m; i++)
        if (ux[i] != uy[i])
            return ux[i] < uy[i] ? -1 : 1;
    return lx == ly ? 0 : (lx < ly ? 1 : -1);
}


/* ---- pairs */

#define PK(a, b) ((uint64_t)(uint32_t)(a) << 32 | (uint32_t)(b))

static int pair_rehash(Learner *L, size_t nslots)
{
    PairSlot *slots = calloc(nslots, sizeof(PairSlot));
    if (!slots)
        return -1;
    size_t mask = nslots - 1;
    for (size_t k = 0; k < L->indexed; k++) {
        size_t i = mix64(L->pkey[k]) & mask;
        while (slots[i].idx)
            i = (i + 1) & mask;
        slots[i].key = L->pkey[k];
        slots[i].idx = (uint32_t)k + 1;
    }
    free(L->pslots);
    L->pslots = slots;
    L->pmask = mask;
    return 0;
}

/* May the pair (a, b) become a merge candidate, i.e. may its merged piece be learned under the piece rules
 * (sp_rules.h; always, without rules)? The one gate of the rules: asked once per distinct pair, when pair_record
 * makes its record (for the pairs of the input words and for those a merge creates alike). A refused pair is never
 * counted, listed or pushed (learner_start and merge_pair_of leave its slots without a pair), so it is never
 * merged. */
static int pair_admissible(Learner *L, int32_t a, int32_t b)
{
    if (!L->unit_cp)
        return 1;
    int64_t len = (int64_t)L->slen[a] + L->slen[b];
    if (L->rules.max_len >= 0 && len > L->rules.max_len)
        return 0;
    if (L->scan_end[a] == SCAN_UNKNOWN) { /* a's scan from the start depends on a alone: kept per symbol */
        SpScan st = {-1};
        const int32_t *u = L->upool + L->soff[a];
        int32_t end = -1;
        for (uint32_t k = 0; k < L->slen[a]; k++)
            if (sp_rule_step(&L->rules, &st, k, L->unit_cp[u[k]])) {
                end = SCAN_FAILED;
                break;
            }
        L->scan_end[a] = end == SCAN_FAILED ? end : st.prev;
    }
    if (L->scan_end[a] == SCAN_FAILED)
        return 0;
    SpScan st = {L->scan_end[a]};
    uint32_t pos = L->slen[a], c = 0;
    const int32_t *u = L->upool + L->soff[b];
    for (uint32_t k = 0; k < L->slen[b]; k++, pos++)
        if (sp_rule_step(&L->rules, &st, pos, c = L->unit_cp[u[k]]))
            return 0;
    return sp_rule_end_ok(&L->rules, c, len);
}

/* A new record (count 0) for (a, b), not yet in the table, into *idx. -1 on OOM. */
static int pair_record(Learner *L, int32_t a, int32_t b, uint32_t *idx)
{
    if (L->npairs == L->paircap) {
        size_t cap = L->paircap ? L->paircap * 2 : 1024;
        RESIZE(L->pairs, cap, Pair);
        RESIZE(L->pkey, cap, uint64_t);
        L->paircap = cap;
    }
    if (L->npairs >= NONE - 1)
        return -1;
    if (L->unit_cp && L->scan_cap < L->nsym) { /* room for pair_admissible's scan state of every symbol */
        size_t cap = L->nsym * 2;
        RESIZE(L->scan_end, cap, int32_t);
        for (size_t k = L->scan_cap; k < cap; k++)
            L->scan_end[k] = SCAN_UNKNOWN;
        L->scan_cap = cap;
    }
    Pair *p = &L->pairs[L->npairs];
    memset(p, 0, sizeof(*p));
    p->refused = !pair_admissible(L, a, b);
    L->pkey[L->npairs] = PK(a, b);
    *idx = (uint32_t)L->npairs++;
    return 0;
}

/* Put the records made since the last call into the table (pair_get needs every record there). -1 on OOM. */
static int pair_index_all(Learner *L)
{
    size_t grow = L->pmask + 1;
    while (L->npairs * 2 > grow)
        grow *= 2;
    if (grow != L->pmask + 1) {
        L->indexed = L->npairs;
        return pair_rehash(L, grow);
    }
    for (; L->indexed < L->npairs; L->indexed++) {
        uint64_t key = L->pkey[L->indexed];
        size_t i = mix64(key) & L->pmask;
        while (L->pslots[i].idx)
            i = (i + 1) & L->pmask;
        L->pslots[i].key = key;
        L->pslots[i].idx = (uint32_t)L->indexed + 1;
    }
    return 0;
}

/* A hint: the table slot where the search for (a, b) starts will be read soon. */
static inline void pair_prefetch(const Learner *L, int32_t a, int32_t b)
{
    __builtin_prefetch(&L->pslots[mix64(PK(a, b)) & L->pmask]);
}

/* The index of the record of (a, b) into *idx, made (and put in the table) if needed; every record must be in the
 * table (pair_index_all). -1 on OOM. */
static int pair_get(Learner *L, int32_t a, int32_t b, uint32_t *idx)
{
    uint64_t key = PK(a, b);
    size_t i = mix64(key) & L->pmask;
    for (;; i = (i + 1) & L->pmask) {
        PairSlot *s = &L->pslots[i];
        if (!s->idx)
            break;
        if (s->key == key) {
            *idx = s->idx - 1;
            return 0;
        }
    }
    if (pair_record(L, a, b, idx))
        return -1;
    L->indexed = L->npairs;
    if (L->npairs * 2 > L->pmask + 1)
        return pair_rehash(L, (L->pmask + 1) * 2);
    L->pslots[i].key = key;
    L->pslots[i].idx = *idx + 1;
    return 0;
}

/* ---- occurrence lists */

/* A block of 2**c entries into *off: a freed one of that size, else from the end of the arena. -1 on OOM. */
static int occ_alloc(Learner *L, unsigned c, uint64_t *off)
{
    uint64_t head = L->occfree[c];
    if (head) {
        *off = head - 1;
        L->occfree[c] = (uint64_t)L->occ[*off] | (uint64_t)L->occ[*off + 1] << 32;
        return 0;
    }
    size_t need = L->occ_len + ((size_t)1 << c);
    if (need > L->occ_cap) {
        size_t cap = L->occ_cap + L->occ_cap / 2 + 1024;
        if (cap < need)
            cap = need;
        RESIZE(L->occ, cap, uint32_t);
        L->occ_cap = cap;
    }
    *off = L->occ_len;
    L->occ_len = need;
    return 0;
}

/* Give back the block of cap entries at off (as the largest 2**c <= cap; its first two entries link the list). */
static void occ_release(Learner *L, uint64_t off, uint32_t cap)
{
    if (cap < 4)
        return;
    unsigned c = 31 - (unsigned)__builtin_clz(cap);
    L->occ[off] = (uint32_t)L->occfree[c];
    L->occ[off + 1] = (uint32_t)(L->occfree[c] >> 32);
    L->occfree[c] = off + 1;
}

/* Append occurrence slot s to P's list (moved to a block twice as large when full). -1 on OOM. */
static int occ_push(Learner *L, Pair *P, uint32_t s)
{
    if (P->n == P->cap) {
        if (P->n >= 1u << 30)
            return -1;
        unsigned c = 2;
        while ((1u << c) < P->n * 2)
            c++;
        uint64_t off;
        if (occ_alloc(L, c, &off))
            return -1;
        memcpy(L->occ + off, L->occ + P->off, P->n * sizeof(uint32_t));
        occ_release(L, P->off, P->cap);
        P->off = off;
        P->cap = 1u << c;
    }
    L->occ[P->off + P->n++] = s;
    return 0;
}

/* ---- heap: a max-heap in the order (count, tie key, pair) of the Python learner's min-heap of (-count, key, p) */

static inline int heap_better(const Learner *L, const HeapEnt *x, const HeapEnt *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    if (L->first_seen && x->key != y->key)
        return x->key < y->key;
    uint64_t kx = L->pkey[x->pair], ky = L->pkey[y->pair];
    if (!L->first_seen) {
        int c = sym_cmp(L, (int32_t)(kx >> 32), (int32_t)(ky >> 32));
        if (!c)
            c = sym_cmp(L, (int32_t)(uint32_t)kx, (int32_t)(uint32_t)ky);
        if (c)
            return c < 0;
    }
    return kx < ky;
}

static void heap_down(Learner *L, size_t i)
{
    HeapEnt e = L->heap[i];
    size_t n = L->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap_better(L, &L->heap[c + 1], &L->heap[c]))
            c++;
        if (!heap_better(L, &L->heap[c], &e))
            break;
        L->heap[i] = L->heap[c];
        i = c;
    }
    L->heap[i] = e;
}

static int heap_push(Learner *L, int64_t count, uint32_t key, uint32_t pair)
{
    GROW(L->heap, L->hcap, L->hn + 1, HeapEnt);
    HeapEnt e = {count, key, pair};
    size_t i = L->hn++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_better(L, &e, &L->heap[parent]))
            break;
        L->heap[i] = L->heap[parent];
        i = parent;
    }
    L->heap[i] = e;
    return 0;
}

static void heap_pop(Learner *L)
{
    L->hn--;
    if (L->hn) {
        L->heap[0] = L->heap[L->hn];
        heap_down(L, 0);
    }
}

/* ---- learning */

/* Sort slot indices ascending. A list is normally sorted already, and then this is one pass: a pair's entries
 * come from the one merge that made its newer symbol (or from learner_start), which visits its own occurrences in
 * slot order. Only a merge into an existing symbol could append a second, earlier batch; that needs a radix sort
 * of four byte-passes. -1 on OOM. */
static int sort_slots(uint32_t *v, size_t n)
{
    size_t i = 1;
    while (i < n && v[i - 1] <= v[i])
        i++;
    if (i == n)
        return 0;
    uint32_t *tmp = malloc(n * sizeof(uint32_t));
    if (!tmp)
        return -1;
    uint32_t *src = v, *dst = tmp;
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t k = 0; k < n; k++)
            count[((src[k] >> shift) & 255) + 1]++;
        for (int d = 0; d < 256; d++)
            count[d + 1] += count[d];
        for (size_t k = 0; k < n; k++)
            dst[count[(src[k] >> shift) & 255]++] = src[k];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    free(tmp); /* four passes: the sorted values are back in v */
    return 0;
}

static inline uint64_t popcount64(uint64_t x) /* (without -mpopcnt the builtin is a library call) */
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (x * 0x0101010101010101ull) >> 56;
}

/* The index of the word that slot s belongs to. */
static inline size_t word_of(const Learner *L, uint32_t s)
{
    const EndRank *e = &L->ends[s >> 6];
    return (size_t)(e->before + popcount64(e->bits & ((1ull << (s & 63)) - 1)));
}

/* The slot of the symbol before the one at slot s, NONE at the start of a word. */
static inline uint32_t prev_of(const Slot *S, uint32_t s)
{
    if (!s)
        return NONE;
    const Slot *t = &S[s - 1];
    return t->sym >= 0 ? s - 1 : t->sym == SYM_INTERIOR ? t->pair : NONE;
}

/* Earliest current occurrence of pair pi (which has a positive count); drops its stale entries. */
static uint32_t exact_first(Learner *L, uint32_t pi)
{
    Pair *P = &L->pairs[pi];
    uint32_t *o = L->occ + P->off, u = 0, best = NONE;
    const Slot *S = L->slots;
    for (uint32_t t = 0; t < P->n; t++) {
        uint32_t s = o[t];
        if (S[s].sym >= 0 && S[s].pair == pi) {
            o[u++] = s;
            if (s < best)
                best = s;
        }
    }
    P->n = u;
    return best;
}

/* Pair q, at slot pos of a word counted c times, loses that occurrence. */
static inline void pair_lose(Learner *L, uint32_t q, uint32_t pos, int64_t c)
{
    Pair *P = &L->pairs[q];
    int64_t cnt = P->count - c;
    if (cnt) {
        P->count = cnt;
        if (L->first_seen && P->first == pos)
            P->dirty = 1; /* its earliest occurrence is gone: the position is now a lower bound */
    } else {
        P->count = 0;
        P->dirty = 0;
        P->n = 0; /* every entry is stale */
        L->live--;
    }
}

/* Pair q gains an occurrence at slot pos of a word counted c times. -1 on OOM. */
static int pair_gain(Learner *L, uint32_t q, uint32_t pos, int64_t c)
{
    Pair *P = &L->pairs[q];
    if (!P->count) {
        P->count = c;
        P->n = 0;
        P->first = pos;
        P->dirty = 0;
        L->live++;
    } else {
        P->count += c;
        if (L->first_seen && pos < P->first) {
            P->first = pos; /* exact: below the (lower bound of the) earliest position */
            P->dirty = 0;
        }
    }
    if (occ_push(L, P, pos))
        return -1;
    if (P->stamp != L->stamp) {
        P->stamp = L->stamp;
        GROW(L->changed, L->chcap, L->nchanged + 1, uint32_t);
        L->changed[L->nchanged++] = q;
    }
    return 0;
}

/* The pair (s, nw) (left) or (nw, s) of the current merge into *out, NONE if refused: from the merge's cache, else
 * from the table (made if needed) when nw is a reused symbol, else a new record. -1 on OOM. */
static int merge_pair_of(Learner *L, int32_t s, int32_t nw, int left, int reused, uint32_t *out)
{
    Recent *r = (left ? L->left_of : L->right_of) + s;
    if (r->stamp == L->stamp) {
        *out = r->idx;
        return 0;
    }
    uint32_t q;
    int32_t x = left ? s : nw, y = left ? nw : s;
    if (reused ? pair_get(L, x, y, &q) : pair_record(L, x, y, &q)) /* a new symbol has no pairs yet */
        return -1;
    if (L->pairs[q].refused)
        q = NONE;
    r->stamp = L->stamp;
    r->idx = q;
    *out = q;
    return 0;
}

/* Start a merge step: a new stamp (every stamp reset when they run out) and room in the caches for every symbol. */
static int merge_begin(Learner *L)
{
    if (L->stamp == STAMP_MAX) {
        for (size_t k = 0; k < L->npairs; k++)
            L->pairs[k].stamp = 0;
        memset(L->left_of, 0, L->recent_cap * sizeof(Recent));
        memset(L->right_of, 0, L->recent_cap * sizeof(Recent));
        L->stamp = 0;
    }
    L->stamp++;
    L->nchanged = 0;
    if (L->recent_cap < L->nsym) {
        size_t cap = L->nsym * 2;
        RESIZE(L->left_of, cap, Recent);
        RESIZE(L->right_of, cap, Recent);
        memset(L->left_of + L->recent_cap, 0, (cap - L->recent_cap) * sizeof(Recent));
        memset(L->right_of + L->recent_cap, 0, (cap - L->recent_cap) * sizeof(Recent));
        L->recent_cap = cap;
    }
    return 0;
}

/* Merge pair pi = (a, b) into nw at each of its occurrences (left to right within a word, which matters only when a
 * == b) and move the counts of the neighbouring pairs: the old pair on each side loses the word's count, the new
 * one gains it. An occurrence next to another merged one briefly makes a pair that the next merge takes back (the
 * same counts as rewriting the word at once). */
static int merge_pair(Learner *L, uint32_t pi, int32_t a, int32_t b, int32_t nw, int reused)
{
    if (merge_begin(L) || (reused && pair_index_all(L)))
        return -1;
    Pair *P = &L->pairs[pi];
    uint64_t off = P->off;
    uint32_t n = P->n;
    if (a == b && n > 1 && sort_slots(L->occ + off, n))
        return -1;
    const uint32_t la = L->slen[a], lb = L->slen[b];
    Slot *S = L->slots;
    for (uint32_t t = 0; t < n; t++) {
        /* prefetch: the slots of the occurrence PREFETCH ahead, the neighbouring pairs of the one half as far */
        if (t + PREFETCH < n) {
            uint32_t s2 = L->occ[off + t + PREFETCH];
            __builtin_prefetch(&S[s2]);
            __builtin_prefetch(&L->ends[s2 >> 6]);
        }
        if (t + PREFETCH / 2 < n) {
            uint32_t s2 = L->occ[off + t + PREFETCH / 2], q2;
            if (S[s2].sym == a) { /* (a hint only: the state may change before it is used) */
                if ((q2 = S[s2 + la].pair) != NONE)
                    __builtin_prefetch(&L->pairs[q2]);
                uint32_t h2 = prev_of(S, s2);
                if (h2 != NONE && (q2 = S[h2].pair) != NONE)
                    __builtin_prefetch(&L->pairs[q2]);
                __builtin_prefetch(&L->wcount[word_of(L, s2)]);
            }
        }
        uint32_t s = L->occ[off + t]; /* (the arena may move when a list grows) */
        if (S[s].sym != a || S[s].pair != pi)
            continue; /* stale, or taken by the occurrence to its left (a == b) */
        uint32_t j = s + la, k = j + lb, h = prev_of(S, s), q;
        int64_t c = L->wcount[word_of(L, s)];
        int right = S[k].sym >= 0;
        if (h != NONE && (q = S[h].pair) != NONE && q != pi)
            pair_lose(L, q, h, c);
        if (right && (q = S[j].pair) != NONE && q != pi)
            pair_lose(L, q, j, c);
        S[s].sym = nw;
        S[j].sym = SYM_INTERIOR;
        S[k - 1].pair = s; /* the merged symbol's last unit records its start */
        if (h != NONE) {
            if (merge_pair_of(L, S[h].sym, nw, 1, reused, &q))
                return -1;
            S[h].pair = q;
            if (q != NONE && pair_gain(L, q, h, c))
                return -1;
        }
        q = NONE;
        if (right) {
            if (merge_pair_of(L, S[k].sym, nw, 0, reused, &q))
                return -1;
            if (q != NONE && pair_gain(L, q, s, c))
                return -1;
        }
        S[s].pair = q;
    }
    P = &L->pairs[pi]; /* the pair array may have moved */
    if (P->count) {
        P->count = 0; /* the merged pair is gone from every word */
        L->live--;
    }
    P->dirty = 0;
    occ_release(L, P->off, P->cap); /* it never occurs again: its symbols are never next to each other again */
    P->n = P->cap = 0;
    P->off = 0;
    return 0;
}

static const char *STOP_VOCAB = "vocabulary size reached";
static const char *STOP_MERGES = "max merges reached";
static const char *STOP_MINFREQ = "min frequency reached";
static const char *STOP_NOPAIRS = "no pairs left";

/* Lay the loaded words out as slots (freeing the unit array), then count the pairs, fill their occurrence lists (in
 * slot order) and build the heap. -1 on OOM, -2 if the words need 2**32 - 2 slots or more. */
static int learner_start(Learner *L)
{
    size_t ns = L->nwords;
    for (size_t wi = 0; wi < L->nwords; wi++)
        ns += L->wlen[wi];
    if (ns >= NONE - 1)
        return -2;
    /* the slots take the place of the unit array (the loaders lay the words out back to back): it grows in place
       and is filled from the end; slot k lies at or after unit k, so every unit is read before it is overwritten */
    int packed = 1;
    for (size_t wi = 0, u = 0; wi < L->nwords; u += L->wlen[wi++])
        packed &= L->wstart[wi] == u;
    Slot *S = L->slots = packed ? realloc(L->sym, (ns ? ns : 1) * sizeof(Slot)) : malloc((ns ? ns : 1) * sizeof(Slot));
    if (S && packed)
        L->sym = NULL;
    EndRank *E = L->ends = calloc((ns >> 6) + 1, sizeof(EndRank));
    if (!S || !E || pair_rehash(L, 1 << 16))
        return -1;
    const int32_t *units = packed ? (const int32_t *)S : L->sym;
    for (size_t wi = L->nwords, at = ns; wi-- > 0;) {
        uint32_t n = L->wlen[wi];
        const int32_t *w = units + L->wstart[wi];
        at -= (size_t)n + 1;
        S[at + n] = (Slot){SYM_END, NONE};
        E[(at + n) >> 6].bits |= 1ull << ((at + n) & 63);
        for (uint32_t j = n; j-- > 0;) {
            int32_t v = w[j];
            S[at + j] = (Slot){v, NONE};
        }
        L->wstart[wi] = at;
    }
    for (size_t wi = 0; wi < L->nwords; wi++) {
        size_t at = L->wstart[wi];
        uint32_t n = L->wlen[wi];
        int64_t c = L->wcount[wi];
        for (uint32_t j = 0; j + 1 < n; j++) {
            uint32_t q;
            if (j + PREFETCH + 1 < n)
                pair_prefetch(L, S[at + j + PREFETCH].sym, S[at + j + PREFETCH + 1].sym);
            if (pair_get(L, S[at + j].sym, S[at + j + 1].sym, &q))
                return -1;
            Pair *P = &L->pairs[q];
            if (P->refused)
                continue;
            if (!P->count) {
                P->first = (uint32_t)(at + j);
                L->live++;
            }
            P->count += c;
            P->n++;
            S[at + j].pair = q;
        }
    }
    free(L->sym);
    L->sym = NULL;
    L->nslots = ns;
    uint64_t before = 0;
    for (size_t i = 0; i <= (ns >> 6); i++) {
        E[i].before = before;
        before += popcount64(E[i].bits);
    }
    size_t total = 0, nheap = 0;
    for (size_t k = 0; k < L->npairs; k++) {
        Pair *P = &L->pairs[k];
        P->off = total;
        P->cap = P->n;
        total += P->n;
        P->n = 0;
        if (P->count && P->count >= L->min_frequency)
            nheap++;
    }
    L->occ_cap = total + total / 4 + 1024;
    L->occ = malloc(L->occ_cap * sizeof(uint32_t));
    if (!L->occ)
        return -1;
    L->occ_len = total;
    for (size_t s = 0; s < ns; s++)
        if (S[s].pair != NONE) {
            Pair *P = &L->pairs[S[s].pair];
            L->occ[P->off + P->n++] = (uint32_t)s;
        }
    GROW(L->heap, L->hcap, nheap + 1, HeapEnt);
    for (size_t k = 0; k < L->npairs; k++) {
        const Pair *P = &L->pairs[k];
        if (P->count && P->count >= L->min_frequency)
            L->heap[L->hn++] = (HeapEnt){P->count, P->first, (uint32_t)k};
    }
    for (size_t i = L->hn / 2; i-- > 0;)
        heap_down(L, i);
    return 0;
}

static int merge_record(Learner *L, int32_t a, int32_t b, int32_t r)
{
    GROW(L->merges, L->mcap, 3 * (L->nmerges + 1), int32_t);
    L->merges[3 * L->nmerges] = a;
    L->merges[3 * L->nmerges + 1] = b;
    L->merges[3 * L->nmerges + 2] = r;
    L->nmerges++;
    return 0;
}

typedef struct {
    PyObject *progress;
    int64_t every;
} ProgressCtx;

/* Returns 0 when done (*stop set), -1 on OOM, -2 when the progress callback raised (GIL held in every case). */
static int learner_run(Learner *L, int64_t max_symbols, int64_t max_merges, ProgressCtx *pc, const char **stop)
{
    PyThreadState *ts = PyEval_SaveThread();
    int rc = 0;
    *stop = NULL;
    while (L->hn) {
        HeapEnt top = L->heap[0];
        Pair *P = &L->pairs[top.pair];
        int64_t cur = P->count;
        if (top.count != cur) {
            heap_pop(L);
            if (top.count > cur && cur >= L->min_frequency) /* a lazily ignored decrease: re-file it */
                if (heap_push(L, cur, P->first, top.pair)) {
                    rc = -1;
                    break;
                }
            continue;
        }
        if (L->first_seen) {
            if (top.key != P->first) {
                heap_pop(L); /* superseded by an entry with the current position */
                continue;
            }
            if (P->dirty) {
                heap_pop(L);
                P->dirty = 0;
                P->first = exact_first(L, top.pair);
                if (heap_push(L, top.count, P->first, top.pair)) {
                    rc = -1;
                    break;
                }
                continue;
            }
        }
        if (cur < L->min_frequency) {
            *stop = STOP_MINFREQ;
            break;
        }
        /* a limit stops only while a pair could still be merged (as in the Python learner) */
        if (max_merges >= 0 && (int64_t)L->nmerges >= max_merges) {
            *stop = STOP_MERGES;
            break;
        }
        if (max_symbols >= 0 && (int64_t)L->nsym >= max_symbols) {
            *stop = STOP_VOCAB;
            break;
        }
        heap_pop(L);

        uint64_t p = L->pkey[top.pair];
        int32_t a = (int32_t)(p >> 32), b = (int32_t)(uint32_t)p;
        size_t known = L->nsym;
        int64_t nw = sym_concat(L, a, b);
        if (nw < 0 || merge_record(L, a, b, (int32_t)nw) ||
            merge_pair(L, top.pair, a, b, (int32_t)nw, (size_t)nw < known)) {
            rc = -1;
            break;
        }
        for (size_t k = 0; k < L->nchanged; k++) {
            const Pair *Q = &L->pairs[L->changed[k]];
            if (Q->count >= L->min_frequency && Q->count)
                if (heap_push(L, Q->count, Q->first, L->changed[k])) {
                    rc = -1;
                    break;
                }
        }
        if (rc)
            break;
        if (pc->progress && (int64_t)L->nmerges % pc->every == 0) {
            PyEval_RestoreThread(ts);
            PyObject *r = PyObject_CallFunction(pc->progress, "n", (Py_ssize_t)L->nmerges);
            Py_XDECREF(r);
            if (!r || PyErr_CheckSignals()) {
                return -2;
            }
            ts = PyEval_SaveThread();
        }
    }
    if (!rc && !*stop)
        *stop = L->live ? STOP_MINFREQ : STOP_NOPAIRS;
    PyEval_RestoreThread(ts);
    return rc;
}

/* Fill the words from a PretokenCounter (units = bytes). */
static int learner_words_from_counter(Learner *L, CounterObject *ctr)
{
    PieceTable *t = &ctr->table;
    L->nwords = t->n;
    size_t nw = t->n ? t->n : 1;
    L->wstart = malloc(nw * sizeof(uint64_t));
    L->wlen = malloc(nw * sizeof(uint32_t));
    L->wcount = malloc(nw * sizeof(int64_t));
    L->sym = malloc((t->arena_len ? t->arena_len : 1) * sizeof(int32_t));
    if (!L->wstart || !L->wlen || !L->wcount || !L->sym)
        return -1;
    uint64_t at = 0;
    for (size_t k = 0; k < t->n; k++) {
        const PieceEntry *e = &t->ent[k];
        const uint8_t *s = t->arena + e->off;
        L->wstart[k] = at;
        L->wlen[k] = e->len;
        L->wcount[k] = e->count;
        for (uint32_t j = 0; j < e->len; j++)
            L->sym[at + j] = s[j];
        at += e->len;
    }
    return 0;
}

/* A word's count (a positive int) into *out: 0, or -1 with a Python error set. */
static int word_count(PyObject *o, int64_t *out) {
    long long c = PyLong_AsLongLong(o);
    if (c == -1 && PyErr_Occurred())
        return -1;
    if (c < 1) {
        PyErr_SetString(PyExc_ValueError, "counts must be positive");
        return -1;
    }
    *out = c;
    return 0;
}

/* Fill the words from Python sequences; sets a Python error and returns -1 on failure. */
static int learner_words_from_lists(Learner *L, PyObject *words, PyObject *counts, Py_ssize_t n_base)
{
    PyObject *ws = PySequence_Fast(words, "words must be a sequence");
    if (!ws)
        return -1;
    PyObject *cs = PySequence_Fast(counts, "counts must be a sequence");
    if (!cs) {
        Py_DECREF(ws);
        return -1;
    }
    int rc = -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ws);
    if (PySequence_Fast_GET_SIZE(cs) != n) {
        PyErr_SetString(PyExc_ValueError, "words and counts differ in length");
        goto done;
    }
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many words");
        goto done;
    }
    size_t nw = n ? (size_t)n : 1;
    L->nwords = (size_t)n;
    L->wstart = malloc(nw * sizeof(uint64_t));
    L->wlen = malloc(nw * sizeof(uint32_t));
    L->wcount = malloc(nw * sizeof(int64_t));
    if (!L->wstart || !L->wlen || !L->wcount) {
        PyErr_NoMemory();
        goto done;
    }
    size_t total = 0, cap = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *w = PySequence_Fast(PySequence_Fast_GET_ITEM(ws, k), "each word must be a sequence of ints");
        if (!w)
            goto done;
        Py_ssize_t len = PySequence_Fast_GET_SIZE(w);
        if ((uint64_t)len >= UINT32_MAX) {
            Py_DECREF(w);
            PyErr_SetString(PyExc_ValueError, "word too long");
            goto done;
        }
        if (total + (size_t)len > cap) {
            size_t c = cap ? cap : 1024;
            while (c < total + (size_t)len)
                c *= 2;
            int32_t *sym = realloc(L->sym, c * sizeof(int32_t));
            if (!sym) {
                Py_DECREF(w);
                PyErr_NoMemory();
                goto done;
            }
            L->sym = sym;
            cap = c;
        }
        for (Py_ssize_t j = 0; j < len; j++) {
            long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(w, j));
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(w);
                goto done;
            }
            if (v < 0 || v >= n_base) {
                Py_DECREF(w);
                PyErr_Format(PyExc_ValueError, "symbol id %ld is not a base symbol", v);
                goto done;
            }
            L->sym[total + (size_t)j] = (int32_t)v;
        }
        Py_DECREF(w);
        L->wstart[k] = total;
        L->wlen[k] = (uint32_t)len;
        total += (size_t)len;
        if (word_count(PySequence_Fast_GET_ITEM(cs, k), &L->wcount[k]) < 0)
            goto done;
    }
    if (!L->sym && !(L->sym = malloc(sizeof(int32_t)))) {
        PyErr_NoMemory();
        goto done;
    }
    rc = 0;
done:
    Py_DECREF(ws);
    Py_DECREF(cs);
    return rc;
}

/* Fill the words from a list of str whose characters are base symbols: code point alphabet[i] is symbol i (a
   character outside the alphabet is a ValueError); sets a Python error and returns -1 on failure. */
static int learner_words_from_strs(Learner *L, PyObject *words, PyObject *counts, PyObject *alphabet)
{
    if (!PyList_Check(words) || !PyList_Check(counts) || !PyUnicode_Check(alphabet)) {
        PyErr_SetString(PyExc_TypeError, "with an alphabet, words and counts must be lists (of str and int)");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(words), na = PyUnicode_GET_LENGTH(alphabet);
    if (PyList_GET_SIZE(counts) != n) {
        PyErr_SetString(PyExc_ValueError, "words and counts differ in length");
        return -1;
    }
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many words");
        return -1;
    }
    /* code point -> symbol + 1: open addressing on (cp + 1) */
    size_t slots = 64;
    while (slots < (size_t)na * 2 + 2)
        slots <<= 1;
    uint64_t *tab = calloc(slots, sizeof *tab); /* (cp + 1) << 32 | (symbol + 1) */
    if (!tab) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = -1;
    for (Py_ssize_t i = 0; i < na; i++) {
        uint64_t cp = PyUnicode_READ_CHAR(alphabet, i);
        size_t h = mix64(cp + 1) & (slots - 1);
        while (tab[h] && (tab[h] >> 32) != cp + 1)
            h = (h + 1) & (slots - 1);
        tab[h] = (cp + 1) << 32 | (uint64_t)(i + 1); /* a repeated character: the last index wins */
    }
    size_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *w = PyList_GET_ITEM(words, k);
        if (!PyUnicode_Check(w)) {
            PyErr_SetString(PyExc_TypeError, "with an alphabet, every word must be a str");
            goto done;
        }
        total += (size_t)PyUnicode_GET_LENGTH(w);
    }
    size_t nw = n ? (size_t)n : 1;
    L->nwords = (size_t)n;
    L->wstart = malloc(nw * sizeof(uint64_t));
    L->wlen = malloc(nw * sizeof(uint32_t));
    L->wcount = malloc(nw * sizeof(int64_t));
    L->sym = malloc((total ? total : 1) * sizeof(int32_t));
    if (!L->wstart || !L->wlen || !L->wcount || !L->sym) {
        PyErr_NoMemory();
        goto done;
    }
    size_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *w = PyList_GET_ITEM(words, k);
        Py_ssize_t len = PyUnicode_GET_LENGTH(w);
        if ((uint64_t)len >= UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "word too long");
            goto done;
        }
        int kind = PyUnicode_KIND(w);
        const void *data = PyUnicode_DATA(w);
        for (Py_ssize_t j = 0; j < len; j++) {
            uint64_t cp = PyUnicode_READ(kind, data, j);
            size_t h = mix64(cp + 1) & (slots - 1);
            while (tab[h] && (tab[h] >> 32) != cp + 1)
                h = (h + 1) & (slots - 1);
            if (!tab[h]) {
                PyErr_Format(PyExc_ValueError, "character U+%04X is not in the alphabet", (unsigned)cp);
                goto done;
            }
            L->sym[at + (size_t)j] = (int32_t)((tab[h] & 0xFFFFFFFFu) - 1);
        }
        L->wstart[k] = at;
        L->wlen[k] = (uint32_t)len;
        at += (size_t)len;
        if (word_count(PyList_GET_ITEM(counts, k), &L->wcount[k]) < 0)
            goto done;
    }
    rc = 0;
done:
    free(tab);
    return rc;
}

/* Fill the words from a PretokenCounter's SentencePiece/Metaspace words (counter_words) over an alphabet, each word
   cut around the characters outside it (those are dropped), equal pieces merged with their counts summed, in
   order of first appearance: the words that words() then split_unknown() give, mapped as in learner_words_from_strs.
   -1 with a Python error. */
static int learner_words_from_counter_alpha(Learner *L, const CounterObject *ctr, PyObject *alphabet, int dummy,
                                            int collapse)
{
    const PieceTable *t = &ctr->table;
    Py_ssize_t na = PyUnicode_GET_LENGTH(alphabet);
    size_t aslots = 64;
    while (aslots < (size_t)na * 2 + 2)
        aslots <<= 1;
    uint64_t *tab = calloc(aslots, sizeof *tab); /* (cp + 1) << 32 | (symbol + 1) */
    size_t cap = t->arena_len + t->n * 2 + 16; /* every symbol comes from a code point, or from the marker */
    size_t wslots = 1024;
    while (wslots < t->n * 2 + 2)
        wslots <<= 1;
    uint32_t *wtab = calloc(wslots, sizeof *wtab); /* word index + 1 */
    size_t wcap = t->n + 16, whcap = wcap;
    uint64_t *whash = malloc(whcap * sizeof *whash); /* grown with the words */
    int32_t *seg = malloc((t->arena_len + 8) * sizeof *seg);
    L->sym = malloc(cap * sizeof(int32_t));
    L->wstart = malloc(wcap * sizeof(uint64_t));
    L->wlen = malloc(wcap * sizeof(uint32_t));
    L->wcount = malloc(wcap * sizeof(int64_t));
    int rc = -1;
    if (!tab || !wtab || !whash || !seg || !L->sym || !L->wstart || !L->wlen || !L->wcount) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < na; i++) {
        uint64_t cp = PyUnicode_READ_CHAR(alphabet, i);
        size_t h = mix64(cp + 1) & (aslots - 1);
        while (tab[h] && (tab[h] >> 32) != cp + 1)
            h = (h + 1) & (aslots - 1);
        tab[h] = (cp + 1) << 32 | (uint64_t)(i + 1);
    }
    size_t at = 0, nw = 0;
    for (size_t k = 0; k < t->n; k++) {
        const PieceEntry *e = &t->ent[k];
        const uint8_t *rest;
        uint32_t rlen;
        int marker;
        if (!piece_word(t, e, dummy, collapse, &rest, &rlen, &marker))
            continue;
        uint32_t i = 0;
        int first = 1;
        for (;;) {
            /* the next segment: symbols up to a character outside the alphabet, or the end */
            size_t m = 0;
            int end = 0;
            for (;;) {
                uint64_t cp;
                if (first && marker) {
                    cp = 0x2581;
                } else if (i < rlen) {
                    cp = utf8_next(rest, &i);
                } else {
                    end = 1;
                    break;
                }
                first = 0;
                size_t h = mix64(cp + 1) & (aslots - 1);
                while (tab[h] && (tab[h] >> 32) != cp + 1)
                    h = (h + 1) & (aslots - 1);
                if (!tab[h])
                    break; /* cut here: the character is dropped */
                seg[m++] = (int32_t)((tab[h] & 0xFFFFFFFFu) - 1);
            }
            first = 0;
            if (m) {
                uint64_t hv = hash_bytes((const uint8_t *)seg, m * sizeof(int32_t));
                size_t h = hv & (wslots - 1);
                for (;;) {
                    uint32_t x = wtab[h];
                    if (!x) {
                        if (at + m > cap) {
                            PyErr_SetString(PyExc_RuntimeError, "word table overflow"); /* unreachable: sized */
                            goto done;
                        }
                        if (nw == wcap || nw == whcap) { /* more pieces than counted words (cuts) */
                            size_t c2 = wcap * 2;
                            uint64_t *a1 = realloc(L->wstart, c2 * sizeof *a1);
                            if (a1)
                                L->wstart = a1;
                            uint32_t *a2 = a1 ? realloc(L->wlen, c2 * sizeof *a2) : NULL;
                            if (a2)
                                L->wlen = a2;
                            int64_t *a3 = a2 ? realloc(L->wcount, c2 * sizeof *a3) : NULL;
                            if (a3)
                                L->wcount = a3;
                            uint64_t *a4 = a3 ? realloc(whash, c2 * sizeof *a4) : NULL;
                            if (!a4) {
                                PyErr_NoMemory();
                                goto done;
                            }
                            whash = a4;
                            wcap = whcap = c2;
                        }
                        memcpy(L->sym + at, seg, m * sizeof(int32_t));
                        L->wstart[nw] = at;
                        L->wlen[nw] = (uint32_t)m;
                        L->wcount[nw] = e->count;
                        whash[nw] = hv;
                        at += m;
                        wtab[h] = (uint32_t)++nw;
                        if (nw * 2 > wslots) {
                            size_t ns = wslots * 2;
                            uint32_t *nt = calloc(ns, sizeof *nt);
                            if (!nt) {
                                PyErr_NoMemory();
                                goto done;
                            }
                            for (size_t q = 0; q < nw; q++) {
                                size_t z = whash[q] & (ns - 1);
                                while (nt[z])
                                    z = (z + 1) & (ns - 1);
                                nt[z] = (uint32_t)q + 1;
                            }
                            free(wtab);
                            wtab = nt;
                            wslots = ns;
                        }
                        break;
                    }
                    if (whash[x - 1] == hv && L->wlen[x - 1] == m &&
                        !memcmp(L->sym + L->wstart[x - 1], seg, m * sizeof(int32_t))) {
                        L->wcount[x - 1] += e->count;
                        break;
                    }
                    h = (h + 1) & (wslots - 1);
                }
            }
            if (end)
                break;
        }
    }
    L->nwords = nw;
    rc = 0;
done:
    free(tab);
    free(wtab);
    free(whash);
    free(seg);
    return rc;
}

/* Base symbols 0..n_base-1 are one unit each; order units (lexicographic) from a sequence of int sequences. */
static int learner_base(Learner *L, Py_ssize_t n_base, PyObject *order_units)
{
    L->symcap = (size_t)n_base * 2 + 1024;
    L->slen = malloc(L->symcap * sizeof(uint32_t));
    L->soff = malloc(L->symcap * sizeof(uint64_t));
    L->shash = malloc(L->symcap * sizeof(uint64_t));
    L->upool_cap = L->symcap * 4;
    L->upool = malloc(L->upool_cap * sizeof(int32_t));
    if (!L->slen || !L->soff || !L->shash || !L->upool) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t s = 0; s < n_base; s++) {
        int32_t u = (int32_t)s;
        L->slen[s] = 1;
        L->soff[s] = (uint64_t)s;
        L->upool[s] = u;
        L->shash[s] = hash_bytes((const uint8_t *)&u, sizeof(u));
    }
    L->upool_len = (size_t)n_base;
    L->nsym = (size_t)n_base;
    size_t nslots = 1024;
    while (nslots < L->nsym * 4)
        nslots *= 2;
    if (sym_rehash(L, nslots)) {
        PyErr_NoMemory();
        return -1;
    }
    if (L->first_seen)
        return 0;
    PyObject *seq = PySequence_Fast(order_units, "order_units must be a sequence");
    if (!seq)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != n_base) {
        PyErr_SetString(PyExc_ValueError, "order_units needs one entry per base symbol");
        goto done;
    }
    L->ooff = malloc(L->symcap * sizeof(uint64_t));
    L->olen = malloc(L->symcap * sizeof(uint32_t));
    if (!L->ooff || !L->olen) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t s = 0; s < n_base; s++) {
        PyObject *u = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, s), "order units must be sequences of ints");
        if (!u)
            goto done;
        Py_ssize_t len = PySequence_Fast_GET_SIZE(u);
        if (L->opool_len + (size_t)len > L->opool_cap) {
            size_t c = L->opool_cap ? L->opool_cap : 1024;
            while (c < L->opool_len + (size_t)len)
                c *= 2;
            uint32_t *pool = realloc(L->opool, c * sizeof(uint32_t));
            if (!pool) {
                Py_DECREF(u);
                PyErr_NoMemory();
                goto done;
            }
            L->opool = pool;
            L->opool_cap = c;
        }
        for (Py_ssize_t j = 0; j < len; j++) {
            unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(u, j));
            if (v == (unsigned long)-1 && PyErr_Occurred()) {
                Py_DECREF(u);
                goto done;
            }
            if (v >= UINT32_MAX) {
                Py_DECREF(u);
                PyErr_SetString(PyExc_ValueError, "order units must be below 2**32 - 1");
                goto done;
            }
            L->opool[L->opool_len + (size_t)j] = (uint32_t)v;
        }
        Py_DECREF(u);
        L->ooff[s] = L->opool_len;
        L->olen[s] = (uint32_t)len;
        L->opool_len += (size_t)len;
    }
    rc = 0;
done:
    Py_DECREF(seq);
    return rc;
}

/* The symbols made by the merges (ids n_base ..) as str: symbol i's units are base ids, unit u is alphabet[u]. */
static PyObject *symbol_texts(const Learner *L, PyObject *alphabet, Py_ssize_t n_base)
{
    int kind = PyUnicode_KIND(alphabet);
    const void *data = PyUnicode_DATA(alphabet);
    size_t longest = 1;
    for (size_t s = (size_t)n_base; s < L->nsym; s++)
        if (L->slen[s] > longest)
            longest = L->slen[s];
    Py_UCS4 *buf = malloc(longest * sizeof(Py_UCS4));
    PyObject *out = buf ? PyList_New((Py_ssize_t)L->nsym - n_base) : PyErr_NoMemory();
    for (size_t s = (size_t)n_base; out && s < L->nsym; s++) {
        const int32_t *u = L->upool + L->soff[s];
        for (uint32_t j = 0; j < L->slen[s]; j++)
            buf[j] = PyUnicode_READ(kind, data, u[j]);
        PyObject *t = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, (Py_ssize_t)L->slen[s]); /* (canonical) */
        if (!t)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)(s - (size_t)n_base), t);
    }
    free(buf);
    return out;
}

static PyObject *mod_learn(PyObject *module, PyObject *args, PyObject *kwds)
{
    (void)module;
    static char *kwlist[] = {"words",      "counts",   "n_base",         "order_units", "max_symbols",
                             "max_merges", "min_frequency", "lexicographic", "progress",    "progress_every",
                             "keep_words", "consume",  "alphabet", "dummy_prefix", "collapse", "rules", NULL};
    PyObject *words, *counts, *order_units = Py_None, *progress = Py_None, *alphabet = Py_None, *rules = Py_None;
    Py_ssize_t n_base;
    long long max_symbols = -1, max_merges = -1, min_frequency = 2, progress_every = 256;
    int lexicographic = 0, keep_words = 0, consume = 0, dummy = 1, collapse = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOn|OLLLpOLppOppO", kwlist, &words, &counts, &n_base, &order_units,
                                     &max_symbols, &max_merges, &min_frequency, &lexicographic, &progress,
                                     &progress_every, &keep_words, &consume, &alphabet, &dummy, &collapse, &rules))
        return NULL;
    if (min_frequency < 1) {
        PyErr_SetString(PyExc_ValueError, "min_frequency must be >= 1");
        return NULL;
    }
    if (n_base < 1 || n_base >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "n_base out of range");
        return NULL;
    }
    if (progress_every < 1)
        progress_every = 1;
    Learner L;
    memset(&L, 0, sizeof(L));
    L.first_seen = !lexicographic;
    L.min_frequency = min_frequency;
    PyObject *result = NULL;
    if (learner_base(&L, n_base, order_units))
        goto done;
    if (rules != Py_None) { /* (marker, flags, max_len): PieceRules.native(); the units are the alphabet's characters */
        if (!PyUnicode_Check(alphabet) || PyUnicode_GET_LENGTH(alphabet) != n_base) {
            PyErr_SetString(PyExc_ValueError, "piece rules need the alphabet (one character per base symbol)");
            goto done;
        }
        if (!PyArg_ParseTuple(rules, "LiL", &L.rules.marker, &L.rules.flags, &L.rules.max_len))
            goto done;
        L.unit_cp = malloc((size_t)n_base * sizeof(uint32_t));
        if (!L.unit_cp) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < n_base; k++)
            L.unit_cp[k] = PyUnicode_READ_CHAR(alphabet, k);
    }
    if (PyObject_TypeCheck(words, &CounterType) && alphabet != Py_None) {
        CounterObject *ctr = (CounterObject *)words;
        if (counts != Py_None || !PyUnicode_Check(alphabet) || PyUnicode_GET_LENGTH(alphabet) != n_base) {
            PyErr_SetString(PyExc_ValueError, "a PretokenCounter with an alphabet: counts=None, n_base=len(alphabet)");
            goto done;
        }
        if (counter_enter(ctr))
            goto done;
        int rc = ctr->table.n >= INT32_MAX / 2 ? -1 : learner_words_from_counter_alpha(&L, ctr, alphabet, dummy,
                                                                                       collapse);
        ctr->busy = 0;
        if (rc) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto done;
        }
        if (consume) {
            pt_free(&ctr->table);
            ctr->pieces = 0;
        }
    } else if (PyObject_TypeCheck(words, &CounterType)) {
        CounterObject *ctr = (CounterObject *)words;
        if (counts != Py_None || n_base != 256) {
            PyErr_SetString(PyExc_ValueError, "a PretokenCounter gives byte words: counts=None, n_base=256");
            goto done;
        }
        if (counter_enter(ctr))
            goto done;
        int rc = ctr->table.n >= INT32_MAX ? -1 : learner_words_from_counter(&L, ctr);
        ctr->busy = 0;
        if (rc) {
            PyErr_NoMemory();
            goto done;
        }
        if (consume) {
            pt_free(&ctr->table);
            ctr->pieces = 0;
        }
    } else if (alphabet != Py_None) {
        if (PyUnicode_Check(alphabet) && PyUnicode_GET_LENGTH(alphabet) != n_base) {
            PyErr_SetString(PyExc_ValueError, "the alphabet must hold n_base characters");
            goto done;
        }
        if (learner_words_from_strs(&L, words, counts, alphabet))
            goto done;
    } else if (learner_words_from_lists(&L, words, counts, n_base)) {
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = learner_start(&L);
    Py_END_ALLOW_THREADS
    if (rc == -2) {
        PyErr_SetString(PyExc_ValueError, "the words hold too many units for the compiled learner (2**32 - 2 or more)");
        goto done;
    }
    if (rc) {
        PyErr_NoMemory();
        goto done;
    }
    ProgressCtx pc = {progress == Py_None ? NULL : progress, progress_every};
    const char *stop = NULL;
    rc = learner_run(&L, max_symbols, max_merges, &pc, &stop);
    if (rc == -1)
        PyErr_NoMemory();
    if (rc)
        goto done;
    if (pc.progress && L.nmerges % (size_t)progress_every) {
        PyObject *r = PyObject_CallFunction(pc.progress, "n", (Py_ssize_t)L.nmerges);
        if (!r)
            goto done;
        Py_DECREF(r);
    }
    PyObject *merges = PyList_New((Py_ssize_t)L.nmerges);
    if (!merges)
        goto done;
    for (size_t k = 0; k < L.nmerges; k++) {
        PyObject *m = Py_BuildValue("(iii)", L.merges[3 * k], L.merges[3 * k + 1], L.merges[3 * k + 2]);
        if (!m) {
            Py_DECREF(merges);
            goto done;
        }
        PyList_SET_ITEM(merges, (Py_ssize_t)k, m);
    }
    PyObject *final = Py_None;
    Py_INCREF(final);
    if (keep_words) {
        Py_DECREF(final);
        final = PyList_New((Py_ssize_t)L.nwords);
        for (size_t wi = 0; final && wi < L.nwords; wi++) {
            const Slot *S = L.slots;
            Py_ssize_t m = 0;
            for (size_t t = L.wstart[wi]; S[t].sym != SYM_END; t += L.slen[S[t].sym])
                m++;
            PyObject *w = PyList_New(m);
            if (!w) {
                Py_CLEAR(final);
                break;
            }
            m = 0;
            for (size_t t = L.wstart[wi]; S[t].sym != SYM_END; t += L.slen[S[t].sym]) {
                PyObject *v = PyLong_FromLong(S[t].sym);
                if (!v) {
                    Py_DECREF(w);
                    Py_CLEAR(final);
                    break;
                }
                PyList_SET_ITEM(w, m++, v);
            }
            if (final)
                PyList_SET_ITEM(final, (Py_ssize_t)wi, w);
        }
        if (!final) {
            Py_DECREF(merges);
            goto done;
        }
    }
    PyObject *texts = Py_None; /* with an alphabet: the new symbols as str (their characters, in order) */
    Py_INCREF(texts);
    if (PyUnicode_Check(alphabet)) {
        Py_DECREF(texts);
        texts = symbol_texts(&L, alphabet, n_base);
        if (!texts) {
            Py_DECREF(merges);
            Py_DECREF(final);
            goto done;
        }
    }
    result = Py_BuildValue("(NnsNN)", merges, (Py_ssize_t)L.nsym, stop, final, texts);
done:
    learner_free(&L);
    return result;
}

/* ------------------------------------------------------------------------------------------------ module */

/* train_unigram.c: the Unigram learner's corpus type; train_wordpiece.c: the WordPiece learner (compiled into this module). */
extern PyTypeObject UnigramWordsType;
extern PyObject *wordpiece_learn(PyObject *module, PyObject *args);
/* train_words.c: word-table helpers of the Unigram and SentencePiece trainers. */
extern PyObject *words_char_counts(PyObject *module, PyObject *words);
extern PyObject *words_split_unknown(PyObject *module, PyObject *args);

static PyObject *mod_sp_scripts(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 0x110000);
    if (!out)
        return NULL;
    char *b = PyBytes_AS_STRING(out);
    for (uint32_t c = 0; c < 0x110000; c++)
        b[c] = (char)sp_script_of(c);
    return out;
}

static PyMethodDef module_methods[] = {
    {"char_counts", (PyCFunction)words_char_counts, METH_O,
     "char_counts(words: dict[str, int]) -> dict[str, int]: each character's occurrences, weighted by the counts."},
    {"split_unknown", (PyCFunction)words_split_unknown, METH_VARARGS,
     "split_unknown(words: dict[str, int], required: set[str]) -> dict[str, int]: the words cut around (and\n"
     "without) the characters not in required, counts of equal pieces summed, in first-appearance order."},
    {"wordpiece_learn", (PyCFunction)wordpiece_learn, METH_VARARGS,
     "wordpiece_learn(alphabet, words, freqs, base, vocab_size, min_frequency, by_count, progress)\n"
     "-> (new_symbols, merges, stop_reason): app.engine.training.wordpiece.learn_wordpiece's merge loop over\n"
     "words as lists of alphabet ids (new symbols in the order they were made)."},
    {"learn", (PyCFunction)(void (*)(void))mod_learn, METH_VARARGS | METH_KEYWORDS,
     "learn(words, counts, n_base, order_units=None, max_symbols=-1, max_merges=-1, min_frequency=2,\n"
     "      lexicographic=False, progress=None, progress_every=256, keep_words=False, consume=False,\n"
     "      alphabet=None, dummy_prefix=True, collapse=True, rules=None)\n"
     "-> (merges: list[(left, right, result)], n_symbols, stop_reason, words | None, texts | None)\n\n"
     "The merge learner of app.engine.training.merges.learn_merges over base-symbol ids 0..n_base-1 (words: a\n"
     "list of int sequences with counts, or a PretokenCounter with counts=None and n_base=256, or with alphabet (a\n"
     "str of n_base characters, symbol i = alphabet[i]) a list of str; texts: then the new symbols as str).\n"
     "order_units[i]: the lexicographic order key of base symbol i without its terminator (lexicographic mode\n"
     "only). rules=(marker, flags, max_len) (PieceRules.native(), needs the alphabet): a pair whose merged piece\n"
     "the piece rules refuse is never merged (sp_rules.h)."},
    {"sp_scripts", (PyCFunction)mod_sp_scripts, METH_NOARGS,
     "sp_scripts() -> bytes: the script id of every code point 0..0x10FFFF in the compiled table (sp_scripts.h)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_trainer", "Compiled pre-token counting and BPE merge learning for app.engine.training.",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__trainer(void)
{
    pretok_init();
    if (PyType_Ready(&CounterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&CounterType);
    if (PyModule_AddObject(m, "PretokenCounter", (PyObject *)&CounterType) < 0) {
        Py_DECREF(&CounterType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyType_Ready(&UnigramWordsType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&UnigramWordsType);
    if (PyModule_AddObject(m, "UnigramWords", (PyObject *)&UnigramWordsType) < 0) {
        Py_DECREF(&UnigramWordsType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "SCAN_GPT2", SCAN_GPT2) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_CL100K", SCAN_CL100K) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_O200K", SCAN_O200K) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_LLAMA3", SCAN_LLAMA3) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_QWEN2", SCAN_QWEN2) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_DEEPSEEK_V3", SCAN_DEEPSEEK_V3) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_TEKKEN", SCAN_TEKKEN) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_SP_WORDS", SCAN_SP_WORDS) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_METASPACE_WORDS", SCAN_METASPACE_WORDS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
