/*
 * otel_bridge.c — the exporter behind MS_TRACE_EXPORTER=otel (see
 * otel_bridge.h and python/mstrace/otel_bridge.py).
 *
 * Owns: turning a finished mst_span into an opentelemetry.sdk.trace
 * ReadableSpan and calling `processor.on_end(span)` on the global SDK
 * TracerProvider's active span processor, from the pipeline's exporter
 * thread; and the rules that keep that thread's GIL use safe:
 *   - one PyGILState_Ensure/Release per batch (not per span);
 *   - never touch Python once the interpreter is finalizing or after
 *     `_otel_bridge_close()` ran (atexit): Py_IsInitialized and the
 *     finalizing flag are checked first, and a `busy` counter lets close()
 *     wait, GIL released, until no exporter thread is inside Python;
 *   - every caller that waits for the exporter thread (flush/shutdown in
 *     module.c, close() here) releases the GIL while it waits.
 *
 * The span is read through the public read-out API of mstrace.h alone
 * (ids, parent, kind, status, scope, attributes, links, events: pointers
 * into the span, nothing copied), as any exporter outside the library would.
 *
 * Not carried: dropped_* counters (the ReadableSpan reports 0 dropped).
 */
#include "otel_bridge.h"
#include "log.h"
#include "state.h"
#include "flush.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCOPE_CACHE 32

typedef struct ob_exporter {
    mst_exporter base;
    /* SDK classes and constants (from otel_bridge.sdk_types()). */
    PyObject *resolve;          /* otel_bridge.resolve                     */
    PyObject *ReadableSpan, *SpanContext, *TraceFlags, *TraceState, *empty_ts;
    PyObject *Link, *Event, *Scope, *Status, *status_unset, *status_ok, *status_error;
    PyObject *kinds[6];
    PyObject *span_kwnames;     /* ReadableSpan keyword names              */
    PyObject *flags[2];         /* TraceFlags(0), TraceFlags(1)            */
    /* Resolved lazily on the exporter thread (GIL held). */
    PyObject *on_end;           /* bound processor.on_end                  */
    PyObject *resource;
    struct { const mst_scope *key; PyObject *val; } scopes[SCOPE_CACHE];
    size_t n_scopes;
    bool warned_fail;
    /* Read by stats() on another thread. */
    mst_exporter_counters counters;
} ob_exporter;

static atomic_int g_closed;     /* close() ran: Python is off limits      */
static atomic_int g_busy;       /* exporter threads inside Python          */
static atomic_int g_live;       /* bridges alive (close() flushes if any)  */

static void at_fork_child(void) { atomic_store(&g_busy, 0); }

/* The pending exception as one object (new reference, or NULL); clears it. */
static PyObject *take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
#endif
}

static bool py_alive(void) {
    if (!Py_IsInitialized())
        return false;
#if PY_VERSION_HEX >= 0x030D0000
    return !Py_IsFinalizing();
#else
    return !_Py_IsFinalizing();
#endif
}

/* --------------------------------------------------------- conversion */

static PyObject *id_to_int(const uint8_t *bytes, size_t n) {
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromUnsignedNativeBytes(bytes, n, Py_ASNATIVEBYTES_BIG_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER);
#else
    return _PyLong_FromByteArray(bytes, n, 0, 0);
#endif
}

static PyObject *str_of(const mst_str *s) {
    return PyUnicode_DecodeUTF8(s->ptr ? s->ptr : "", s->ptr ? (Py_ssize_t)s->len : 0, "replace");
}

static PyObject *attr_value(const mst_attr *a) {
    switch (a->type) {
    case MST_ATTR_STRING: return str_of(&a->v.s);
    case MST_ATTR_INT: return PyLong_FromLongLong(a->v.i);
    case MST_ATTR_DOUBLE: return PyFloat_FromDouble(a->v.d);
    case MST_ATTR_BOOL: return PyBool_FromLong(a->v.b);
    case MST_ATTR_STRING_LIST: {
        /* The SDK stores sequences as tuples (immutable attributes). */
        PyObject *t = PyTuple_New(a->v.list.count);
        if (!t)
            return NULL;
        for (uint32_t i = 0; i < a->v.list.count; i++) {
            PyObject *s = str_of(&a->v.list.items[i]);
            if (!s) {
                Py_DECREF(t);
                return NULL;
            }
            PyTuple_SET_ITEM(t, i, s);
        }
        return t;
    }
    }
    return Py_NewRef(Py_None); /* unknown type: never produced by the core */
}

