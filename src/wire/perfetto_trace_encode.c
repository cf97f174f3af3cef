/*
 * perfetto_trace_encode.c — Perfetto TracePacket layout (see
 * perfetto_trace_encode.h for what it owns). Field numbers are named once,
 * in perfetto_trace_fields.h, shared with the .pftrace reader of analyze.
 */
#include "wire/perfetto_trace_encode.h"
#include "wire/perfetto_trace_fields.h"

/* Length hints: a packet is usually 128..16K bytes, nested pieces short. */
#define HINT_PACKET 2
#define HINT_SMALL 1

static mst_pb_mark packet_open(mst_buf *b, uint64_t ts_ns, bool has_ts) {
    mst_pb_mark m = mst_pb_begin(b, TRACE_PACKET, HINT_PACKET);
    if (has_ts) mst_pb_field_varint(b, PKT_TIMESTAMP, ts_ns);
    mst_pb_field_varint(b, PKT_SEQUENCE_ID, MST_PFT_SEQUENCE_ID);
    return m;
}

void mst_pft_clock_snapshot(mst_buf *b, uint64_t ts_ns) {
    mst_pb_mark p = packet_open(b, ts_ns, true);
    mst_pb_field_varint(b, PKT_SEQUENCE_FLAGS, MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED);
    mst_pb_field_varint(b, PKT_FIRST_ON_SEQUENCE, 1);
    mst_pb_mark cs = mst_pb_begin(b, PKT_CLOCK_SNAPSHOT, HINT_SMALL);
    static const unsigned clocks[2] = {BUILTIN_CLOCK_REALTIME, BUILTIN_CLOCK_BOOTTIME};
    for (int i = 0; i < 2; i++) {
        mst_pb_mark c = mst_pb_begin(b, CLK_CLOCKS, HINT_SMALL);
        mst_pb_field_varint(b, CLOCK_ID, clocks[i]);
        mst_pb_field_varint(b, CLOCK_TIMESTAMP, ts_ns);
        mst_pb_end(b, c);
    }
    mst_pb_field_varint(b, CLK_PRIMARY_TRACE_CLOCK, BUILTIN_CLOCK_REALTIME);
    mst_pb_end(b, cs);
    mst_pb_end(b, p);
}

static mst_pb_mark track_open(mst_buf *b, mst_pb_mark *packet, uint64_t uuid) {
    *packet = packet_open(b, 0, false);
    mst_pb_mark td = mst_pb_begin(b, PKT_TRACK_DESCRIPTOR, HINT_SMALL);
    mst_pb_field_varint(b, TD_UUID, uuid);
    return td;
}

static void track_close(mst_buf *b, mst_pb_mark packet, mst_pb_mark td) {
    mst_pb_end(b, td);
    mst_pb_end(b, packet);
}

void mst_pft_process_track(mst_buf *b, uint64_t uuid, int32_t pid, const char *name, size_t n) {
    mst_pb_mark p, td = track_open(b, &p, uuid);
    mst_pb_mark pd = mst_pb_begin(b, TD_PROCESS, HINT_SMALL);
    mst_pb_field_varint(b, PD_PID, (uint64_t)(int64_t)pid);
    if (n) mst_pb_field_string(b, PD_PROCESS_NAME, name, n);
    mst_pb_end(b, pd);
    track_close(b, p, td);
}

void mst_pft_thread_track(mst_buf *b, uint64_t uuid, int32_t pid, int32_t tid, const char *name,
                          size_t n) {
    mst_pb_mark p, td = track_open(b, &p, uuid);
    mst_pb_mark thd = mst_pb_begin(b, TD_THREAD, HINT_SMALL);
    mst_pb_field_varint(b, THD_PID, (uint64_t)(int64_t)pid);
    mst_pb_field_varint(b, THD_TID, (uint64_t)(int64_t)tid);
    if (n) mst_pb_field_string(b, THD_THREAD_NAME, name, n);
    mst_pb_end(b, thd);
    track_close(b, p, td);
}

void mst_pft_named_track(mst_buf *b, uint64_t uuid, uint64_t parent_uuid, const char *name,
                         size_t n, int32_t rank) {
    mst_pb_mark p, td = track_open(b, &p, uuid);
    if (parent_uuid) mst_pb_field_varint(b, TD_PARENT_UUID, parent_uuid);
    mst_pb_field_string(b, TD_NAME, name, n);
    if (rank) mst_pb_field_varint(b, TD_SIBLING_ORDER_RANK, (uint64_t)(int64_t)rank);
    else mst_pb_field_varint(b, TD_CHILD_ORDERING, CHILD_ORDERING_CHRONOLOGICAL);
    track_close(b, p, td);
}

