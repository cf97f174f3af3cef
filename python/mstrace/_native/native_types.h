/*
 * native_types.h — the small types and limits every file of the CPython
 * extension `mstrace._native` shares: the compact trace context (mstn_ctx)
 * and the per-span / per-thread limits. Nothing here is public: Python sees
 * only what module.c exports, and the C core is reached only through
 * include/mstrace.h.
 *
 * Concurrency model: every function of the extension runs with the GIL held
 * (they are all called from Python), so its process-global state needs no
 * lock of its own; the GIL is released only around mst_tracer_flush/shutdown,
 * which touch no Python object and no state of the extension (the otel
 * bridge's exporter thread takes the GIL itself).
 */
#ifndef MST_NATIVE_TYPES_H
#define MST_NATIVE_TYPES_H

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

#endif /* MST_NATIVE_TYPES_H */
