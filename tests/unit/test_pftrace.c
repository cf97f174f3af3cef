/*
 * test_pftrace.c — the native Perfetto encoder (wire/perfetto_trace_encode.h)
 * and writer (forward/pftrace_writer.h). Bytes of single pieces are checked
 * against hand-encoded protobuf; whole files are walked packet by packet
 * with the project's protobuf reader: every record is a whole Trace.packet,
 * the first is the clock snapshot, every interned id is defined earlier in
 * the sequence (also across restarts), every track has a descriptor before
 * its first event, begins and ends pair up. The request-id lists: the
 * array bytes, the JSON list splitter and when a list is a delta or a
 * keyframe. (The official-proto decoding lives in
 * tests/integration/test_pftrace.py and test_pftrace_encoding.py.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "forward/pftrace_id_lists.h"
#include "forward/pftrace_writer.h"
#include "testlib.h"
#include "wire/pb_reader.h"
#include "wire/perfetto_packet.h"
#include "wire/perfetto_trace_encode.h"

static char g_dir[64];

static const char *tmp_path(const char *name) {
    static char path[256];
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/mst_pftrace_test_XXXXXX");
        if (!mkdtemp(g_dir)) abort();
    }
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

static void test_annotation_bytes(void) {
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_pft_annotation_int(&b, 3, 5);
    /* TrackEvent.debug_annotations (4, LEN) { name_iid (1) = 3, int_value (4) = 5 } */
    static const uint8_t want[] = {0x22, 0x04, 0x08, 0x03, 0x20, 0x05};
    CHECK_EQ_INT(b.len, sizeof want);
    CHECK(memcmp(b.data, want, sizeof want) == 0);
    mst_buf_reset(&b);
    mst_pft_annotation_string_iid(&b, 1, 2);
    /* { name_iid = 1, string_value_iid (17) = 2 }: tag 17<<3 = 0x88 0x01 */
    static const uint8_t want2[] = {0x22, 0x05, 0x08, 0x01, 0x88, 0x01, 0x02};
    CHECK_EQ_INT(b.len, sizeof want2);
    CHECK(memcmp(b.data, want2, sizeof want2) == 0);
    mst_buf_free(&b);
}

/* Reference layout of an event packet, field by field on the generic
 * protobuf writer (reserved lengths fixed up afterwards), as the encoder
 * wrote it before it laid packets out in one pass. */
static mst_pb_mark ref_event_open(mst_buf *b, uint64_t ts, uint32_t flags, mst_pb_mark *te,
                                  const mst_buf *interned, unsigned type, uint64_t track) {
    mst_pb_mark p = mst_pb_begin(b, TRACE_PACKET, 1);
    mst_pb_field_varint(b, PKT_TIMESTAMP, ts);
    mst_pb_field_varint(b, PKT_SEQUENCE_ID, MST_PFT_SEQUENCE_ID);
    if (flags) mst_pb_field_varint(b, PKT_SEQUENCE_FLAGS, flags);
    if (interned && interned->len) mst_pb_field_bytes(b, PKT_INTERNED_DATA, interned->data, interned->len);
    *te = mst_pb_begin(b, PKT_TRACK_EVENT, 1);
    mst_pb_field_varint(b, TE_TYPE, type);
    mst_pb_field_varint(b, TE_TRACK_UUID, track);
    return p;
}

static void ref_annotation_text(mst_buf *b, uint64_t iid, uint32_t field, const char *s, size_t n) {
    mst_pb_mark m = mst_pb_begin(b, TE_DEBUG_ANNOTATIONS, 1);
    mst_pb_field_varint(b, DA_NAME_IID, iid);
    mst_pb_field_string(b, field, s, n);
    mst_pb_end(b, m);
}

static void ref_annotation_varint(mst_buf *b, uint64_t iid, uint32_t field, uint64_t v) {
    mst_pb_mark m = mst_pb_begin(b, TE_DEBUG_ANNOTATIONS, 1);
    mst_pb_field_varint(b, DA_NAME_IID, iid);
    mst_pb_field_varint(b, field, v);
    mst_pb_end(b, m);
}

static void ref_interned(mst_buf *b, unsigned kind, uint64_t iid, const char *s, size_t n) {
    mst_pb_mark m = mst_pb_begin(b, kind, 1);
    mst_pb_field_varint(b, IE_IID, iid);
    mst_pb_field_string(b, IE_NAME, s, n);
    mst_pb_end(b, m);
}

