/*
 * test_pftrace.c — the native Perfetto encoder (wire/perfetto_trace_encode.h)
 * and writer (forward/pftrace_writer.h). Bytes of single pieces are checked
 * against hand-encoded protobuf; whole files are walked packet by packet
 * with the project's protobuf reader: every record is a whole Trace.packet,
 * the first is the clock snapshot, every interned id is defined earlier in
 * the sequence (also across restarts), every track has a descriptor before
 * its first event, begins and ends pair up. (The official-proto decoding
 * lives in tests/integration/test_pftrace.py.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
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

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
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
                     "\"model\":\"m\",\"kv_cache.usage\":0.5%s},"
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
    uint8_t *data = read_all(path, &len);
    CHECK_EQ_INT(st.bytes_written, len);
    walk wk;
    walk_file(data, len, &wk);
    CHECK(wk.first_is_clock);
    CHECK_EQ_INT(wk.begins, 102); /* 101 spans + the request slice */
    CHECK_EQ_INT(wk.ends, wk.begins);
    CHECK_EQ_INT(wk.counters, 101 + 3); /* kv_cache.usage per span + own counters */
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
    uint8_t *data = read_all(path, &len);
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

static const mst_test_case TESTS[] = {
    {"annotation_bytes", test_annotation_bytes},
    {"file_walks_clean", test_file_walks_clean},
    {"intern_restart_keeps_ids_resolvable", test_intern_restart_keeps_ids_resolvable},
    {"open_refuses_bad_paths", test_open_refuses_bad_paths},
};

MST_TEST_MAIN(TESTS)
