/*
 * module.c — the module `mstrace._native`: the process-global tracer
 * (init/flush/shutdown/stats), the request-context functions exposed to
 * Python (register_request, finish_request, current_context), the env rules
 * of docs/configuration.md for the request contexts (MS_PROFILER_AUTO_TRACE,
 * MS_PROFILER_SAMPLE_RATE), fork and exit handling, and logging through
 * Python's `logging` (so the plugin's handler and level apply).
 *
 * Exit: init() registers a C-level Py_AtExit function that flushes and shuts
 * the tracer down after the interpreter finalizes (no Python object is
 * touched there). A process ended by os._exit() (multiprocessing children)
 * skips it: call _native.flush() or shutdown() first (see CONTRACT.md).
 */
#include "native.h"
#include "otel_bridge.h"
#include "mstrace_otlp.h"

#include <errno.h>
#include <stdatomic.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

mstn_globals mstn_g;

/* What init() built: exporters kept for their counters (the tracer owns them). */
#define MAX_EXPORTERS 4
static struct {
    mst_exporter *exp;
    const char *name;
} g_exporters[MAX_EXPORTERS];
static size_t g_n_exporters;
static PyObject *g_init_info;       /* the dict init() returned            */
static bool g_initializing;
static bool g_atexit_registered;
static mst_tracer *g_retired;       /* shut down with spans still in flight */
/* Threads inside mst_tracer_flush() with the GIL released (flush(), the
 * otel bridge's close). While any is, the tracer must not be freed: it
 * waits on the tracer's mutex and condition variable. Written with the GIL
 * held; read also by the Py_AtExit hook, hence atomic. */
static atomic_int g_flushing;

/* ------------------------------------------------------------ logging */

void mstn_log(const char *level, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *logging = PyImport_ImportModule("logging");
    PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "mstrace") : NULL;
    PyObject *r = logger ? PyObject_CallMethod(logger, level, "s", buf) : NULL;
    if (!r) { /* logging itself is broken: stderr, never an exception */
        PyErr_Clear();
        fprintf(stderr, "mstrace %s: %s\n", level, buf);
    }
    Py_XDECREF(r);
    Py_XDECREF(logger);
    Py_XDECREF(logging);
    PyErr_Restore(t, v, tb);
}

/* ------------------------------------------------------------ env rules */

static void read_env_rules(void) {
    static bool warned_auto, warned_rate;
    const char *a = getenv("MS_PROFILER_AUTO_TRACE");
    mstn_g.auto_trace = false;
    if (a && strcmp(a, "1") == 0) {
        mstn_g.auto_trace = true;
    } else if (a && strcmp(a, "0") != 0 && *a && !warned_auto) {
        warned_auto = true;
        mstn_log("warning", "mstrace: MS_PROFILER_AUTO_TRACE=%.64s is not 0 or 1; treated as unset", a);
    }
    const char *r = getenv("MS_PROFILER_SAMPLE_RATE");
    mstn_g.sample_rate = 0;
    if (r && *r) {
        bool digits = true;
        for (const char *p = r; *p; p++)
            if (*p < '0' || *p > '9')
                digits = false;
        errno = 0;
        unsigned long long n = digits ? strtoull(r, NULL, 10) : 0;
        if (digits && errno == 0 && n >= 1 && n <= INT_MAX) {
            mstn_g.sample_rate = (uint32_t)n;
        } else if (!warned_rate) {
            warned_rate = true;
            mstn_log("warning", "mstrace: MS_PROFILER_SAMPLE_RATE=%.64s is not a positive integer "
                                "(digits only, <= %d); no sampling", r, INT_MAX);
        }
    }
}

/* -------------------------------------------------------- fork & exit */

static void at_fork_child(void) {
    atomic_store(&g_flushing, 0); /* the flushing threads were not copied */
    mstn_after_fork_child();
}

static void at_exit(void) {
    if (mstn_g.tracer) {
        mst_tracer *t = mstn_g.tracer;
        mstn_g.tracer = NULL;
        /* A daemon thread may still wait inside flush(): export, never free. */
        if (atomic_load(&g_flushing) > 0)
            mst_tracer_flush(t, 5000);
        else
            mst_tracer_shutdown(t, 5000);
    }
}

