/*
 * perfetto_trace_encode.h — owns the byte layout of Perfetto's native trace
 * format (the `perfetto.protos.Trace` message: a stream of `TracePacket`s),
 * written on the protobuf writer in pb_writer.h. Field numbers and enum
 * values come from perfetto_trace_fields.h (Perfetto's published protos).
 *
 * Every packet function appends one whole `Trace.packet` field (tag 1 +
 * length + TracePacket), so a file made of such records, cut after any
 * complete record, is still a valid Trace; the annotation and interned-
 * entry appenders make the pieces a slice-begin packet is built around. Interning policy (which names get which ids, when state is
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
/* `rank`: the thread's sibling_order_rank (0: none). */
void mst_pft_thread_track(mst_buf *b, uint64_t uuid, int32_t pid, int32_t tid, const char *name,
                          size_t n, int32_t rank);
/* The root descriptor (uuid 0) asking the UI to order the threads of a
 * process by their sibling_order_rank. */
void mst_pft_thread_ordering_explicit(mst_buf *b);
/* A plain named track; parent_uuid 0 = top level. `rank` is this track's
 * sibling_order_rank; with rank 0 the track instead asks the UI to order
 * its own children chronologically (the Requests track: by arrival). */
void mst_pft_named_track(mst_buf *b, uint64_t uuid, uint64_t parent_uuid, const char *name,
                         size_t n, int32_t rank);
/* A counter track under parent_uuid (a process track for per-engine
 * counters). */
void mst_pft_counter_track(mst_buf *b, uint64_t uuid, uint64_t parent_uuid, const char *name,
                           size_t n);

/* ---- event packets, each laid out in one pass ----
 *
 * Why one pass: the forwarder writes a slice begin with ~15 annotations and
 * a slice end for every span, and laying a packet out field by field (a
 * room check, a reserved length and its fix-up per nested message) was most
 * of its per-span instructions. So the pieces of a packet are encoded with
 * exact sizes, each with one room check: the InternedData entries and the
 * debug annotations are appended to scratch buffers as the writer meets
 * them, then mst_pft_slice_begin writes the whole packet around them. The
 * bytes are canonical protobuf: the same content always gives the same
 * bytes. */

/* The annotation appenders below are a few instructions each once their
 * field tags are constants: always inlined into the writer's loop. */
#define MST_PFT_INLINE static inline __attribute__((always_inline))

/* Out-of-line paths for text that is long or not ASCII (sized after
 * UTF-8 repair): one debug annotation with a text value in field
 * `value_field`, one InternedData entry. */
void mst_pft_annotation_text_slow(mst_buf *b, uint64_t name_iid, uint32_t value_field,
                                  const char *s, size_t n);
void mst_pft_interned_entry_slow(mst_buf *b, unsigned kind, uint64_t iid, const char *s,
                                 size_t n);

/* Starts a debug annotation of `body` (< 128) bytes at the end of b (room
 * checked by the caller): field tag, length, name_iid. Returns where its
 * value field goes. */
MST_PFT_INLINE uint8_t *mst_pft_annotation_head_(mst_buf *b, size_t body, uint64_t name_iid) {
    uint8_t *p = b->data + b->len;
    p[0] = (TE_DEBUG_ANNOTATIONS << 3) | MST_PB_WT_LEN;
    p[1] = (uint8_t)body;
    p[2] = (DA_NAME_IID << 3) | MST_PB_WT_VARINT;
    return p + 3 + mst_pb_put_varint(p + 3, name_iid);
}

/* TrackEvent.debug_annotations (4) { name_iid (1), value field `vtag`
 * (a whole varint tag) = v }: at most 2 + 23 bytes, a 1-byte length. */
MST_PFT_INLINE void mst_pft_annotation_varint_(mst_buf *b, uint64_t name_iid, unsigned vtag,
                                              uint64_t v) {
    size_t body = 1 + mst_pb_varint_size(name_iid) + mst_pb_varint_size(vtag) +
                  mst_pb_varint_size(v);
    if (!mst_pb_room(b, 2 + body)) return;
    uint8_t *p = mst_pft_annotation_head_(b, body, name_iid);
    p += mst_pb_put_varint(p, vtag);
    p += mst_pb_put_varint(p, v);
    b->len = (size_t)(p - b->data);
}

/* A text value (string_value 6 or legacy_json_value 9): short ASCII
 * inline, anything else sized after UTF-8 repair out of line. */
MST_PFT_INLINE void mst_pft_annotation_text_(mst_buf *b, uint64_t name_iid, uint32_t value_field,
                                            const char *s, size_t n) {
    if (!(n <= 64 && mst_pb_is_ascii(s, n))) {
        mst_pft_annotation_text_slow(b, name_iid, value_field, s, n);
        return;
    }
    size_t body = 1 + mst_pb_varint_size(name_iid) + 2 + n; /* < 128 */
    if (!mst_pb_room(b, 2 + body)) return;
    uint8_t *p = mst_pft_annotation_head_(b, body, name_iid);
    p[0] = (uint8_t)((value_field << 3) | MST_PB_WT_LEN);
    p[1] = (uint8_t)n;
    memcpy(p + 2, s, n);
    b->len = (size_t)(p + 2 + n - b->data);
}

/* DebugAnnotation values (name by interned id), appended as whole
 * TrackEvent.debug_annotations fields. */
