/*
 * id_list.h: lists of ids built without zero-filling their item arrays (PyList_New(n) clears an array that the
 * caller then overwrites item by item): the text encoders' results in tokcore.c, spbpe.c and mergebpe.c, where a
 * call returns thousands of ids. Header-only; needs Python.h first.
 */
#ifndef TOK_ID_LIST_H
#define TOK_ID_LIST_H

/* A new list of size 0 whose item array has room for n (>= 0) items, none of them set: the caller fills
 * list_items(list)[0..k) and then calls list_sized(list, k), k = n when every item was made; on an error, k = the
 * items made so far, and Py_DECREF(list) releases them with the list. NULL with an error set. */
static inline PyObject *list_unfilled(Py_ssize_t n) {
    Py_ssize_t room = n > 0 ? n : 1;
    PyObject **items = (PyObject **)PyMem_Malloc((size_t)room * sizeof(PyObject *));
    PyObject *list = items ? PyList_New(0) : NULL;
    if (!list) {
        PyMem_Free(items);
        return items ? NULL : PyErr_NoMemory();
    }
    ((PyListObject *)list)->ob_item = items;
    ((PyListObject *)list)->allocated = room;
    return list;
}

static inline PyObject **list_items(PyObject *list) { return ((PyListObject *)list)->ob_item; }

static inline void list_sized(PyObject *list, Py_ssize_t k) { Py_SET_SIZE((PyListObject *)list, k); }

#endif /* TOK_ID_LIST_H */
