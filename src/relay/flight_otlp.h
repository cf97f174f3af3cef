/*
 * flight_otlp.h — the flight recorder's decision sent to a collector
 * (Jaeger): an output (output_sink.h) that encodes each span it is given
 * as an OTLP ExportTraceServiceRequest and queues it on an OTLP relay
 * (otlp_relay.h: bounded queue, sender thread, retries, exact counts) bound
 * for OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT. The flight recorder hands it the
 * spans of each triggered dump (the request's and every step's that carried
 * it, each step span once), so a kept request's links resolve in Jaeger.
 *
 * Why in the relay's library: it needs libmstrace_otlp (the transport);
 * the Perfetto-only forwarder sees it only through the output interface.
 *
 * Threads: add_span from one thread (the formatting thread); the relay's
 * sender thread does the network.
 */
#ifndef MST_RELAY_FLIGHT_OTLP_H
#define MST_RELAY_FLIGHT_OTLP_H

#include <stddef.h>

#include "forward/output_sink.h"
#include "wire/buf.h"

/* Reads the collector settings from the environment (as the relay,
 * docs/relay.md) and starts the sender. On error: status and a one-line
 * message naming the variable. */
mst_status mst_flight_otlp_open(mst_output_sink *out, char *err, size_t err_size);

/* Appends one ExportTraceServiceRequest holding `span` (resource from its
 * resource attributes, scope from its category) to `out`. Exported for the
 * tests. */
mst_status mst_flight_otlp_encode(const mst_pf_span *span, mst_arena *arena, mst_buf *out);

#endif /* MST_RELAY_FLIGHT_OTLP_H */