MST_PFT_INLINE void mst_pft_annotation_string(mst_buf *b, uint64_t name_iid, const char *s,
                                             size_t n) {
    mst_pft_annotation_text_(b, name_iid, DA_STRING, s, n);
}
/* A JSON text shown as is (arrays, objects, null). */
MST_PFT_INLINE void mst_pft_annotation_json(mst_buf *b, uint64_t name_iid, const char *s,
                                           size_t n) {
    mst_pft_annotation_text_(b, name_iid, DA_LEGACY_JSON, s, n);
}
/* A string value by its interned id (MST_PFT_INTERN_STRING_VALUE). */
MST_PFT_INLINE void mst_pft_annotation_string_iid(mst_buf *b, uint64_t name_iid,
                                                 uint64_t value_iid) {
    mst_pft_annotation_varint_(b, name_iid, (DA_STRING_IID << 3) | MST_PB_WT_VARINT, value_iid);
}
MST_PFT_INLINE void mst_pft_annotation_int(mst_buf *b, uint64_t name_iid, int64_t v) {
    mst_pft_annotation_varint_(b, name_iid, (DA_INT << 3) | MST_PB_WT_VARINT, (uint64_t)v);
}
MST_PFT_INLINE void mst_pft_annotation_bool(mst_buf *b, uint64_t name_iid, bool v) {
    mst_pft_annotation_varint_(b, name_iid, (DA_BOOL << 3) | MST_PB_WT_VARINT, v ? 1 : 0);
}
MST_PFT_INLINE void mst_pft_annotation_double(mst_buf *b, uint64_t name_iid, double v) {
    size_t body = 1 + mst_pb_varint_size(name_iid) + 1 + 8;
    if (!mst_pb_room(b, 2 + body)) return;
    uint8_t *p = mst_pft_annotation_head_(b, body, name_iid);
    *p++ = (DA_DOUBLE << 3) | MST_PB_WT_FIXED64;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    mst_pb_put_fixed64(p, bits);
    b->len = (size_t)(p + 8 - b->data);
}

/* A list of interned string values (MST_PFT_INTERN_STRING_VALUE ids):
 * DebugAnnotation { name_iid, array_values: [{string_value_iid}, ...] },
 * 5–6 bytes an item. Perfetto shows it as name[0], name[1], ... */
void mst_pft_annotation_iid_array(mst_buf *b, uint64_t name_iid, const uint64_t *iids, size_t n);

/* One InternedData entry: field `kind` { iid (1), name / str (2) }. */
MST_PFT_INLINE void mst_pft_interned_entry(mst_buf *b, unsigned kind, uint64_t iid, const char *s,
                                          size_t n) {
    if (!(n <= 64 && mst_pb_is_ascii(s, n))) {
        mst_pft_interned_entry_slow(b, kind, iid, s, n);
        return;
    }
    size_t body = 1 + mst_pb_varint_size(iid) + 2 + n; /* < 128 */
    if (!mst_pb_room(b, MST_PB_MAX_VARINT + 1 + body)) return;
    uint8_t *p = b->data + b->len;
    p += mst_pb_put_varint(p, ((uint64_t)kind << 3) | MST_PB_WT_LEN);
    *p++ = (uint8_t)body;
    *p++ = (IE_IID << 3) | MST_PB_WT_VARINT;
    p += mst_pb_put_varint(p, iid);
    p[0] = (IE_NAME << 3) | MST_PB_WT_LEN;
    p[1] = (uint8_t)n;
    memcpy(p + 2, s, n);
    b->len = (size_t)(p + 2 + n - b->data);
}

/* A SLICE_BEGIN event packet: InternedData (when `interned_len`) holding
 * the entries encoded at `interned`, then the TrackEvent: type, track, name
 * and category ids (0: field left out), the annotations encoded at
 * `annotations`, then the flow ids and the terminating flow ids. */
typedef struct mst_pft_slice {
    uint64_t ts_ns;
    uint32_t seq_flags;
    uint64_t track_uuid;
    uint64_t name_iid, category_iid;
    const uint8_t *interned;
    size_t interned_len;
    const uint8_t *annotations;
    size_t annotations_len;
    const uint64_t *flow_ids;
    size_t n_flows;
    const uint64_t *terminating_flow_ids; /* flows that end at this slice */
    size_t n_terminating;
} mst_pft_slice;

void mst_pft_slice_begin(mst_buf *b, const mst_pft_slice *s);
/* A SLICE_END packet (no flags: it uses no interned ids). */
void mst_pft_slice_end(mst_buf *b, uint64_t ts_ns, uint64_t track_uuid);
/* A COUNTER event packet with an int or a double value. */
void mst_pft_counter_int(mst_buf *b, uint64_t ts_ns, uint64_t track_uuid, int64_t v);
void mst_pft_counter_double(mst_buf *b, uint64_t ts_ns, uint64_t track_uuid, double v);

/* A varint encoded once and copied into many packets: a counter track's
 * uuid (the same few tracks get a sample with every schedule step) and
 * the timestamp that a span's counter samples share. */
typedef struct mst_pft_varint {
    uint8_t len;             /* 0: not set */
    uint8_t b[MST_PB_MAX_VARINT];
} mst_pft_varint;

void mst_pft_varint_set(mst_pft_varint *v, uint64_t x);
/* mst_pft_counter_int / _double with the timestamp and the track uuid
 * already encoded (mst_pft_varint_set): the same bytes. */
void mst_pft_counter_int_at(mst_buf *b, const mst_pft_varint *ts, const mst_pft_varint *track,
                            int64_t v);
void mst_pft_counter_double_at(mst_buf *b, const mst_pft_varint *ts, const mst_pft_varint *track,
                               double v);

#endif /* MST_WIRE_PERFETTO_TRACE_ENCODE_H */
