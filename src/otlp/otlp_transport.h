/*
 * otlp_transport.h — sends one already-encoded OTLP trace body to a collector
 * (docs/reference/otlp.md) and nothing else: one persistent libcurl easy handle (keep-alive),
 * http/protobuf, http/json or gRPC (HTTP/2), optional gzip, user headers,
 * bounded retries inside the export timeout. The collector's reply (partial
 * success, grpc-status, RetryInfo) is read by wire/otlp_response.h.
 *
 * Why a separate unit: the OTLP exporter (spans → encoder → here) and the
 * MindIE relay (raw ExportTraceServiceRequest bytes → here) share exactly the
 * same wire and retry rules, so they live once.
 *
 * Threading: a transport is used by one thread at a time (the pipeline's
 * exporter thread or the relay's sender); it keeps no locks of its own.
 */
#ifndef MST_OTLP_TRANSPORT_H
#define MST_OTLP_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mstrace_otlp.h"

typedef struct mst_otlp_transport mst_otlp_transport;

/* What one mst_otlp_transport_send did, for counters and tests. */
typedef struct mst_otlp_send_result {
    uint32_t attempts;        /* requests actually sent                      */
    uint32_t retries;         /* attempts after the first: attempts - 1, or 0 */
    long http_status;         /* last HTTP status, 0 when none               */
    int grpc_status;          /* last grpc-status, -1 when none              */
    int64_t rejected_spans;   /* partial_success.rejected_spans, 0 if none   */
    bool partial_success;     /* the response carried a partial_success      */
    bool config_error;        /* a failure no retry fixes (TLS, 4xx, URL):   */
                              /* logged by the transport, MST_ERR_REJECTED   */
} mst_otlp_send_result;

/* Copies `cfg`, checks it and builds the header list; the CURL handle is
 * created lazily on the first send. */
mst_status mst_otlp_transport_create(const mst_otlp_config *cfg, mst_otlp_transport **out);

/* Sends `body` (an ExportTraceServiceRequest encoded for cfg->protocol:
 * protobuf for grpc and http/protobuf, OTLP/JSON for http/json).
 * Returns MST_OK (also for a partial success: see res->rejected_spans),
 * MST_ERR_REJECTED (a non-retryable status, or a configuration error with
 * res->config_error set: see the .c), MST_ERR_UNAVAILABLE (retryable
 * failures until the budget ran out), MST_ERR_TIMEOUT (the export timeout
 * expired during a request), MST_ERR_CLOSED (the cancel flag was set: the
 * request in flight, if any, was aborted; the collector may or may not have
 * received it), MST_ERR_NOMEM. `res` may be NULL. */
mst_status mst_otlp_transport_send(mst_otlp_transport *t, const uint8_t *body, size_t len,
                                   mst_otlp_send_result *res);

/* In a fork()ed child: forget the inherited connection without touching the
 * parent's socket (see the .c for why the handle is deliberately leaked). */
void mst_otlp_transport_after_fork_child(mst_otlp_transport *t);

void mst_otlp_transport_destroy(mst_otlp_transport *t);

/* `t` takes over what `from` has already logged (the configuration error),
 * so a second transport to the same collector (the relay's stop-time one)
 * does not log the same cause again. */
void mst_otlp_transport_adopt_log_state(mst_otlp_transport *t, const mst_otlp_transport *from);

/* Optional cancel flag (NULL: none), owned by the caller and read from the
 * sending thread while it sends: once another thread stores true, the send
 * in progress stops within about a second (libcurl calls the progress
 * callback that checks it at least that often; backoff sleeps in 20 ms
 * slices) and returns MST_ERR_CLOSED, and so does every later send while it
 * stays true. Why: a stop bound (the relay's flush deadline) must not be
 * overrun by a whole export timeout. Set it before sending, not during. */
void mst_otlp_transport_set_cancel(mst_otlp_transport *t, const atomic_bool *flag);

/* Tests only: multiplies the exponential backoff (not Retry-After) by
 * `scale` (1.0 = production; 0.01 makes 1 s become 10 ms). Process-wide. */
void mst_otlp_transport_set_backoff_scale(double scale);

/* Tests only: every backoff sleep lasts `ms` longer than the deadline check
 * before it allowed (0 = production), as when a loaded machine wakes the
 * sending thread late, so a test can cross the export deadline during a
 * backoff deterministically. Process-wide. */
void mst_otlp_transport_set_backoff_overrun_ms(uint32_t ms);

#endif /* MST_OTLP_TRANSPORT_H */
