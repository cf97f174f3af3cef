/*
 * fuzz_packet_decode.c — libFuzzer target for the forwarder's untrusted
 * input path: the strict JSON reader and the Perfetto packet decoder
 * (perfetto_packet_decode.c), then the Chrome Trace writer fed with
 * whatever decodes. The input is tried as a whole packet and with the magic
 * prefixed (so the fuzzer need not discover the magic).
 *
 * Invariants checked (abort on violation):
 *   - a failed decode writes a non-empty message and the status is PARSE,
 *     TOO_LARGE or NOMEM;
 *   - a decoded span has lowercase hex ids of the right length, counts
 *     within the limits, keys that lie inside the input (plain) or are
 *     NUL-terminated arena copies (escaped), raw values that lie inside the
 *     input and are each one valid JSON value, and process.pid/thread.id
 *     taken out only when present as integers;
 *   - the events the writer appends for it form valid JSON: after each
 *     flush the bytes from the old closing ']' to the end of the file are
 *     re-read and validated as an array;
 *   - a span the decoder marked plain_text is written exactly as through
 *     the writer's checked path: a twin writer gets every span with the
 *     mark cleared, and the two files stay byte-identical;
 *   - the loss report decoder (wire/loss_report.h) accepts exactly the
 *     payloads of its size that start with its magic, and what it accepts
 *     encodes back to the same bytes (tried on the input as is and with
 *     the report magic prefixed);
 *   - the fast path (perfetto_packet_fast.c) agrees with the general
 *     decoder: whenever it accepts, the general decoder accepts with the
 *     same span (pf_span_compare.h, the request id stream fields
 *     included), and the public decoder's status and message are always
 *     the general decoder's. The input is also tried behind the change
 *     packet's magic (MSPF_PERFETTO_V2; the stream state behind it has its
 *     own target, fuzz_id_streams.c).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward/chrome_trace.h"
#include "wire/json_reader.h"
#include "wire/loss_report.h"
#include "wire/frame.h"
#include "wire/perfetto_packet.h"
#include "wire/perfetto_packet_fast.h"
#include "../unit/pf_span_compare.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

static mst_chrome_writer *g_writer, *g_twin; /* g_twin: every span as not plain_text */
static char g_path[64], g_twin_path[64];
static int g_read_fd = -1, g_twin_fd = -1;
static off_t g_prev_size;
static unsigned g_spans_in_file;

static void remove_output(void) {
    if (g_path[0]) unlink(g_path);
    if (g_twin_path[0]) unlink(g_twin_path);
}

static void open_writer(void) {
    char err[256];
    if (!g_path[0]) {
        snprintf(g_path, sizeof g_path, "/tmp/mst_fuzz_packet_%d.json", (int)getpid());
        snprintf(g_twin_path, sizeof g_twin_path, "/tmp/mst_fuzz_packet_%d.twin.json", (int)getpid());
        atexit(remove_output);
    }
    REQUIRE(mst_chrome_writer_open(g_path, 4242, &g_writer, err, sizeof err) == MST_OK);
    REQUIRE(mst_chrome_writer_open(g_twin_path, 4242, &g_twin, err, sizeof err) == MST_OK);
    if (g_read_fd >= 0) close(g_read_fd);
    if (g_twin_fd >= 0) close(g_twin_fd);
    g_read_fd = open(g_path, O_RDONLY | O_CLOEXEC);
    g_twin_fd = open(g_twin_path, O_RDONLY | O_CLOEXEC);
    REQUIRE(g_read_fd >= 0 && g_twin_fd >= 0);
    g_prev_size = 2; /* "[]" */
    g_spans_in_file = 0;
}

