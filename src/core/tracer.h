/*
 * tracer.h — internals of a pipeline (mst_tracer), shared by tracer.c (which
 * runs it) and span.c (whose hot path feeds it).
 *
 * A tracer owns: the bounded span queue, a pool of recycled span records
 * (so a span costs no malloc in steady state and RSS stays flat), the
 * exporters, one lazily started exporter thread, the resource, interned
 * scopes, the sampling plan and exact counters. Producer-side counters are sharded per thread
 * group on separate cache lines so two threads never fight over one line;
 * exporter-side counters are written only by the exporter thread.
 */
#ifndef MST_CORE_TRACER_H
#define MST_CORE_TRACER_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/queue.h"
#include "core/resource.h"
#include "core/sampler.h"
#include "core/span.h"

#define MST_TRACER_SHARDS 16
#define MST_TRACER_MAX_EXPORTERS 16

typedef struct mst_tracer_shard {
    _Alignas(64) _Atomic uint64_t started;
    _Atomic uint64_t ended;
    _Atomic uint64_t dropped;   /* queue full, or ended after shutdown */
    _Atomic uint64_t filtered;  /* export_errors_only, or discarded */
    _Atomic uint64_t unsampled; /* starts refused by the sampler */
} mst_tracer_shard;

enum { MST_THREAD_NONE = 0, MST_THREAD_RUNNING = 1, MST_THREAD_FAILED = 2 };

struct mst_tracer {
    mst_tracer_options opts;
    mst_sampler sampler;         /* read-only after create (span.c) */
    mst_queue queue;             /* ended spans waiting for export */
    mst_queue pool;              /* free span records for reuse */
    _Atomic int closed;          /* shutdown started: no new spans */
    _Atomic int thread_state;    /* MST_THREAD_* */
    _Atomic int sleeping;        /* exporter thread waits on `wake` */
    _Atomic int fork_pending;    /* child: exporters need after_fork_child */
    _Atomic int abandon;         /* shutdown timed out: stop exporting */
    mst_tracer_shard shards[MST_TRACER_SHARDS];
    _Alignas(64) _Atomic uint64_t exported;
    _Atomic uint64_t failed;
    _Atomic uint64_t batches;
    _Atomic uint64_t completed;  /* queue positions fully processed */
    /* Guarded by mu: */
    pthread_mutex_t mu;
    pthread_cond_t wake;         /* producers/flush -> exporter thread */
    pthread_cond_t done;         /* exporter thread -> flush waiters */
    uint64_t flush_req, flush_seen;
    uint32_t flush_timeout_ms;
    bool stop;
    pthread_t thread;
    /* Exporters: slots never move; n_exporters published with release. */
    mst_exporter *exporters[MST_TRACER_MAX_EXPORTERS];
    _Atomic size_t n_exporters;
    const mst_span **batch;      /* the exporter thread's batch buffer */
    pthread_mutex_t scope_mu;
    mst_scope *scopes;
    mst_resource resource;
    struct mst_tracer *reg_next; /* the process-wide list used at fork */
};

/* The tracer's resource (valid until shutdown). */
const mst_resource *mst_tracer_resource(const struct mst_tracer *tracer);
/* The resource a built-in exporter encodes `span` with: the resource of the
 * tracer that recorded it (built once per tracer, rebuilt once in a forked
 * child by the tracer's fork handler); for a span no tracer recorded,
 * mst_resource_untraced(). The spans of one batch come from one tracer, so
 * an exporter asks once per batch. NULL only when the untraced resource
 * cannot be built. */
MST_SHARED_INTERNAL const mst_resource *mst_span_resource(const mst_span *span);

/* Spans the tracer that recorded `span` dropped so far (queue full, or
 * ended after shutdown); 0 for a span no tracer recorded. For an exporter
 * that reports its process's loss downstream (forward_client.c). */
uint64_t mst_span_tracer_dropped(const mst_span *span);

/* The calling thread's counter shard. */
mst_tracer_shard *mst_tracer_my_shard(mst_tracer *t);

static inline bool mst_tracer_is_closed(const mst_tracer *t) {
    return atomic_load_explicit(&((mst_tracer *)t)->closed, memory_order_acquire) != 0;
}

/* A span record from the pool, else malloc'd; NULL when out of memory.
 * Nothing in it is initialised. */
mst_span *mst_tracer_span_alloc(mst_tracer *t);
/* Releases the span's arena and returns the record to the pool (or frees). */
void mst_tracer_span_free(mst_tracer *t, mst_span *s);
/* Counts a start before the span touches the pipeline; false (nothing
 * counted) when the tracer is closed. Pair a later failure to allocate
 * with mst_tracer_span_enter_failed. */
bool mst_tracer_span_enter(mst_tracer *t);
void mst_tracer_span_enter_failed(mst_tracer *t);
/* Called once a span is set up: starts the exporter thread on the first
 * span. */
void mst_tracer_span_started(mst_tracer *t);
/* A start refused by the sampler: counts it (nothing else exists). */
void mst_tracer_count_unsampled(mst_tracer *t);
/* mst_span_end's hand-off: counts, filters, queues or drops; never blocks. */
void mst_tracer_submit(mst_tracer *t, mst_span *s);
/* mst_span_discard: counts ended + filtered and frees. */
void mst_tracer_discard(mst_tracer *t, mst_span *s);

#endif /* MST_CORE_TRACER_H */