mst_status mstn_flush_released(mst_tracer *t, unsigned int timeout_ms) {
    mst_status st;
    atomic_fetch_add(&g_flushing, 1);
    Py_BEGIN_ALLOW_THREADS
    st = mst_tracer_flush(t, timeout_ms);
    Py_END_ALLOW_THREADS
    atomic_fetch_sub(&g_flushing, 1);
    return st;
}

/* ----------------------------------------------------------- init */

static const char *protocol_name(mst_otlp_protocol p) {
    switch (p) {
    case MST_OTLP_GRPC: return "grpc";
    case MST_OTLP_HTTP_PROTOBUF: return "http/protobuf";
    case MST_OTLP_HTTP_JSON: return "http/json";
    }
    return "?";
}

static bool add_exporter(mst_exporter *e, const char *name) {
    mst_status st = mst_tracer_add_exporter(mstn_g.tracer, e);
    if (st != MST_OK) {
        mstn_log("warning", "mstrace: %s exporter not added: %s", name, mst_strerror(st));
        return false;
    }
    if (g_n_exporters < MAX_EXPORTERS) {
        g_exporters[g_n_exporters].exp = e;
        g_exporters[g_n_exporters].name = name;
        g_n_exporters++;
    }
    return true;
}

/* MS_TRACE_EXPORTER: unset/"native" = the C OTLP exporter, "otel" = the
 * process's global OpenTelemetry TracerProvider (otel_bridge.c); anything
 * else warns once and means native. */
static bool exporter_mode_otel(void) {
    static bool warned;
    const char *v = getenv("MS_TRACE_EXPORTER");
    if (!v || !*v || strcasecmp(v, "native") == 0)
        return false;
    if (strcasecmp(v, "otel") == 0)
        return true;
    if (!warned) {
        warned = true;
        mstn_log("warning", "mstrace: MS_TRACE_EXPORTER=%.64s is not 'native' or 'otel'; using native", v);
    }
    return false;
}

/* MSTRACE_PERFETTO: how the Perfetto forwarder client is used.
 *   unset/"auto": created and optional (mst_forward_exporter_set_optional):
 *                 a Jaeger-only run without a forwarder gets one INFO line
 *                 and no failed counts; a forwarder started later is used.
 *   "on":         required: an absent forwarder is a warning, its spans fail.
 *   "off":        no Perfetto client at all.
 * Anything else warns once and means auto. */
typedef enum perfetto_mode { PERFETTO_AUTO, PERFETTO_ON, PERFETTO_OFF } perfetto_mode;

static perfetto_mode perfetto_mode_from_env(void) {
    static bool warned;
    const char *v = getenv("MSTRACE_PERFETTO");
    if (!v || !*v || strcasecmp(v, "auto") == 0)
        return PERFETTO_AUTO;
    if (strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0)
        return PERFETTO_ON;
    if (strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0)
        return PERFETTO_OFF;
    if (!warned) {
        warned = true;
        mstn_log("warning", "mstrace: MSTRACE_PERFETTO=%.64s is not 'auto', 'on' or 'off'; using auto", v);
    }
    return PERFETTO_AUTO;
}

