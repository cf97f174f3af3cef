/*
 * perfetto_sink.h — the Perfetto mode of `mstrace forward` (docs/forwarder.md):
 * each frame payload is decoded as one hook span packet and handed to the
 * outputs, each an implementation of output_sink.h: a file writer of the
 * chosen format (Chrome Trace JSON or native Perfetto protobuf, through
 * writer_sinks.h), optionally a second one of the other format, or the
 * flight recorder (flight_sink.h). Bad packets are counted and
 * logged (rate-limited); they never close the connection or harm the output.
 * About once a second (and at close) the forwarder's own counters (spans
 * received / written / dropped) are added to the timeline.
 *
 * Flush policy: the events of every batch of readiness events are handed
 * to the Chrome writer's thread, which writes them (valid JSON after each
 * write) while the next batch is decoded; when that thread is still busy
 * they stay buffered and are handed over as soon as it is idle (the loop
 * checks every few ms), so bursts become large writes.
 */
#ifndef MST_FORWARD_PERFETTO_SINK_H
#define MST_FORWARD_PERFETTO_SINK_H

#include "forward/daemon.h"
#include "forward/flight_sink.h"
#include "forward/output_sink.h"
#include "forward/writer_sinks.h"

typedef struct mst_perfetto_sink mst_perfetto_sink;

/* Allocates a sink for `output_path`; the file is opened by the service's
 * open() (after the socket is bound). */
mst_status mst_perfetto_sink_create(const char *output_path, mst_perfetto_format format,
                                    mst_perfetto_sink **out);

/* Adds a second output of the other format (its format from its
 * extension), so one run writes the same spans as JSON and as .pftrace.
 * MST_ERR_INVALID_ARG when one was added already or the formats match. */
mst_status mst_perfetto_sink_add_output(mst_perfetto_sink *sink, const char *path);

/* Flight-recorder mode (docs/forwarder.md "Flight recorder"): the output
 * path becomes the template of the dumps' names and nothing is written
 * until a trigger fires. `opts` must outlive the sink. Not with a second
 * output. */
void mst_perfetto_sink_set_flight(mst_perfetto_sink *sink, const mst_flight_options *opts);

/* Fills `svc` with the sink's callbacks (svc->self = sink); call it after
 * mst_perfetto_sink_set_flight (on_demand is set only in that mode). */
void mst_perfetto_sink_service(mst_perfetto_sink *sink, mst_daemon_service *svc);

/* The frame callback (also usable directly, e.g. by fuzz targets). */
void mst_perfetto_sink_on_frame(void *sink, const uint8_t *payload, size_t len, uint64_t conn_id);

/* Frees the sink (close it first through the service). NULL is fine. */
void mst_perfetto_sink_destroy(mst_perfetto_sink *sink);

#endif /* MST_FORWARD_PERFETTO_SINK_H */
