/*
 * otlp_exporter.c — mst_otlp_exporter_create: the mst_exporter that sends
 * spans to an OTLP collector (Jaeger, an OTel collector) the way vLLM's own
 * exporter does (docs/configuration.md, docs/reference/otlp.md), so hook spans land next to vLLM's spans.
 *
 * A batch is encoded once (protobuf for grpc and http/protobuf, OTLP/JSON for
 * http/json) into a buffer reused across batches, then handed to the
 * transport (otlp_transport.c), which owns keep-alive, gzip, retries and
 * the timeout budget. The exporter runs on the pipeline's exporter thread
 * only, so producers never wait on the network; counters are atomics only
 * because get_stats may be called from any thread.
 *
 * Counting rule (exact): every span handed to export_batch ends up in
 * exactly one of spans_exported (the collector accepted it), spans_rejected
 * (the collector answered success but listed it in
 * partial_success.rejected_spans) or spans_failed (its whole batch was not
 * delivered: encoding error, non-retryable status, retries or timeout used
 * up, cancelled). A partially accepted batch counts as batches_ok (it was
 * answered and is never retried) but export_batch returns MST_ERR_REJECTED
 * for it, so the tracer, which counts whole batches, does not report the
 * rejected spans as exported (see mst_exporter_stats in mstrace.h).
 *
 * Cancel (tracer shutdown out of time): the exporter owns the transport's
 * cancel flag; otlp_cancel sets it from the shutdown thread, the send in
 * flight returns MST_ERR_CLOSED and the batch counts as failed.
 *
 * Resource: the tracer's, read through the spans of each batch
 * (mst_span_resource); the exporter builds none of its own.
 *
 * fork(): the child gets zeroed counters (they describe this process) and a
 * fresh CURL handle made lazily on its first export (its spans carry the
 * resource the tracer rebuilt with the child's pid); the inherited handle is abandoned without touching
 * the parent's connection (see otlp_transport.c).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/resource.h"
#include "core/tracer.h"
#include "otlp/otlp_transport.h"
#include "wire/buf.h"
#include "wire/otlp.h"

#define BODY_MAX_BYTES (64u << 20) /* 512 full-size spans fit many times over */

typedef struct otlp_exporter {
    mst_exporter base; /* first: the pipeline sees only this */
    mst_otlp_config cfg;
    mst_otlp_transport *transport;
    mst_buf body;
    mst_exporter_counters counters; /* read by get_stats from any thread */
    atomic_bool cancel; /* the transport's cancel flag: set by otlp_cancel */
} otlp_exporter;

static const mst_exporter_ops k_otlp_ops;

static otlp_exporter *as_otlp(mst_exporter *exp) {
    return exp && exp->ops == &k_otlp_ops ? (otlp_exporter *)exp : NULL;
}

static mst_status encode(otlp_exporter *x, const mst_span *const *spans, size_t n) {
    mst_buf_reset(&x->body);
    /* The tracer's resource, through the spans (one tracer per batch). */
    const mst_resource *res = mst_span_resource(spans[0]);
    if (!res) {
        MST_WARN("OTLP exporter: resource attributes unavailable");
        return MST_ERR_INTERNAL;
    }
    if (x->cfg.protocol == MST_OTLP_HTTP_JSON)
        return mst_otlp_encode_json(res, spans, n, &x->body);
    return mst_otlp_encode_proto(res, spans, n, &x->body);
}

static mst_status otlp_export_batch(mst_exporter *self, const mst_span *const *spans, size_t n) {
    otlp_exporter *x = as_otlp(self);
    if (!x || (!spans && n)) return MST_ERR_INVALID_ARG;
    if (n == 0) return MST_OK;
    mst_status st = encode(x, spans, n);
    if (st == MST_OK && x->body.failed) st = MST_ERR_NOMEM;
    if (st != MST_OK) {
        MST_WARN("OTLP exporter: encoding %zu span(s) failed: %s", n, mst_strerror(st));
        mst_exporter_counters_batch_failed(&x->counters, n);
        return st;
    }
    mst_otlp_send_result r;
    st = mst_otlp_transport_send(x->transport, x->body.data, x->body.len, &r);
    mst_counter_add(&x->counters.retries, r.retries);
    if (st != MST_OK) {
        mst_exporter_counters_batch_failed(&x->counters, n);
        return st;
    }
    uint64_t rejected = r.rejected_spans > 0 ? (uint64_t)r.rejected_spans : 0;
    if (rejected > n) rejected = n; /* a collector cannot reject more than it got */
    mst_exporter_counters_batch_ok(&x->counters, n - rejected, rejected);
    /* Not MST_OK: the tracer counts a batch all-or-nothing, and rejected
     * spans must not appear there as exported. Never retried either way. */
    return rejected ? MST_ERR_REJECTED : MST_OK;
}

/* Tracer shutdown out of time: the send in flight returns MST_ERR_CLOSED
 * within about a second, later sends at once (counted failed). */
static void otlp_cancel(mst_exporter *self) {
    otlp_exporter *x = as_otlp(self);
    if (x) atomic_store_explicit(&x->cancel, true, memory_order_release);
}

static void otlp_after_fork_child(mst_exporter *self) {
    otlp_exporter *x = as_otlp(self);
    if (!x) return;
    atomic_store(&x->cancel, false); /* a shutdown in the parent is not the child's */
    mst_otlp_transport_after_fork_child(x->transport);
    mst_exporter_counters_reset(&x->counters);
}

static void otlp_get_stats(mst_exporter *self, mst_exporter_stats *out) {
    otlp_exporter *x = as_otlp(self);
    if (!out) return;
    if (x) mst_exporter_counters_read(&x->counters, out);
    else memset(out, 0, sizeof *out);
}

static void otlp_destroy(mst_exporter *self) {
    otlp_exporter *x = as_otlp(self);
    if (!x) return;
    mst_otlp_transport_destroy(x->transport);
    mst_buf_free(&x->body);
    free(x);
}

static const mst_exporter_ops k_otlp_ops = {
    .name = "otlp",
    .export_batch = otlp_export_batch,
    .flush = NULL, /* nothing is buffered between batches */
    .after_fork_child = otlp_after_fork_child,
    .get_stats = otlp_get_stats,
    .destroy = otlp_destroy,
    .cancel = otlp_cancel,
};

mst_status mst_otlp_exporter_create(const mst_otlp_config *cfg, mst_exporter **out) {
    if (!cfg || !out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    otlp_exporter *x = calloc(1, sizeof *x);
    if (!x) return MST_ERR_NOMEM;
    x->base.ops = &k_otlp_ops;
    x->cfg = *cfg;
    mst_buf_init(&x->body, BODY_MAX_BYTES);
    mst_status st = mst_otlp_transport_create(cfg, &x->transport);
    if (st != MST_OK) {
        mst_buf_free(&x->body);
        free(x);
        return st;
    }
    atomic_init(&x->cancel, false);
    mst_otlp_transport_set_cancel(x->transport, &x->cancel);
    static const char *const names[] = {"grpc", "http/protobuf", "http/json"};
    MST_DEBUG("OTLP exporter: %s to %s (timeout %u ms%s)", names[cfg->protocol], cfg->endpoint,
              cfg->timeout_ms, cfg->gzip ? ", gzip" : "");
    *out = &x->base;
    return MST_OK;
}
