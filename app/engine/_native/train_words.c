/*
 * train_words.c: word-table helpers of the Unigram and SentencePiece trainers (app/engine/training/unigram.py),
 * part of app.engine._native._trainer (trainer.c registers char_counts and split_unknown).
 *
 *   char_counts(words: dict[str, int]) -> dict[str, int]
 *       how often each character occurs, every word weighted by its count (characters in first-appearance order);
 *   split_unknown(words: dict[str, int], required: set[str]) -> dict[str, int]
 *       every word cut around the characters that are not in required (those are dropped), the counts of equal
 *       pieces summed, in first-appearance order; a word without such a character is kept as it is.
 *
 * Both give exactly what the Python functions of the same names give (the tests compare them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hash_mix.h"

/* code point -> slot: open addressing, 0 = empty (keys are stored + 1) */
typedef struct {
    uint32_t *keys;
    int64_t *vals;
    uint32_t *order; /* slots in first-insertion order */
    size_t mask, n;
} CpMap;

static int cpmap_init(CpMap *m, size_t expect)
{
    size_t slots = 256;
    while (slots < expect * 2)
        slots <<= 1;
    m->keys = calloc(slots, sizeof *m->keys);
    m->vals = calloc(slots, sizeof *m->vals);
    m->order = malloc(slots * sizeof *m->order);
    m->mask = slots - 1;
    m->n = 0;
    return m->keys && m->vals && m->order ? 0 : -1;
}

static void cpmap_free(CpMap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->order);
    memset(m, 0, sizeof *m);
}

static int cpmap_grow(CpMap *m)
{
    CpMap g;
    if (cpmap_init(&g, (m->mask + 1)) < 0) {
        cpmap_free(&g);
        return -1;
    }
    for (size_t q = 0; q < m->n; q++) {
        size_t s = m->order[q];
        size_t i = mix64(m->keys[s]) & g.mask;
        while (g.keys[i])
            i = (i + 1) & g.mask;
        g.keys[i] = m->keys[s];
        g.vals[i] = m->vals[s];
        g.order[g.n++] = (uint32_t)i;
    }
    cpmap_free(m);
    *m = g;
    return 0;
}

/* The slot of cp (inserted with value 0 if missing when insert, else -1 if missing); -2 on memory error. */
static Py_ssize_t cpmap_slot(CpMap *m, uint32_t cp, int insert)
{
    uint32_t key = cp + 1;
    size_t i = mix64(key) & m->mask;
    for (;;) {
        if (m->keys[i] == key)
            return (Py_ssize_t)i;
        if (!m->keys[i])
            break;
        i = (i + 1) & m->mask;
    }
    if (!insert)
        return -1;
    if ((m->n + 1) * 2 > m->mask + 1) {
        if (cpmap_grow(m) < 0)
            return -2;
        return cpmap_slot(m, cp, 1);
    }
    m->keys[i] = key;
    m->vals[i] = 0;
    m->order[m->n++] = (uint32_t)i;
    return (Py_ssize_t)i;
}

static inline uint32_t read_cp(int kind, const void *data, Py_ssize_t i)
{
    return (uint32_t)PyUnicode_READ(kind, data, i);
}

PyObject *words_char_counts(PyObject *module, PyObject *words)
{
    (void)module;
    if (!PyDict_Check(words)) {
        PyErr_SetString(PyExc_TypeError, "words must be a dict of str to int");
        return NULL;
    }
    CpMap m;
    if (cpmap_init(&m, 1024) < 0) {
        cpmap_free(&m);
        return PyErr_NoMemory();
    }
    PyObject *key, *value, *out = NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(words, &pos, &key, &value)) {
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "words must be a dict of str to int");
            goto done;
        }
        long long f = PyLong_AsLongLong(value);
        if (f == -1 && PyErr_Occurred())
            goto done;
        int kind = PyUnicode_KIND(key);
        const void *data = PyUnicode_DATA(key);
        Py_ssize_t n = PyUnicode_GET_LENGTH(key);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t s = cpmap_slot(&m, read_cp(kind, data, i), 1);
            if (s < 0) {
                PyErr_NoMemory();
                goto done;
            }
            m.vals[s] += f;
        }
    }
    out = PyDict_New();
    for (size_t q = 0; out && q < m.n; q++) {
        size_t s = m.order[q];
        Py_UCS4 cp = m.keys[s] - 1;
        PyObject *ch = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, &cp, 1);
        PyObject *v = PyLong_FromLongLong(m.vals[s]);
        if (!ch || !v || PyDict_SetItem(out, ch, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(ch);
        Py_XDECREF(v);
    }
done:
    cpmap_free(&m);
    return out;
}

