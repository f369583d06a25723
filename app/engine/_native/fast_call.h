/* FastCall: a callable that sends the plain one-argument call straight to a compiled function and every other call
 * to the general one.
 *
 *     FastCall(fast, slow[, bound], *, length=False, retry=None, avoid=None, verify=None)
 *
 * ``f(x)`` (one positional argument, no keywords) returns ``fast(bound, x)`` (``fast(x)`` without ``bound``), or
 * with ``length`` its ``len()``; any other call returns ``slow(*args, **kwargs)``, as it is. ``retry`` (an
 * exception class or tuple of them): a plain call whose ``fast`` raises one of them returns ``slow(x)`` instead
 * (e.g. a compiled encoder that refuses text with lone surrogates, which the method scrubs). ``avoid`` (a str, or
 * a tuple of non-empty strs) and ``verify`` (a callable) narrow the plain call further: it goes to ``fast`` only
 * when ``x`` is a str holding none of ``avoid``'s characters (a tuple: none of its strings; their first characters
 * are looked for first and the strings compared only where one occurs, so text holding none of those costs one
 * character search per distinct first character)
 * and, unless it is ASCII, ``verify(x)`` is true; every other ``x`` goes to ``slow(x)`` (e.g. text that holds an
 * added token's string, or that may need Unicode normalization). ``__wrapped__`` is
 * ``slow`` (so ``inspect.signature`` and ``help`` describe the general call) and ``__doc__`` its docstring.
 *
 * What it is for: a tokenizer's ``encode(text)`` with no options is one compiled call, but a Python method in front
 * of it costs up to ~170 ns a call (a frame, the keyword defaults, the option tests, a ``functools.partial``), as
 * much as encoding a few words. An instance attribute holding a FastCall shadows the method for that one call
 * shape; ``slow`` is the method itself, so every other shape behaves exactly as before. Calls through vectorcall,
 * no tuple or dict built on the fast path. Holds its three objects strongly and takes part in garbage collection
 * (``slow`` is usually a bound method of the object the FastCall is stored on: a cycle). */
#ifndef FAST_CALL_H
#define FAST_CALL_H

#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *fast;
    PyObject *slow;
    PyObject *bound; /* NULL: not given */
    PyObject *retry; /* NULL: none */
    PyObject *avoid; /* NULL: none (a str: the characters, or the first characters of avoid_strings) */
    PyObject *avoid_strings; /* NULL: avoid's characters decide alone; else a tuple of strs, which then decide */
    PyObject *verify; /* NULL: none */
    int length;      /* the plain call returns len(fast(...)) */
    vectorcallfunc vectorcall;
} FastCall;

/* Past this many occurrences of one first character, the strings starting with it are searched for from there
 * instead (one pass each), so that text made of that character costs no more than those searches. */
#define AVOID_AT_MOST 64

/* 1 if str x (of len characters) holds one of avoid_strings (all of whose first characters are in avoid), 0 if
 * not; -1 with an exception set. Each first character is looked for, and only where it occurs are the strings
 * starting with it compared: text holding a few '<' and none of the strings costs one character search, not a
 * search per string over the whole text. */
static int FastCall_holds(FastCall *self, PyObject *x, Py_ssize_t len) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(self->avoid), count = PyTuple_GET_SIZE(self->avoid_strings);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_UCS4 c = PyUnicode_READ_CHAR(self->avoid, k);
        for (Py_ssize_t from = 0, seen = 0;; seen++) {
            Py_ssize_t at = PyUnicode_FindChar(x, c, from, len, 1);
            if (at < 0) {
                if (at == -2) return -1;
                break;
            }
            for (Py_ssize_t j = 0; j < count; j++) {
                PyObject *s = PyTuple_GET_ITEM(self->avoid_strings, j);
                if (PyUnicode_READ_CHAR(s, 0) != c) continue;
                Py_ssize_t r = seen < AVOID_AT_MOST ? PyUnicode_Tailmatch(x, s, at, len, -1)
                                                    : PyUnicode_Find(x, s, at, len, 1) + 1;
                if (r < 0) return -1;
                if (r > 0) return 1;
            }
            if (seen >= AVOID_AT_MOST) break; /* every string of this first character searched for from here */
            from = at + 1;
        }
    }
    return 0;
}

/* 1 if the plain call of x goes to fast (avoid, verify above), 0 if to slow; -1 with an exception set. */
static int FastCall_admits(FastCall *self, PyObject *x) {
    if (self->avoid == NULL && self->verify == NULL) return 1;
    if (!PyUnicode_Check(x)) return 0;
    Py_ssize_t len = PyUnicode_GET_LENGTH(x);
    if (self->avoid != NULL && self->avoid_strings != NULL) {
        int holds = FastCall_holds(self, x, len);
        if (holds != 0) return holds < 0 ? -1 : 0;
    } else if (self->avoid != NULL) {
        for (Py_ssize_t k = 0; k < PyUnicode_GET_LENGTH(self->avoid); k++) {
            Py_ssize_t at = PyUnicode_FindChar(x, PyUnicode_READ_CHAR(self->avoid, k), 0, len, 1);
            if (at != -1) return at == -2 ? -1 : 0;
        }
    }
    if (self->verify == NULL || PyUnicode_IS_ASCII(x)) return 1;
    PyObject *ok = PyObject_CallOneArg(self->verify, x);
    if (ok == NULL) return -1;
    int truth = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    return truth;
}