static PyObject *attrs_dict(const mst_attr *attrs, uint32_t n) {
    PyObject *d = PyDict_New();
    for (uint32_t i = 0; d && i < n; i++) {
        PyObject *k = str_of(&attrs[i].key);
        PyObject *v = k ? attr_value(&attrs[i]) : NULL;
        if (!v || PyDict_SetItem(d, k, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *trace_state(ob_exporter *e, const mst_str *ts) {
    if (!ts->ptr || ts->len == 0)
        return Py_NewRef(e->empty_ts);
    PyObject *h = str_of(ts);
    PyObject *l = h ? PyList_New(1) : NULL;
    if (!l) {
        Py_XDECREF(h);
        return NULL;
    }
    PyList_SET_ITEM(l, 0, h);
    PyObject *r = PyObject_CallMethod(e->TraceState, "from_header", "O", l);
    Py_DECREF(l);
    return r;
}

/* SpanContext(trace_id, span_id, is_remote, TraceFlags(flags), trace_state). */
static PyObject *span_context(ob_exporter *e, const mst_trace_id *tid, const mst_span_id *sid, bool remote,
                              uint8_t flags, PyObject *ts) {
    PyObject *fl = NULL;
    if (flags < 2)
        fl = Py_NewRef(e->flags[flags]);
    else
        fl = PyObject_CallFunction(e->TraceFlags, "i", (int)flags);
    PyObject *t = id_to_int(tid->bytes, sizeof tid->bytes);
    PyObject *s = id_to_int(sid->bytes, sizeof sid->bytes);
    PyObject *r = NULL;
    if (fl && t && s) {
        PyObject *args[5] = {t, s, remote ? Py_True : Py_False, fl, ts};
        r = PyObject_Vectorcall(e->SpanContext, args, 5, NULL);
    }
    Py_XDECREF(fl);
    Py_XDECREF(t);
    Py_XDECREF(s);
    return r;
}

static PyObject *links_tuple(ob_exporter *e, const mst_span *sp) {
    size_t n;
    const mst_link *links = mst_span_get_links(sp, &n);
    PyObject *tup = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; tup && i < n; i++) {
        const mst_link *l = &links[i];
        PyObject *ts = trace_state(e, &l->trace_state);
        PyObject *ctx = ts ? span_context(e, &l->trace_id, &l->span_id, l->is_remote, l->trace_flags, ts) : NULL;
        PyObject *at = ctx ? attrs_dict(l->attrs, l->n_attrs) : NULL;
        PyObject *link = NULL;
        if (at) {
            PyObject *args[2] = {ctx, at};
            link = PyObject_Vectorcall(e->Link, args, 2, NULL);
        }
        Py_XDECREF(ts);
        Py_XDECREF(ctx);
        Py_XDECREF(at);
        if (!link)
            Py_CLEAR(tup);
        else
            PyTuple_SET_ITEM(tup, (Py_ssize_t)i, link);
    }
    return tup;
}

static PyObject *events_tuple(ob_exporter *e, const mst_span *sp) {
    size_t n;
    const mst_event *events = mst_span_get_events(sp, &n);
    PyObject *tup = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; tup && i < n; i++) {
        const mst_event *ev = &events[i];
        PyObject *name = str_of(&ev->name);
        PyObject *at = name ? attrs_dict(ev->attrs, ev->n_attrs) : NULL;
        PyObject *ts = at ? PyLong_FromUnsignedLongLong(ev->time_ns) : NULL;
        PyObject *obj = NULL;
        if (ts) {
            PyObject *args[3] = {name, at, ts};
            obj = PyObject_Vectorcall(e->Event, args, 3, NULL);
        }
        Py_XDECREF(name);
        Py_XDECREF(at);
        Py_XDECREF(ts);
        if (!obj)
            Py_CLEAR(tup);
        else
            PyTuple_SET_ITEM(tup, (Py_ssize_t)i, obj);
    }
    return tup;
}

/* InstrumentationScope(name, version), one per interned scope (scopes live
 * as long as the tracer, which outlives this exporter). Borrowed. */
static PyObject *scope_of(ob_exporter *e, const mst_scope *sc) {
    for (size_t i = 0; i < e->n_scopes; i++)
        if (e->scopes[i].key == sc)
            return e->scopes[i].val;
    mst_str sc_name = mst_scope_get_name(sc), sc_version = mst_scope_get_version(sc);
    PyObject *name = str_of(&sc_name);
    PyObject *ver = sc_version.len ? str_of(&sc_version) : Py_NewRef(Py_None);
    PyObject *obj = NULL;
    if (name && ver) {
        PyObject *args[2] = {name, ver};
        obj = PyObject_Vectorcall(e->Scope, args, 2, NULL);
    }
    Py_XDECREF(name);
    Py_XDECREF(ver);
    if (!obj)
        return NULL;
    if (e->n_scopes < SCOPE_CACHE) {
        e->scopes[e->n_scopes].key = sc;
        e->scopes[e->n_scopes].val = obj; /* the cache keeps the reference */
        e->n_scopes++;
        return obj;
    }
    /* Cache full (more than 32 domains): evict slot 0, which then keeps
     * the reference the caller borrows. */
    Py_SETREF(e->scopes[0].val, obj);
    e->scopes[0].key = sc;
    return obj;
}

static PyObject *status_of(ob_exporter *e, const mst_span *sp) {
    mst_str message;
    mst_status_code code = mst_span_get_status(sp, &message);
    if (code == MST_STATUS_OK)
        return Py_NewRef(e->status_ok);
    if (code != MST_STATUS_ERROR)
        return Py_NewRef(e->status_unset);
    PyObject *msg = message.len ? str_of(&message) : Py_NewRef(Py_None);
    if (!msg)
        return NULL;
    PyObject *args[2] = {e->status_error, msg};
    PyObject *r = PyObject_Vectorcall(e->Status, args, 2, NULL);
    Py_DECREF(msg);
    return r;
}

/* The ReadableSpan for one finished span (new reference), NULL + exception. */
static PyObject *readable_span(ob_exporter *e, const mst_span *sp) {
    enum { NAME, CTX, PARENT, RES, ATTRS, EVENTS, LINKS, KIND, STATUS, START, END, SCOPE, N };
    PyObject *v[N] = {0};
    PyObject *r = NULL;
    mst_str trace_state_str = mst_span_get_trace_state(sp);
    PyObject *ts = trace_state(e, &trace_state_str);
    if (!ts)
        return NULL;
    const mst_trace_id *trace_id = mst_span_get_trace_id(sp);
    const mst_span_id *parent_id = mst_span_get_parent_id(sp);
    uint8_t flags = mst_span_get_trace_flags(sp);
    const char *name = mst_span_name(sp);
    size_t n_attrs;
    const mst_attr *attrs = mst_span_get_attrs(sp, &n_attrs);
    unsigned kind = (unsigned)mst_span_get_kind(sp);
    v[NAME] = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
    v[CTX] = span_context(e, trace_id, mst_span_get_span_id(sp), false, flags, ts);
    if (parent_id)
        v[PARENT] = span_context(e, trace_id, parent_id, mst_span_get_parent_is_remote(sp), flags, ts);
    else
        v[PARENT] = Py_NewRef(Py_None);
    v[RES] = Py_NewRef(e->resource);
    v[ATTRS] = attrs_dict(attrs, (uint32_t)n_attrs);
    v[EVENTS] = events_tuple(e, sp);
    v[LINKS] = links_tuple(e, sp);
    v[KIND] = Py_NewRef(e->kinds[kind < 6 ? kind : 1]);
    v[STATUS] = status_of(e, sp);
    v[START] = PyLong_FromUnsignedLongLong(mst_span_start_ns(sp));
    v[END] = PyLong_FromUnsignedLongLong(mst_span_end_ns(sp));
    v[SCOPE] = Py_XNewRef(scope_of(e, mst_span_get_scope(sp)));
    bool ok = true;
    for (int i = 0; i < N; i++)
        ok = ok && v[i] != NULL;
    if (ok)
        r = PyObject_Vectorcall(e->ReadableSpan, v, 1, e->span_kwnames);
    for (int i = 0; i < N; i++)
        Py_XDECREF(v[i]);
    Py_DECREF(ts);
    return r;
}

/* ----------------------------------------------------------- exporter */

static void warn_failure(ob_exporter *e, const char *what) {
    if (e->warned_fail) {
        PyErr_Clear();
        return;
    }
    e->warned_fail = true;
    PyObject *exc = take_exception();
    PyObject *s = exc ? PyObject_Str(exc) : NULL;
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    if (!msg)
        PyErr_Clear();
    mstn_log("warning", "mstrace: otel bridge: %s failed (%s: %s); such spans are dropped (logged once)", what,
             exc ? Py_TYPE(exc)->tp_name : "?", msg ? msg : "?");
    Py_XDECREF(s);
    Py_XDECREF(exc);
}

/* GIL held: (processor.on_end, resource) from otel_bridge.resolve(). */
static bool resolve(ob_exporter *e) {
    PyObject *r = PyObject_CallNoArgs(e->resolve);
    if (!r) {
        warn_failure(e, "resolving the global TracerProvider");
        return false;
    }
    bool ok = false;
    if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
        PyObject *on_end = PyObject_GetAttrString(PyTuple_GET_ITEM(r, 0), "on_end");
        if (on_end) {
            e->on_end = on_end;
            e->resource = Py_NewRef(PyTuple_GET_ITEM(r, 1));
            ok = true;
        } else {
            warn_failure(e, "reading the span processor's on_end");
        }
    }
    Py_DECREF(r);
    return ok;
}

static mst_status ob_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    ob_exporter *e = (ob_exporter *)self;
    atomic_fetch_add(&g_busy, 1);
    /* Checked after announcing `busy`: close() sets g_closed first and then
     * waits for busy == 0, so no thread enters Python after close(). */
    if (atomic_load(&g_closed) || !py_alive()) {
        atomic_fetch_sub(&g_busy, 1);
        mst_exporter_counters_batch_failed(&e->counters, n);
        return MST_ERR_CLOSED;
    }
    PyGILState_STATE gs = PyGILState_Ensure();
    size_t done = 0;
    if (e->on_end || resolve(e)) {
        for (size_t i = 0; i < n; i++) {
            PyObject *rs = readable_span(e, spans[i]);
            PyObject *r = rs ? PyObject_CallOneArg(e->on_end, rs) : NULL;
            if (r)
                done++;
            else
                warn_failure(e, rs ? "span processor on_end" : "building a ReadableSpan");
            Py_XDECREF(r);
            Py_XDECREF(rs);
        }
    }
    PyGILState_Release(gs);
    atomic_fetch_sub(&g_busy, 1);
    mst_counter_add(&e->counters.spans_exported, done);
    mst_counter_add(&e->counters.spans_failed, n - done);
    mst_counter_add(done == n ? &e->counters.batches_ok : &e->counters.batches_failed, 1);
    if (done == n)
        return MST_OK;
    return e->on_end ? MST_ERR_REJECTED : MST_ERR_UNAVAILABLE;
}

