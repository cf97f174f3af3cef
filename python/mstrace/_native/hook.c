/*
 * hook.c — the `Hook` type: a transparent C wrapper around a function,
 * method, staticmethod, classmethod or async function that records one span
 * per call through an adapter (docs/reference/spans.md "Adapters"), in the style of wrapt's C proxy.
 *
 * Shapes:
 *   - `Hook` (root or bound) wraps a plain function. It is a method
 *     descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR), so `obj.method(...)` calls
 *     it unbound with `obj` first and no bound object is built per call;
 *     `__get__` still returns a bound Hook for `m = obj.method`.
 *   - `_DescrHook` (a subtype) wraps anything else (staticmethod,
 *     classmethod, builtins, callables): `__get__` delegates to the wrapped
 *     object's own `__get__` and wraps what it returns, so each kind binds
 *     exactly as it would unwrapped.
 * A bound hook shares its root's configuration and failure counter.
 *
 * Per call: adapter pre-step, span start (parent: the thread's current hook
 * span, or the batch's single known request context), push as current, the
 * business call (directly or through the profiling handler), pop, adapter
 * post-step, status, end. The business exception is never touched: it is
 * only read (for the status text) and left pending, so the same object and
 * traceback propagate. Internal failures (exceptions raised by the hook's own
 * reads) are cleared and counted; the fifth switches the hook off.
 *
 * Async functions: the call returns a coroutine of a tiny helper
 * (module.c: `_trace_coro`, a 6-line `async def` compiled from a string) that
 * drives an `_AsyncRun` object: `_begin()` at the first send starts the span
 * and makes it current in a ContextVar (async steps interleave on one thread,
 * so the thread stack cannot hold them), `_end()` at completion ends it.
 *
 * Generator and async generator functions: the call returns a generator
 * (async generator) of a helper compiled below (`_trace_gen`, `_trace_agen`)
 * that forwards next/send/throw/close (asend/athrow/aclose) to the business
 * generator as `yield from` would. The business async generator's first step
 * is taken with no asyncgen hooks installed, so the event loop registers (and
 * closes at shutdown_asyncgens) the wrapper only, which closes it: both
 * registered, the loop closed them concurrently and one aclose() failed with
 * "asynchronous generator is already running". The span starts at the first step and ends
 * at exhaustion (OK), close (OK: GeneratorExit is no error) or an exception
 * (ERROR, the same exception object re-raised). It is current only while a
 * step of the business generator runs (`_enter()`/`_leave()` around it: the
 * thread stack for a generator, the ContextVar for an async generator), not
 * while the consumer runs between steps.
 */
#include "native.h"

#include <string.h>

typedef struct MstnHook {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *wrapped;          /* the object given                        */
    PyObject *target;           /* what the business call invokes          */
    PyObject *self_obj;         /* prepended to args (bound plain function) */
    PyObject *handler;          /* profiling handler or NULL               */
    struct MstnHook *root;      /* bound hooks: the hook they came from    */
    PyObject *dict;
    PyObject *weakreflist;
    /* configuration (meaningful in the root only) */
    PyObject *name_obj, *domain_obj;
    char *name;
    char *scope_name;
    mst_span_kind kind;
    mstn_adapter adapter;
    bool is_async;
    uint8_t gen_kind;           /* MSTN_RUN_GEN / MSTN_RUN_ASYNCGEN, else 0 */
    bool disabled;
    int failures;
    const mst_scope *scope;
    uint64_t scope_gen;
} MstnHook;

#define ROOT(h) ((h)->root ? (h)->root : (h))

PyObject *mstn_trace_coro; /* set by module.c */

/* What an _AsyncRun drives: a coroutine, a generator or an async generator. */
enum { MSTN_RUN_CORO = 0, MSTN_RUN_GEN = 1, MSTN_RUN_ASYNCGEN = 2 };

/* The wrappers of hooked generators / async generators (see the header
 * comment); compiled once in mstn_hook_module_init. They forward as PEP 380's
 * `yield from` does: close (GeneratorExit thrown in) closes the business
 * generator, anything else thrown in is thrown into it, outside the except
 * block so its own exceptions do not gain a __context__. */
static const char trace_gen_src[] =
    "from sys import get_asyncgen_hooks as _get_hooks, set_asyncgen_hooks as _set_hooks\n"
    "\n"
    "def _trace_gen(gen, run):\n"
    "    run._begin()\n"
    "    send, value, thrown = gen.send, None, None\n"
    "    while True:\n"
    "        try:\n"
    "            try:\n"
    "                run._enter()\n"
    "                if thrown is None:\n"
    "                    item = send(value)\n"
    "                elif isinstance(thrown, GeneratorExit):\n"
    "                    gen.close()\n"
    "                else:\n"
    "                    item = gen.throw(thrown)\n"
    "            finally:\n"
    "                run._leave()\n"
    "        except StopIteration as stop:\n"
    "            run._end(None, stop.value)\n"
    "            return stop.value\n"
    "        except BaseException as exc:\n"
    "            run._end(exc, None)\n"
    "            raise\n"
    "        if thrown is not None:\n"
    "            if isinstance(thrown, GeneratorExit):\n"
    "                run._end(None, None)\n"
    "                raise thrown\n"
    "            thrown = None\n"
    "        try:\n"
    "            value = yield item\n"
    "        except BaseException as exc:\n"
    "            thrown = exc\n"
    "\n"
    "async def _trace_agen(agen, run):\n"
    "    run._begin()\n"
    "    hooks = _get_hooks()\n"
    "    _set_hooks(firstiter=None, finalizer=None)\n"
    "    try:\n"
    "        step = agen.asend(None)\n"
    "    finally:\n"
    "        _set_hooks(*hooks)\n"
    "    thrown = None\n"
    "    while True:\n"
    "        try:\n"
    "            try:\n"
    "                run._enter()\n"
    "                if thrown is None:\n"
    "                    item = await step\n"
    "                elif isinstance(thrown, GeneratorExit):\n"
    "                    await agen.aclose()\n"
    "                else:\n"
    "                    item = await agen.athrow(thrown)\n"
    "            finally:\n"
    "                run._leave()\n"
    "        except StopAsyncIteration:\n"
    "            run._end(None, None)\n"
    "            return\n"
    "        except BaseException as exc:\n"
    "            run._end(exc, None)\n"
    "            raise\n"
    "        if thrown is not None:\n"
    "            if isinstance(thrown, GeneratorExit):\n"
    "                run._end(None, None)\n"
    "                raise thrown\n"
    "            thrown = None\n"
    "        step = None\n"
    "        try:\n"
    "            step = agen.asend((yield item))\n"
    "        except BaseException as exc:\n"
    "            thrown = exc\n";