static bool same_bytes(const mst_buf *a, const mst_buf *b) {
    return !a->failed && !b->failed && a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

/* Varint boundaries of timestamps and track uuids (1, 8, 9 and 10
 * bytes): slice ends and counters, against the reference layout. */
static void test_event_packet_bytes(void) {
    static const uint64_t vals[] = {0, 1, 127, 128, (1ull << 49) - 1, 1ull << 49,
                                    (1ull << 56) - 1, 1ull << 56, 1700000000123456789ull,
                                    (1ull << 63) - 1, 1ull << 63, UINT64_MAX, 0x8123456789abcdefull};
    size_t nv = sizeof vals / sizeof vals[0];
    mst_buf got, want;
    mst_buf_init(&got, 0);
    mst_buf_init(&want, 0);
    for (size_t i = 0; i < nv; i++)
        for (size_t j = 0; j < nv; j++) {
            uint64_t ts = vals[i], track = vals[j];
            mst_buf_reset(&got);
            mst_buf_reset(&want);
            mst_pft_slice_end(&got, ts, track);
            mst_pb_mark te, p = ref_event_open(&want, ts, 0, &te, NULL, MST_PFT_SLICE_END, track);
            mst_pb_end(&want, te);
            mst_pb_end(&want, p);
            CHECK(same_bytes(&got, &want));

            mst_buf_reset(&got);
            mst_buf_reset(&want);
            mst_pft_counter_int(&got, ts, track, (int64_t)vals[(i + j) % nv]);
            p = ref_event_open(&want, ts, 0, &te, NULL, MST_PFT_COUNTER, track);
            mst_pb_field_varint(&want, TE_COUNTER_VALUE, vals[(i + j) % nv]);
            mst_pb_end(&want, te);
            mst_pb_end(&want, p);
            CHECK(same_bytes(&got, &want));

            /* The same packet from varints encoded once and copied, twice
             * (a span's samples share them), after a packet of other ones. */
            mst_pft_varint ts_v, track_v, other;
            mst_pft_varint_set(&ts_v, ts);
            mst_pft_varint_set(&track_v, track);
            mst_pft_varint_set(&other, vals[(i + 1) % nv]);
            mst_buf_reset(&got);
            mst_pft_counter_int_at(&got, &other, &other, 1);
            size_t first = got.len;
            mst_pft_counter_int_at(&got, &ts_v, &track_v, (int64_t)vals[(i + j) % nv]);
            mst_pft_counter_int_at(&got, &ts_v, &track_v, (int64_t)vals[(i + j) % nv]);
            CHECK(got.len == first + 2 * want.len);
            CHECK(memcmp(got.data + first, want.data, want.len) == 0);
            CHECK(memcmp(got.data + first + want.len, want.data, want.len) == 0);

            mst_buf_reset(&got);
            mst_buf_reset(&want);
            mst_pft_counter_double(&got, ts, track, -0.4375);
            p = ref_event_open(&want, ts, 0, &te, NULL, MST_PFT_COUNTER, track);
            mst_pb_field_double(&want, TE_DOUBLE_COUNTER_VALUE, -0.4375);
            mst_pb_end(&want, te);
            mst_pb_end(&want, p);
            CHECK(same_bytes(&got, &want));
            mst_buf_reset(&got);
            mst_pft_counter_double_at(&got, &ts_v, &track_v, -0.4375);
            CHECK(same_bytes(&got, &want));
        }
    mst_buf_free(&got);
    mst_buf_free(&want);
}

/* A slice begin with interned entries and annotations of every kind
 * (short, long, non-ASCII and invalid UTF-8 text, big ids and values) and
 * flows, against the reference layout; also with 300 annotations (a
 * TrackEvent and packet over 16 KiB: 3-byte lengths). */
static void test_slice_begin_bytes(void) {
    char long_text[300];
    for (size_t i = 0; i < sizeof long_text; i++) long_text[i] = (char)('a' + i % 26);
    static const char bad_utf8[] = "ok \xff\xfe caf\xc3\xa9";
    static const uint64_t flows[] = {1, 0xffffffffffffffffull, 0x0123456789abcdefull};
    for (int big = 0; big < 2; big++) {
        mst_buf defs, ann, ref_defs, ref_ann, got, want;
        mst_buf_init(&defs, 0);
        mst_buf_init(&ann, 0);
        mst_buf_init(&ref_defs, 0);
        mst_buf_init(&ref_ann, 0);
        mst_buf_init(&got, 0);
        mst_buf_init(&want, 0);
        const char *texts[4] = {"vllm.scheduler.schedule", long_text, bad_utf8, "\xe5\x90\x8d\xe5\xad\x97"};
        size_t lens[4] = {23, sizeof long_text, sizeof bad_utf8 - 1, strlen("\xe5\x90\x8d\xe5\xad\x97")};
        for (unsigned k = 0; k < 4; k++) {
            unsigned kind = k == 3 ? MST_PFT_INTERN_STRING_VALUE : k + 1;
            mst_pft_interned_entry(&defs, kind, 100 + k * 1000, texts[k], lens[k]);
            ref_interned(&ref_defs, kind, 100 + k * 1000, texts[k], lens[k]);
        }
        int reps = big ? 60 : 1;
        for (int r = 0; r < reps; r++) {
            uint64_t iid = (uint64_t)r * 300 + 1;
            mst_pft_annotation_string(&ann, iid, "Scheduler", 9);
            ref_annotation_text(&ref_ann, iid, DA_STRING, "Scheduler", 9);
            mst_pft_annotation_string(&ann, iid + 1, long_text, sizeof long_text);
            ref_annotation_text(&ref_ann, iid + 1, DA_STRING, long_text, sizeof long_text);
            mst_pft_annotation_json(&ann, iid + 2, bad_utf8, sizeof bad_utf8 - 1);
            ref_annotation_text(&ref_ann, iid + 2, DA_LEGACY_JSON, bad_utf8, sizeof bad_utf8 - 1);
            mst_pft_annotation_int(&ann, 200, -5);
            ref_annotation_varint(&ref_ann, 200, DA_INT, (uint64_t)-5);
            mst_pft_annotation_string_iid(&ann, 1u << 20, 70000);
            ref_annotation_varint(&ref_ann, 1u << 20, DA_STRING_IID, 70000);
            mst_pft_annotation_bool(&ann, 3, true);
            ref_annotation_varint(&ref_ann, 3, DA_BOOL, 1);
        }
        mst_pft_annotation_double(&ann, 4, 0.4375);
        mst_pb_mark m = mst_pb_begin(&ref_ann, TE_DEBUG_ANNOTATIONS, 1);
        mst_pb_field_varint(&ref_ann, DA_NAME_IID, 4);
        mst_pb_field_double(&ref_ann, DA_DOUBLE, 0.4375);
        mst_pb_end(&ref_ann, m);
        CHECK(same_bytes(&defs, &ref_defs));
        CHECK(same_bytes(&ann, &ref_ann));

        mst_pft_slice sl = {.ts_ns = 1700000000123456789ull,
                            .seq_flags = MST_PFT_SEQ_NEEDS_INCREMENTAL_STATE |
                                         MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED,
                            .track_uuid = 0x8123456789abcdefull,
                            .name_iid = 7,
                            .category_iid = 300,
                            .interned = defs.data,
                            .interned_len = defs.len,
                            .annotations = ann.data,
                            .annotations_len = ann.len,
                            .flow_ids = flows,
                            .n_flows = 3};
        mst_pft_slice_begin(&got, &sl);
        mst_pb_mark te, p = ref_event_open(&want, sl.ts_ns, sl.seq_flags, &te, &ref_defs,
                                           MST_PFT_SLICE_BEGIN, sl.track_uuid);
        mst_pb_field_varint(&want, TE_NAME_IID, 7);
        mst_pb_field_varint(&want, TE_CATEGORY_IIDS, 300);
        mst_buf_append(&want, ref_ann.data, ref_ann.len);
        for (int f = 0; f < 3; f++) mst_pb_field_fixed64(&want, TE_FLOW_IDS, flows[f]);
        mst_pb_end(&want, te);
        mst_pb_end(&want, p);
        CHECK(same_bytes(&got, &want));
        if (big) CHECK(got.len > 16384);

        /* No definitions, name or category: those fields are left out. */
        mst_buf_reset(&got);
        mst_buf_reset(&want);
        mst_pft_slice bare = {.ts_ns = 5, .track_uuid = 9};
        mst_pft_slice_begin(&got, &bare);
        p = ref_event_open(&want, 5, 0, &te, NULL, MST_PFT_SLICE_BEGIN, 9);
        mst_pb_end(&want, te);
        mst_pb_end(&want, p);
        CHECK(same_bytes(&got, &want));
        mst_buf_free(&defs);
        mst_buf_free(&ann);
        mst_buf_free(&ref_defs);
        mst_buf_free(&ref_ann);
        mst_buf_free(&got);
        mst_buf_free(&want);
    }
}

/* What the walk saw. */
typedef struct walk {
    size_t packets, begins, ends, counters, descriptors, restarts;
    bool first_is_clock;
} walk;

#define MAX_IID 20000
#define MAX_TRACKS 256

/* Walks a whole file: see the header comment for what is checked. */
static void walk_file(const uint8_t *data, size_t len, walk *w) {
    memset(w, 0, sizeof *w);
    static bool defined[30][MAX_IID];
    memset(defined, 0, sizeof defined);
    uint64_t tracks[MAX_TRACKS];
    size_t n_tracks = 0;
    mst_pb_reader r;
    mst_pb_reader_init(&r, data, len);
    mst_pb_field f;
    while (mst_pb_next(&r, &f) == MST_OK) {
        CHECK_EQ_INT(f.number, 1);
        CHECK_EQ_INT(f.wire_type, MST_PB_WT_LEN);
        mst_pb_reader pr;
        mst_pb_reader_init(&pr, f.data, f.len);
        mst_pb_field pf;
        const uint8_t *te = NULL, *in = NULL, *td = NULL;
        size_t te_len = 0, in_len = 0, td_len = 0;
        uint64_t flags = 0, seq = 0;
        bool clock = false;
        while (mst_pb_next(&pr, &pf) == MST_OK) {
            if (pf.number == 6) clock = true;
            if (pf.number == 10) seq = pf.u;
            if (pf.number == 13) flags = pf.u;
            if (pf.number == 11) { te = pf.data; te_len = pf.len; }
            if (pf.number == 12) { in = pf.data; in_len = pf.len; }
            if (pf.number == 60) { td = pf.data; td_len = pf.len; }
        }
        CHECK(mst_pb_reader_done(&pr));
        CHECK_EQ_INT(seq, MST_PFT_SEQUENCE_ID);
        if (w->packets == 0) w->first_is_clock = clock;
        w->packets++;
        if (flags & MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED) {
            memset(defined, 0, sizeof defined);
            w->restarts++;
        }
        if (in) {
            mst_pb_reader ir;
            mst_pb_reader_init(&ir, in, in_len);
            while (mst_pb_next(&ir, &pf) == MST_OK) {
                mst_pb_reader er;
                mst_pb_field ef;
                mst_pb_reader_init(&er, pf.data, pf.len);
                while (mst_pb_next(&er, &ef) == MST_OK)
                    if (ef.number == 1 && pf.number < 30 && ef.u < MAX_IID) defined[pf.number][ef.u] = true;
            }
        }
        if (td) {
            mst_pb_reader dr;
            mst_pb_reader_init(&dr, td, td_len);
            while (mst_pb_next(&dr, &pf) == MST_OK)
                if (pf.number == 1 && n_tracks < MAX_TRACKS) tracks[n_tracks++] = pf.u;
            w->descriptors++;
        }
        if (te) {
            mst_pb_reader er;
            mst_pb_reader_init(&er, te, te_len);
            uint64_t type = 0, track = 0;
            while (mst_pb_next(&er, &pf) == MST_OK) {
                if (pf.number == 9) type = pf.u;
                if (pf.number == 11) track = pf.u;
                if (pf.number == 10) CHECK(pf.u < MAX_IID && defined[2][pf.u]);
                if (pf.number == 3) CHECK(pf.u < MAX_IID && defined[1][pf.u]);
                if (pf.number == 4) { /* debug annotation: name and interned value */
                    mst_pb_reader ar;
                    mst_pb_field af;
                    mst_pb_reader_init(&ar, pf.data, pf.len);
                    while (mst_pb_next(&ar, &af) == MST_OK) {
                        if (af.number == 1) CHECK(af.u < MAX_IID && defined[3][af.u]);
                        if (af.number == 17) CHECK(af.u < MAX_IID && defined[29][af.u]);
                    }
                }
            }
            bool known = false;
            for (size_t i = 0; i < n_tracks; i++) known |= tracks[i] == track;
            CHECK(known);
            if (type == MST_PFT_SLICE_BEGIN) w->begins++;
            if (type == MST_PFT_SLICE_END) w->ends++;
            if (type == MST_PFT_COUNTER) w->counters++;
        }
    }
    CHECK(mst_pb_reader_done(&r));
}

static mst_status add(mst_pftrace_writer *w, const char *name, int i, const char *extra) {
    char json[1024];
    int n = snprintf(json, sizeof json,
                     MST_PERFETTO_MAGIC
                     "{\"name\":\"%s\",\"category\":\"c\",\"trace_id\":\"%032x\",\"span_id\":\"%016x\","
                     "\"parent_span_id\":\"\",\"start_time_ns\":%d,\"end_time_ns\":%d,\"kind\":1,"
                     "\"status\":1,\"attributes\":{\"process.pid\":5,\"thread.id\":%d,"
                     "\"model\":\"m\",\"kv_cache.usage\":0.5,\"scheduler.waiting\":1%s},"
                     "\"resource_attributes\":{\"service.name\":\"vllm\"},\"links\":[]}",
                     name, 1, i + 1, 1000 + i, 2000 + i, i % 3, extra);
    mst_arena a;
    mst_arena_init(&a);
    mst_pf_span s;
    char err[200];
    mst_status st = mst_perfetto_packet_decode((const uint8_t *)json, (size_t)n, &a, &s, err, sizeof err);
    if (st == MST_OK) st = mst_pftrace_writer_add_span(w, &s);
    mst_arena_release(&a);
    return st;
}

static void test_file_walks_clean(void) {
    const char *path = tmp_path("a.pftrace");
    mst_pftrace_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_pftrace_writer_open(path, 1, &w, err, sizeof err), MST_OK);
    for (int i = 0; i < 100; i++) CHECK_EQ_INT(add(w, "span", i, ""), MST_OK);
    CHECK_EQ_INT(add(w, "vllm.request", 200, ",\"request.id\":\"r\""), MST_OK);
    CHECK_EQ_INT(mst_pftrace_writer_flush(w, false), MST_OK);
    mst_pftrace_writer_add_forwarder_counters(w, 5000, 101, 101, 0);
    mst_chrome_stats st;
    CHECK_EQ_INT(mst_pftrace_writer_close_final(w, &st), MST_OK);
    CHECK_EQ_INT(st.spans_written, 101);
    size_t len;
    uint8_t *data = (uint8_t *)mst_test_read_file(path, &len);
    CHECK(data != NULL);
    CHECK_EQ_INT(st.bytes_written, len);
    walk wk;
    walk_file(data, len, &wk);
    CHECK(wk.first_is_clock);
    CHECK_EQ_INT(wk.begins, 102); /* 101 spans + the request slice */
    CHECK_EQ_INT(wk.ends, wk.begins);
    CHECK_EQ_INT(wk.counters, 101 * 2 + 3); /* KV usage and waiting per span + own counters */
    CHECK_EQ_INT(wk.restarts, 1);
    free(data);
    unlink(path);
}

