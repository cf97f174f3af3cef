/*
 * context.h — where trace contexts come from and which one is current
 * (context.c): the per-thread stack of hook spans and the async hooks'
 * ContextVar, the cached native thread id, the context rules for a
 * request's trace headers, and registering a request's context.
 */
#ifndef MST_NATIVE_CONTEXT_H
#define MST_NATIVE_CONTEXT_H

#include "native_types.h"

/* Fills a full public context from a compact one (no tracestate). */
void mstn_ctx_to_public(const mstn_ctx *c, mst_span_context *out);

/* Native thread id of the calling thread, cached per thread (and reset in a
 * fork()ed child, where the surviving thread has a new id). */
long mstn_thread_id(void);
/* fork() child (module.c's pthread_atfork handler): forgets the thread id,
 * refreshes mstn_g.pid and the request table's inherited spans. */
void mstn_after_fork_child(void);

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

#endif /* MST_NATIVE_CONTEXT_H */
