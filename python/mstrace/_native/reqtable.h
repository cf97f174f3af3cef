/*
 * reqtable.h — the request table (reqtable.c): request id -> trace context
 * (and the open vllm.request span, if any), bounded at 10,000 entries.
 */
#ifndef MST_NATIVE_REQTABLE_H
#define MST_NATIVE_REQTABLE_H

#include "native_types.h"

/* The hash of a request id the extension's id tables use (this one and
 * queued_times.c). */
uint64_t mstn_id_hash(const char *s, size_t n);
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

#endif /* MST_NATIVE_REQTABLE_H */
