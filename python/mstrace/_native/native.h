/*
 * native.h — internal declarations shared by the files of the CPython
 * extension `mstrace._native` (module.c, the hook_*.c files, adapters.c,
 * reqtable.c, context.c). Nothing here is public: Python sees only what module.c
 * exports, and the C core is reached only through include/mstrace.h.
 *
 * Concurrency model: every function here runs with the GIL held (they are
 * all called from Python), so the process-global state below needs no lock
 * of its own; the GIL is released only around mst_tracer_flush/shutdown,
 * which touch no Python object and no state declared here.
 */
#ifndef MST_NATIVE_H
#define MST_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>

#include "mstrace.h"

/* ------------------------------------------------------------ limits */

#define MSTN_MAX_IDS MST_MAX_LIST_ITEMS   /* request ids per span         */
#define MSTN_MAX_LINKS MST_MAX_LINKS      /* links per span               */
#define MSTN_FAILURE_LIMIT 5              /* internal failures before off */
#define MSTN_STACK_DEPTH 64               /* nested hook spans per thread */
#define MSTN_ROLE_MAX 128                 /* process.role bytes + NUL     */

/* --------------------------------------------------- compact contexts */

/* A trace context without tracestate: what the per-thread stack, the
 * request table and the links need (32 bytes instead of ~560). */
typedef struct mstn_ctx {
    mst_trace_id trace_id;
    mst_span_id span_id;
    uint8_t flags;          /* W3C flags, bit 0 = sampled                  */
    bool remote;            /* came from a traceparent header              */
    bool synthetic;         /* auto-generated (MS_PROFILER_AUTO_TRACE=1):
                               its span id names no real span, so spans use
                               only its trace id and start as roots in it */
} mstn_ctx;

static inline bool mstn_ctx_sampled(const mstn_ctx *c) {
    return (c->flags & MST_TRACE_FLAG_SAMPLED) != 0;
}

/* Fills a full public context from a compact one (no tracestate). */
void mstn_ctx_to_public(const mstn_ctx *c, mst_span_context *out);

/* ------------------------------------------------- process-global state */

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
    PyObject *capture;          /* list: test-only span capture, or NULL   */
    PyObject *ctxvar;           /* ContextVar for the current span of async hooks */
    char role[MSTN_ROLE_MAX];   /* process.role on every span; "" = none    */
} mstn_globals;

extern mstn_globals mstn_g;

/* Logs one line through logging.getLogger("mstrace") (level: "info",
 * "warning", "debug"). Keeps any pending exception intact. */
void mstn_log(const char *level, const char *fmt, ...);

/* Native thread id of the calling thread, cached per thread (and reset in a
 * fork()ed child, where the surviving thread has a new id). */
long mstn_thread_id(void);
void mstn_after_fork_child(void);
/* mst_tracer_flush(t) with the GIL released, counted so that a concurrent
 * shutdown() (or the exit hook) keeps `t` allocated while it waits. */
mst_status mstn_flush_released(mst_tracer *t, unsigned int timeout_ms);

/* ------------------------------------------------ per-thread span stack */

/* The current span: the one an async hook set in the task's contextvar
 * (when async hooks exist) unless a sync hook span was pushed on this thread
 * after it began, else the top of this thread's stack. Returns false when
 * there is none. */
bool mstn_current(mstn_ctx *out);
/* Push/pop the context of a span that becomes current for the duration of a
 * synchronous call. Pushes past MSTN_STACK_DEPTH are counted, not stored,
 * so push/pop stay balanced. */
void mstn_push(const mstn_ctx *ctx);
void mstn_pop(void);
/* The value an async hook puts in the contextvar while its span is current
 * (new reference, NULL with an exception). */
PyObject *mstn_ctxvar_value(const mstn_ctx *ctx);

/* --------------------------------------------------------- request table */

/* Registers `ctx` under `id` (replacing and refreshing an existing entry);
 * evicts the oldest entry when 10,000 are in flight. Returns false only on
 * out-of-memory. */
bool mstn_req_put(const char *id, size_t len, const mstn_ctx *ctx);
/* Like mstn_req_put, and the entry takes ownership of `span` (the open
 * vllm.request span named by ctx, or NULL): the table ends it on drop (OK),
 * eviction/clear (`mstrace.evicted`) or a replacing context. */
bool mstn_req_put_span(const char *id, size_t len, const mstn_ctx *ctx, mst_span *span);
/* fork() child: forget (never end) the inherited open request spans. */
void mstn_req_after_fork_child(void);
/* Looks `id` up exactly, then with a trailing "-<8 hex>" stripped. */
bool mstn_req_get(const char *id, size_t len, mstn_ctx *out);
/* Drops `id` (exact, else stripped); true if something was dropped. */
bool mstn_req_drop(const char *id, size_t len);
typedef struct mstn_req_stats {
    uint64_t tracked, registered, evicted, finished;
    uint64_t spans_started, spans_open, spans_finished, spans_evicted; /* vllm.request */
} mstn_req_stats;
/* Counts a request span started by context.c (the table counts its end). */
void mstn_req_span_started(void);
void mstn_req_stats_get(mstn_req_stats *out);
void mstn_req_clear(void);

