/*
 * hook_invoke.c — the business call through a profiling handler, and the
 * `_Original` (Once) object the handler receives in place of the original:
 * it runs the business call at most once and remembers its outcome, so the
 * hook can return the business result / re-raise the business exception
 * unchanged whatever the handler does, and run the business itself if the
 * handler never did. See hook_invoke.h.
 */
#include "hook_invoke.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *target;
    bool called;
    PyObject *result;
    PyObject *et, *ev, *etb;
} MstnOnce;

static PyObject *once_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    MstnOnce *o = (MstnOnce *)self;
    if (!o->called) {
        o->called = true;
        o->result = PyObject_Vectorcall(o->target, args, nargsf, kwnames);
        if (!o->result) {
            PyErr_Fetch(&o->et, &o->ev, &o->etb);
            Py_XINCREF(o->et);
            Py_XINCREF(o->ev);
            Py_XINCREF(o->etb);
            PyErr_Restore(o->et, o->ev, o->etb);
            return NULL;
        }
        return Py_NewRef(o->result);
    }
    /* A second call does not run the business again. */
    if (o->result)
        return Py_NewRef(o->result);
    Py_XINCREF(o->et);
    Py_XINCREF(o->ev);
    Py_XINCREF(o->etb);
    PyErr_Restore(o->et, o->ev, o->etb);
    return NULL;
}

static PyObject *once_getattro(PyObject *self, PyObject *name) {
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    return PyObject_GetAttr(((MstnOnce *)self)->target, name);
}

static int once_traverse(PyObject *self, visitproc visit, void *arg) {
    MstnOnce *o = (MstnOnce *)self;
    Py_VISIT(o->target);
    Py_VISIT(o->result);
    Py_VISIT(o->et);
    Py_VISIT(o->ev);
    Py_VISIT(o->etb);
    return 0;
}

static int once_clear(PyObject *self) {
    MstnOnce *o = (MstnOnce *)self;
    Py_CLEAR(o->target);
    Py_CLEAR(o->result);
    Py_CLEAR(o->et);
    Py_CLEAR(o->ev);
    Py_CLEAR(o->etb);
    return 0;
}

static void once_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    once_clear(self);
    Py_TYPE(self)->tp_free(self);
}

PyTypeObject MstnOnce_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mstrace._native._Original",
    .tp_basicsize = sizeof(MstnOnce),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(MstnOnce, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getattro = once_getattro,
    .tp_traverse = once_traverse,
    .tp_clear = once_clear,
    .tp_dealloc = once_dealloc,
    .tp_doc = "The original callable as a profiling handler sees it (runs at most once).",
};

/* Calls `callable(prefix, *args, **kw)` for a vectorcall argument array. */
static PyObject *call_prefixed(PyObject *callable, PyObject *prefix, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *small[17];
    PyObject **a = mstn_args_prepend(small, sizeof small / sizeof small[0], 1, prefix, args, nargs, kwnames);
    if (!a)
        return NULL;
    PyObject *r = PyObject_Vectorcall(callable, a + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      kwnames);
    mstn_args_release(a, small);
    return r;
}

/* The business call through the handler: the result / exception of the
 * business is what comes out; handler failures are hook failures. */
PyObject *mstn_hook_invoke_handler(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
    MstnOnce *once = PyObject_GC_New(MstnOnce, &MstnOnce_Type);
    if (!once) {
        mstn_hook_failed(r);
        return PyObject_Vectorcall(h->target, args, (size_t)nargs, kwnames);
    }
    once->vectorcall = once_vectorcall;
    once->target = Py_NewRef(h->target);
    once->called = false;
    once->result = once->et = once->ev = once->etb = NULL;
    PyObject_GC_Track(once);

    PyObject *res = call_prefixed(r->handler, (PyObject *)once, args, nargs, kwnames);
    PyObject *out;
    if (!once->called) { /* the handler never ran the business: we do */
        if (res)
            PyErr_SetString(PyExc_RuntimeError, "profiling handler did not call the original");
        Py_XDECREF(res);
        mstn_hook_failed(r);
        out = PyObject_Vectorcall(h->target, args, (size_t)nargs, kwnames);
    } else if (once->result) { /* business returned: that value, always */
        if (!res)
            mstn_hook_failed(r);
        Py_XDECREF(res);
        out = Py_NewRef(once->result);
    } else { /* business raised: that exception, unchanged */
        if (res)
            Py_DECREF(res);
        else
            PyErr_Clear();
        Py_XINCREF(once->et);
        Py_XINCREF(once->ev);
        Py_XINCREF(once->etb);
        PyErr_Restore(once->et, once->ev, once->etb);
        out = NULL;
    }
    Py_DECREF(once);
    return out;
}