/* out[piece] += f (piece: a new reference, consumed). */
static int add_count(PyObject *out, PyObject *piece, PyObject *f)
{
    if (!piece)
        return -1;
    PyObject *old = PyDict_GetItemWithError(out, piece);
    int rc;
    if (old) {
        PyObject *sum = PyNumber_Add(old, f);
        rc = sum ? PyDict_SetItem(out, piece, sum) : -1;
        Py_XDECREF(sum);
    } else {
        rc = PyErr_Occurred() ? -1 : PyDict_SetItem(out, piece, f);
    }
    Py_DECREF(piece);
    return rc;
}

PyObject *words_split_unknown(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *words, *required;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &words, &required))
        return NULL;
    CpMap req;
    if (cpmap_init(&req, 1024) < 0) {
        cpmap_free(&req);
        return PyErr_NoMemory();
    }
    PyObject *out = NULL, *it = PyObject_GetIter(required), *ch;
    if (!it)
        goto done;
    while ((ch = PyIter_Next(it))) {
        if (!PyUnicode_Check(ch) || PyUnicode_GET_LENGTH(ch) != 1) {
            Py_DECREF(ch);
            PyErr_SetString(PyExc_TypeError, "required must hold single characters");
            goto done;
        }
        Py_ssize_t s = cpmap_slot(&req, (uint32_t)PyUnicode_READ_CHAR(ch, 0), 1);
        Py_DECREF(ch);
        if (s < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (PyErr_Occurred())
        goto done;
    out = PyDict_New();
    if (!out)
        goto done;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(words, &pos, &key, &value)) {
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "words must be a dict of str to int");
            Py_CLEAR(out);
            goto done;
        }
        int kind = PyUnicode_KIND(key);
        const void *data = PyUnicode_DATA(key);
        Py_ssize_t n = PyUnicode_GET_LENGTH(key), start = 0, i = 0;
        for (; i < n; i++)
            if (cpmap_slot(&req, read_cp(kind, data, i), 0) < 0)
                break;
        if (i == n) { /* no unknown character: the word itself */
            Py_INCREF(key);
            if (add_count(out, key, value) < 0) {
                Py_CLEAR(out);
                goto done;
            }
            continue;
        }
        for (; i <= n; i++) {
            if (i < n && cpmap_slot(&req, read_cp(kind, data, i), 0) >= 0)
                continue;
            if (i > start && add_count(out, PyUnicode_Substring(key, start, i), value) < 0) {
                Py_CLEAR(out);
                goto done;
            }
            start = i + 1;
        }
    }
done:
    Py_XDECREF(it);
    cpmap_free(&req);
    return out;
}

/* ------------------------------------------------------------------------------------------------ for trainer.c */

/* A code point counter for trainer.c's PretokenCounter.char_counts (the same table as char_counts above). */
void *cpcount_new(void)
{
    CpMap *m = malloc(sizeof *m);
    if (m && cpmap_init(m, 1024) < 0) {
        cpmap_free(m);
        free(m);
        m = NULL;
    }
    return m;
}

int cpcount_add(void *counter, uint32_t cp, int64_t n)
{
    CpMap *m = counter;
    Py_ssize_t s = cpmap_slot(m, cp, 1);
    if (s < 0)
        return -1;
    m->vals[s] += n;
    return 0;
}

/* The counts as a dict (characters in first-appearance order); NULL with a Python error. */
PyObject *cpcount_dict(void *counter)
{
    CpMap *m = counter;
    PyObject *out = PyDict_New();
    for (size_t q = 0; out && q < m->n; q++) {
        size_t s = m->order[q];
        Py_UCS4 cp = m->keys[s] - 1;
        PyObject *ch = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, &cp, 1);
        PyObject *v = PyLong_FromLongLong(m->vals[s]);
        if (!ch || !v || PyDict_SetItem(out, ch, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(ch);
        Py_XDECREF(v);
    }
    return out;
}

void cpcount_free(void *counter)
{
    if (counter) {
        cpmap_free(counter);
        free(counter);
    }
}
