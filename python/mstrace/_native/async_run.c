/*
 * async_run.c — hooked calls whose work runs on after the call returned:
 * async functions, generator functions and async generator functions. The
 * call returns the business coroutine / generator wrapped in one of the
 * helpers of trace_helpers.c (_trace_coro, _trace_gen, _trace_agen), which
 * drive an `_AsyncRun` object defined here: `_begin()` at the first step
 * starts the span, `_enter()`/`_leave()` make it current around each
 * generator step (the thread stack for a generator, the ContextVar for an
 * async generator; a coroutine is current in the ContextVar for its whole
 * life, as async steps interleave on one thread), `_end(exc, result)` ends
 * it. A run dropped before its end discards its span. See async_run.h.
 */
#include "async_run.h"
#include "hook_invoke.h"
#include "hook_span.h"
#include "trace_helpers.h"
#include "context.h"

/* The state of one hooked call that runs on after it returned: a coroutine
 * (_trace_coro), a generator or an async generator (_trace_gen, _trace_agen)
 * drives it. */
typedef struct {
    PyObject_HEAD
    MstnHook *root;
    mstn_batch *batch;          /* model/output: read at call time         */
    PyObject *outputs;
    PyObject *token;            /* ContextVar token while current          */
    mstn_span_run sr;
    int kind;                   /* MSTN_RUN_*                              */
    bool started;
    bool pushed;                /* generator: on the thread stack (a step) */
    uint64_t t0;
} MstnAsyncRun;

/* Makes the run's span current in the ContextVar (for this task/context). */
static void arun_set_ctxvar(MstnAsyncRun *a) {
    PyObject *v = mstn_ctxvar_value(&a->sr.ctx);
    if (v) {
        a->token = PyContextVar_Set(mstn_g.ctxvar, v);
        Py_DECREF(v);
    }
    if (!a->token)
        mstn_hook_failed(a->root);
}

static PyObject *arun_begin(PyObject *self, PyObject *unused) {
    MstnAsyncRun *a = (MstnAsyncRun *)self;
    MstnHook *r = a->root;
    a->t0 = mst_clock_now_ns();
    if (r->adapter == MSTN_AD_SCHEDULE || r->disabled)
        Py_RETURN_NONE; /* schedule: started at the end, with t0 */
    a->started = mstn_hook_span_begin(r, &a->sr, a->batch, a->t0);
    /* A coroutine is current for its whole life (its caller waits on it);
     * a generator only during its steps (_enter/_leave). */
    if (a->started && a->kind == MSTN_RUN_CORO)
        arun_set_ctxvar(a);
    Py_RETURN_NONE;
}

/* A generator step begins: the span becomes current until _leave(). */
static PyObject *arun_enter(PyObject *self, PyObject *unused) {
    MstnAsyncRun *a = (MstnAsyncRun *)self;
    if (!a->started || a->pushed || a->token)
        Py_RETURN_NONE;
    if (a->kind == MSTN_RUN_GEN) {
        mstn_push(&a->sr.ctx);
        a->pushed = true;
    } else {
        arun_set_ctxvar(a);
    }
    Py_RETURN_NONE;
}

/* A generator step ended (yielded, returned or raised): no longer current.
 * Keeps a pending exception (called from a finally block). */
static PyObject *arun_leave(PyObject *self, PyObject *unused) {
    MstnAsyncRun *a = (MstnAsyncRun *)self;
    if (a->pushed) {
        mstn_pop();
        a->pushed = false;
    }
    if (a->token) {
        if (PyContextVar_Reset(mstn_g.ctxvar, a->token) < 0)
            mstn_hook_failed(a->root);
        Py_CLEAR(a->token);
    }
    Py_RETURN_NONE;
}

