/*
 * hook_span.h — start and end of the span of one hooked call (hook_span.c).
 */
#ifndef MST_NATIVE_HOOK_SPAN_H
#define MST_NATIVE_HOOK_SPAN_H

#include "hook_state.h"

/* A started span with what the capture needs to describe it. */
typedef struct mstn_span_run {
    mst_span *span;
    mstn_ctx ctx;               /* the span's own context                 */
    mstn_ctx parent;
    bool has_parent;
    uint64_t t0;
} mstn_span_run;

/* Starts the span of root hook `r` at `t0` (batch `b` or NULL): parent = the
 * current hook span, else the batch's single known request context (a
 * synthetic one lends only its trace id), else a root in a new trace. Sets
 * process.pid, thread.id and process.role. Returns false if nothing is
 * recorded (no tracer, or every request of the batch is unsampled). */
bool mstn_hook_span_begin(MstnHook *r, mstn_span_run *sr, const mstn_batch *b, uint64_t t0);

/* Ends the span: batch attributes and links, status from `ok` (an exception
 * is pending when !ok and stays pending), the test capture if on. */
void mstn_hook_span_finish(MstnHook *r, mstn_span_run *sr, const mstn_batch *b, bool ok);

#endif /* MST_NATIVE_HOOK_SPAN_H */
