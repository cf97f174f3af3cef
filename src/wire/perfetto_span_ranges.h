/*
 * perfetto_span_ranges.h — the value ranges a decoded hook span must be in
 * so both forwarder outputs hold it alike (Chrome Trace JSON prints any
 * int64; a .pftrace timestamp is a uint64 and a process/thread descriptor
 * holds an int32): start_time_ns / end_time_ns not negative (then a
 * duration end - start cannot overflow int64 either), an integer
 * process.pid / thread.id 0..INT32_MAX. One rule for both decoders (the
 * fast path declines such a span; the general decoder rejects it with the
 * reason), so no value is ever wrapped on its way into a file.
 */
#ifndef MST_WIRE_PERFETTO_SPAN_RANGES_H
#define MST_WIRE_PERFETTO_SPAN_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/perfetto_packet_types.h"

/* True when every value of s is in range. Inline: the decoder's fast path
 * runs it on every packet. */
static inline bool mst_pf_span_in_range(const mst_pf_span *s) {
    return s->start_ns >= 0 && s->end_ns >= 0 &&
           (!s->has_pid || (s->pid >= 0 && s->pid <= INT32_MAX)) &&
           (!s->has_tid || (s->tid >= 0 && s->tid <= INT32_MAX)) &&
           s->request_links >= 0 && (uint64_t)s->request_links <= s->n_links;
}

/* The request id stream fields (mst_pf_span.ids_*): neither, or both with
 * ids_stream 0..INT32_MAX and ids_seq >= 1 on a span whose attributes hold
 * request.ids — a list ('[') in a V1 packet, a change object ('{') in a
 * MSPF_PERFETTO_V2 one, which must have them. Sets ids_attr. False with a
 * one-line reason in err (may be NULL). Both decoders run it last. */
bool mst_pf_span_check_ids(mst_pf_span *s, char *err, size_t err_size);

/* mst_pf_span_in_range, and when false a one-line reason naming the field
 * and its value in err (may be NULL). */
bool mst_pf_span_check_ranges(const mst_pf_span *s, char *err, size_t err_size);

#endif /* MST_WIRE_PERFETTO_SPAN_RANGES_H */
