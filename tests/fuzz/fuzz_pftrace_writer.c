/*
 * fuzz_pftrace_writer.c — libFuzzer target for the native Perfetto writer
 * (forward/pftrace_writer.c) and the timeline model it feeds
 * (forward/timeline.c: request.ids walks, request.id, counter attributes)
 * with whatever the packet decoder accepts from untrusted input. The input
 * is decoded with the magic prefixed (as fuzz_packet_decode does).
 *
 * Invariants checked (abort on violation), on the bytes each flush appends:
 *   - they are whole `Trace.packet` fields (field 1, length-delimited) and
 *     every packet parses as protobuf, as do its TrackEvent, InternedData and
 *     TrackDescriptor;
 *   - every interned name / category / annotation name / string value a
 *     TrackEvent uses (an id list's items included) was defined earlier in
 *     the file since the last SEQ_INCREMENTAL_STATE_CLEARED.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "forward/pftrace_writer.h"
#include "wire/frame.h"
#include "wire/pb_reader.h"
#include "wire/perfetto_packet.h"
#include "wire/perfetto_trace_encode.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

#define MAX_IID 65536
#define FLUSH_EVERY 64

static mst_pftrace_writer *g_writer;
static char g_path[64];
static int g_read_fd = -1;
static off_t g_prev_size;
static unsigned g_spans_in_file;
static uint8_t g_defined[30][MAX_IID];

static void remove_output(void) {
    if (g_path[0]) unlink(g_path);
}

static void open_writer(void) {
    char err[256];
    if (!g_path[0]) {
        snprintf(g_path, sizeof g_path, "/tmp/mst_fuzz_pftrace_%d.pftrace", (int)getpid());
        atexit(remove_output);
    }
    REQUIRE(mst_pftrace_writer_open(g_path, 4242, &g_writer, err, sizeof err) == MST_OK);
    if (g_read_fd >= 0) close(g_read_fd);
    g_read_fd = open(g_path, O_RDONLY | O_CLOEXEC);
    REQUIRE(g_read_fd >= 0);
    g_prev_size = 0;
    g_spans_in_file = 0;
    memset(g_defined, 0, sizeof g_defined);
}

/* Every field of a message parses; returns the reader's end state. */
static void parse_all(const uint8_t *p, size_t n) {
    mst_pb_reader r;
    mst_pb_field f;
    mst_pb_reader_init(&r, p, n);
    mst_status st;
    while ((st = mst_pb_next(&r, &f)) == MST_OK) {
    }
    REQUIRE(st == MST_ERR_CLOSED);
}

static void check_iid(unsigned kind, uint64_t iid) {
    REQUIRE(iid > 0 && iid < MAX_IID && g_defined[kind][iid]);
}

/* An id list's item (array_values): one interned string value. */
static void check_array_item(const uint8_t *p, size_t n) {
    mst_pb_reader r;
    mst_pb_field f;
    unsigned values = 0;
    mst_pb_reader_init(&r, p, n);
    while (mst_pb_next(&r, &f) == MST_OK) {
        REQUIRE(f.number == 17);
        check_iid(MST_PFT_INTERN_STRING_VALUE, f.u);
        values++;
    }
    REQUIRE(values == 1);
}

