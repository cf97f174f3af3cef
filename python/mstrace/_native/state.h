/*
 * state.h — the extension's process-global state (mstn_g): the tracer, the
 * request-context env rules read at init, the counters stats() reports, the
 * test capture list, the async hooks' ContextVar and the process role.
 * Written and read with the GIL held. Defined in state.c.
 */
#ifndef MST_NATIVE_STATE_H
#define MST_NATIVE_STATE_H

#include "native_types.h"

typedef struct mstn_globals {
    mst_tracer *tracer;         /* NULL before init() / after shutdown()   */
    uint64_t tracer_gen;        /* bumped per tracer: invalidates scope caches */
    int64_t inflight;           /* hook spans started and not yet ended    */
    long pid;                   /* cached getpid(), refreshed after fork   */
    /* env rules (read at init) */
    bool auto_trace;            /* MS_PROFILER_AUTO_TRACE=1                */
    uint32_t sample_rate;       /* MS_PROFILER_SAMPLE_RATE, 0 = unset      */
    uint64_t auto_counter;      /* auto-generated contexts so far          */
    /* counters for stats() */
    uint64_t hooks_disabled;
    uint64_t hook_failures;
    uint64_t auto_contexts;
    uint64_t auto_unsampled;
    bool async_used;            /* some async hook exists: consult the contextvar */
    bool story_wanted;          /* an OTLP exporter or the otel bridge is on: write the requests'
                                   stories (they are for Jaeger; the forwarder draws its own) */
    PyObject *capture;          /* list: test-only span capture, or NULL   */
    PyObject *ctxvar;           /* ContextVar for the current span of async hooks */
    char role[MSTN_ROLE_MAX];   /* process.role on every span; "" = none    */
} mstn_globals;

extern mstn_globals mstn_g;

/* Stores `role` (UTF-8, cut to MSTN_ROLE_MAX-1 bytes on a character
 * boundary) as the process.role of every later span; NULL/"" clears it. */
void mstn_set_process_role(const char *role);
/* Rebuilds the tracer's resource for mstn_g.role when it was built for
 * another one and the tracer has not started exporting
 * (mst_tracer_set_process_role); nothing without a tracer. */
void mstn_apply_role_to_resource(void);
/* _native.set_process_role(role or None). */
PyObject *mstn_py_set_process_role(PyObject *m, PyObject *arg);

#endif /* MST_NATIVE_STATE_H */
