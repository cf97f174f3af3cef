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
                          size_t n, int32_t rank) {
    mst_pb_mark p, td = track_open(b, &p, uuid);
    if (rank) mst_pb_field_varint(b, TD_SIBLING_ORDER_RANK, (uint64_t)(int64_t)rank);
    mst_pb_mark thd = mst_pb_begin(b, TD_THREAD, HINT_SMALL);
    mst_pb_field_varint(b, THD_PID, (uint64_t)(int64_t)pid);
    mst_pb_field_varint(b, THD_TID, (uint64_t)(int64_t)tid);
    if (n) mst_pb_field_string(b, THD_THREAD_NAME, name, n);
    mst_pb_end(b, thd);
    track_close(b, p, td);
}

void mst_pft_thread_ordering_explicit(mst_buf *b) {
    mst_pb_mark p, td = track_open(b, &p, 0);
    mst_pb_field_varint(b, TD_THREAD_ORDERING, THREAD_ORDERING_EXPLICIT);
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

static mst_pb_mark annotation_open(mst_buf *b, uint64_t name_iid) {
    mst_pb_mark m = mst_pb_begin(b, TE_DEBUG_ANNOTATIONS, HINT_SMALL);
    mst_pb_field_varint(b, DA_NAME_IID, name_iid);
    return m;
}

void mst_pft_annotation_text_slow(mst_buf *b, uint64_t name_iid, uint32_t value_field,
                                  const char *s, size_t n) {
    mst_pb_mark m = annotation_open(b, name_iid);
    mst_pb_field_string(b, value_field, s, n);
    mst_pb_end(b, m);
}

void mst_pft_interned_entry_slow(mst_buf *b, unsigned kind, uint64_t iid, const char *s,
                                 size_t n) {
    mst_pb_mark m = mst_pb_begin(b, kind, HINT_SMALL);
    mst_pb_field_varint(b, IE_IID, iid);
    mst_pb_field_string(b, IE_NAME, s, n);
    mst_pb_end(b, m);
}

void mst_pft_annotation_iid_array(mst_buf *b, uint64_t name_iid, const uint64_t *iids, size_t n) {
    /* Each item: array_values (12) { string_value_iid (17) = iid }. */
    size_t body = 1 + mst_pb_varint_size(name_iid);
    /* Ids below 2^14 (a writer's are below its intern table's size) take
     * one or two bytes: counted, then written a word a store. */
    size_t two = 0;
    uint64_t all = 0;
    for (size_t i = 0; i < n; i++) {
        two += iids[i] >= 0x80;
        all |= iids[i];
    }
    bool small = all < 0x4000;
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    small = false;
#endif
    if (small) {
        body += 5 * n + two;
    } else {
        for (size_t i = 0; i < n; i++) body += 4 + mst_pb_varint_size(iids[i]);
    }
    /* + 8: the word stores may run past the last item */
    if (!mst_pb_room(b, 1 + MST_PB_MAX_VARINT + body + 8)) return;
    uint8_t *p = b->data + b->len;
    *p++ = (TE_DEBUG_ANNOTATIONS << 3) | MST_PB_WT_LEN;
    p += mst_pb_put_varint(p, body);
    *p++ = (DA_NAME_IID << 3) | MST_PB_WT_VARINT;
    p += mst_pb_put_varint(p, name_iid);
    const uint64_t tag = (DA_ARRAY_VALUES << 3) | MST_PB_WT_LEN,
                   iid_tag = (DA_STRING_IID << 3) | MST_PB_WT_VARINT; /* two varint bytes */
    if (small) {
        const uint64_t head = tag | ((iid_tag | 0x80) & 0xff) << 16 | (iid_tag >> 7) << 24;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = iids[i], wide = v >= 0x80;
            uint64_t w = head | (3 + wide) << 8 |
                         (wide ? ((v & 0x7f) | 0x80) | (v >> 7) << 8 : v) << 32;
            memcpy(p, &w, 8);
            p += 5 + wide;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            *p++ = (uint8_t)tag;
            *p++ = (uint8_t)(2 + mst_pb_varint_size(iids[i]));
            *p++ = (uint8_t)((iid_tag | 0x80) & 0xff);
            *p++ = (uint8_t)(iid_tag >> 7);
            p += mst_pb_put_varint(p, iids[i]);
        }
    }
    b->len = (size_t)(p - b->data);
}

/* ------------------------------------------------------------ one pass */

#define vsz mst_pb_varint_size

/* A varint at p (room checked by the caller); returns the byte after it.
 * The wide writer: timestamps and track uuids are in every event packet. */