void mst_pft_counter_track(mst_buf *b, uint64_t uuid, uint64_t parent_uuid, const char *name,
                           size_t n) {
    mst_pb_mark p, td = track_open(b, &p, uuid);
    if (parent_uuid) mst_pb_field_varint(b, TD_PARENT_UUID, parent_uuid);
    mst_pb_field_string(b, TD_NAME, name, n);
    mst_pb_field_bytes(b, TD_COUNTER, "", 0); /* an empty CounterDescriptor */
    track_close(b, p, td);
}

void mst_pft_event_open(mst_buf *b, mst_pft_event *e, uint64_t ts_ns, uint32_t seq_flags) {
    e->packet = packet_open(b, ts_ns, true);
    if (seq_flags) mst_pb_field_varint(b, PKT_SEQUENCE_FLAGS, seq_flags);
    e->interned.body = 0;
    e->event.body = 0;
}

void mst_pft_event_intern(mst_buf *b, mst_pft_event *e, unsigned kind, uint64_t iid,
                          const char *s, size_t n) {
    if (!e->interned.body) e->interned = mst_pb_begin(b, PKT_INTERNED_DATA, HINT_SMALL);
    mst_pb_mark m = mst_pb_begin(b, kind, HINT_SMALL);
    mst_pb_field_varint(b, IE_IID, iid);
    mst_pb_field_string(b, IE_NAME, s, n);
    mst_pb_end(b, m);
}

void mst_pft_event_track(mst_buf *b, mst_pft_event *e, unsigned type, uint64_t track_uuid) {
    if (e->interned.body) {
        mst_pb_end(b, e->interned);
        e->interned.body = 0;
    }
    e->event = mst_pb_begin(b, PKT_TRACK_EVENT, HINT_PACKET);
    mst_pb_field_varint(b, TE_TYPE, type);
    mst_pb_field_varint(b, TE_TRACK_UUID, track_uuid);
}

static mst_pb_mark annotation_open(mst_buf *b, uint64_t name_iid) {
    mst_pb_mark m = mst_pb_begin(b, TE_DEBUG_ANNOTATIONS, HINT_SMALL);
    mst_pb_field_varint(b, DA_NAME_IID, name_iid);
    return m;
}

void mst_pft_annotation_string(mst_buf *b, uint64_t name_iid, const char *s, size_t n) {
    mst_pb_mark m = annotation_open(b, name_iid);
    mst_pb_field_string(b, DA_STRING, s, n);
    mst_pb_end(b, m);
}

void mst_pft_annotation_string_iid(mst_buf *b, uint64_t name_iid, uint64_t value_iid) {
    mst_pb_mark m = annotation_open(b, name_iid);
    mst_pb_field_varint(b, DA_STRING_IID, value_iid);
    mst_pb_end(b, m);
}

void mst_pft_annotation_int(mst_buf *b, uint64_t name_iid, int64_t v) {
    mst_pb_mark m = annotation_open(b, name_iid);
    mst_pb_field_varint(b, DA_INT, (uint64_t)v);
    mst_pb_end(b, m);
}

void mst_pft_annotation_double(mst_buf *b, uint64_t name_iid, double v) {
    mst_pb_mark m = annotation_open(b, name_iid);
    mst_pb_field_double(b, DA_DOUBLE, v);
    mst_pb_end(b, m);
}

void mst_pft_annotation_bool(mst_buf *b, uint64_t name_iid, bool v) {
    mst_pb_mark m = annotation_open(b, name_iid);
    mst_pb_field_varint(b, DA_BOOL, v ? 1 : 0);
    mst_pb_end(b, m);
}

void mst_pft_annotation_json(mst_buf *b, uint64_t name_iid, const char *s, size_t n) {
    mst_pb_mark m = annotation_open(b, name_iid);
    mst_pb_field_string(b, DA_LEGACY_JSON, s, n);
    mst_pb_end(b, m);
}

void mst_pft_event_close(mst_buf *b, mst_pft_event *e) {
    if (e->interned.body) {
        mst_pb_end(b, e->interned);
        e->interned.body = 0;
    }
    if (e->event.body) mst_pb_end(b, e->event);
    else mst_pb_field_bytes(b, PKT_TRACK_EVENT, "", 0);
    e->event.body = 0;
    mst_pb_end(b, e->packet);
}