/* Builds the tracer and its exporters; fills `info`. -1 with an exception. */
static int build_tracer(const char *forward_socket, bool otlp, bool perfetto, bool null_exp,
                        PyObject *info) {
    mst_tracer_options opts;
    memset(&opts, 0, sizeof opts);
    mst_tracer_options_from_env(&opts);
    /* otel mode takes the OTLP exporter's place. Without a usable SDK hook
     * tracing is a no-op (docs/reference/behaviour.md): no span is ever started. */
    bool otel = otlp && !null_exp && exporter_mode_otel();
    mst_exporter *bridge = otel ? mstn_otel_bridge_create() : NULL;
    if (otel && !bridge)
        opts.sdk_disabled = true;
    PyObject *mode = PyUnicode_FromString(otel ? "otel" : "native");
    int mode_rc = mode ? PyDict_SetItemString(info, "exporter_mode", mode) : -1;
    Py_XDECREF(mode);
    mst_tracer *t = NULL;
    mst_status st = mode_rc < 0 ? MST_ERR_NOMEM : mst_tracer_create(&opts, &t);
    if (st != MST_OK) {
        if (bridge)
            bridge->ops->destroy(bridge);
        if (mode_rc == 0)
            PyErr_Format(PyExc_RuntimeError, "mstrace: tracer not created: %s", mst_strerror(st));
        return -1;
    }
    mstn_g.tracer = t;
    mstn_g.tracer_gen++;
    g_n_exporters = 0;
    PyObject *names = PyList_New(0);
    if (!names)
        return -1;
    PyObject *endpoint = Py_NewRef(Py_None), *protocol = Py_NewRef(Py_None);
    int rc = 0;
    /* Names are appended through one helper to keep refcounts obvious. */
#define APPEND_NAME(s)                                                           \
    do {                                                                         \
        PyObject *n_ = PyUnicode_FromString(s);                                  \
        if (!n_ || PyList_Append(names, n_) < 0)                                 \
            rc = -1;                                                             \
        Py_XDECREF(n_);                                                          \
    } while (0)
    if (null_exp) {
        mst_exporter *e = mst_null_exporter_create();
        if (e && add_exporter(e, "null"))
            APPEND_NAME("null");
    }
    perfetto_mode pmode = perfetto && !null_exp ? perfetto_mode_from_env() : PERFETTO_OFF;
    if (pmode != PERFETTO_OFF) {
        mst_exporter *e = NULL;
        st = mst_forward_exporter_create(forward_socket, &e);
        if (st == MST_OK)
            mst_forward_exporter_set_optional(e, pmode == PERFETTO_AUTO);
        if (st == MST_OK && add_exporter(e, "perfetto"))
            APPEND_NAME("perfetto");
        else if (st != MST_OK)
            mstn_log("warning", "mstrace: Perfetto forwarder client not created: %s", mst_strerror(st));
    }
    if (bridge) {
        if (add_exporter(bridge, "otel"))
            APPEND_NAME("otel");
    } else if (otel) {
        /* no SDK: warned by mstn_otel_bridge_create; spans are not started */
    } else if (otlp && !null_exp) {
        mst_otlp_config cfg;
        char err[256] = "";
        memset(&cfg, 0, sizeof cfg);
        st = mst_otlp_config_from_env(&cfg, err, sizeof err);
        if (st == MST_ERR_UNAVAILABLE) {
            mstn_log("info", "mstrace: Jaeger/OTLP export is off: no OTLP endpoint is set. Start vLLM with "
                             "--otlp-traces-endpoint URL (or export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=URL) "
                             "to send hook spans where vLLM's spans go.");
        } else if (st != MST_OK) {
            mstn_log("warning", "mstrace: OTLP export is off: %s (%s)", err[0] ? err : "bad OTLP settings",
                     mst_strerror(st));
        } else {
            mst_exporter *e = NULL;
            st = mst_otlp_exporter_create(&cfg, &e);
            if (st == MST_OK && add_exporter(e, "otlp")) {
                APPEND_NAME("otlp");
                Py_SETREF(endpoint, PyUnicode_FromString(cfg.endpoint));
                Py_SETREF(protocol, PyUnicode_FromString(protocol_name(cfg.protocol)));
                if (!endpoint || !protocol)
                    rc = -1;
            } else if (st != MST_OK) {
                mstn_log("warning", "mstrace: OTLP exporter not created: %s", mst_strerror(st));
            }
        }
    }
#undef APPEND_NAME
    if (rc == 0 && (PyDict_SetItemString(info, "exporters", names) < 0 ||
                    PyDict_SetItemString(info, "endpoint", endpoint ? endpoint : Py_None) < 0 ||
                    PyDict_SetItemString(info, "protocol", protocol ? protocol : Py_None) < 0))
        rc = -1;
    Py_DECREF(names);
    Py_XDECREF(endpoint);
    Py_XDECREF(protocol);
    return rc;
}