static PyObject *trace_gen, *trace_agen;

/* ---------------------------------------------------------- failures */

/* Records an internal failure of hook `r` (a Python exception is pending and
 * is cleared); the MSTN_FAILURE_LIMIT-th switches the hook off, once. */
static void hook_failed(MstnHook *r) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    r->failures++;
    mstn_g.hook_failures++;
    if (r->failures >= MSTN_FAILURE_LIMIT && !r->disabled) {
        r->disabled = true;
        mstn_g.hooks_disabled++;
        PyObject *s = v ? PyObject_Str(v) : NULL;
        const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
        if (!msg)
            PyErr_Clear();
        mstn_log("warning",
                 "mstrace: hook '%s' switched off after %d internal failures "
                 "(last: %s: %s); the wrapped function keeps running untraced",
                 r->name, r->failures, t ? ((PyTypeObject *)t)->tp_name : "?",
                 msg ? msg : "?");
        Py_XDECREF(s);
    }
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
}

/* "Type: message" of the pending exception into buf (≤ 1024 bytes, cut at a
 * UTF-8 boundary); the exception stays pending, untouched. */
static void exc_text(char *buf, size_t size) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    const char *tname = t && PyType_Check(t) ? ((PyTypeObject *)t)->tp_name : "Exception";
    const char *dot = strrchr(tname, '.');
    if (dot)
        tname = dot + 1;
    PyObject *s = v ? PyObject_Str(v) : NULL;
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    if (!msg)
        PyErr_Clear(); /* str() of the exception failed: type name only */
    int n = msg && *msg ? snprintf(buf, size, "%s: %s", tname, msg) : snprintf(buf, size, "%s", tname);
    if (n >= (int)size) { /* snprintf cut it: back off to a char boundary */
        size_t end = size - 1;
        while (end > 0 && ((unsigned char)buf[end] & 0xC0) == 0x80)
            end--;
        buf[end] = '\0';
    }
    Py_XDECREF(s);
    PyErr_Restore(t, v, tb);
}

/* ------------------------------------------------------------ Once */

/* The `original` a profiling handler receives: runs the business call at
 * most once and remembers its outcome, so the hook can return the business
 * result / re-raise the business exception unchanged whatever the handler
 * does, and run the business itself if the handler never did. */
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
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[17];
    PyObject **a = small;
    if (total + 2 > (Py_ssize_t)(sizeof small / sizeof small[0])) {
        a = PyMem_Malloc((size_t)(total + 2) * sizeof(PyObject *));
        if (!a)
            return PyErr_NoMemory();
    }
    a[1] = prefix;
    if (total)
        memcpy(a + 2, args, (size_t)total * sizeof(PyObject *));
    PyObject *r = PyObject_Vectorcall(callable, a + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      kwnames);
    if (a != small)
        PyMem_Free(a);
    return r;
}

/* The business call through the handler: the result / exception of the
 * business is what comes out; handler failures are hook failures. */
