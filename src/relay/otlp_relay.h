/*
 * otlp_relay.h — the legacy OTLP relay mode of `mstrace forward` (docs/relay.md,
 * the MindIE Motor path): each frame on \0OTLP_SOCKET is one serialized
 * ExportTraceServiceRequest; the relay validates it (strict decoder), queues
 * it and forwards it upstream (OTEL_EXPORTER_OTLP_ENDPOINT, http/protobuf or
 * grpc) through the shared libcurl transport (otlp/otlp_transport.h).
 *
 * Why a sender thread and a bounded queue: the epoll thread must never wait
 * for the collector. Payloads go into a byte- and item-bounded FIFO; a
 * sender thread batches them (protobuf concatenation of requests of the same
 * message type merges their repeated resource_spans, so N requests
 * concatenated are one valid request) and posts the batch. When the queue is
 * full the NEWEST payload is dropped (as the OpenTelemetry SDK's batch
 * processor does): the in-flight batch at the head is never disturbed and
 * every drop is counted exactly. The log lines an alert may match are
 * upstream's: "Trace data is being stacked" when the backlog passes a tenth
 * of a bound (well before loss) and "Trace data queue is full, discarding
 * the oldest data." at the first drop and in the periodic drop summary,
 * each line saying in the same breath that the newest are the ones
 * dropped here. While the collector is down the sender keeps
 * the batch and retries with capped exponential backoff; delivery resumes on
 * its own when the collector comes back.
 *
 * Accounting (exact, in messages): received = rejected + forwarded +
 * dropped_full + failed + lost_at_exit + queued.
 */
#ifndef MST_RELAY_OTLP_RELAY_H
#define MST_RELAY_OTLP_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "forward/daemon.h"
#include "mstrace_otlp.h"

/* The default bound (docs/relay.md, "Why these bounds"): upstream's loss
 * point in payloads, and a byte bound that a typical MindIE span (a few
 * hundred bytes) does not reach first, so memory stays under ~0.5 GiB. */
#define MST_RELAY_DEFAULT_QUEUE_BYTES (512u * 1024u * 1024u)
#define MST_RELAY_DEFAULT_QUEUE_ITEMS 1000000u
#define MST_RELAY_DEFAULT_BATCH_ITEMS 512u
#define MST_RELAY_DEFAULT_BATCH_BYTES (4u * 1024u * 1024u)
#define MST_RELAY_DEFAULT_BACKOFF_MIN_MS 1000u
#define MST_RELAY_DEFAULT_BACKOFF_MAX_MS 30000u
#define MST_RELAY_DEFAULT_FLUSH_MS 5000u
/* The backlog warning comes at a tenth of each bound: 100,000 payloads by
 * default, upstream's own warning threshold. */
#define MST_RELAY_WARN_FRACTION 10u

/* Tuning; 0 in any field means its default above. */
typedef struct mst_otlp_relay_options {
    uint64_t queue_max_bytes;   /* payload bytes + per-item overhead */
    uint32_t queue_max_items;
    uint32_t batch_max_items;
    uint32_t batch_max_bytes;
    uint32_t backoff_min_ms;    /* first wait after a failed batch */
    uint32_t backoff_max_ms;    /* cap of the doubling */
    uint32_t flush_timeout_ms;  /* at stop: time allowed to flush the queue */
    uint32_t warn_queued_items; /* warn once when the queue reaches this;  */
                                /* 0 or not below queue_max_items: a tenth */
} mst_otlp_relay_options;

typedef struct mst_otlp_relay_stats {
    uint64_t received;          /* payloads handed to the relay */
    uint64_t rejected;          /* failed validation */
    uint64_t spans_received;    /* spans in accepted payloads */
    uint64_t forwarded;         /* payloads the collector accepted */
    uint64_t spans_forwarded;   /* their spans minus partial-success rejections */
    uint64_t spans_refused;     /* partial_success.rejected_spans from upstream */
    uint64_t dropped_full;      /* payloads dropped: queue full (or no memory) */
    uint64_t spans_dropped;     /* spans of dropped_full + lost_at_exit */
    uint64_t failed;            /* payloads refused upstream (non-retryable) */
    uint64_t spans_failed;
    uint64_t lost_at_exit;      /* payloads still queued when the flush ran out */
    uint64_t retries;           /* transport retries + relay re-sends */
    uint64_t send_errors;       /* upstream sends that failed (kept for retry) */
    uint64_t batches;           /* successful upstream requests */
    uint64_t queued;            /* payloads waiting right now */
    uint64_t queued_bytes;
} mst_otlp_relay_stats;

typedef struct mst_otlp_relay mst_otlp_relay;

/* The upstream settings from the environment (docs/relay.md):
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as-is) or OTEL_EXPORTER_OTLP_ENDPOINT
 * (required otherwise), OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL (required:
 * http/protobuf or grpc), an http(s) URL with an explicit port. For
 * http/protobuf a generic endpoint already ending in /v1/traces is kept,
 * else /v1/traces is appended. Headers, timeout and compression follow the
 * standard variables (mst_otlp_config_from_env). On error: a message naming
 * the variable in err. */
mst_status mst_otlp_relay_config_from_env(mst_otlp_config *cfg, char *err, size_t err_size);

/* Creates the relay (nothing runs yet: the sender thread is started by the
 * service's open()). opts may be NULL. */
mst_status mst_otlp_relay_create(const mst_otlp_config *cfg, const mst_otlp_relay_options *opts,
                                 mst_otlp_relay **out);

/* Fills svc with the relay's callbacks (svc->self = relay). */
void mst_otlp_relay_service(mst_otlp_relay *relay, mst_daemon_service *svc);

/* The frame callback (epoll thread). */
void mst_otlp_relay_on_frame(void *relay, const uint8_t *payload, size_t len, uint64_t conn_id);

void mst_otlp_relay_get_stats(mst_otlp_relay *relay, mst_otlp_relay_stats *out);

/* Frees the relay (close it first through the service). NULL is fine. */
void mst_otlp_relay_destroy(mst_otlp_relay *relay);

#endif /* MST_RELAY_OTLP_RELAY_H */