static PyObject *set_item_str(PyObject *d, const char *k, const char *v) {
    PyObject *o = v ? PyUnicode_FromString(v) : Py_NewRef(Py_None);
    if (!o || PyDict_SetItemString(d, k, o) < 0) {
        Py_XDECREF(o);
        return NULL;
    }
    Py_DECREF(o);
    return d;
}

/* Stores `role` (UTF-8, cut to MSTN_ROLE_MAX-1 bytes on a character
 * boundary) as the process.role of every later span; NULL/"" clears it. */
static void set_role(const char *role) {
    size_t n = role ? strlen(role) : 0;
    if (n >= MSTN_ROLE_MAX) {
        n = MSTN_ROLE_MAX - 1;
        while (n > 0 && ((unsigned char)role[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(mstn_g.role, role, n);
    mstn_g.role[n] = '\0';
}

static PyObject *mod_set_process_role(PyObject *m, PyObject *arg) {
    if (arg != Py_None && !PyUnicode_Check(arg))
        return PyErr_Format(PyExc_TypeError, "process role must be str or None");
    const char *s = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
    if (arg != Py_None && !s)
        return NULL;
    set_role(s);
    Py_RETURN_NONE;
}

static PyObject *mod_init(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"service_name", "forward_socket", "otlp", "perfetto", "null_exporter",
                             "process_role", NULL};
    const char *service = NULL, *sock = NULL, *role = NULL;
    int otlp = 1, perfetto = 1, null_exp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$zzpppz:init", kwlist, &service, &sock, &otlp,
                                     &perfetto, &null_exp, &role))
        return NULL;
    if (role) /* also on a repeated init: the role is per process, not per tracer */
        set_role(role);
    if (mstn_g.tracer && g_init_info)
        return PyDict_Copy(g_init_info);
    if (g_initializing) /* re-entered (e.g. from a log handler): nothing yet */
        Py_RETURN_NONE;
    g_initializing = true;
    read_env_rules();
    /* service.name: OTEL_SERVICE_NAME wins; the argument fills it when unset. */
    if (service && *service && !getenv("OTEL_SERVICE_NAME"))
        setenv("OTEL_SERVICE_NAME", service, 0);
    PyObject *info = PyDict_New();
    if (!info) {
        g_initializing = false;
        return NULL;
    }
    if (build_tracer(sock, otlp, perfetto, null_exp, info) < 0) {
        g_initializing = false;
        Py_DECREF(info);
        return NULL;
    }
    const char *svc = getenv("OTEL_SERVICE_NAME");
    PyObject *ar = PyLong_FromUnsignedLong(mstn_g.sample_rate);
    PyObject *pid = PyLong_FromLong(mstn_g.pid);
    if (!set_item_str(info, "service_name", svc) ||
        !set_item_str(info, "perfetto_socket", perfetto && !null_exp && perfetto_mode_from_env() != PERFETTO_OFF ? (sock ? sock : "MSP_PERFETTO_SOCKET") : NULL) ||
        !ar || !pid || PyDict_SetItemString(info, "sample_rate", ar) < 0 ||
        PyDict_SetItemString(info, "pid", pid) < 0 ||
        PyDict_SetItemString(info, "auto_trace", mstn_g.auto_trace ? Py_True : Py_False) < 0 ||
        !set_item_str(info, "exit_hook", "Py_AtExit")) {
        Py_XDECREF(ar);
        Py_XDECREF(pid);
        Py_DECREF(info);
        g_initializing = false;
        return NULL;
    }
    Py_DECREF(ar);
    Py_DECREF(pid);
    if (!g_atexit_registered && Py_AtExit(at_exit) == 0)
        g_atexit_registered = true;
    Py_XSETREF(g_init_info, info);
    g_initializing = false;
    return PyDict_Copy(info);
}

/* ------------------------------------------------- flush / shutdown */

static PyObject *mod_flush(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"timeout_ms", NULL};
    unsigned int timeout = 5000;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|I:flush", kwlist, &timeout))
        return NULL;
    mst_tracer *t = mstn_g.tracer;
    if (!t)
        Py_RETURN_FALSE;
    return PyBool_FromLong(mstn_flush_released(t, timeout) == MST_OK);
}