static PyObject *invoke_handler(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    MstnOnce *once = PyObject_GC_New(MstnOnce, &MstnOnce_Type);
    if (!once) {
        hook_failed(r);
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
        hook_failed(r);
        out = PyObject_Vectorcall(h->target, args, (size_t)nargs, kwnames);
    } else if (once->result) { /* business returned: that value, always */
        if (!res)
            hook_failed(r);
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

static inline PyObject *invoke(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    if (r->handler)
        return invoke_handler(h, r, args, nargs, kwnames);
    return PyObject_Vectorcall(h->target, args, (size_t)nargs, kwnames);
}

/* ------------------------------------------------------------ spans */

static const mst_scope *hook_scope(MstnHook *r) {
    if (r->scope_gen != mstn_g.tracer_gen || !r->scope) {
        r->scope = mst_tracer_scope(mstn_g.tracer, r->scope_name, NULL);
        r->scope_gen = mstn_g.tracer_gen;
    }
    return r->scope;
}

/* A started span with what the capture needs to describe it. */
typedef struct span_run {
    mst_span *span;
    mstn_ctx ctx;               /* the span's own context                 */
    mstn_ctx parent;
    bool has_parent;
    uint64_t t0;
} span_run;

/* Starts the span of hook `r`: parent = the current hook span, else the
 * batch's single known request context (a synthetic one lends only its
 * trace id), else a root in a new trace. Returns false if nothing is
 * recorded (no tracer, or every request of the batch is unsampled). */
static bool span_begin(MstnHook *r, span_run *sr, const mstn_batch *b, uint64_t t0) {
    mst_tracer *tr = mstn_g.tracer;
    sr->span = NULL;
    sr->has_parent = false;
    sr->t0 = t0;
    if (!tr)
        return false;
    if (b && b->n_ids == 0 && b->n_unsampled > 0)
        return false;
    const mst_scope *scope = hook_scope(r);
    mstn_ctx lone;
    bool have_lone = false;
    if (mstn_current(&sr->parent)) {
        sr->has_parent = true;
    } else if (b && b->n_links == 1) {
        lone = b->link_ctx[0];
        have_lone = true;
        if (!lone.synthetic) {
            sr->parent = lone;
            sr->has_parent = true;
        }
    }
    if (sr->has_parent) {
        mst_span_context pc;
        mstn_ctx_to_public(&sr->parent, &pc);
        sr->span = mst_span_start(tr, scope, r->name, r->kind, &pc, t0);
    } else if (have_lone) { /* synthetic context: a root inside its trace */
        mst_span_id sid = mst_span_id_random();
        sr->span = mst_span_start_with_ids(tr, scope, r->name, r->kind, NULL, &lone.trace_id, &sid, t0);
    } else {
        sr->span = mst_span_start(tr, scope, r->name, r->kind, NULL, t0);
    }
    if (!sr->span)
        return false;
    mstn_g.inflight++;
    mst_span_context own;
    if (mst_span_get_context(sr->span, &own)) {
        sr->ctx.trace_id = own.trace_id;
        sr->ctx.span_id = own.span_id;
        sr->ctx.flags = own.trace_flags;
    } else {
        memset(&sr->ctx, 0, sizeof sr->ctx);
    }
    sr->ctx.remote = false;
    sr->ctx.synthetic = false;
    mst_span_set_int(sr->span, "process.pid", mstn_g.pid);
    mst_span_set_int(sr->span, "thread.id", mstn_thread_id());
    if (mstn_g.role[0]) /* names the process track in Perfetto */
        mst_span_set_str(sr->span, "process.role", mstn_g.role);
    return true;
}

static void hex_ids(const mstn_ctx *c, char tid[33], char sid[17]) {
    mst_trace_id_to_hex(&c->trace_id, tid);
    mst_span_id_to_hex(&c->span_id, sid);
}

/* Test-only: mirrors what was recorded into a dict on mstn_g.capture. */
static void capture(MstnHook *r, const span_run *sr, const mstn_batch *b, uint64_t t1,
                    bool error, const char *msg) {
    char tid[33], sid[17], ptid[33], psid[17];
    hex_ids(&sr->ctx, tid, sid);
    PyObject *attrs = PyDict_New(), *links = PyList_New(0), *d = NULL;
    if (!attrs || !links)
        goto fail;
    PyObject *v = PyLong_FromLong(mstn_g.pid);
    if (!v || PyDict_SetItemString(attrs, "process.pid", v) < 0) { Py_XDECREF(v); goto fail; }
    Py_DECREF(v);
    v = PyLong_FromLong(mstn_thread_id());
    if (!v || PyDict_SetItemString(attrs, "thread.id", v) < 0) { Py_XDECREF(v); goto fail; }
    Py_DECREF(v);
    if (mstn_g.role[0]) {
        v = PyUnicode_FromString(mstn_g.role);
        if (!v || PyDict_SetItemString(attrs, "process.role", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->n_ids) {
        PyObject *ids = PyList_New((Py_ssize_t)b->n_ids);
        if (!ids)
            goto fail;
        for (size_t i = 0; i < b->n_ids; i++)
            PyList_SET_ITEM(ids, (Py_ssize_t)i, Py_NewRef(b->owned[i]));
        int rc = PyDict_SetItemString(attrs, "request.ids", ids);
        Py_DECREF(ids);
        if (rc < 0)
            goto fail;
    }
    if (b && b->request_count >= 0) {
        v = PyLong_FromLongLong(b->request_count);
        if (!v || PyDict_SetItemString(attrs, "batch.request_count", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->scheduled_tokens >= 0) {
        v = PyLong_FromLongLong(b->scheduled_tokens);
        if (!v || PyDict_SetItemString(attrs, "batch.scheduled_tokens", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->waiting >= 0) {
        v = PyLong_FromLongLong(b->waiting);
        if (!v || PyDict_SetItemString(attrs, "scheduler.waiting", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->running >= 0) {
        v = PyLong_FromLongLong(b->running);
        if (!v || PyDict_SetItemString(attrs, "scheduler.running", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->kv_usage >= 0.0) {
        v = PyFloat_FromDouble(b->kv_usage);
        if (!v || PyDict_SetItemString(attrs, "kv_cache.usage", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    for (size_t i = 0; b && i < b->n_links; i++) {
        char lt[33], ls[17];
        hex_ids(&b->link_ctx[i], lt, ls);
        PyObject *l = Py_BuildValue("{s:s,s:s,s:O}", "trace_id", lt, "span_id", ls, "request.id",
                                    b->owned[b->link_idx[i]]);
        if (!l || PyList_Append(links, l) < 0) { Py_XDECREF(l); goto fail; }
        Py_DECREF(l);
    }
    ptid[0] = psid[0] = '\0';
    if (sr->has_parent)
        hex_ids(&sr->parent, ptid, psid);
    d = Py_BuildValue("{s:s,s:s,s:i,s:s,s:s,s:s,s:K,s:K,s:s,s:s,s:O,s:O}", "name", r->name, "scope",
                      r->scope_name, "kind", (int)r->kind, "trace_id", tid, "span_id", sid,
                      "parent_span_id", psid, "start_ns", (unsigned long long)sr->t0, "end_ns",
                      (unsigned long long)t1, "status", error ? "ERROR" : "OK", "status_message",
                      msg ? msg : "", "attributes", attrs, "links", links);
    if (!d || PyList_Append(mstn_g.capture, d) < 0)
        goto fail;
    Py_DECREF(d);
    Py_DECREF(attrs);
    Py_DECREF(links);
    return;
fail:
    PyErr_Clear();
    Py_XDECREF(d);
    Py_XDECREF(attrs);
    Py_XDECREF(links);
}

/* Ends the span: batch attributes and links, status from `ok` (an exception
 * is pending when !ok and stays pending). */
static void span_finish(MstnHook *r, span_run *sr, const mstn_batch *b, bool ok) {
    mst_span *span = sr->span;
    char msg[MST_MAX_STATUS_MESSAGE_LEN + 1];
    msg[0] = '\0';
    if (b) {
        if (b->n_ids)
            mst_span_set_str_list(span, "request.ids", b->ids, b->n_ids);
        if (b->request_count >= 0)
            mst_span_set_int(span, "batch.request_count", b->request_count);
        if (b->scheduled_tokens >= 0)
            mst_span_set_int(span, "batch.scheduled_tokens", b->scheduled_tokens);
        if (b->waiting >= 0)
            mst_span_set_int(span, "scheduler.waiting", b->waiting);
        if (b->running >= 0)
            mst_span_set_int(span, "scheduler.running", b->running);
        if (b->kv_usage >= 0.0)
            mst_span_set_double(span, "kv_cache.usage", b->kv_usage);
        for (size_t i = 0; i < b->n_links; i++) {
            mst_span_context lc;
            mst_attr_in a;
            mstn_ctx_to_public(&b->link_ctx[i], &lc);
            a.key = "request.id";
            a.type = MST_ATTR_STRING;
            a.v.s = b->ids[b->link_idx[i]];
            mst_span_add_link(span, &lc, &a, 1);
        }
    }
    if (ok) {
        mst_span_set_status(span, MST_STATUS_OK, NULL);
    } else {
        exc_text(msg, sizeof msg);
        mst_span_set_status(span, MST_STATUS_ERROR, msg);
    }
    uint64_t t1 = mst_clock_now_ns();
    if (mstn_g.capture) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        capture(r, sr, b, t1, !ok, msg);
        PyErr_Restore(t, v, tb);
    }
    mst_span_end(span, t1);
    mstn_g.inflight--;
    sr->span = NULL;
}

/* ------------------------------------------------------ sync adapters */

static PyObject *call_adapter(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
    span_run sr;
    if (!span_begin(r, &sr, NULL, mst_clock_now_ns()))
        return invoke(h, r, args, nargs, kwnames);
    mstn_push(&sr.ctx);
    PyObject *res = invoke(h, r, args, nargs, kwnames);
    mstn_pop();
    span_finish(r, &sr, NULL, res != NULL);
    return res;
}

/* schedule/model/output: the batch is read before (model, output) or after
 * (schedule) the call; the schedule span is started after the call with the
 * start time taken before it, so it is not current during the call. */
static PyObject *batch_adapter(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    mstn_batch b;
    span_run sr;
    PyObject *outputs = NULL, *res;
    bool started = false;
    uint64_t t0 = mst_clock_now_ns();
    mstn_batch_init(&b);
    if (r->adapter == MSTN_AD_SCHEDULE) {
        res = invoke(h, r, args, nargs, kwnames);
        PyObject *t = NULL, *v = NULL, *tb = NULL;
        if (!res)
            PyErr_Fetch(&t, &v, &tb);
        else if (mstn_batch_from_scheduler_output(&b, res) < 0)
            hook_failed(r);
        else if (nargs > 0)
            mstn_batch_from_scheduler(&b, args[0]); /* self: the Scheduler */
        if (!res)
            PyErr_Restore(t, v, tb);
        if (span_begin(r, &sr, &b, t0))
            span_finish(r, &sr, &b, res != NULL);
        mstn_batch_release(&b);
        return res;
    }
    int rc = r->adapter == MSTN_AD_MODEL
                 ? mstn_batch_from_model_args(&b, args, nargs, kwnames)
                 : mstn_batch_from_output_args(&b, args, nargs, kwnames, &outputs);
    if (rc < 0)
        hook_failed(r);
    started = span_begin(r, &sr, &b, t0);
    if (started)
        mstn_push(&sr.ctx);
    res = invoke(h, r, args, nargs, kwnames);
    if (started) {
        mstn_pop();
        span_finish(r, &sr, &b, res != NULL);
    }
    if (outputs) {
        if (res && mstn_finish_outputs(outputs) < 0)
            hook_failed(r);
        Py_DECREF(outputs);
    }
    mstn_batch_release(&b);
    return res;
}

static PyObject *async_call(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames);

static PyObject *dispatch(MstnHook *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    MstnHook *r = ROOT(h);
    if (r->disabled)
        return invoke(h, r, args, nargs, kwnames);
    switch (r->adapter) {
    case MSTN_AD_REQUEST:
    case MSTN_AD_REQUEST_CONTEXT:
        if (mstn_register_from_args(args, nargs, kwnames, false, r->adapter == MSTN_AD_REQUEST,
                                    r->adapter == MSTN_AD_REQUEST && mstn_g.auto_trace && mstn_g.tracer
                                        ? hook_scope(r) : NULL) < 0)
            hook_failed(r);
        return invoke(h, r, args, nargs, kwnames);
    default:
        break;
    }
    if (!mstn_g.tracer)
        return invoke(h, r, args, nargs, kwnames);
    if (r->is_async || r->gen_kind)
        return async_call(h, r, args, nargs, kwnames);
    if (r->adapter == MSTN_AD_CALL)
        return call_adapter(h, r, args, nargs, kwnames);
    return batch_adapter(h, r, args, nargs, kwnames);
}

static PyObject *hook_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    MstnHook *h = (MstnHook *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!h->self_obj)
        return dispatch(h, args, nargs, kwnames);
    /* Bound plain function: self goes first. Borrow the slot before args
     * when the caller allows it (PY_VECTORCALL_ARGUMENTS_OFFSET). */
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
        PyObject **a = (PyObject **)args - 1;
        PyObject *saved = a[0];
        a[0] = h->self_obj;
        PyObject *res = dispatch(h, a, nargs + 1, kwnames);
        a[0] = saved;
        return res;
    }
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[16];
    PyObject **a = small;
    if (total + 1 > 16) {
        a = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (!a)
            return PyErr_NoMemory();
    }
    a[0] = h->self_obj;
    if (total)
        memcpy(a + 1, args, (size_t)total * sizeof(PyObject *));
    PyObject *res = dispatch(h, a, nargs + 1, kwnames);
    if (a != small)
        PyMem_Free(a);
    return res;
}

/* ------------------------------------------------------------- async */

/* The state of one hooked call that runs on after it returned: a coroutine
 * (module.c's _trace_coro), a generator or an async generator (_trace_gen,
 * _trace_agen above) drives it. */
typedef struct {
    PyObject_HEAD
    MstnHook *root;
    mstn_batch *batch;          /* model/output: read at call time         */
    PyObject *outputs;
    PyObject *token;            /* ContextVar token while current          */
    span_run sr;
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
        hook_failed(a->root);
}

static PyObject *arun_begin(PyObject *self, PyObject *unused) {
    MstnAsyncRun *a = (MstnAsyncRun *)self;
    MstnHook *r = a->root;
    a->t0 = mst_clock_now_ns();
    if (r->adapter == MSTN_AD_SCHEDULE || r->disabled)
        Py_RETURN_NONE; /* schedule: started at the end, with t0 */
    a->started = span_begin(r, &a->sr, a->batch, a->t0);
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
            hook_failed(a->root);
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
            hook_failed(r);
        Py_CLEAR(a->token);
    }
    mstn_batch local;
    if (r->adapter == MSTN_AD_SCHEDULE && !r->disabled) {
        mstn_batch_init(&local);
        if (ok && mstn_batch_from_scheduler_output(&local, result) < 0)
            hook_failed(r);
        a->started = span_begin(r, &a->sr, &local, a->t0);
    }
    if (a->started) {
        /* Make the business exception the pending one so the status reads
         * it; it is handed back untouched. */
        if (!ok)
            PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), Py_NewRef(exc),
                          PyException_GetTraceback(exc));
        span_finish(r, &a->sr, r->adapter == MSTN_AD_SCHEDULE ? &local : a->batch, ok);
        if (!ok)
            PyErr_Clear();
        a->started = false;
    }
    if (r->adapter == MSTN_AD_SCHEDULE && !r->disabled)
        mstn_batch_release(&local);
    if (a->outputs && ok && mstn_finish_outputs(a->outputs) < 0)
        hook_failed(r);
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

static PyObject *async_call(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
    MstnAsyncRun *a = PyObject_New(MstnAsyncRun, &MstnAsyncRun_Type);
    if (!a) {
        hook_failed(r);
        return invoke(h, r, args, nargs, kwnames);
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
            hook_failed(r);
        } else {
            mstn_batch_init(a->batch);
            int rc = r->adapter == MSTN_AD_MODEL
                         ? mstn_batch_from_model_args(a->batch, args, nargs, kwnames)
                         : mstn_batch_from_output_args(a->batch, args, nargs, kwnames, &a->outputs);
            if (rc < 0)
                hook_failed(r);
        }
    }
    PyObject *inner = invoke(h, r, args, nargs, kwnames);
    if (!inner) {
        Py_DECREF(a);
        return NULL;
    }
    PyObject *helper = mstn_trace_coro;
    if (a->kind == MSTN_RUN_GEN)
        helper = PyGen_CheckExact(inner) ? trace_gen : NULL;
    else if (a->kind == MSTN_RUN_ASYNCGEN)
        helper = PyAsyncGen_CheckExact(inner) ? trace_agen : NULL;
    if (!helper) { /* not what the function's code promised: leave it alone */
        Py_DECREF(a);
        return inner;
    }
    PyObject *argv[2] = {inner, (PyObject *)a};
    PyObject *coro = PyObject_Vectorcall(helper, argv, 2, NULL);
    Py_DECREF(a);
    if (!coro) { /* could not wrap: hand back the untraced coroutine */
        hook_failed(r);
        return inner;
    }
    Py_DECREF(inner);
    return coro;
}

/* ---------------------------------------------------------- the type */

static const struct { const char *s; mst_span_kind k; } kinds[] = {
    {"INTERNAL", MST_SPAN_KIND_INTERNAL}, {"SERVER", MST_SPAN_KIND_SERVER},
    {"CLIENT", MST_SPAN_KIND_CLIENT},     {"PRODUCER", MST_SPAN_KIND_PRODUCER},
    {"CONSUMER", MST_SPAN_KIND_CONSUMER},
};
static const struct { const char *s; mstn_adapter a; } adapters[] = {
    {"call", MSTN_AD_CALL},         {"request", MSTN_AD_REQUEST},
    {"request_context", MSTN_AD_REQUEST_CONTEXT}, {"schedule", MSTN_AD_SCHEDULE},
    {"model", MSTN_AD_MODEL},       {"output", MSTN_AD_OUTPUT},
};

static char *dup_cstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = PyMem_Malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* True for objects that bind like a plain function (the fast shape). */
static bool function_like(PyObject *w) {
    return PyFunction_Check(w) || PyType_HasFeature(Py_TYPE(w), Py_TPFLAGS_METHOD_DESCRIPTOR);
}

static int set_async_markers(MstnHook *h) {
    /* So inspect/asyncio.iscoroutinefunction(hook) answer like the wrapped
     * function: asyncio's `_is_coroutine` (3.11) and inspect's marker (3.12+). */
    static const char code[] =
        "def _mark(f):\n"
        "    import asyncio.coroutines as c, inspect as i\n"
        "    m = getattr(c, '_is_coroutine', None)\n"
        "    if m is not None: f.__dict__['_is_coroutine'] = m\n"
        "    k = getattr(i, '_is_coroutine_mark', None)\n"
        "    if k is not None: f.__dict__['_is_coroutine_marker'] = k\n";
    PyObject *g = PyDict_New();
    if (!g)
        return -1;
    if (PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) < 0) {
        Py_DECREF(g);
        return -1;
    }
    PyObject *rv = PyRun_String(code, Py_file_input, g, g);
    PyObject *res = NULL;
    if (rv) {
        PyObject *f = PyDict_GetItemString(g, "_mark");
        res = f ? PyObject_CallOneArg(f, (PyObject *)h) : NULL;
    }
    Py_XDECREF(rv);
    Py_DECREF(g);
    if (!res)
        return -1;
    Py_DECREF(res);
    return 0;
}

/* inspect.<predicate>(w), looking through staticmethod/classmethod; false on
 * any error. */
static bool inspect_says(PyObject *w, const char *predicate) {
    PyObject *f = w, *inner = NULL;
    if (PyObject_TypeCheck(w, &PyStaticMethod_Type) || PyObject_TypeCheck(w, &PyClassMethod_Type)) {
        inner = PyObject_GetAttr(w, mstn_n.func);
        if (!inner) {
            PyErr_Clear();
            return false;
        }
        f = inner;
    }
    PyObject *inspect = PyImport_ImportModule("inspect");
    PyObject *r = inspect ? PyObject_CallMethod(inspect, predicate, "O", f) : NULL;
    bool yes = r && PyObject_IsTrue(r) == 1;
    /* A @types.coroutine generator is awaited, not iterated: not ours to
     * wrap as a generator (CO_ITERABLE_COROUTINE on its code). */
    if (yes && strcmp(predicate, "isgeneratorfunction") == 0) {
        PyObject *unwrapped = PyObject_CallMethod(inspect, "unwrap", "O", f);
        PyObject *code = unwrapped ? PyObject_GetAttrString(unwrapped, "__code__") : NULL;
        if (code && PyCode_Check(code) && (((PyCodeObject *)code)->co_flags & CO_ITERABLE_COROUTINE))
            yes = false;
        Py_XDECREF(code);
        Py_XDECREF(unwrapped);
    }
    Py_XDECREF(r);
    Py_XDECREF(inspect);
    Py_XDECREF(inner);
    PyErr_Clear();
    return yes;
}

static bool is_coroutine_function(PyObject *w) {
    return inspect_says(w, "iscoroutinefunction");
}

/* MSTN_RUN_GEN / MSTN_RUN_ASYNCGEN for a (async) generator function, else 0. */
static uint8_t generator_kind(PyObject *w) {
    if (inspect_says(w, "isasyncgenfunction"))
        return MSTN_RUN_ASYNCGEN;
    return inspect_says(w, "isgeneratorfunction") ? MSTN_RUN_GEN : 0;
}

static MstnHook *hook_alloc(PyTypeObject *type) {
    MstnHook *h = (MstnHook *)type->tp_alloc(type, 0);
    if (!h)
        return NULL;
    h->vectorcall = hook_vectorcall;
    return h;
}

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"wrapped", "name", "domain", "kind", "adapter", "handler", NULL};
    PyObject *wrapped, *name, *domain = NULL, *handler = Py_None;
    const char *kind = "INTERNAL", *adapter = "call";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$UUssO:Hook", kwlist, &wrapped, &name, &domain,
                                     &kind, &adapter, &handler))
        return NULL;
    if (!kw || !PyDict_GetItemString(kw, "name")) {
        PyErr_SetString(PyExc_TypeError, "Hook() missing required keyword argument 'name'");
        return NULL;
    }
    int ki = -1, ai = -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcasecmp(kind, kinds[i].s) == 0)
            ki = (int)i;
    for (size_t i = 0; i < sizeof adapters / sizeof adapters[0]; i++)
        if (strcmp(adapter, adapters[i].s) == 0)
            ai = (int)i;
    if (ki < 0)
        return PyErr_Format(PyExc_ValueError, "unknown span kind '%s' (INTERNAL, SERVER, CLIENT, "
                                              "PRODUCER, CONSUMER)", kind);
    if (ai < 0)
        return PyErr_Format(PyExc_ValueError, "unknown adapter '%s' (call, request, request_context, "
                                              "schedule, model, output)", adapter);
    if (handler != Py_None && !PyCallable_Check(handler))
        return PyErr_Format(PyExc_TypeError, "handler must be callable");

    bool fn = function_like(wrapped);
    MstnHook *h = hook_alloc(fn ? &MstnHook_Type : &MstnDescrHook_Type);
    if (!h)
        return NULL;
    h->wrapped = Py_NewRef(wrapped);
    if (PyObject_TypeCheck(wrapped, &PyStaticMethod_Type)) {
        h->target = PyObject_GetAttr(wrapped, mstn_n.func);
        if (!h->target)
            goto fail;
    } else {
        h->target = Py_NewRef(wrapped);
    }
    h->handler = handler == Py_None ? NULL : Py_NewRef(handler);
    h->name_obj = Py_NewRef(name);
    h->domain_obj = domain ? Py_NewRef(domain) : PyUnicode_FromString("Tracing");
    if (!h->domain_obj)
        goto fail;
    const char *n = PyUnicode_AsUTF8(name), *d = PyUnicode_AsUTF8(h->domain_obj);
    if (!n || !d)
        goto fail;
    h->name = dup_cstr(n);
    PyObject *sc = PyUnicode_FromFormat("ms_service_profiler.hook.%s", d);
    if (!sc)
        goto fail;
    h->scope_name = dup_cstr(PyUnicode_AsUTF8(sc));
    Py_DECREF(sc);
    if (!h->name || !h->scope_name) {
        PyErr_NoMemory();
        goto fail;
    }
    h->kind = kinds[ki].k;
    h->adapter = adapters[ai].a;
    h->is_async = is_coroutine_function(wrapped);
    h->gen_kind = h->is_async ? 0 : generator_kind(wrapped);
    if (h->is_async) {
        mstn_g.async_used = true;
        if (set_async_markers(h) < 0)
            PyErr_Clear(); /* cosmetic only */
    }
    if (h->gen_kind == MSTN_RUN_ASYNCGEN)
        mstn_g.async_used = true; /* its steps are current through the contextvar */
    return (PyObject *)h;
fail:
    Py_DECREF(h);
    return NULL;
}

/* A bound hook sharing root `r`'s configuration. */
static PyObject *make_bound(MstnHook *r, PyTypeObject *type, PyObject *target, PyObject *self_obj) {
    MstnHook *b = hook_alloc(type);
    if (!b)
        return NULL;
    b->root = (MstnHook *)Py_NewRef(r);
    b->wrapped = Py_NewRef(r->wrapped);
    b->target = Py_NewRef(target);
    b->self_obj = Py_XNewRef(self_obj);
    b->handler = Py_XNewRef(r->handler);
    b->name_obj = Py_NewRef(r->name_obj);
    b->domain_obj = Py_NewRef(r->domain_obj);
    return (PyObject *)b;
}

static PyObject *hook_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    MstnHook *h = (MstnHook *)self;
    if (obj == NULL || obj == Py_None || h->self_obj || h->root)
        return Py_NewRef(self);
    return make_bound(ROOT(h), &MstnHook_Type, h->target, obj);
}

static PyObject *descr_hook_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    MstnHook *h = (MstnHook *)self;
    descrgetfunc get = Py_TYPE(h->wrapped)->tp_descr_get;
    if (!get || h->root)
        return Py_NewRef(self);
    PyObject *res = get(h->wrapped, obj, type);
    if (!res)
        return NULL;
    if (res == h->wrapped) {
        Py_DECREF(res);
        return Py_NewRef(self);
    }
    PyObject *b = make_bound(ROOT(h), &MstnDescrHook_Type, res, NULL);
    Py_DECREF(res);
    return b;
}

static int hook_traverse(PyObject *self, visitproc visit, void *arg) {
    MstnHook *h = (MstnHook *)self;
    Py_VISIT(h->wrapped);
    Py_VISIT(h->target);
    Py_VISIT(h->self_obj);
    Py_VISIT(h->handler);
    Py_VISIT(h->root);
    Py_VISIT(h->dict);
    Py_VISIT(h->name_obj);
    Py_VISIT(h->domain_obj);
    return 0;
}

static int hook_clear(PyObject *self) {
    MstnHook *h = (MstnHook *)self;
    Py_CLEAR(h->wrapped);
    Py_CLEAR(h->target);
    Py_CLEAR(h->self_obj);
    Py_CLEAR(h->handler);
    Py_CLEAR(h->root);
    Py_CLEAR(h->dict);
    Py_CLEAR(h->name_obj);
    Py_CLEAR(h->domain_obj);
    return 0;
}

static void hook_dealloc(PyObject *self) {
    MstnHook *h = (MstnHook *)self;
    PyObject_GC_UnTrack(self);
    if (h->weakreflist)
        PyObject_ClearWeakRefs(self);
    hook_clear(self);
    PyMem_Free(h->name);
    PyMem_Free(h->scope_name);
    Py_TYPE(self)->tp_free(self);
}

/* Unknown attributes come from the wrapped object (wrapt-style proxy). A
 * bound hook looks in its root's __dict__ first (the async markers and any
 * attribute set on the hook, as a bound method forwards to __func__), then
 * in what binding produced (`target`: the function under a staticmethod,
 * the bound method of a classmethod), which carries `__code__` and friends
 * that inspect.iscoroutinefunction reads; the staticmethod/classmethod
 * object itself has neither, so an async one looked synchronous. */
static PyObject *hook_getattro(PyObject *self, PyObject *name) {
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    MstnHook *h = (MstnHook *)self;
    if (!h->root)
        return PyObject_GetAttr(h->wrapped, name);
    if (h->root->dict) {
        PyObject *v = PyDict_GetItemWithError(h->root->dict, name);
        if (v)
            return Py_NewRef(v);
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_GetAttr(h->target, name);
}

static PyObject *fwd(PyObject *self, const char *attr) {
    return PyObject_GetAttrString(((MstnHook *)self)->wrapped, attr);
}
static PyObject *get_name(PyObject *s, void *c) { return fwd(s, "__name__"); }
static PyObject *get_qualname(PyObject *s, void *c) { return fwd(s, "__qualname__"); }
static PyObject *get_doc(PyObject *s, void *c) { return fwd(s, "__doc__"); }
static PyObject *get_module(PyObject *s, void *c) { return fwd(s, "__module__"); }

static PyObject *get_wrapped(PyObject *self, void *c) {
    MstnHook *h = (MstnHook *)self;
    if (h->self_obj) /* bound: what the plain function bound to self is */
        return PyMethod_New(h->target, h->self_obj);
    if (h->root)
        return Py_NewRef(h->target);
    return Py_NewRef(h->wrapped);
}

static PyObject *get_self(PyObject *self, void *c) {
    MstnHook *h = (MstnHook *)self;
    return Py_NewRef(h->self_obj ? h->self_obj : Py_None);
}

static PyObject *get_hook_info(PyObject *self, void *c) {
    MstnHook *h = (MstnHook *)self, *r = ROOT(h);
    const char *gen = r->gen_kind == MSTN_RUN_GEN        ? "generator"
                      : r->gen_kind == MSTN_RUN_ASYNCGEN ? "async_generator"
                                                         : NULL;
    return Py_BuildValue("{s:O,s:O,s:i,s:s,s:O,s:z,s:O,s:i,s:s}", "name", r->name_obj, "domain",
                         r->domain_obj, "kind", (int)r->kind, "adapter",
                         adapters[r->adapter].s, "async", r->is_async ? Py_True : Py_False,
                         "generator", gen, "disabled", r->disabled ? Py_True : Py_False,
                         "failures", r->failures, "scope", r->scope_name);
}

static PyGetSetDef hook_getset[] = {
    {"__wrapped__", get_wrapped, NULL, "the wrapped callable", NULL},
    {"__name__", get_name, NULL, NULL, NULL},
    {"__qualname__", get_qualname, NULL, NULL, NULL},
    {"__doc__", get_doc, NULL, NULL, NULL},
    {"__module__", get_module, NULL, NULL, NULL},
    {"__self__", get_self, NULL, "the bound instance, or None", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"_mstrace_hook", get_hook_info, NULL, "this hook's configuration and state", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Pickled and copied by reference, as the function it stands for: a root
 * hook (module function, Class.method) by its qualified name, which pickle
 * resolves back to the hook installed there and copy/deepcopy return as is;
 * a bound one as getattr(instance or class, name), like a bound method. Without
 * it, pickling or deep-copying anything that holds a hooked function raised
 * TypeError ("cannot pickle 'Hook' object"): a hook changed user-visible
 * behaviour. */
static PyObject *hook_reduce(PyObject *self, PyObject *unused) {
    MstnHook *h = (MstnHook *)self;
    PyObject *owner = NULL;
    if (h->self_obj) {
        owner = Py_NewRef(h->self_obj);
    } else if (h->root && PyMethod_Check(h->target)) {
        owner = Py_NewRef(PyMethod_GET_SELF(h->target));
    }
    if (!owner)
        return fwd(self, "__qualname__");
    PyObject *name = fwd(self, "__name__");
    PyObject *builtins = name ? PyImport_ImportModule("builtins") : NULL;
    PyObject *getattr = builtins ? PyObject_GetAttrString(builtins, "getattr") : NULL;
    PyObject *res = getattr ? Py_BuildValue("(O(OO))", getattr, owner, name) : NULL;
    Py_XDECREF(getattr);
    Py_XDECREF(builtins);
    Py_XDECREF(name);
    Py_DECREF(owner);
    return res;
}

static PyMethodDef hook_methods[] = {
    {"__reduce__", hook_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject *hook_repr(PyObject *self) {
    MstnHook *h = (MstnHook *)self, *r = ROOT(h);
    return PyUnicode_FromFormat("<mstrace hook %R (%s, %s) of %R%s>", r->name_obj,
                                adapters[r->adapter].s, r->scope_name, h->wrapped,
                                h->self_obj || h->root ? " bound" : "");
}

PyTypeObject MstnHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mstrace._native.Hook",
    .tp_basicsize = sizeof(MstnHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Hook(wrapped, *, name, domain='Tracing', kind='INTERNAL', adapter='call', handler=None)\n"
              "A transparent wrapper that records one span per call (see CONTRACT.md).",
    .tp_vectorcall_offset = offsetof(MstnHook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = hook_new,
    .tp_dealloc = hook_dealloc,
    .tp_traverse = hook_traverse,
    .tp_clear = hook_clear,
    .tp_getattro = hook_getattro,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_getset = hook_getset,
    .tp_methods = hook_methods,
    .tp_descr_get = hook_descr_get,
    .tp_dictoffset = offsetof(MstnHook, dict),
    .tp_weaklistoffset = offsetof(MstnHook, weakreflist),
    .tp_repr = hook_repr,
};

PyTypeObject MstnDescrHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mstrace._native._DescrHook",
    .tp_basicsize = sizeof(MstnHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A Hook around a non-function (staticmethod, classmethod, other descriptor).",
    .tp_vectorcall_offset = offsetof(MstnHook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = hook_dealloc,
    .tp_traverse = hook_traverse,
    .tp_clear = hook_clear,
    .tp_getattro = hook_getattro,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_descr_get = descr_hook_descr_get,
    .tp_dictoffset = offsetof(MstnHook, dict),
    .tp_weaklistoffset = offsetof(MstnHook, weakreflist),
    .tp_repr = hook_repr,
};

/* Compiles the generator wrappers (trace_gen_src) into trace_gen/trace_agen. */
static int compile_generator_wrappers(void) {
    PyObject *g = PyDict_New();
    if (!g)
        return -1;
    PyObject *name = PyUnicode_InternFromString("mstrace._native");
    int rc = -1;
    if (name && PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) == 0 &&
        PyDict_SetItemString(g, "__name__", name) == 0) {
        PyObject *rv = PyRun_String(trace_gen_src, Py_file_input, g, g);
        if (rv) {
            Py_DECREF(rv);
            trace_gen = Py_XNewRef(PyDict_GetItemString(g, "_trace_gen"));
            trace_agen = Py_XNewRef(PyDict_GetItemString(g, "_trace_agen"));
            rc = trace_gen && trace_agen ? 0 : -1;
        }
    }
    Py_XDECREF(name);
    Py_DECREF(g);
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "mstrace._native: generator wrappers missing");
    return rc;
}

int mstn_hook_module_init(PyObject *module) {
    if (compile_generator_wrappers() < 0)
        return -1;
    MstnDescrHook_Type.tp_base = &MstnHook_Type;
    if (PyType_Ready(&MstnHook_Type) < 0 || PyType_Ready(&MstnDescrHook_Type) < 0 ||
        PyType_Ready(&MstnOnce_Type) < 0 || PyType_Ready(&MstnAsyncRun_Type) < 0)
        return -1;
    /* Subtypes of a method descriptor type inherit the flag only if they
     * inherit tp_descr_get; ours has its own, so this must stay clear. */
    MstnDescrHook_Type.tp_flags &= ~Py_TPFLAGS_METHOD_DESCRIPTOR;
    Py_INCREF(&MstnHook_Type);
    if (PyModule_AddObject(module, "Hook", (PyObject *)&MstnHook_Type) < 0) {
        Py_DECREF(&MstnHook_Type);
        return -1;
    }
    return 0;
}
