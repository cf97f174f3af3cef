/*
 * module.c — the module `mstrace._native`: its function table and its
 * import (interned names, the hook types, the async helpers, the
 * ContextVar of async hooks, the fork handler, the constants). The functions
 * live with their subsystems: tracer_life.c (init/flush/shutdown/stats, fork
 * and exit), exporters.c (which exporters init() builds), request_api.c
 * (request contexts and their env rules), state.c (process role),
 * hook_capture.c (the test capture), otel_bridge.c (the bridge's close),
 * log.c (logging through Python's `logging`).
 */
#include "hook.h"
#include "hook_capture.h"
#include "native_types.h"
#include "otel_bridge.h"
#include "pyattr.h"
#include "request_api.h"
#include "state.h"
#include "trace_helpers.h"
#include "tracer_life.h"

#include "request_story.h"

#include <pthread.h>
#include <unistd.h>

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))mstn_py_init, METH_VARARGS | METH_KEYWORDS,
     "init(*, service_name=None, forward_socket=None, otlp=True, perfetto=True, null_exporter=False, "
     "process_role=None) -> dict"},
    {"set_process_role", mstn_py_set_process_role, METH_O,
     "set_process_role(role or None): the process.role attribute of every later hook span"},
    {"flush", (PyCFunction)(void (*)(void))mstn_py_flush, METH_VARARGS | METH_KEYWORDS,
     "flush(timeout_ms=5000) -> bool: export everything queued"},
    {"shutdown", mstn_py_shutdown, METH_NOARGS, "shutdown(): flush and stop the tracer"},
    {"end_stories", mstn_py_end_stories, METH_NOARGS,
     "end_stories(): end the open request stories (their last phase spans), before the exit flush"},
    {"stats", mstn_py_stats, METH_NOARGS, "stats() -> dict of tracer, exporter and request counters"},
    {"current_context", mstn_py_current_context, METH_NOARGS,
     "current_context() -> (trace_id_hex, span_id_hex) | None"},
    {"register_request", (PyCFunction)(void (*)(void))mstn_py_register_request, METH_VARARGS | METH_KEYWORDS,
     "register_request(request_id, trace_headers=None) -> bool"},
    {"finish_request", mstn_py_finish_request, METH_O, "finish_request(request_id) -> bool"},
    {"lookup_request", mstn_py_lookup_request, METH_O,
     "lookup_request(request_id) -> (trace_id_hex, span_id_hex, sampled) | None"},
    {"_reset_requests", mstn_py_reset_requests, METH_NOARGS, "tests: clear the request table, re-read env rules"},
    {"_capture", mstn_py_capture, METH_O, "tests: mirror recorded hook spans into a list"},
    {"_otel_bridge_close", mstn_otel_bridge_close, METH_NOARGS,
     "atexit (otel_bridge.py): flush hook spans into the TracerProvider, then keep the exporter thread out of Python"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "mstrace._native",
    "The C side of mstrace's vLLM hook tracing (see python/mstrace/_native/CONTRACT.md).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    mstn_g.pid = (long)getpid();
    if (mstn_names_init() < 0 || mstn_hook_module_init(m) < 0 || mstn_trace_coro_init(m) < 0)
        goto fail;
    mstn_g.ctxvar = PyContextVar_New("mstrace_current_span", NULL);
    if (!mstn_g.ctxvar)
        goto fail;
    static bool atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, mstn_at_fork_child) == 0)
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