static PyObject *mod_shutdown(PyObject *m, PyObject *unused) {
    mst_tracer *t = mstn_g.tracer;
    if (!t)
        Py_RETURN_NONE;
    /* Hooks stop starting spans now; spans still in flight on other threads
     * end on a tracer that must stay allocated, and a flush() waiting on
     * another thread (GIL released) still uses it: then flush and retire it. */
    mstn_g.tracer = NULL;
    Py_CLEAR(g_init_info);
    bool busy = mstn_g.inflight > 0 || atomic_load(&g_flushing) > 0;
    Py_BEGIN_ALLOW_THREADS
    if (busy)
        mst_tracer_flush(t, 5000);
    else
        mst_tracer_shutdown(t, 5000);
    Py_END_ALLOW_THREADS
    if (busy)
        g_retired = t;
    g_n_exporters = 0;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ stats */

static int put_u64(PyObject *d, const char *k, uint64_t v) {
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    int r = o ? PyDict_SetItemString(d, k, o) : -1;
    Py_XDECREF(o);
    return r;
}

static PyObject *mod_stats(PyObject *m, PyObject *unused) {
    PyObject *d = PyDict_New(), *ex = NULL;
    if (!d)
        return NULL;
    mst_tracer_stats ts;
    memset(&ts, 0, sizeof ts);
    if (mstn_g.tracer)
        mst_tracer_get_stats(mstn_g.tracer, &ts);
    mstn_req_stats rs;
    mstn_req_stats_get(&rs);
    if (PyDict_SetItemString(d, "active", mstn_g.tracer ? Py_True : Py_False) < 0 ||
        put_u64(d, "spans_started", ts.spans_started) < 0 || put_u64(d, "spans_ended", ts.spans_ended) < 0 ||
        put_u64(d, "spans_queued", ts.spans_queued) < 0 || put_u64(d, "spans_dropped", ts.spans_dropped) < 0 ||
        put_u64(d, "spans_filtered", ts.spans_filtered) < 0 ||
        put_u64(d, "spans_exported", ts.spans_exported) < 0 || put_u64(d, "spans_failed", ts.spans_failed) < 0 ||
        put_u64(d, "batches_exported", ts.batches_exported) < 0 || put_u64(d, "queue_depth", ts.queue_depth) < 0 ||
        put_u64(d, "spans_in_flight", (uint64_t)(mstn_g.inflight > 0 ? mstn_g.inflight : 0)) < 0 ||
        put_u64(d, "hooks_disabled", mstn_g.hooks_disabled) < 0 ||
        put_u64(d, "hook_failures", mstn_g.hook_failures) < 0 ||
        put_u64(d, "requests_tracked", rs.tracked) < 0 || put_u64(d, "requests_registered", rs.registered) < 0 ||
        put_u64(d, "requests_evicted", rs.evicted) < 0 || put_u64(d, "requests_finished", rs.finished) < 0 ||
        put_u64(d, "request_spans_started", rs.spans_started) < 0 ||
        put_u64(d, "request_spans_open", rs.spans_open) < 0 ||
        put_u64(d, "request_spans_finished", rs.spans_finished) < 0 ||
        put_u64(d, "request_spans_evicted", rs.spans_evicted) < 0 ||
        put_u64(d, "auto_contexts", mstn_g.auto_contexts) < 0 ||
        put_u64(d, "auto_contexts_unsampled", mstn_g.auto_unsampled) < 0)
        goto fail;
    ex = PyDict_New();
    if (!ex || PyDict_SetItemString(d, "exporters", ex) < 0)
        goto fail;
    for (size_t i = 0; i < g_n_exporters; i++) {
        mst_exporter_stats es;
        memset(&es, 0, sizeof es);
        mst_exporter_get_stats(g_exporters[i].exp, &es);
        PyObject *e = PyDict_New();
        if (!e || PyDict_SetItemString(ex, g_exporters[i].name, e) < 0 ||
            put_u64(e, "spans_exported", es.spans_exported) < 0 || put_u64(e, "spans_failed", es.spans_failed) < 0 ||
            put_u64(e, "spans_rejected", es.spans_rejected) < 0 || put_u64(e, "batches_ok", es.batches_ok) < 0 ||
            put_u64(e, "batches_failed", es.batches_failed) < 0 || put_u64(e, "retries", es.retries) < 0 ||
            put_u64(e, "spans_skipped", es.spans_skipped) < 0) {
            Py_XDECREF(e);
            goto fail;
        }
        Py_DECREF(e);
    }
    Py_DECREF(ex);
    return d;
fail:
    Py_XDECREF(ex);
    Py_DECREF(d);
    return NULL;
}

/* ------------------------------------------------- request contexts */

static PyObject *mod_current_context(PyObject *m, PyObject *unused) {
    mstn_ctx c;
    if (!mstn_current(&c))
        Py_RETURN_NONE;
    char t[33], s[17];
    mst_trace_id_to_hex(&c.trace_id, t);
    mst_span_id_to_hex(&c.span_id, s);
    return Py_BuildValue("(ss)", t, s);
}

static PyObject *mod_register_request(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"request_id", "trace_headers", NULL};
    PyObject *rid, *headers = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:register_request", kwlist, &rid, &headers))
        return NULL;
    int r = mstn_register(rid, headers, true);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *mod_finish_request(PyObject *m, PyObject *rid) {
    const char *u;
    Py_ssize_t n;
    PyObject *s = mstn_id_utf8(rid, &u, &n);
    if (!s)
        return NULL;
    PyObject *res = PyBool_FromLong(mstn_req_drop(u, (size_t)n));
    Py_DECREF(s);
    return res;
}

/* lookup_request(id) -> (trace_id_hex, span_id_hex, sampled) | None (tests). */
static PyObject *mod_lookup_request(PyObject *m, PyObject *rid) {
    if (!PyUnicode_Check(rid))
        return PyErr_Format(PyExc_TypeError, "request id must be str");
    Py_ssize_t n = 0;
    const char *u = PyUnicode_AsUTF8AndSize(rid, &n);
    mstn_ctx c;
    if (!u)
        return NULL;
    if (!mstn_req_get(u, (size_t)n, &c))
        Py_RETURN_NONE;
    char t[33], s[17];
    mst_trace_id_to_hex(&c.trace_id, t);
    mst_span_id_to_hex(&c.span_id, s);
    return Py_BuildValue("(ssO)", t, s, mstn_ctx_sampled(&c) ? Py_True : Py_False);
}

static PyObject *mod_reset_requests(PyObject *m, PyObject *unused) {
    mstn_req_clear();
    mstn_g.auto_counter = 0;
    read_env_rules();
    Py_RETURN_NONE;
}

/* _capture(True) starts mirroring every recorded hook span into a list of
 * dicts and returns it; _capture(False) stops and returns the list. */
static PyObject *mod_capture(PyObject *m, PyObject *on) {
    int yes = PyObject_IsTrue(on);
    if (yes < 0)
        return NULL;
    PyObject *prev = mstn_g.capture;
    if (yes) {
        PyObject *l = PyList_New(0);
        if (!l)
            return NULL;
        mstn_g.capture = l;
        Py_XDECREF(prev);
        return Py_NewRef(l);
    }
    mstn_g.capture = NULL;
    return prev ? prev : Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))mod_init, METH_VARARGS | METH_KEYWORDS,
     "init(*, service_name=None, forward_socket=None, otlp=True, perfetto=True, null_exporter=False, "
     "process_role=None) -> dict"},
    {"set_process_role", mod_set_process_role, METH_O,
     "set_process_role(role or None): the process.role attribute of every later hook span"},
    {"flush", (PyCFunction)(void (*)(void))mod_flush, METH_VARARGS | METH_KEYWORDS,
     "flush(timeout_ms=5000) -> bool: export everything queued"},
    {"shutdown", mod_shutdown, METH_NOARGS, "shutdown(): flush and stop the tracer"},
    {"stats", mod_stats, METH_NOARGS, "stats() -> dict of tracer, exporter and request counters"},
    {"current_context", mod_current_context, METH_NOARGS,
     "current_context() -> (trace_id_hex, span_id_hex) | None"},
    {"register_request", (PyCFunction)(void (*)(void))mod_register_request, METH_VARARGS | METH_KEYWORDS,
     "register_request(request_id, trace_headers=None) -> bool"},
    {"finish_request", mod_finish_request, METH_O, "finish_request(request_id) -> bool"},
    {"lookup_request", mod_lookup_request, METH_O,
     "lookup_request(request_id) -> (trace_id_hex, span_id_hex, sampled) | None"},
    {"_reset_requests", mod_reset_requests, METH_NOARGS, "tests: clear the request table, re-read env rules"},
    {"_capture", mod_capture, METH_O, "tests: mirror recorded hook spans into a list"},
    {"_otel_bridge_close", mstn_otel_bridge_close, METH_NOARGS,
     "atexit (otel_bridge.py): flush hook spans into the TracerProvider, then keep the exporter thread out of Python"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "mstrace._native",
    "The C side of mstrace's vLLM hook tracing (see python/mstrace/_native/CONTRACT.md).", -1, methods,
    NULL, NULL, NULL, NULL,
};