static void test_intern_restart_keeps_ids_resolvable(void) {
    const char *path = tmp_path("b.pftrace");
    mst_pftrace_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_pftrace_writer_open(path, 1, &w, err, sizeof err), MST_OK);
    for (int i = 0; i < 12000; i++) {
        char name[32], extra[64];
        snprintf(name, sizeof name, "n%d", i);
        snprintf(extra, sizeof extra, ",\"k%d\":\"v%d\",\"same\":\"s%d\"", i, i % 7, i % 3);
        CHECK_EQ_INT(add(w, name, i, extra), MST_OK);
    }
    CHECK_EQ_INT(mst_pftrace_writer_close(w), MST_OK);
    size_t len;
    uint8_t *data = (uint8_t *)mst_test_read_file(path, &len);
    CHECK(data != NULL);
    walk wk;
    walk_file(data, len, &wk);
    CHECK(wk.restarts >= 3); /* 8192 entries per generation */
    CHECK_EQ_INT(wk.begins, 12000);
    free(data);
    unlink(path);
}

static void test_open_refuses_bad_paths(void) {
    mst_pftrace_writer *w = NULL;
    char err[256];
    CHECK(mst_pftrace_writer_open(tmp_path("x.txt"), 1, &w, err, sizeof err) != MST_OK);
    CHECK(w == NULL);
    CHECK(strstr(err, ".pftrace") != NULL);
}


