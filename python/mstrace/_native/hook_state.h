/*
 * hook_state.h — what one hook is (struct MstnHook: the wrapped callable and
 * the root's configuration) and the two things every call path asks of it:
 * its instrumentation scope in the current tracer, and the failure counter
 * that switches it off. Shared by the files of the Hook type: hook.c (the
 * type and per-call dispatch), hook_invoke.c (the business call),
 * hook_span.c (span start/end), hook_sync.c and async_run.c (the call paths).
 */
#ifndef MST_NATIVE_HOOK_STATE_H
#define MST_NATIVE_HOOK_STATE_H

#include "adapters.h"
#include "native_types.h"
#include "state.h"

/* What an _AsyncRun drives: a coroutine, a generator or an async generator
 * (also MstnHook.gen_kind, where 0 means neither generator kind). */
enum { MSTN_RUN_CORO = 0, MSTN_RUN_GEN = 1, MSTN_RUN_ASYNCGEN = 2 };

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

/* The hook that holds the configuration: a bound hook's root, else itself. */
static inline MstnHook *mstn_hook_root(MstnHook *h) {
    return h->root ? h->root : h;
}

/* Records an internal failure of root hook `r` (a Python exception is
 * pending and is cleared); the MSTN_FAILURE_LIMIT-th switches the hook off,
 * once, with one warning. */
void mstn_hook_failed(MstnHook *r);

/* The scope of root hook `r` in the current tracer, looked up again after
 * the tracer changed (mstn_g.tracer_gen). Needs a tracer. */
static inline const mst_scope *mstn_hook_scope(MstnHook *r) {
    if (r->scope_gen != mstn_g.tracer_gen || !r->scope) {
        r->scope = mst_tracer_scope(mstn_g.tracer, r->scope_name, NULL);
        r->scope_gen = mstn_g.tracer_gen;
    }
    return r->scope;
}

#endif /* MST_NATIVE_HOOK_STATE_H */