/* `_trace_coro`: the coroutine an async hook returns (see hook.c). */
static const char trace_coro_src[] =
    "async def _trace_coro(coro, run):\n"
    "    run._begin()\n"
    "    try:\n"
    "        result = await coro\n"
    "    except BaseException as exc:\n"
    "        run._end(exc, None)\n"
    "        raise\n"
    "    run._end(None, result)\n"
    "    return result\n";

static int init_names(void) {
#define N(f, s) if (!(mstn_n.f = PyUnicode_InternFromString(s))) return -1
    N(request_id, "request_id");
    N(trace_headers, "trace_headers");
    N(traceparent, "traceparent");
    N(tracestate, "tracestate");
    N(num_scheduled_tokens, "num_scheduled_tokens");
    N(total_num_scheduled_tokens, "total_num_scheduled_tokens");
    N(outputs, "outputs");
    N(finish_reason, "finish_reason");
    N(iscoroutinefunction, "iscoroutinefunction");
    N(func, "__func__");
    N(get, "__get__");
    N(scheduler_output, "scheduler_output");
    N(arrival_time, "arrival_time");
    N(external_req_id, "external_req_id");
    N(waiting, "waiting");
    N(running, "running");
    N(kv_cache_manager, "kv_cache_manager");
    N(usage, "usage");
#undef N
    return 0;
}