static void ob_get_stats(mst_exporter *self, mst_exporter_stats *out) {
    ob_exporter *e = (ob_exporter *)self;
    mst_exporter_counters_read(&e->counters, out);
}

static void clear_refs(ob_exporter *e) {
    Py_CLEAR(e->resolve);
    Py_CLEAR(e->ReadableSpan);
    Py_CLEAR(e->SpanContext);
    Py_CLEAR(e->TraceFlags);
    Py_CLEAR(e->TraceState);
    Py_CLEAR(e->empty_ts);
    Py_CLEAR(e->Link);
    Py_CLEAR(e->Event);
    Py_CLEAR(e->Scope);
    Py_CLEAR(e->Status);
    Py_CLEAR(e->status_unset);
    Py_CLEAR(e->status_ok);
    Py_CLEAR(e->status_error);
    for (int i = 0; i < 6; i++)
        Py_CLEAR(e->kinds[i]);
    Py_CLEAR(e->span_kwnames);
    Py_CLEAR(e->flags[0]);
    Py_CLEAR(e->flags[1]);
    Py_CLEAR(e->on_end);
    Py_CLEAR(e->resource);
    for (size_t i = 0; i < e->n_scopes; i++)
        Py_CLEAR(e->scopes[i].val);
    e->n_scopes = 0;
}