static void test_id_array_bytes(void) {
    mst_buf b;
    mst_buf_init(&b, 0);
    uint64_t iids[2] = {5, 300};
    mst_pft_annotation_iid_array(&b, 7, iids, 2);
    /* debug_annotations (4) { name_iid 7, array_values (12) { string_value_iid (17) 5 },
     * array_values { string_value_iid 300 } } */
    static const uint8_t want[] = {0x22, 13, 0x08, 7, 0x62, 3, 0x88, 0x01, 5,
                                   0x62, 4, 0x88, 0x01, 0xac, 0x02};
    CHECK_EQ_INT(b.len, sizeof want);
    CHECK(memcmp(b.data, want, sizeof want) == 0);
    /* an id of 2^14 or more (three bytes): every item the general way */
    mst_buf_reset(&b);
    uint64_t big[2] = {5, 1u << 14};
    mst_pft_annotation_iid_array(&b, 7, big, 2);
    static const uint8_t want_big[] = {0x22, 14, 0x08, 7, 0x62, 3, 0x88, 0x01, 5,
                                       0x62, 5, 0x88, 0x01, 0x80, 0x80, 0x01};
    CHECK_EQ_INT(b.len, sizeof want_big);
    CHECK(memcmp(b.data, want_big, sizeof want_big) == 0);
    mst_buf_free(&b);
}