static inline uint8_t *put_v(uint8_t *p, uint64_t v) { return p + mst_pb_put_varint_wide(p, v); }

#define TAG(field, wt) (((uint64_t)(field) << 3) | (wt))

static inline uint8_t *put_fixed64(uint8_t *p, uint64_t v) {
    mst_pb_put_fixed64(p, v);
    return p + 8;
}

/* Reserves a whole packet of `body` bytes and writes its tag and length;
 * NULL when the buffer failed. */
static inline __attribute__((always_inline)) uint8_t *packet_room(mst_buf *b, size_t body) {
    /* Protobuf lengths are int32 on every parser we talk to. */
    if (body > INT32_MAX) {
        b->failed = true;
        return NULL;
    }
    if (!mst_pb_room(b, 1 + vsz(body) + body)) return NULL;
    uint8_t *p = b->data + b->len;
    *p++ = (uint8_t)TAG(TRACE_PACKET, MST_PB_WT_LEN);
    return put_v(p, body);
}

/* The packet's timestamp and sequence id (and flags when nonzero). */
static inline size_t packet_head_size(uint64_t ts_ns, uint32_t flags) {
    return 1 + vsz(ts_ns) + 2 + (flags ? 1 + vsz(flags) : 0);
}

static inline uint8_t *put_packet_head(uint8_t *p, uint64_t ts_ns, uint32_t flags) {
    *p++ = (uint8_t)TAG(PKT_TIMESTAMP, MST_PB_WT_VARINT);
    p = put_v(p, ts_ns);
    *p++ = (uint8_t)TAG(PKT_SEQUENCE_ID, MST_PB_WT_VARINT);
    *p++ = MST_PFT_SEQUENCE_ID;
    if (flags) {
        *p++ = (uint8_t)TAG(PKT_SEQUENCE_FLAGS, MST_PB_WT_VARINT);
        p = put_v(p, flags);
    }
    return p;
}

/* TrackEvent type and track (type < 128). */
static inline size_t te_head_size(uint64_t track_uuid) { return 2 + 1 + vsz(track_uuid); }

static inline uint8_t *put_te_head(uint8_t *p, size_t te_body, unsigned type, uint64_t track) {
    *p++ = (uint8_t)TAG(PKT_TRACK_EVENT, MST_PB_WT_LEN);
    p = put_v(p, te_body);
    *p++ = (uint8_t)TAG(TE_TYPE, MST_PB_WT_VARINT);
    *p++ = (uint8_t)type;
    *p++ = (uint8_t)TAG(TE_TRACK_UUID, MST_PB_WT_VARINT);
    return put_v(p, track);
}

void mst_pft_slice_begin(mst_buf *b, const mst_pft_slice *s) {
    size_t te_body = te_head_size(s->track_uuid) + (s->name_iid ? 1 + vsz(s->name_iid) : 0) +
                     (s->category_iid ? 1 + vsz(s->category_iid) : 0) + s->annotations_len +
                     (s->n_flows + s->n_terminating) * (2 + 8); /* a 2-byte tag + fixed64 each */
    size_t pkt_body = packet_head_size(s->ts_ns, s->seq_flags) +
                      (s->interned_len ? 1 + vsz(s->interned_len) + s->interned_len : 0) + 1 +
                      vsz(te_body) + te_body;
    uint8_t *p = packet_room(b, pkt_body);
    if (!p) return;
    p = put_packet_head(p, s->ts_ns, s->seq_flags);
    if (s->interned_len) {
        *p++ = (uint8_t)TAG(PKT_INTERNED_DATA, MST_PB_WT_LEN);
        p = put_v(p, s->interned_len);
        memcpy(p, s->interned, s->interned_len);
        p += s->interned_len;
    }
    p = put_te_head(p, te_body, MST_PFT_SLICE_BEGIN, s->track_uuid);
    if (s->name_iid) {
        *p++ = (uint8_t)TAG(TE_NAME_IID, MST_PB_WT_VARINT);
        p = put_v(p, s->name_iid);
    }
    if (s->category_iid) {
        *p++ = (uint8_t)TAG(TE_CATEGORY_IIDS, MST_PB_WT_VARINT);
        p = put_v(p, s->category_iid);
    }
    if (s->annotations_len) memcpy(p, s->annotations, s->annotations_len);
    p += s->annotations_len;
    for (size_t i = 0; i < s->n_flows; i++) {
        p = put_v(p, TAG(TE_FLOW_IDS, MST_PB_WT_FIXED64));
        p = put_fixed64(p, s->flow_ids[i]);
    }
    for (size_t i = 0; i < s->n_terminating; i++) {
        p = put_v(p, TAG(TE_TERMINATING_FLOW_IDS, MST_PB_WT_FIXED64));
        p = put_fixed64(p, s->terminating_flow_ids[i]);
    }
    b->len = (size_t)(p - b->data);
}