static bool is_hex(const char *s, size_t n) {
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

static void check_kvs(const mst_pf_kv *kv, size_t n, const uint8_t *data, size_t len) {
    REQUIRE(n <= MST_PF_MAX_ATTRS);
    REQUIRE(n == 0 || kv != NULL);
    for (size_t i = 0; i < n; i++) {
        /* A key is a slice: inside the input (no escapes) or an arena copy. */
        const uint8_t *k = (const uint8_t *)kv[i].key.ptr;
        REQUIRE(k);
        bool in_input = k >= data && k < data + len;
        REQUIRE(in_input ? k + kv[i].key.len <= data + len : k[kv[i].key.len] == '\0');
        const uint8_t *v = (const uint8_t *)kv[i].value.ptr;
        REQUIRE(v >= data && v + kv[i].value.len <= data + len && kv[i].value.len > 0);
        REQUIRE(mst_json_validate(v, kv[i].value.len, MST_PF_MAX_DEPTH, NULL, NULL));
        /* Keys are unique. */
        for (size_t j = 0; j < i; j++)
            REQUIRE(kv[j].key.len != kv[i].key.len ||
                    memcmp(kv[j].key.ptr, kv[i].key.ptr, kv[i].key.len) != 0);
    }
}

static void check_span(const mst_pf_span *s, const uint8_t *data, size_t len) {
    REQUIRE(is_hex(s->trace_id, 32));
    REQUIRE(is_hex(s->span_id, 16));
    REQUIRE(s->parent_span_id[0] == '\0' || is_hex(s->parent_span_id, 16));
    REQUIRE(s->name.ptr && s->name.ptr[s->name.len] == '\0');
    REQUIRE(s->category.ptr && s->category.ptr[s->category.len] == '\0');
    check_kvs(s->attrs, s->n_attrs, data, len);
    check_kvs(s->resource, s->n_resource, data, len);
    for (size_t i = 0; i < s->n_attrs; i++) {
        int64_t v;
        const mst_str *k = &s->attrs[i].key;
        bool special = (k->len == 11 && !memcmp(k->ptr, "process.pid", 11)) ||
                       (k->len == 9 && !memcmp(k->ptr, "thread.id", 9));
        /* An integer pid/tid must have been taken out. */
        if (special) REQUIRE(!mst_json_slice_to_i64(&s->attrs[i].value, &v));
    }
    REQUIRE(s->n_links <= MST_PF_MAX_LINKS);
    for (size_t i = 0; i < s->n_links; i++) {
        REQUIRE(is_hex(s->links[i].trace_id, 32));
        REQUIRE(is_hex(s->links[i].span_id, 16));
    }
}

/* Validates what the last flush appended. */
static void check_appended(void) {
    struct stat st;
    REQUIRE(fstat(g_read_fd, &st) == 0);
    REQUIRE(st.st_size >= g_prev_size);
    size_t n = (size_t)(st.st_size - g_prev_size) + 1; /* from the old ']' */
    char *buf = malloc(n + 1);
    REQUIRE(buf);
    REQUIRE(pread(g_read_fd, buf + 1, n, g_prev_size - 1) == (ssize_t)n);
    REQUIRE(buf[n] == ']');
    /* the twin (checked path) wrote the same bytes */
    struct stat tst;
    REQUIRE(fstat(g_twin_fd, &tst) == 0);
    REQUIRE(tst.st_size == st.st_size);
    char *twin = malloc(n);
    REQUIRE(twin);
    REQUIRE(pread(g_twin_fd, twin, n, g_prev_size - 1) == (ssize_t)n);
    if (memcmp(twin, buf + 1, n) != 0) {
        fprintf(stderr, "plain_text output differs from the checked path's:\n%.*s\n%.*s\n",
                (int)n, buf + 1, (int)n, twin);
        abort();
    }
    free(twin);
    /* "[" + appended events (drop a leading ',') + "]" */
    size_t off = 0;
    if (buf[1] == ',') off = 1;
    buf[off] = '[';
    const char *err = NULL;
    size_t err_off = 0;
    if (!mst_json_validate(buf + off, n + 1 - off, 64, &err, &err_off)) {
        fprintf(stderr, "writer produced invalid JSON (%s at %zu): %.*s\n", err, err_off,
                (int)(n + 1 - off), buf + off);
        abort();
    }
    free(buf);
    g_prev_size = st.st_size;
}

/* The fast path alone and the general decoder alone, against each other
 * and against the public decoder's result (st, err, span). */
static void check_paths_agree(const uint8_t *data, size_t len, mst_status st, const char *err,
                              const mst_pf_span *span) {
    mst_arena ga, fa;
    mst_pf_span general, fast;
    char gerr[256];
    mst_arena_init(&ga);
    mst_arena_init(&fa);
    mst_status gst = mst_perfetto_packet_decode_general(data, len, &ga, &general, gerr, sizeof gerr);
    REQUIRE(gst == st && strcmp(gerr, err) == 0);
    if (st == MST_OK) REQUIRE(pf_spans_differ(span, &general, data, len) == NULL);
    bool v1 = len >= MST_PERFETTO_MAGIC_LEN && memcmp(data, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN) == 0;
    bool v2 = len >= MST_PERFETTO_MAGIC_LEN && memcmp(data, MST_PERFETTO_CHANGE_MAGIC, MST_PERFETTO_MAGIC_LEN) == 0;
    if (v1 || v2) {
        mst_pf_span_defaults(&fast);
        fast.ids_change = v2;
        if (mst_pf_decode_fast(data + MST_PERFETTO_MAGIC_LEN, len - MST_PERFETTO_MAGIC_LEN, &fa,
                               &fast)) {
            REQUIRE(gst == MST_OK);
            REQUIRE(pf_spans_differ(&fast, &general, data, len) == NULL);
        }
    }
    mst_arena_release(&ga);
    mst_arena_release(&fa);
}

static void decode_one(const uint8_t *data, size_t len) {
    mst_arena arena;
    mst_pf_span span;
    char err[256];
    mst_arena_init(&arena);
    mst_status st = mst_perfetto_packet_decode(data, len, &arena, &span, err, sizeof err);
    check_paths_agree(data, len, st, err, &span);
    if (st != MST_OK) {
        REQUIRE(st == MST_ERR_PARSE || st == MST_ERR_TOO_LARGE || st == MST_ERR_NOMEM);
        REQUIRE(err[0] != '\0');
    } else {
        check_span(&span, data, len);
        if (!g_writer) open_writer();
        mst_status ws = mst_chrome_writer_add_span(g_writer, &span);
        REQUIRE(ws == MST_OK);
        mst_pf_span checked = span;
        checked.plain_text = false;
        REQUIRE(mst_chrome_writer_add_span(g_twin, &checked) == MST_OK);
        REQUIRE(mst_chrome_writer_flush(g_writer) == MST_OK);
        REQUIRE(mst_chrome_writer_flush(g_twin) == MST_OK);
        check_appended();
        if (++g_spans_in_file >= 2048) { /* keep the file small */
            REQUIRE(mst_chrome_writer_close(g_writer) == MST_OK);
            REQUIRE(mst_chrome_writer_close(g_twin) == MST_OK);
            open_writer();
        }
    }
    mst_arena_release(&arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_loss_report(const uint8_t *p, size_t n) {
    mst_loss_report r;
    bool ok = mst_loss_report_decode(p, n, &r);
    REQUIRE(ok == (n == MST_LOSS_REPORT_BYTES && mst_loss_report_is(p, n)));
    if (!ok) return;
    uint8_t again[MST_LOSS_REPORT_BYTES];
    mst_loss_report_encode(&r, again);
    REQUIRE(memcmp(again, p, n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MST_FRAME_MAX_BYTES) return 0;
    /* The reader on its own, on the raw bytes. */
    (void)mst_json_validate(data, size, MST_PF_MAX_DEPTH, NULL, NULL);
    /* Exact-size copies so any overread is caught by ASan. */
    uint8_t *a = malloc(size ? size : 1);
    if (!a) return 0;
    memcpy(a, data, size);
    decode_one(a, size);
    decode_loss_report(a, size);
    free(a);
    uint8_t *b = malloc(MST_PERFETTO_MAGIC_LEN + size);
    if (!b) return 0;
    memcpy(b, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
    memcpy(b + MST_PERFETTO_MAGIC_LEN, data, size);
    decode_one(b, MST_PERFETTO_MAGIC_LEN + size);
    memcpy(b, MST_PERFETTO_CHANGE_MAGIC, MST_PERFETTO_MAGIC_LEN);
    decode_one(b, MST_PERFETTO_MAGIC_LEN + size);
    free(b);
    uint8_t *c = malloc(MST_LOSS_REPORT_MAGIC_LEN + size);
    if (!c) return 0;
    memcpy(c, MST_LOSS_REPORT_MAGIC, MST_LOSS_REPORT_MAGIC_LEN);
    memcpy(c + MST_LOSS_REPORT_MAGIC_LEN, data, size);
    decode_loss_report(c, MST_LOSS_REPORT_MAGIC_LEN + size);
    free(c);
    return 0;
}
