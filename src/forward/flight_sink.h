/*
 * flight_sink.h — `mstrace forward --flight-recorder`: an output
 * (output_sink.h) that writes nothing while spans flow. It keeps the last
 * SIZE bytes / DURATION of decoded spans and counter samples in memory
 * (flight_ring.h), follows every request through the shared timeline model
 * (timeline.h), and when a trigger fires (flight_trigger.h; a request over
 * an SLO, a span with status ERROR, or on demand) writes a dump
 * (flight_dump.h): the triggering requests' spans, every engine step that
 * carried them, the counters over their lifetime, within a budget of dumps
 * per minute and of disk.
 *
 * Why a request fires only when the timeline completes it: the engine's
 * spans of a request come from other processes whose exporters batch for
 * seconds; the timeline's grace period (MST_TL_REQUEST_GRACE_MS) is the
 * moment its steps are in the ring.
 *
 * Threads: as every output (output_sink.h).
 */
#ifndef MST_FORWARD_FLIGHT_SINK_H
#define MST_FORWARD_FLIGHT_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "forward/flight_trigger.h"
#include "forward/output_sink.h"

#define MST_FLIGHT_DEFAULT_RING_BYTES (256ull << 20)
#define MST_FLIGHT_DEFAULT_DUMPS_PER_MIN 6
#define MST_FLIGHT_DEFAULT_DISK_BUDGET (1ull << 30)

typedef struct mst_flight_options {
    uint64_t ring_bytes;         /* 0: MST_FLIGHT_DEFAULT_RING_BYTES */
    int64_t ring_duration_ns;    /* 0: no age bound */
    mst_flight_trigger triggers[MST_FLIGHT_MAX_TRIGGERS];
    size_t n_triggers;
    uint32_t max_dumps_per_min;  /* 0: MST_FLIGHT_DEFAULT_DUMPS_PER_MIN */
    uint64_t disk_budget;        /* bytes of dumps kept in the directory; 0: default */
    int64_t margin_ns;           /* also every span within +- this of the request (0: none) */
    /* Also sends each triggered dump's spans here (flight_otlp.h: to a
     * collector), each span once; NULL: files only. Owned by the caller,
     * open for the recorder's life. */
    const mst_output_sink *export_to;
    /* With export_to: also 1 in this many ordinary requests (by a hash of
     * the request id), with their steps, to the collector; 0: none. */
    uint32_t baseline_n;
} mst_flight_options;

/* Opens the flight recorder; `path` is the template of the dump names
 * (flight_dump.h) and `format` their format. On error: status and a
 * one-line message. */
mst_status mst_flight_sink_open(const char *path, mst_perfetto_format format,
                                const mst_flight_options *opts, mst_output_sink *out, char *err,
                                size_t err_size);

#endif /* MST_FORWARD_FLIGHT_SINK_H */
