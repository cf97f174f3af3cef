/*
 * tracer_life.c — the process-global tracer's life cycle as Python sees it:
 * init() (builds it once per process: env rules, service name, exporters;
 * the dict it returns), flush(), shutdown() (a tracer still in use by spans
 * in flight or a waiting flush is flushed and retired, never freed),
 * stats(), and the fork and exit handling.
 *
 * Exit: init() registers a C-level Py_AtExit function that flushes and shuts
 * the tracer down after the interpreter finalizes (no Python object is
 * touched there). A process ended by os._exit() (multiprocessing children)
 * skips it: call _native.flush() or shutdown() first (see CONTRACT.md).
 * See tracer_life.h.
 */
#include "tracer_life.h"
#include "context.h"
#include "exporters.h"
#include "flush.h"
#include "request_story.h"
#include "pyattr.h"
#include "reqtable.h"
#include "request_api.h"
#include "state.h"

#include <stdlib.h>
#include <string.h>

static PyObject *g_init_info;       /* the dict init() returned            */
static bool g_initializing;
static bool g_atexit_registered;
static mst_tracer *g_retired;       /* shut down with spans still in flight */

static void at_exit(void) {
    mstn_story_end_all(); /* open stories end with the process */
    if (mstn_g.tracer) {
        mst_tracer *t = mstn_g.tracer;
        mstn_g.tracer = NULL;
        /* A daemon thread may still wait inside flush(): export, never free. */
        if (mstn_flushing() > 0)
            mst_tracer_flush(t, 5000);
        else
            mst_tracer_shutdown(t, 5000);
    }
}

void mstn_at_fork_child(void) {
    mstn_flush_after_fork_child();
    mstn_after_fork_child();
    mstn_story_clear(); /* the parent's requests are not this process's */
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

PyObject *mstn_py_init(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"service_name", "forward_socket", "otlp", "perfetto", "null_exporter",
                             "process_role", NULL};
    const char *service = NULL, *sock = NULL, *role = NULL;
    int otlp = 1, perfetto = 1, null_exp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$zzpppz:init", kwlist, &service, &sock, &otlp,
                                     &perfetto, &null_exp, &role))
        return NULL;
    if (role) /* also on a repeated init: the role is per process, not per tracer */
        mstn_set_process_role(role);
    if (mstn_g.tracer && g_init_info)
        return PyDict_Copy(g_init_info);
    if (g_initializing) /* re-entered (e.g. from a log handler): nothing yet */
        Py_RETURN_NONE;
    g_initializing = true;
    mstn_read_env_rules();
    /* service.name: OTEL_SERVICE_NAME wins; the argument fills it when unset. */
    if (service && *service && !getenv("OTEL_SERVICE_NAME"))
        setenv("OTEL_SERVICE_NAME", service, 0);
    PyObject *info = PyDict_New();
    if (!info) {
        g_initializing = false;
        return NULL;
    }
    if (mstn_build_tracer(sock, otlp, perfetto, null_exp, info) < 0) {
        g_initializing = false;
        Py_DECREF(info);
        return NULL;
    }
    mstn_apply_role_to_resource(); /* the role was set before the tracer existed */
    const char *svc = mst_tracer_service_name(mstn_g.tracer);
    PyObject *ar = PyLong_FromUnsignedLong(mstn_g.sample_rate);
    PyObject *pid = PyLong_FromLong(mstn_g.pid);
    if (!set_item_str(info, "service_name", svc) ||
        !set_item_str(info, "perfetto_socket", perfetto && !null_exp && mstn_perfetto_client_wanted() ? (sock ? sock : "MSP_PERFETTO_SOCKET") : NULL) ||
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

PyObject *mstn_py_flush(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"timeout_ms", NULL};
    unsigned int timeout = 5000;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|I:flush", kwlist, &timeout))
        return NULL;
    mst_tracer *t = mstn_g.tracer;
    if (!t)
        Py_RETURN_FALSE;
    return PyBool_FromLong(mstn_flush_released(t, timeout) == MST_OK);
}

PyObject *mstn_py_shutdown(PyObject *m, PyObject *unused) {
    mstn_story_end_all();
    mst_tracer *t = mstn_g.tracer;
    if (!t)
        Py_RETURN_NONE;
    /* Hooks stop starting spans now; spans still in flight on other threads
     * end on a tracer that must stay allocated, and a flush() waiting on
     * another thread (GIL released) still uses it: then flush and retire it. */
    mstn_g.tracer = NULL;
    Py_CLEAR(g_init_info);
    bool busy = mstn_g.inflight > 0 || mstn_flushing() > 0;
    Py_BEGIN_ALLOW_THREADS
    if (busy)
        mst_tracer_flush(t, 5000);
    else
        mst_tracer_shutdown(t, 5000);
    Py_END_ALLOW_THREADS
    if (busy)
        g_retired = t;
    mstn_exporters_forget();
    Py_RETURN_NONE;
}

PyObject *mstn_py_stats(PyObject *m, PyObject *unused) {
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
        mstn_dict_put_u64(d, "spans_started", ts.spans_started) < 0 || mstn_dict_put_u64(d, "spans_ended", ts.spans_ended) < 0 ||
        mstn_dict_put_u64(d, "spans_queued", ts.spans_queued) < 0 || mstn_dict_put_u64(d, "spans_dropped", ts.spans_dropped) < 0 ||
        mstn_dict_put_u64(d, "spans_filtered", ts.spans_filtered) < 0 ||
        mstn_dict_put_u64(d, "spans_exported", ts.spans_exported) < 0 || mstn_dict_put_u64(d, "spans_failed", ts.spans_failed) < 0 ||
        mstn_dict_put_u64(d, "batches_exported", ts.batches_exported) < 0 || mstn_dict_put_u64(d, "queue_depth", ts.queue_depth) < 0 ||
        mstn_dict_put_u64(d, "spans_in_flight", (uint64_t)(mstn_g.inflight > 0 ? mstn_g.inflight : 0)) < 0 ||
        mstn_dict_put_u64(d, "hooks_disabled", mstn_g.hooks_disabled) < 0 ||
        mstn_dict_put_u64(d, "hook_failures", mstn_g.hook_failures) < 0 ||
        mstn_dict_put_u64(d, "requests_tracked", rs.tracked) < 0 || mstn_dict_put_u64(d, "requests_registered", rs.registered) < 0 ||
        mstn_dict_put_u64(d, "requests_evicted", rs.evicted) < 0 || mstn_dict_put_u64(d, "requests_finished", rs.finished) < 0 ||
        mstn_dict_put_u64(d, "request_spans_started", rs.spans_started) < 0 ||
        mstn_dict_put_u64(d, "request_spans_open", rs.spans_open) < 0 ||
        mstn_dict_put_u64(d, "request_spans_finished", rs.spans_finished) < 0 ||
        mstn_dict_put_u64(d, "request_spans_evicted", rs.spans_evicted) < 0 ||
        mstn_dict_put_u64(d, "auto_contexts", mstn_g.auto_contexts) < 0 ||
        mstn_dict_put_u64(d, "auto_contexts_unsampled", mstn_g.auto_unsampled) < 0)
        goto fail;
    ex = PyDict_New();
    if (!ex || PyDict_SetItemString(d, "exporters", ex) < 0)
        goto fail;
    if (mstn_exporters_stats(ex) < 0)
        goto fail;
    Py_DECREF(ex);
    return d;
fail:
    Py_XDECREF(ex);
    Py_DECREF(d);
    return NULL;
}