static PyObject *FastCall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    FastCall *self = (FastCall *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    int plain = n == 1 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) ? FastCall_admits(self, args[0]) : 0;
    if (plain < 0) return NULL;
    if (plain) {
        PyObject *stack[2] = {self->bound, args[0]};
        PyObject *out = self->bound == NULL ? PyObject_Vectorcall(self->fast, args, 1, NULL)
                                            : PyObject_Vectorcall(self->fast, stack, 2, NULL);
        if (out == NULL && self->retry != NULL && PyErr_ExceptionMatches(self->retry)) {
            PyErr_Clear();
            return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
        }
        if (out == NULL || !self->length) return out;
        Py_ssize_t len = PyObject_Length(out);
        Py_DECREF(out);
        return len < 0 ? NULL : PyLong_FromSsize_t(len);
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *FastCall_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *fast, *slow, *bound = NULL, *retry = Py_None, *avoid = Py_None, *verify = Py_None;
    int length = 0; /* (bound: NULL when not given; None is a value like any other) */
    static char *kwlist[] = {"fast", "slow", "bound", "length", "retry", "avoid", "verify", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O$pOOO", kwlist, &fast, &slow, &bound, &length, &retry, &avoid,
                                     &verify))
        return NULL;
    PyObject *strings = NULL; /* (new reference: avoid's strings, when it is a tuple) */
    if (avoid != Py_None && PyTuple_Check(avoid)) {
        PyObject *firsts = PyUnicode_New(0, 0); /* the strings' distinct first characters, in order */
        for (Py_ssize_t j = 0; firsts != NULL && j < PyTuple_GET_SIZE(avoid); j++) {
            PyObject *item = PyTuple_GET_ITEM(avoid, j);
            if (!PyUnicode_Check(item) || PyUnicode_GET_LENGTH(item) == 0) {
                Py_CLEAR(firsts);
                PyErr_SetString(PyExc_TypeError, "avoid must be a str or a tuple of non-empty strs");
                break;
            }
            PyObject *first = PyUnicode_Substring(item, 0, 1);
            int seen = first == NULL ? -1 : PyUnicode_Contains(firsts, first);
            if (seen == 0)
                PyUnicode_Append(&firsts, first);
            Py_XDECREF(first);
            if (seen < 0)
                Py_CLEAR(firsts);
        }
        if (firsts == NULL)
            return NULL;
        strings = avoid;
        Py_INCREF(strings);
        avoid = firsts; /* (owned from here: released below) */
    } else {
        Py_INCREF(avoid);
    }
    if ((avoid != Py_None && !PyUnicode_Check(avoid)) || (verify != Py_None && !PyCallable_Check(verify))) {
        Py_DECREF(avoid);
        Py_XDECREF(strings);
        PyErr_SetString(PyExc_TypeError, "avoid must be a str or a tuple of non-empty strs, and verify callable");
        return NULL;
    }
    if (!PyCallable_Check(fast) || !PyCallable_Check(slow)) {
        Py_DECREF(avoid);
        Py_XDECREF(strings);
        PyErr_SetString(PyExc_TypeError, "fast and slow must be callable");
        return NULL;
    }
    FastCall *self = (FastCall *)type->tp_alloc(type, 0);
    if (!self) {
        Py_DECREF(avoid);
        Py_XDECREF(strings);
        return NULL;
    }
    Py_INCREF(fast);
    Py_INCREF(slow);
    self->fast = fast;
    self->slow = slow;
    Py_XINCREF(bound);
    self->bound = bound;
    if (retry != Py_None) {
        Py_INCREF(retry);
        self->retry = retry;
    }
    if (avoid != Py_None && PyUnicode_GET_LENGTH(avoid) > 0) {
        self->avoid = avoid; /* (the reference taken above) */
        self->avoid_strings = strings;
    } else {
        Py_DECREF(avoid);
        Py_XDECREF(strings);
    }
    if (verify != Py_None) {
        Py_INCREF(verify);
        self->verify = verify;
    }
    self->length = length;
    self->vectorcall = FastCall_vectorcall;
    return (PyObject *)self;
}

static int FastCall_traverse(FastCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->fast);
    Py_VISIT(self->slow);
    Py_VISIT(self->bound);
    Py_VISIT(self->retry);
    Py_VISIT(self->avoid);
    Py_VISIT(self->avoid_strings);
    Py_VISIT(self->verify);
    return 0;
}

static int FastCall_clear(FastCall *self) {
    Py_CLEAR(self->fast);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->bound);
    Py_CLEAR(self->retry);
    Py_CLEAR(self->avoid);
    Py_CLEAR(self->avoid_strings);
    Py_CLEAR(self->verify);
    return 0;
}

static void FastCall_dealloc(FastCall *self) {
    PyObject_GC_UnTrack(self);
    FastCall_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *FastCall_wrapped(FastCall *self, void *closure) {
    (void)closure;
    if (!self->slow) Py_RETURN_NONE;
    Py_INCREF(self->slow);
    return self->slow;
}

static PyObject *FastCall_doc(FastCall *self, void *closure) {
    (void)closure;
    if (!self->slow) Py_RETURN_NONE;
    return PyObject_GetAttrString(self->slow, "__doc__");
}

static PyGetSetDef FastCall_getset[] = {
    {"__wrapped__", (getter)FastCall_wrapped, NULL, "the general callable", NULL},
    {"__doc__", (getter)FastCall_doc, NULL, "the general callable's docstring", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef FastCall_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastCall, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._core.FastCall",
    .tp_basicsize = sizeof(FastCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = FastCall_new,
    .tp_dealloc = (destructor)FastCall_dealloc,
    .tp_traverse = (traverseproc)FastCall_traverse,
    .tp_clear = (inquiry)FastCall_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastCall, vectorcall),
    .tp_getset = FastCall_getset,
    .tp_members = FastCall_members,
};

#endif
