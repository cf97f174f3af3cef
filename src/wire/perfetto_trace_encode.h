/*
 * perfetto_trace_encode.h — owns the byte layout of Perfetto's native trace
 * format (the `perfetto.protos.Trace` message: a stream of `TracePacket`s),
 * written on the protobuf writer in pb_writer.h. Field numbers are those of
 * Perfetto's published protos (protos/perfetto/trace/trace_packet.proto,
 * track_event/track_event.proto, track_descriptor.proto,
 * debug_annotation.proto, interned_data.proto, clock_snapshot.proto).
 *
 * Every function appends one whole `Trace.packet` field (tag 1 + length +
 * TracePacket), or one piece of the packet opened by mst_pft_packet_begin,
 * so a file made of such records, cut after any complete record, is still a
 * valid Trace. Interning policy (which names get which ids, when state is
 * cleared) belongs to the caller (forward/pftrace_writer.c); this file only
 * lays out the bytes. Error model: as mst_buf (check buf->failed once).
 */
#ifndef MST_WIRE_PERFETTO_TRACE_ENCODE_H
#define MST_WIRE_PERFETTO_TRACE_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/pb_writer.h"

/* The one packet sequence the forwarder writes. */
#define MST_PFT_SEQUENCE_ID 1u

/* TracePacket.sequence_flags */
enum {
    MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED = 1,
    MST_PFT_SEQ_NEEDS_INCREMENTAL_STATE = 2
};

/* TrackEvent.Type */
enum {
    MST_PFT_SLICE_BEGIN = 1,
    MST_PFT_SLICE_END = 2,
    MST_PFT_INSTANT = 3,
    MST_PFT_COUNTER = 4
};

/* InternedData fields, used as the `kind` of an interned entry. */
enum {
    MST_PFT_INTERN_CATEGORY = 1,       /* event_categories */
    MST_PFT_INTERN_EVENT_NAME = 2,     /* event_names */
    MST_PFT_INTERN_ANNOTATION_NAME = 3, /* debug_annotation_names */
    MST_PFT_INTERN_STRING_VALUE = 29    /* debug_annotation_string_values */
};
/* Largest interned-data kind above, for tables indexed by kind. */
#define MST_PFT_INTERN_KINDS 30

/* First packet of the trace: a clock snapshot that maps BOOTTIME (the
 * default clock of track events) 1:1 onto REALTIME and makes REALTIME the
 * trace's clock, so every timestamp written is the spans' own Unix-epoch
 * nanoseconds. Also clears the sequence's incremental state. */
void mst_pft_clock_snapshot(mst_buf *b, uint64_t ts_ns);

/* TrackDescriptor packets. Names are UTF-8 (invalid bytes are replaced). */
void mst_pft_process_track(mst_buf *b, uint64_t uuid, int32_t pid, const char *name, size_t n);
void mst_pft_thread_track(mst_buf *b, uint64_t uuid, int32_t pid, int32_t tid, const char *name,
                          size_t n);
/* A plain named track; parent_uuid 0 = top level. `rank` is this track's
 * sibling_order_rank; with rank 0 the track instead asks the UI to order
 * its own children chronologically (the Requests track: by arrival). */
void mst_pft_named_track(mst_buf *b, uint64_t uuid, uint64_t parent_uuid, const char *name,
                         size_t n, int32_t rank);
/* A counter track under parent_uuid (a process track for per-engine
 * counters). */
void mst_pft_counter_track(mst_buf *b, uint64_t uuid, uint64_t parent_uuid, const char *name,
                           size_t n);

/* ---- a TracePacket holding one TrackEvent, built piece by piece ---- */

typedef struct mst_pft_event {
    mst_pb_mark packet;
    mst_pb_mark interned;   /* open InternedData (body 0 = none open) */
    mst_pb_mark event;      /* open TrackEvent (body 0 = not yet) */
} mst_pft_event;

/* Opens Trace.packet with timestamp, sequence id and flags. */
void mst_pft_event_open(mst_buf *b, mst_pft_event *e, uint64_t ts_ns, uint32_t seq_flags);
/* Interned entries must come before mst_pft_event_track (they are written
 * into the packet's InternedData). */
void mst_pft_event_intern(mst_buf *b, mst_pft_event *e, unsigned kind, uint64_t iid,
                          const char *s, size_t n);
/* Opens the TrackEvent: type and track. */
void mst_pft_event_track(mst_buf *b, mst_pft_event *e, unsigned type, uint64_t track_uuid);
static inline void mst_pft_event_name_iid(mst_buf *b, uint64_t iid) {
    mst_pb_field_varint(b, 10, iid);
}
static inline void mst_pft_event_name(mst_buf *b, const char *s, size_t n) {
    mst_pb_field_string(b, 23, s, n);
}
static inline void mst_pft_event_category_iid(mst_buf *b, uint64_t iid) {
    mst_pb_field_varint(b, 3, iid);
}
static inline void mst_pft_event_flow_id(mst_buf *b, uint64_t id) {
    mst_pb_field_fixed64(b, 47, id);
}
static inline void mst_pft_event_counter_int(mst_buf *b, int64_t v) {
    mst_pb_field_varint(b, 30, (uint64_t)v);
}
static inline void mst_pft_event_counter_double(mst_buf *b, double v) {
    mst_pb_field_double(b, 44, v);
}

/* DebugAnnotation values (name by interned id). */
void mst_pft_annotation_string(mst_buf *b, uint64_t name_iid, const char *s, size_t n);
/* A string value by its interned id (MST_PFT_INTERN_STRING_VALUE). */
void mst_pft_annotation_string_iid(mst_buf *b, uint64_t name_iid, uint64_t value_iid);
void mst_pft_annotation_int(mst_buf *b, uint64_t name_iid, int64_t v);
void mst_pft_annotation_double(mst_buf *b, uint64_t name_iid, double v);
void mst_pft_annotation_bool(mst_buf *b, uint64_t name_iid, bool v);
/* A JSON text shown as is (arrays, objects, null). */
void mst_pft_annotation_json(mst_buf *b, uint64_t name_iid, const char *s, size_t n);

/* Closes the TrackEvent (opening an empty one if none) and the packet. */
void mst_pft_event_close(mst_buf *b, mst_pft_event *e);

#endif /* MST_WIRE_PERFETTO_TRACE_ENCODE_H */
