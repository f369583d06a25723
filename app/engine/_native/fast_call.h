/* FastCall: a callable that sends the plain one-argument call straight to a compiled function and every other call
 * to the general one.
 *
 *     FastCall(fast, slow[, bound], *, length=False, retry=None)
 *
 * ``f(x)`` (one positional argument, no keywords) returns ``fast(bound, x)`` (``fast(x)`` without ``bound``), or
 * with ``length`` its ``len()``; any other call returns ``slow(*args, **kwargs)``, as it is. ``retry`` (an
 * exception class or tuple of them): a plain call whose ``fast`` raises one of them returns ``slow(x)`` instead
 * (e.g. a compiled encoder that refuses text with lone surrogates, which the method scrubs). ``__wrapped__`` is
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
    int length;      /* the plain call returns len(fast(...)) */
    vectorcallfunc vectorcall;
} FastCall;

static PyObject *FastCall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    FastCall *self = (FastCall *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n == 1 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
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
    PyObject *fast, *slow, *bound = NULL, *retry = Py_None; /* bound not given (None is a value like any other) */
    int length = 0;
    static char *kwlist[] = {"fast", "slow", "bound", "length", "retry", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O$pO", kwlist, &fast, &slow, &bound, &length, &retry))
        return NULL;
    if (!PyCallable_Check(fast) || !PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "fast and slow must be callable");
        return NULL;
    }
    FastCall *self = (FastCall *)type->tp_alloc(type, 0);
    if (!self) return NULL;
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
    self->length = length;
    self->vectorcall = FastCall_vectorcall;
    return (PyObject *)self;
}

static int FastCall_traverse(FastCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->fast);
    Py_VISIT(self->slow);
    Py_VISIT(self->bound);
    Py_VISIT(self->retry);
    return 0;
}

static int FastCall_clear(FastCall *self) {
    Py_CLEAR(self->fast);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->bound);
    Py_CLEAR(self->retry);
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
