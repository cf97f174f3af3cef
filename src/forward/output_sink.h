/*
 * output_sink.h — the one interface every output of the Perfetto forwarder
 * implements (docs/architecture.md "Flight recorder"): the Chrome Trace
 * JSON writer and the native .pftrace writer (adapters in writer_sinks.c)
 * and the flight recorder's ring (flight_sink.c). perfetto_sink.c holds an
 * array of these and calls every entry the same way, so a new output is a
 * new file that fills this table and touches no other output.
 *
 * Threads: every function of one sink is called from one thread at a time
 * (the formatting thread while it runs, then the loop's thread at close).
 */
#ifndef MST_FORWARD_OUTPUT_SINK_H
#define MST_FORWARD_OUTPUT_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forward/chrome_trace.h" /* mst_chrome_stats: the counters every output reports */
#include "forward/out_queue.h"    /* mst_outq_stats */
#include "forward/timeline.h"     /* mst_tl_counter */
#include "wire/perfetto_packet.h"

typedef enum mst_perfetto_format {
    MST_PERFETTO_FORMAT_AUTO = 0,  /* from the extension: .pftrace = proto, else JSON */
    MST_PERFETTO_FORMAT_JSON,
    MST_PERFETTO_FORMAT_PROTO
} mst_perfetto_format;

typedef struct mst_output_sink_ops {
    /* One decoded span. MST_ERR_QUEUE_FULL: dropped and counted by the
     * output itself (spans_dropped); other errors: not taken, the caller
     * counts it. */
    mst_status (*add_span)(void *self, const mst_pf_span *span);
    /* One counter sample (c->name a static string). */
    void (*add_counter)(void *self, const mst_tl_counter *c);
    /* The forwarder's own counters (spans received / written / dropped). */
    void (*add_forwarder_counters)(void *self, int64_t ts_ns, uint64_t received,
                                   uint64_t written, uint64_t dropped);
    /* The forwarder's monotonic clock advanced (timeline.h). Returns 1 while
     * the output wants to be ticked again within a second or so, else 0. */
    int (*tick)(void *self, uint64_t now_ms);
    /* Hands buffered output to the output's own thread if it is idle;
     * returns 1 when output stays buffered (call again soon), else 0. */
    int (*handoff)(void *self);
    /* At the stop: completes everything still open and flushes. */
    mst_status (*finish)(void *self);
    void (*get_stats)(const void *self, mst_chrome_stats *out);
    /* A file writer's output-queue counters as of now (what is in the
     * file), from any thread while it is open; false when the output has
     * none. NULL: none. */
    bool (*get_disk_stats)(const void *self, struct mst_outq_stats *out);
    /* Appends " name=value ..." details of this output for the stats line
     * (may append nothing). */
    void (*describe)(const void *self, char *buf, size_t size);
    /* The output's own accounting identity as "name=N = a=N + b=N" (for the
     * final accounting line); false when it does not add up. NULL: none. */
    bool (*identity)(const void *self, char *buf, size_t size);
    /* On demand (`mstrace trigger`, SIGUSR2): the output's snapshot, if it
     * has one (the flight recorder dumps its ring). NULL: nothing to do. */
    void (*on_demand)(void *self);
    /* Closes and frees; *final (may be NULL) gets the counters after it. */
    mst_status (*close)(void *self, mst_chrome_stats *final);
} mst_output_sink_ops;

typedef struct mst_output_sink {
    const mst_output_sink_ops *ops;
    void *self;
} mst_output_sink;

#endif /* MST_FORWARD_OUTPUT_SINK_H */