void mst_pft_slice_end(mst_buf *b, uint64_t ts_ns, uint64_t track_uuid) {
    size_t te_body = te_head_size(track_uuid);
    uint8_t *p = packet_room(b, packet_head_size(ts_ns, 0) + 1 + vsz(te_body) + te_body);
    if (!p) return;
    p = put_packet_head(p, ts_ns, 0);
    p = put_te_head(p, te_body, MST_PFT_SLICE_END, track_uuid);
    b->len = (size_t)(p - b->data);
}

void mst_pft_varint_set(mst_pft_varint *v, uint64_t x) {
    v->len = (uint8_t)mst_pb_put_varint_wide(v->b, x);
}

/* Copies an encoded varint to p (room checked by the caller): two
 * overlapping 8-byte copies for the usual 8-10 bytes, else byte by byte. */
static inline uint8_t *put_encoded(uint8_t *p, const mst_pft_varint *v) {
    if (v->len >= 8) {
        memcpy(p, v->b, 8);
        memcpy(p + v->len - 8, v->b + v->len - 8, 8);
    } else {
        for (unsigned i = 0; i < v->len; i++) p[i] = v->b[i];
    }
    return p + v->len;
}

/* A COUNTER packet up to its value, whose `value_size` bytes (tag
 * included) the caller writes at the pointer returned; NULL when the
 * buffer failed. The layout of put_packet_head and put_te_head. */
static uint8_t *counter_open(mst_buf *b, const mst_pft_varint *ts, const mst_pft_varint *track,
                             size_t value_size) {
    size_t te_body = 2 + 1 + (size_t)track->len + value_size;
    uint8_t *p = packet_room(b, 1 + (size_t)ts->len + 2 + 1 + vsz(te_body) + te_body);
    if (!p) return NULL;
    *p++ = (uint8_t)TAG(PKT_TIMESTAMP, MST_PB_WT_VARINT);
    p = put_encoded(p, ts);
    *p++ = (uint8_t)TAG(PKT_SEQUENCE_ID, MST_PB_WT_VARINT);
    *p++ = MST_PFT_SEQUENCE_ID;
    *p++ = (uint8_t)TAG(PKT_TRACK_EVENT, MST_PB_WT_LEN);
    p += mst_pb_put_varint(p, te_body);
    *p++ = (uint8_t)TAG(TE_TYPE, MST_PB_WT_VARINT);
    *p++ = (uint8_t)MST_PFT_COUNTER;
    *p++ = (uint8_t)TAG(TE_TRACK_UUID, MST_PB_WT_VARINT);
    return put_encoded(p, track);
}

void mst_pft_counter_int_at(mst_buf *b, const mst_pft_varint *ts, const mst_pft_varint *track,
                            int64_t v) {
    uint64_t tag = TAG(TE_COUNTER_VALUE, MST_PB_WT_VARINT);
    uint8_t *p = counter_open(b, ts, track, vsz(tag) + vsz((uint64_t)v));
    if (!p) return;
    p = put_v(p, tag);
    p = put_v(p, (uint64_t)v);
    b->len = (size_t)(p - b->data);
}

void mst_pft_counter_double_at(mst_buf *b, const mst_pft_varint *ts, const mst_pft_varint *track,
                               double v) {
    uint64_t tag = TAG(TE_DOUBLE_COUNTER_VALUE, MST_PB_WT_FIXED64), bits;
    memcpy(&bits, &v, sizeof bits);
    uint8_t *p = counter_open(b, ts, track, vsz(tag) + 8);
    if (!p) return;
    p = put_v(p, tag);
    p = put_fixed64(p, bits);
    b->len = (size_t)(p - b->data);
}

void mst_pft_counter_int(mst_buf *b, uint64_t ts_ns, uint64_t track_uuid, int64_t v) {
    mst_pft_varint ts, track;
    mst_pft_varint_set(&ts, ts_ns);
    mst_pft_varint_set(&track, track_uuid);
    mst_pft_counter_int_at(b, &ts, &track, v);
}

void mst_pft_counter_double(mst_buf *b, uint64_t ts_ns, uint64_t track_uuid, double v) {
    mst_pft_varint ts, track;
    mst_pft_varint_set(&ts, ts_ns);
    mst_pft_varint_set(&track, track_uuid);
    mst_pft_counter_double_at(b, &ts, &track, v);
}
