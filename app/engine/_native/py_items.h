/*
 * py_items.h: the item lists the compiled models take (``encode(items, ...)``): each item a ``str`` (text to
 * tokenize) or an ``int`` (an id that passes through, 0 <= id <= INT32_MAX). Read with the GIL held, so the
 * tokenizing loop can run without it. Header-only; needs Python.h first.
 */
#ifndef TOK_PY_ITEMS_H
#define TOK_PY_ITEMS_H

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    PyObject *held;  /* a private copy of the list: keeps every item alive while the GIL is released */
    int32_t *passed; /* the id of an int item; -1 for a str item */
    Py_ssize_t count;
} Items;

/* The id of an int item: 0 and *id set; -1 with ValueError("id out of range") for one outside 0..INT32_MAX
 * (however large). */
static inline int item_id(PyObject *o, int32_t *id)
{
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow || v < 0 || v > INT32_MAX) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "id out of range");
        return -1;
    }
    *id = (int32_t)v;
    return 0;
}

/* Read ``items`` (a list). 0 on success (release with items_free); -1 with a Python error set (TypeError for an
 * item neither str nor int, ValueError for an id out of range, MemoryError), nothing to release. */
static inline int items_read(PyObject *items, Items *it)
{
    it->count = PyList_GET_SIZE(items);
    it->held = NULL;
    it->passed = (int32_t *)malloc((size_t)(it->count + 1) * sizeof(int32_t));
    if (!it->passed) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t t = 0; t < it->count; t++) {
        PyObject *o = PyList_GET_ITEM(items, t);
        if (PyUnicode_Check(o)) {
            it->passed[t] = -1;
        } else if (!PyLong_Check(o) || item_id(o, &it->passed[t]) < 0) {
            free(it->passed);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "items must be str or int");
            return -1;
        }
    }
    it->held = PyList_GetSlice(items, 0, it->count);
    if (!it->held) {
        free(it->passed);
        return -1;
    }
    return 0;
}

/* Release what items_read took (with the GIL held). */
static inline void items_free(Items *it)
{
    Py_DECREF(it->held);
    free(it->passed);
}

#endif
