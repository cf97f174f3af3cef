/* observer_exporter.c — the tests' observing exporter (observer_exporter.h). */
#include "observer_exporter.h"

#include <stdio.h>
#include <string.h>

#include "export/forward_client.h"

static mst_status obs_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    mst_test_observer *o = (mst_test_observer *)self;
    atomic_fetch_add(&o->handed, n);
    mst_status st = o->inner->ops->export_batch(o->inner, spans, n);
    atomic_store(&o->last_status, (int)st);
    atomic_fetch_add(&o->batches, 1);
    return st;
}

static void obs_cancel(mst_exporter *self) {
    mst_test_observer *o = (mst_test_observer *)self;
    atomic_fetch_add(&o->cancels, 1);
    if (o->inner->ops->cancel) o->inner->ops->cancel(o->inner);
}

/* Called by mst_tracer_shutdown after it counted the queue's leftovers as
 * failed: the tracer's counters are final here. */
static void obs_destroy(mst_exporter *self) {
    mst_test_observer *o = (mst_test_observer *)self;
    mst_exporter_get_stats(o->inner, &o->final);
    if (o->tracer) mst_tracer_get_stats(o->tracer, &o->tracer_final);
    o->inner->ops->destroy(o->inner);
    o->destroyed = true;
}

static const mst_exporter_ops obs_ops = {
    .name = "observer", .export_batch = obs_export, .destroy = obs_destroy, .cancel = obs_cancel};

void mst_test_observer_init(mst_test_observer *o, mst_exporter *inner, mst_tracer *tracer) {
    memset(o, 0, sizeof *o);
    o->base.ops = &obs_ops;
    o->inner = inner;
    o->tracer = tracer;
    atomic_store(&o->last_status, -1);
}

mst_tracer *mst_test_forward_tracer(const char *socket_name, uint32_t send_budget_ms, uint32_t retry_interval_ms,
                                    mst_test_observer *o) {
    mst_tracer_options opts = {.max_queue_size = 1u << 16, .max_export_batch_size = 512,
                               .schedule_delay_ms = 600000};
    mst_tracer *t;
    mst_exporter *fwd;
    if (mst_tracer_create(&opts, &t) != MST_OK) return NULL;
    if (mst_forward_exporter_create(socket_name, &fwd) != MST_OK) {
        mst_tracer_shutdown(t, 1000);
        return NULL;
    }
    mst_forward_exporter_set_send_budget_ms(fwd, send_budget_ms);
    if (retry_interval_ms) mst_forward_exporter_set_retry_interval_ms(fwd, retry_interval_ms);
    mst_test_observer_init(o, fwd, t);
    if (mst_tracer_add_exporter(t, &o->base) != MST_OK) { /* the tracer owns `o` even then */
        mst_tracer_shutdown(t, 1000);
        return NULL;
    }
    return t;
}

bool mst_test_warmup_reached(mst_tracer *t, const mst_test_observer *o) {
    if (mst_tracer_flush(t, 60000) == MST_OK && atomic_load(&o->last_status) == MST_OK) return true;
    fprintf(stderr, "the warm-up spans did not reach the forwarder\n");
    mst_tracer_shutdown(t, 1000);
    return false;
}