static void check_packet(const uint8_t *p, size_t n) {
    parse_all(p, n);
    mst_pb_reader r;
    mst_pb_field f;
    mst_pb_reader_init(&r, p, n);
    const uint8_t *te = NULL, *in = NULL;
    size_t te_n = 0, in_n = 0;
    uint64_t flags = 0;
    while (mst_pb_next(&r, &f) == MST_OK) {
        if (f.number == 13) flags = f.u;
        if (f.number == 11) { te = f.data; te_n = f.len; }
        if (f.number == 12) { in = f.data; in_n = f.len; }
        if (f.number == 60) parse_all(f.data, f.len);
    }
    if (flags & MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED) memset(g_defined, 0, sizeof g_defined);
    if (in) {
        mst_pb_reader ir;
        mst_pb_reader_init(&ir, in, in_n);
        while (mst_pb_next(&ir, &f) == MST_OK) {
            REQUIRE(f.wire_type == MST_PB_WT_LEN && f.number < 30);
            mst_pb_reader er;
            mst_pb_field ef;
            mst_pb_reader_init(&er, f.data, f.len);
            while (mst_pb_next(&er, &ef) == MST_OK)
                if (ef.number == 1) {
                    REQUIRE(ef.u > 0 && ef.u < MAX_IID);
                    g_defined[f.number][ef.u] = 1;
                }
        }
    }
    if (te) {
        mst_pb_reader er;
        mst_pb_reader_init(&er, te, te_n);
        while (mst_pb_next(&er, &f) == MST_OK) {
            if (f.number == 10) check_iid(MST_PFT_INTERN_EVENT_NAME, f.u);
            if (f.number == 3) check_iid(MST_PFT_INTERN_CATEGORY, f.u);
            if (f.number == 4) {
                mst_pb_reader ar;
                mst_pb_field af;
                mst_pb_reader_init(&ar, f.data, f.len);
                while (mst_pb_next(&ar, &af) == MST_OK) {
                    if (af.number == 1) check_iid(MST_PFT_INTERN_ANNOTATION_NAME, af.u);
                    if (af.number == 17) check_iid(MST_PFT_INTERN_STRING_VALUE, af.u);
                    if (af.number == 12) check_array_item(af.data, af.len);
                }
            }
        }
    }
}

/* Checks the bytes appended since the last flush. */
static void check_appended(void) {
    struct stat st;
    REQUIRE(fstat(g_read_fd, &st) == 0);
    REQUIRE(st.st_size >= g_prev_size);
    size_t n = (size_t)(st.st_size - g_prev_size);
    uint8_t *buf = malloc(n ? n : 1);
    REQUIRE(buf);
    REQUIRE(pread(g_read_fd, buf, n, g_prev_size) == (ssize_t)n);
    mst_pb_reader r;
    mst_pb_field f;
    mst_pb_reader_init(&r, buf, n);
    mst_status s;
    while ((s = mst_pb_next(&r, &f)) == MST_OK) {
        REQUIRE(f.number == 1 && f.wire_type == MST_PB_WT_LEN);
        check_packet(f.data, f.len);
    }
    REQUIRE(s == MST_ERR_CLOSED);
    free(buf);
    g_prev_size = st.st_size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MST_FRAME_MAX_BYTES) return 0;
    uint8_t *b = malloc(MST_PERFETTO_MAGIC_LEN + size);
    if (!b) return 0;
    memcpy(b, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
    memcpy(b + MST_PERFETTO_MAGIC_LEN, data, size);
    mst_arena arena;
    mst_pf_span span;
    mst_arena_init(&arena);
    if (mst_perfetto_packet_decode(b, MST_PERFETTO_MAGIC_LEN + size, &arena, &span, NULL, 0) ==
        MST_OK) {
        if (!g_writer) {
            open_writer();
            check_appended(); /* the clock snapshot */
        }
        REQUIRE(mst_pftrace_writer_add_span(g_writer, &span) == MST_OK);
        /* Flush and check every FLUSH_EVERY spans: a flush waits for the
         * writer thread, which would dominate the run time. */
        if (++g_spans_in_file % FLUSH_EVERY == 0) {
            REQUIRE(mst_pftrace_writer_flush(g_writer, false) == MST_OK);
            check_appended();
        }
        if (g_spans_in_file >= 2048) { /* keep the file small; close completes requests */
            REQUIRE(mst_pftrace_writer_flush(g_writer, true) == MST_OK);
            check_appended();
            REQUIRE(mst_pftrace_writer_close(g_writer) == MST_OK);
            g_writer = NULL;
        }
    }
    mst_arena_release(&arena);
    free(b);
    return 0;
}
