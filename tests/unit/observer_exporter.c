/* observer_exporter.c — the tests' observing exporter (observer_exporter.h). */
#include "observer_exporter.h"

#include <string.h>

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