/* Called by mst_tracer_shutdown on the thread that shuts down: from
 * _native.shutdown() (GIL released there, so Ensure re-takes it) or from
 * the Py_AtExit hook after finalization (Python gone: the references are
 * left behind, the process is ending). */
static void ob_destroy(mst_exporter *self) {
    ob_exporter *e = (ob_exporter *)self;
    if (py_alive()) {
        PyGILState_STATE gs = PyGILState_Ensure();
        clear_refs(e);
        PyGILState_Release(gs);
    }
    atomic_fetch_sub(&g_live, 1);
    free(e);
}

static const mst_exporter_ops ob_ops = {
    .name = "otel",
    .export_batch = ob_export,
    .flush = NULL,
    .after_fork_child = NULL,
    .get_stats = ob_get_stats,
    .destroy = ob_destroy,
};

/* ------------------------------------------------------------- create */

static int take(PyObject *types, const char *key, PyObject **out) {
    PyObject *v = PyDict_GetItemString(types, key); /* borrowed */
    if (!v) {
        PyErr_Format(PyExc_KeyError, "otel_bridge.sdk_types() has no %s", key);
        return -1;
    }
    *out = Py_NewRef(v);
    return 0;
}

static int fill_types(ob_exporter *e, PyObject *types) {
    PyObject *kinds = NULL;
    if (!PyDict_Check(types)) {
        PyErr_SetString(PyExc_TypeError, "otel_bridge.sdk_types() must return a dict");
        return -1;
    }
    if (take(types, "ReadableSpan", &e->ReadableSpan) < 0 || take(types, "SpanContext", &e->SpanContext) < 0 ||
        take(types, "TraceFlags", &e->TraceFlags) < 0 || take(types, "TraceState", &e->TraceState) < 0 ||
        take(types, "empty_trace_state", &e->empty_ts) < 0 || take(types, "Link", &e->Link) < 0 ||
        take(types, "Event", &e->Event) < 0 || take(types, "InstrumentationScope", &e->Scope) < 0 ||
        take(types, "Status", &e->Status) < 0 || take(types, "status_unset", &e->status_unset) < 0 ||
        take(types, "status_ok", &e->status_ok) < 0 || take(types, "status_error", &e->status_error) < 0 ||
        take(types, "kinds", &kinds) < 0)
        return -1;
    int rc = 0;
    if (!PyTuple_Check(kinds) || PyTuple_GET_SIZE(kinds) != 6) {
        PyErr_SetString(PyExc_TypeError, "otel_bridge.sdk_types()['kinds'] must be a 6-tuple");
        rc = -1;
    } else {
        for (int i = 0; i < 6; i++)
            e->kinds[i] = Py_NewRef(PyTuple_GET_ITEM(kinds, i));
    }
    Py_DECREF(kinds);
    if (rc < 0)
        return -1;
    e->flags[0] = PyObject_CallFunction(e->TraceFlags, "i", 0);
    e->flags[1] = PyObject_CallFunction(e->TraceFlags, "i", 1);
    e->span_kwnames = Py_BuildValue("(sssssssssss)", "context", "parent", "resource", "attributes", "events",
                                    "links", "kind", "status", "start_time", "end_time", "instrumentation_scope");
    return (e->flags[0] && e->flags[1] && e->span_kwnames) ? 0 : -1;
}