/* _end(exc, result): exc is the business exception or None. */
static PyObject *arun_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    MstnAsyncRun *a = (MstnAsyncRun *)self;
    MstnHook *r = a->root;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_end(exc, result)");
        return NULL;
    }
    PyObject *exc = args[0], *result = args[1];
    bool ok = exc == Py_None;
    if (a->token) {
        if (PyContextVar_Reset(mstn_g.ctxvar, a->token) < 0)
            mstn_hook_failed(r);
        Py_CLEAR(a->token);
    }
    mstn_batch local;
    if (r->adapter == MSTN_AD_SCHEDULE && !r->disabled) {
        mstn_batch_init(&local);
        if (ok && mstn_batch_from_schedule(&local, result, NULL) < 0)
            mstn_hook_failed(r);
        a->started = mstn_hook_span_begin(r, &a->sr, &local, a->t0);
    }
    if (a->started) {
        /* Make the business exception the pending one so the status reads
         * it; it is handed back untouched. */
        if (!ok)
            PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), Py_NewRef(exc),
                          PyException_GetTraceback(exc));
        mstn_hook_span_finish(r, &a->sr, r->adapter == MSTN_AD_SCHEDULE ? &local : a->batch, ok);
        if (!ok)
            PyErr_Clear();
        a->started = false;
    }
    if (r->adapter == MSTN_AD_SCHEDULE && !r->disabled)
        mstn_batch_release(&local);
    if (a->outputs && ok && mstn_finish_outputs(a->outputs) < 0)
        mstn_hook_failed(r);
    Py_RETURN_NONE;
}

static void arun_dealloc(PyObject *self) {
    MstnAsyncRun *a = (MstnAsyncRun *)self;
    if (a->started) { /* never finished (coroutine closed unawaited) */
        mst_span_discard(a->sr.span);
        mstn_g.inflight--;
    }
    if (a->batch) {
        mstn_batch_release(a->batch);
        PyMem_Free(a->batch);
    }
    Py_XDECREF(a->outputs);
    Py_XDECREF(a->token);
    Py_XDECREF(a->root);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef arun_methods[] = {
    {"_begin", arun_begin, METH_NOARGS, NULL},
    {"_enter", arun_enter, METH_NOARGS, NULL},
    {"_leave", arun_leave, METH_NOARGS, NULL},
    {"_end", (PyCFunction)(void (*)(void))arun_end, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject MstnAsyncRun_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mstrace._native._AsyncRun",
    .tp_basicsize = sizeof(MstnAsyncRun),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = arun_dealloc,
    .tp_methods = arun_methods,
};

PyObject *mstn_hook_call_async(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    MstnAsyncRun *a = PyObject_New(MstnAsyncRun, &MstnAsyncRun_Type);
    if (!a) {
        mstn_hook_failed(r);
        return mstn_hook_invoke(h, r, args, nargs, kwnames);
    }
    a->root = (MstnHook *)Py_NewRef(r);
    a->batch = NULL;
    a->outputs = NULL;
    a->token = NULL;
    a->kind = r->is_async ? MSTN_RUN_CORO : r->gen_kind;
    a->started = false;
    a->pushed = false;
    a->t0 = 0;
    if (r->adapter == MSTN_AD_MODEL || r->adapter == MSTN_AD_OUTPUT) {
        a->batch = PyMem_Malloc(sizeof(mstn_batch));
        if (!a->batch) {
            PyErr_NoMemory();
            mstn_hook_failed(r);
        } else {
            mstn_batch_init(a->batch);
            int rc = r->adapter == MSTN_AD_MODEL
                         ? mstn_batch_from_model_args(a->batch, args, nargs, kwnames)
                         : mstn_batch_from_output_args(a->batch, args, nargs, kwnames, &a->outputs);
            if (rc < 0)
                mstn_hook_failed(r);
        }
    }
    PyObject *inner = mstn_hook_invoke(h, r, args, nargs, kwnames);
    if (!inner) {
        Py_DECREF(a);
        return NULL;
    }
    PyObject *helper = mstn_trace_coro;
    if (a->kind == MSTN_RUN_GEN)
        helper = PyGen_CheckExact(inner) ? mstn_trace_gen : NULL;
    else if (a->kind == MSTN_RUN_ASYNCGEN)
        helper = PyAsyncGen_CheckExact(inner) ? mstn_trace_agen : NULL;
    if (!helper) { /* not what the function's code promised: leave it alone */
        Py_DECREF(a);
        return inner;
    }
    PyObject *argv[2] = {inner, (PyObject *)a};
    PyObject *coro = PyObject_Vectorcall(helper, argv, 2, NULL);
    Py_DECREF(a);
    if (!coro) { /* could not wrap: hand back the untraced coroutine */
        mstn_hook_failed(r);
        return inner;
    }
    Py_DECREF(inner);
    return coro;
}
