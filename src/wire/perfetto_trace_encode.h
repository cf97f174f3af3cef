/*
 * perfetto_trace_encode.h — owns the byte layout of Perfetto's native trace
 * format (the `perfetto.protos.Trace` message: a stream of `TracePacket`s),
 * written on the protobuf writer in pb_writer.h. Field numbers and enum
 * values come from perfetto_trace_fields.h (Perfetto's published protos).
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
#include "wire/perfetto_trace_fields.h"

/* The one packet sequence the forwarder writes. */
#define MST_PFT_SEQUENCE_ID 1u

/* TracePacket.sequence_flags */
enum {
    MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED = SEQ_INCREMENTAL_STATE_CLEARED,
    MST_PFT_SEQ_NEEDS_INCREMENTAL_STATE = SEQ_NEEDS_INCREMENTAL_STATE
};

/* TrackEvent.Type */
enum {
    MST_PFT_SLICE_BEGIN = TYPE_SLICE_BEGIN,
    MST_PFT_SLICE_END = TYPE_SLICE_END,
    MST_PFT_INSTANT = TYPE_INSTANT,
    MST_PFT_COUNTER = TYPE_COUNTER
};

/* InternedData fields, used as the `kind` of an interned entry. */
enum {
    MST_PFT_INTERN_CATEGORY = IN_EVENT_CATEGORIES,
    MST_PFT_INTERN_EVENT_NAME = IN_EVENT_NAMES,
    MST_PFT_INTERN_ANNOTATION_NAME = IN_ANNOTATION_NAMES,
    MST_PFT_INTERN_STRING_VALUE = IN_STRING_VALUES
};
/* One more than the largest interned-data kind above, for tables indexed
 * by kind. */
#define MST_PFT_INTERN_KINDS (IN_STRING_VALUES + 1)

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
    mst_pb_field_varint(b, TE_NAME_IID, iid);
}
static inline void mst_pft_event_name(mst_buf *b, const char *s, size_t n) {
    mst_pb_field_string(b, TE_NAME, s, n);
}
static inline void mst_pft_event_category_iid(mst_buf *b, uint64_t iid) {
    mst_pb_field_varint(b, TE_CATEGORY_IIDS, iid);
}
static inline void mst_pft_event_flow_id(mst_buf *b, uint64_t id) {
    mst_pb_field_fixed64(b, TE_FLOW_IDS, id);
}
static inline void mst_pft_event_counter_int(mst_buf *b, int64_t v) {
    mst_pb_field_varint(b, TE_COUNTER_VALUE, (uint64_t)v);
}
static inline void mst_pft_event_counter_double(mst_buf *b, double v) {
    mst_pb_field_double(b, TE_DOUBLE_COUNTER_VALUE, v);
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