mst_exporter *mstn_otel_bridge_create(void) {
    static bool atfork_done;
    PyObject *mod = PyImport_ImportModule("mstrace.otel_bridge");
    PyObject *types = mod ? PyObject_CallMethod(mod, "sdk_types", NULL) : NULL;
    ob_exporter *e = types ? calloc(1, sizeof *e) : NULL;
    if (types && !e)
        PyErr_NoMemory();
    if (e && (fill_types(e, types) < 0 || !(e->resolve = PyObject_GetAttrString(mod, "resolve")))) {
        clear_refs(e);
        free(e);
        e = NULL;
    }
    if (e) {
        /* Stop the exporter thread from entering Python before
         * finalization even if no provider ever shows up. */
        PyObject *r = PyObject_CallMethod(mod, "_arm_close", NULL);
        if (!r)
            PyErr_Clear();
        Py_XDECREF(r);
    }
    Py_XDECREF(types);
    Py_XDECREF(mod);
    if (!e) {
        PyObject *exc = take_exception();
        PyObject *s = exc ? PyObject_Str(exc) : NULL;
        const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
        PyErr_Clear();
        mstn_log("warning", "mstrace: MS_TRACE_EXPORTER=otel but the OpenTelemetry SDK cannot be used (%s: %s); "
                            "hook tracing is off, inference continues. Install opentelemetry-sdk or unset "
                            "MS_TRACE_EXPORTER.", exc ? Py_TYPE(exc)->tp_name : "?", msg ? msg : "?");
        Py_XDECREF(s);
        Py_XDECREF(exc);
        return NULL;
    }
    e->base.ops = &ob_ops;
    atomic_fetch_add(&g_live, 1);
    if (!atfork_done && pthread_atfork(NULL, NULL, at_fork_child) == 0)
        atfork_done = true;
    return &e->base;
}

/* ------------------------------------------------------------- close */

PyObject *mstn_otel_bridge_close(PyObject *module, PyObject *unused) {
    if (atomic_load(&g_closed))
        Py_RETURN_NONE;
    mst_tracer *t = mstn_g.tracer;
    if (t && atomic_load(&g_live) > 0)
        mstn_flush_released(t, 5000); /* counted: shutdown() meanwhile retires, never frees */
    atomic_store(&g_closed, 1);
    /* A batch that started before the flag was set finishes in Python: let
     * it have the GIL, bounded (a stuck on_end must not hang exit). */
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < 5000 && atomic_load(&g_busy) > 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