/* -------------------------------------------------------- context rules */

/* Applies docs/reference/spans.md "Request contexts" to a request's trace headers (a mapping or None):
 * a valid traceparent (+ tracestate) → that context; otherwise, when
 * MS_PROFILER_AUTO_TRACE=1, a generated one (sampled 1 in N by
 * MS_PROFILER_SAMPLE_RATE); else nothing. Returns 1 when a context was
 * produced, 0 when none, -1 with a Python exception on an internal error. */
int mstn_ctx_from_headers(PyObject *headers, mstn_ctx *out, bool allow_auto);
/* register_request semantics for C callers (adapters). 1/0/-1 as above. */
int mstn_register(PyObject *request_id, PyObject *headers, bool allow_auto);
/* The request adapter's form: when the context is auto-generated and
 * sampled, a tracer exists, `scope` is given and `obj.trace_headers` (value
 * `headers`, NULL if the attribute is missing) is None or a dict without a
 * traceparent, starts the `vllm.request` span named by the context, writes
 * the traceparent into obj.trace_headers and hands the span to the table. */
int mstn_register_ex(PyObject *request_id, PyObject *headers, bool allow_auto, PyObject *obj,
                     const mst_scope *scope);

/* ---------------------------------------------------------- Hook type */

/* What module.c needs of the hook at import (mstn_hook_module_init,
 * mstn_trace_coro): two headers that include only Python.h. */
#include "hook.h"
#include "trace_helpers.h"

/* ----------------------------------------------------------- adapters */

typedef enum mstn_adapter {
    MSTN_AD_CALL = 0,
    MSTN_AD_REQUEST,
    MSTN_AD_REQUEST_CONTEXT,
    MSTN_AD_SCHEDULE,
    MSTN_AD_MODEL,
    MSTN_AD_OUTPUT
} mstn_adapter;

/* What an adapter learned about one call, applied to the span at its end
 * (and mirrored into the test capture). Request id pointers borrow from
 * `owned`, which holds a reference to each id string. */
typedef struct mstn_batch {
    PyObject *owned[MSTN_MAX_IDS];
    const char *ids[MSTN_MAX_IDS];
    Py_ssize_t id_lens[MSTN_MAX_IDS];
    size_t n_ids;
    size_t n_ids_dropped;
    size_t n_unsampled;                    /* known, unsampled: left out   */
    mstn_ctx link_ctx[MSTN_MAX_LINKS];
    uint16_t link_idx[MSTN_MAX_LINKS];     /* index into ids               */
    size_t n_links;
    int64_t request_count;                 /* -1 = not set                 */
    int64_t scheduled_tokens;              /* -1 = not set                 */
    int64_t waiting, running;              /* scheduler queues; -1 = not set */
    double kv_usage;                       /* 0..1; < 0 = not set          */
} mstn_batch;

void mstn_batch_init(mstn_batch *b);
void mstn_batch_release(mstn_batch *b);
/* Extractors: 0 on success (nothing found is success), -1 with a Python
 * exception when the hook's own logic failed. */
int mstn_batch_from_scheduler_output(mstn_batch *b, PyObject *so);
/* After Scheduler.schedule: the scheduler's queue lengths (len(waiting),
 * len(running)) and KV-cache usage (kv_cache_manager.usage, 0..1). Each is
 * optional: what cannot be read is simply not recorded (never -1). */
void mstn_batch_from_scheduler(mstn_batch *b, PyObject *scheduler);
int mstn_batch_from_model_args(mstn_batch *b, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
int mstn_batch_from_output_args(mstn_batch *b, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames, PyObject **outputs_list);
/* After an output call: drop the contexts of outputs with finish_reason set. */
int mstn_finish_outputs(PyObject *outputs_list);
/* request / request_context adapters: register from the call's arguments. */
int mstn_register_from_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                            bool skip_self, bool kw_allowed, const mst_scope *span_scope);

/* Optional attribute lookup: 1 found (*out new ref), 0 missing, -1 error. */
int mstn_getattr_opt(PyObject *obj, PyObject *name, PyObject **out);

/* A request id as the request table's key: str(id) (id itself when it is a
 * str) in UTF-8. Returns the new reference that owns *u, or NULL with an
 * exception set. */
static inline PyObject *mstn_id_utf8(PyObject *id, const char **u, Py_ssize_t *n) {
    PyObject *s = PyUnicode_Check(id) ? Py_NewRef(id) : PyObject_Str(id);
    if (!s)
        return NULL;
    *n = 0;
    *u = PyUnicode_AsUTF8AndSize(s, n);
    if (!*u) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

/* Interned attribute names. */
typedef struct mstn_names {
    PyObject *request_id, *trace_headers, *traceparent, *tracestate,
        *num_scheduled_tokens, *total_num_scheduled_tokens, *outputs,
        *finish_reason, *iscoroutinefunction, *func, *get, *scheduler_output,
        *arrival_time, *external_req_id, *waiting, *running, *kv_cache_manager, *usage;
} mstn_names;
extern mstn_names mstn_n;

#endif /* MST_NATIVE_H */