static void test_id_list_split(void) {
    mst_pft_id_item it[4];
    size_t n;
    const char *ok = " [ \"a\", \"bc\" ,\"\"] ";
    CHECK(mst_pft_split_id_list(ok, strlen(ok), it, 4, &n));
    CHECK_EQ_INT(n, 3);
    CHECK(it[1].n == 2 && memcmp(it[1].s, "bc", 2) == 0 && it[2].n == 0);
    static const char *const refused[] = {"[]", "[1]", "[\"a\\\"b\"]", "[\"a\",]", "[\"a\"] x",
                                          "[\"a\"", "\"a\"", "[\"a\",\"b\",\"c\",\"d\",\"e\"]"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        CHECK(!mst_pft_split_id_list(refused[i], strlen(refused[i]), it, 4, &n));
    CHECK(mst_pft_is_id_list_key("request.ids", 11) && mst_pft_is_id_list_key("step.new_ids", 12));
    CHECK(!mst_pft_is_id_list_key("step.tokens", 11) && !mst_pft_is_id_list_key("ids", 3));
    /* Guided: an item equal to a guess is that guess (one left out and one
     * joined; a guess that is a prefix of the item is not it), the rest
     * are scanned; the result is the unguided split's. */
    const char *list = "[\"id-one-0123456789abcdef\",\"id-three-0123456789abcdef\",\"id-fo\","
                       "\"id-five-0123456789abcdef\",\"new\"]";
    const mst_pft_id_item guess[] = {{"id-one-0123456789abcdef", 23, NULL},
                                     {"id-two-0123456789abcdef", 23, NULL},
                                     {"id-three-0123456789abcdef", 25, NULL},
                                     {"id-f", 4, NULL},
                                     {"id-five-0123456789abcdef", 24, NULL}};
    mst_pft_id_item g[8], u[8];
    size_t ng, nu;
    uint32_t which[8];
    CHECK(mst_pft_split_id_list_guided(list, strlen(list), g, 8, &ng, guess, 5, which));
    CHECK(mst_pft_split_id_list(list, strlen(list), u, 8, &nu));
    CHECK_EQ_INT(ng, 5);
    CHECK_EQ_INT(nu, 5);
    for (size_t i = 0; i < ng && i < nu; i++) CHECK(g[i].s == u[i].s && g[i].n == u[i].n);
    CHECK(which[0] == 0 && which[1] == 2 && which[2] == MST_PFT_ID_NO_GUESS && which[3] == 4 &&
          which[4] == MST_PFT_ID_NO_GUESS);
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        CHECK(!mst_pft_split_id_list_guided(refused[i], strlen(refused[i]), it, 4, &n, guess, 5, which));
    const char *escaped = "[\"id-one-0123456789abcdef\",\"a\\\"b\"]"; /* an escape after a guess */
    CHECK(!mst_pft_split_id_list_guided(escaped, strlen(escaped), g, 8, &ng, guess, 5, which));
}

static void test_id_chain_keyframes_and_deltas(void) {
    mst_pft_id_chains *c = mst_pft_id_chains_new();
    CHECK(c != NULL);
    mst_pft_id_delta d;
    uint64_t a[] = {1, 2, 3, 4, 5, 6}, b[] = {2, 3, 4, 5, 6, 7}, r[] = {2, 4, 3, 5, 6, 7},
             dup[] = {2, 2, 3, 4, 5, 6};
    CHECK(mst_pft_id_chain_step(c, 100, a, NULL, 6, &d) && d.pos == 0);          /* first: keyframe */
    CHECK(mst_pft_id_chain_step(c, 100, b, NULL, 6, &d) && d.pos == 1);          /* 1 left, 7 joined */
    CHECK(d.n_left == 1 && d.left[0] == 1 && d.n_joined == 1 && d.joined[0] == 7);
    CHECK(mst_pft_id_chain_step(c, 100, b, NULL, 6, &d) && d.pos == 2 && !d.n_left && !d.n_joined);
    CHECK(mst_pft_id_chain_step(c, 200, a, NULL, 6, &d) && d.pos == 0);         /* another stream */
    CHECK(mst_pft_id_chain_step(c, 100, r, NULL, 6, &d) && d.pos == 0);          /* reordered */
    CHECK(mst_pft_id_chain_step(c, 100, dup, NULL, 6, &d) && d.pos == 0);        /* an id twice */
    CHECK(mst_pft_id_chain_step(c, 100, b, NULL, 6, &d) && d.pos == 0);          /* after a dup list */
    CHECK(mst_pft_id_chain_step(c, 100, a + 3, NULL, 3, &d) && d.pos == 0);      /* half the list changed */
    /* a keyframe every MST_PFT_ID_KEYFRAME_EVERY lists of a stream */
    unsigned keyframes = 0;
    for (unsigned i = 0; i < 3 * MST_PFT_ID_KEYFRAME_EVERY; i++) {
        CHECK(mst_pft_id_chain_step(c, 300, a, NULL, 6, &d));
        keyframes += d.pos == 0;
        CHECK(d.pos == i % MST_PFT_ID_KEYFRAME_EVERY);
    }
    CHECK_EQ_INT(keyframes, 3);
    /* a stream's refs, for predicting its next list */
    const uint32_t *got_refs = NULL, refs[] = {11, 12, 13, 14, 15, 16};
    CHECK_EQ_INT(mst_pft_id_chain_last(c, 300, &got_refs), 0); /* recorded without */
    CHECK(mst_pft_id_chain_step(c, 300, a, refs, 6, &d));
    CHECK(mst_pft_id_chain_last(c, 300, &got_refs) == 6 && got_refs[0] == 11 && got_refs[5] == 16);
    CHECK_EQ_INT(mst_pft_id_chain_last(c, 400, &got_refs), 0);
    mst_pft_id_chain_forget(c, 300);
    CHECK_EQ_INT(mst_pft_id_chain_last(c, 300, &got_refs), 0);
    CHECK(mst_pft_id_chain_step(c, 300, a, refs, 6, &d));
    mst_pft_id_chains_reset(c);
    CHECK_EQ_INT(mst_pft_id_chain_last(c, 300, &got_refs), 0);
    CHECK(mst_pft_id_chain_step(c, 300, a, NULL, 6, &d) && d.pos == 0);
    mst_pft_id_chains_free(c);
}

/* Splits `list` against the text of `prev_list` kept in a chain (as the
 * writer does) and checks the runs splitter gives the plain split's items
 * and verdict; returns the items' places in prev through which[]. */
static bool split_runs_as_plain(const char *prev_list, const char *list, size_t cap, uint32_t *which,
                                size_t *n_out) {
    mst_pft_id_chains *c = mst_pft_id_chains_new();
    CHECK(c != NULL);
    mst_pft_id_item pi[16], r[16], u[16];
    size_t np = 0, nr = 0, nu = 0;
    CHECK(mst_pft_split_id_list(prev_list, strlen(prev_list), pi, 16, &np));
    uint64_t iids[16];
    uint32_t refs[16];
    for (size_t i = 0; i < np; i++) {
        iids[i] = 100 + i;
        refs[i] = (uint32_t)i;
    }
    mst_pft_id_delta d;
    CHECK(mst_pft_id_chain_step(c, 7, iids, refs, np, &d));
    mst_pft_id_chain_keep_text(c, 7, prev_list, strlen(prev_list), pi, np);
    mst_pft_id_text t;
    CHECK(mst_pft_id_chain_last_text(c, 7, &t));
    CHECK_EQ_INT(t.items, np);
    bool ok_r = mst_pft_split_id_list_runs(list, strlen(list), r, cap, &nr, &t, which);
    bool ok_u = mst_pft_split_id_list(list, strlen(list), u, cap, &nu);
    CHECK_EQ_INT(ok_r, ok_u);
    if (ok_r && ok_u) {
        CHECK_EQ_INT(nr, nu);
        for (size_t i = 0; i < nr && i < nu; i++) CHECK(r[i].s == u[i].s && r[i].n == u[i].n);
        for (size_t i = 0; i < nr; i++)
            if (which[i] != MST_PFT_ID_NO_GUESS)
                CHECK(pi[which[i]].n == r[i].n && memcmp(pi[which[i]].s, r[i].s, r[i].n) == 0);
    }
    *n_out = nr;
    mst_pft_id_chains_free(c);
    return ok_r;
}

/* The runs splitter (a stream's previous list's text taken whole where the
 * new list agrees with it): the plain split's items and verdict whatever
 * the two lists, its items of the previous list told by their place. */
static void test_id_list_split_runs(void) {
    const char *prev = "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef0123\",\"cc\",\"dd-x\","
                       "\"ee-0123456789abcdef0123\"]";
    uint32_t w[16];
    size_t n;
    /* one left in the middle, one joined at the end: two runs, a new id */
    CHECK(split_runs_as_plain(prev, "[\"aa-0123456789abcdef0123\",\"cc\",\"dd-x\",\"ee-0123456789abcdef0123\",\"ff\"]", 16, w, &n));
    CHECK(n == 5 && w[0] == 0 && w[1] == 2 && w[2] == 3 && w[3] == 4 && w[4] == MST_PFT_ID_NO_GUESS);
    /* the same list: one run */
    CHECK(split_runs_as_plain(prev, prev, 16, w, &n));
    CHECK(n == 5 && w[0] == 0 && w[4] == 4);
    /* an item that is a prefix (or an extension) of the previous one there */
    CHECK(split_runs_as_plain(prev, "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef012\",\"cc\"]", 16, w, &n));
    CHECK(n == 3 && w[0] == 0 && w[1] == MST_PFT_ID_NO_GUESS && w[2] == 2);
    CHECK(split_runs_as_plain(prev, "[\"aa-0123456789abcdef0123\",\"cc1\",\"dd-x\"]", 16, w, &n));
    CHECK(n == 3 && w[1] == MST_PFT_ID_NO_GUESS && w[2] == 3);
    /* ... where the run ends just at a previous item's closing quote */
    CHECK(split_runs_as_plain(prev, "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef0123\",\"cc1\",\"dd-x\"]", 16, w, &n));
    CHECK(n == 4 && w[0] == 0 && w[1] == 1 && w[2] == MST_PFT_ID_NO_GUESS && w[3] == 3);
    /* other blanks between the items than before */
    CHECK(split_runs_as_plain(prev, " [ \"aa-0123456789abcdef0123\" , \"bb-0123456789abcdef0123\",\"cc\" ] ", 16, w, &n));
    CHECK(n == 3 && w[0] == 0 && w[1] == 1 && w[2] == 2);
    /* a new id in the middle, the rest after it; more than the look-ahead left */
    CHECK(split_runs_as_plain(prev, "[\"aa-0123456789abcdef0123\",\"zz\",\"bb-0123456789abcdef0123\"]", 16, w, &n));
    CHECK(n == 3 && w[1] == MST_PFT_ID_NO_GUESS && w[2] == 1);
    CHECK(split_runs_as_plain(prev, "[\"ee-0123456789abcdef0123\",\"aa-0123456789abcdef0123\"]", 16, w, &n));
    CHECK(n == 2 && w[0] == MST_PFT_ID_NO_GUESS && w[1] == 0); /* ee is beyond the look-ahead */
    /* refused as the plain split refuses: after a run, bad syntax, an
     * escape, more items than cap (in a run and after it) */
    static const char *const refused[] = {
        "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef0123\",]",
        "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef0123\"] x",
        "[\"aa-0123456789abcdef0123\",\"b\\\"b\"]",
        "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef0123\"",
        "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef0123\",\"cc\",\"dd-x\"]", "[]", "[1]"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        CHECK(!split_runs_as_plain(prev, refused[i], 3, w, &n));
    /* exactly cap items */
    CHECK(split_runs_as_plain(prev, "[\"aa-0123456789abcdef0123\",\"bb-0123456789abcdef0123\",\"cc\"]", 3, w, &n));
    CHECK_EQ_INT(n, 3);
}

/* The shaped chain step (the caller tells which ids were kept) records and
 * writes each list as the general one does. */
static void test_id_chain_step_shaped(void) {
    mst_pft_id_chains *plain = mst_pft_id_chains_new(), *shaped = mst_pft_id_chains_new();
    CHECK(plain && shaped);
    /* lists as (kept places in the previous list, new ids) */
    uint64_t lists[][8] = {{1, 2, 3, 4, 5, 6}, {2, 3, 4, 5, 6, 7}, {2, 4, 5, 6, 7, 8},
                           {2, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14}, {9, 10, 11, 12, 13, 14, 15, 16}};
    size_t lens[] = {6, 6, 6, 6, 6, 8};
    uint32_t refs[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
        const uint64_t *cur = lists[l];
        uint32_t which[8];
        size_t kept = 0, n_last = l ? lens[l - 1] : 0;
        for (size_t i = 0; i < lens[l] && l; i++) {
            size_t g = 0;
            while (g < n_last && lists[l - 1][g] != cur[i]) g++;
            if (g == n_last) break;
            which[kept++] = (uint32_t)g;
        }
        mst_pft_id_delta dp, ds;
        CHECK(mst_pft_id_chain_step(plain, 5, cur, refs, lens[l], &dp));
        CHECK(mst_pft_id_chain_step_shaped(shaped, 5, cur, refs, lens[l], which, kept, n_last, &ds));
        CHECK_EQ_INT(dp.pos, ds.pos);
        CHECK_EQ_INT(dp.n_left, ds.n_left);
        CHECK_EQ_INT(dp.n_joined, ds.n_joined);
        for (size_t i = 0; i < dp.n_left && i < ds.n_left; i++) CHECK(dp.left[i] == ds.left[i]);
        for (size_t i = 0; i < dp.n_joined && i < ds.n_joined; i++) CHECK(dp.joined[i] == ds.joined[i]);
    }
    mst_pft_id_chains_free(plain);
    mst_pft_id_chains_free(shaped);
}

static const mst_test_case TESTS[] = {
    {"annotation_bytes", test_annotation_bytes},
    {"event_packet_bytes", test_event_packet_bytes},
    {"slice_begin_bytes", test_slice_begin_bytes},
    {"file_walks_clean", test_file_walks_clean},
    {"intern_restart_keeps_ids_resolvable", test_intern_restart_keeps_ids_resolvable},
    {"open_refuses_bad_paths", test_open_refuses_bad_paths},
    {"id_array_bytes", test_id_array_bytes},
    {"id_list_split", test_id_list_split},
    {"id_chain_keyframes_and_deltas", test_id_chain_keyframes_and_deltas},
    {"id_list_split_runs", test_id_list_split_runs},
    {"id_chain_step_shaped", test_id_chain_step_shaped},
};

MST_TEST_MAIN(TESTS)