static int init_trace_coro(PyObject *module) {
    PyObject *g = PyDict_New();
    if (!g)
        return -1;
    if (PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) < 0 ||
        PyDict_SetItemString(g, "__name__", PyUnicode_InternFromString("mstrace._native")) < 0) {
        Py_DECREF(g);
        return -1;
    }
    PyObject *r = PyRun_String(trace_coro_src, Py_file_input, g, g);
    if (!r) {
        Py_DECREF(g);
        return -1;
    }
    Py_DECREF(r);
    mstn_trace_coro = Py_XNewRef(PyDict_GetItemString(g, "_trace_coro"));
    Py_DECREF(g);
    if (!mstn_trace_coro)
        return -1;
    return PyModule_AddObject(module, "_trace_coro", Py_NewRef(mstn_trace_coro));
}

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    mstn_g.pid = (long)getpid();
    if (init_names() < 0 || mstn_hook_module_init(m) < 0 || init_trace_coro(m) < 0)
        goto fail;
    mstn_g.ctxvar = PyContextVar_New("mstrace_current_span", NULL);
    if (!mstn_g.ctxvar)
        goto fail;
    static bool atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, at_fork_child) == 0)
        atfork_done = true;
    if (PyModule_AddStringConstant(m, "SCOPE_PREFIX", "ms_service_profiler.hook.") < 0 ||
        PyModule_AddIntConstant(m, "FAILURE_LIMIT", MSTN_FAILURE_LIMIT) < 0 ||
        PyModule_AddIntConstant(m, "REQUEST_TABLE_SIZE", 10000) < 0 ||
        PyModule_AddStringConstant(m, "core_version", mst_version()) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
