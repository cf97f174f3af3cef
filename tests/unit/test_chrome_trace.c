/*
 * test_chrome_trace.c — the Chrome Trace writer (src/forward/chrome_trace.c,
 * docs/forwarder.md "Output format") fed through the real packet decoder: the seed's expectations
 * (pid 100, tid 200, dur 1000 for 1 ms, args.trace_id, a late-arriving link
 * source still yields one s/f pair with equal ids), an invalid payload
 * leaving "[]", exact microsecond fractions, unicode/escape round trip, args
 * composition, M events, valid JSON after every flush, and table eviction.
 * Output is parsed back with the strict JSON reader. The fast paths are
 * checked against their references: the number and hex formatters
 * (chrome_json.h) against printf, and spans the decoder marked plain_text
 * against the same spans written through the checked path, byte for byte.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward/chrome_json.h"
#include "forward/chrome_trace.h"
#include "testlib.h"
#include "wire/json_reader.h"

static char g_dir[64];

static const char *tmp_path(const char *name) {
    static char path[256];
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/mst_chrome_test_XXXXXX");
        if (!mkdtemp(g_dir)) abort();
    }
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

/* Decodes magic + json and adds it to the writer; returns decode status. */
static mst_status add_json(mst_chrome_writer *w, const char *json) {
    size_t n = strlen(json);
    uint8_t *pkt = malloc(MST_PERFETTO_MAGIC_LEN + n);
    memcpy(pkt, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
    memcpy(pkt + MST_PERFETTO_MAGIC_LEN, json, n);
    mst_arena a;
    mst_pf_span s;
    char err[256];
    mst_arena_init(&a);
    mst_status st = mst_perfetto_packet_decode(pkt, MST_PERFETTO_MAGIC_LEN + n, &a, &s, err, sizeof err);
    if (st == MST_OK) st = mst_chrome_writer_add_span(w, &s);
    mst_arena_release(&a);
    free(pkt);
    return st;
}

static char *make_packet(const char *name, const char *trace, const char *span, long long start,
                         long long end, const char *link_trace, const char *link_span) {
    char *buf = malloc(2048);
    char links[256] = "";
    if (link_trace)
        snprintf(links, sizeof links, "{\"trace_id\":\"%s\",\"span_id\":\"%s\"}", link_trace, link_span);
    snprintf(buf, 2048,
             "{\"name\":\"%s\",\"category\":\"ms_service_profiler.hook.Tracing\",\"trace_id\":\"%s\","
             "\"span_id\":\"%s\",\"parent_span_id\":\"\",\"start_time_ns\":%lld,\"end_time_ns\":%lld,"
             "\"kind\":1,\"status\":1,\"attributes\":{\"process.pid\":100,\"thread.id\":200,"
             "\"request.id\":\"request-1\"},\"resource_attributes\":{\"service.name\":\"vllm\"},"
             "\"links\":[%s]}",
             name, trace, span, start, end, links);
    return buf;
}

/* ---- a tiny event model parsed back with the strict reader ---- */

typedef struct ev {
    char name[128], ph[4], cat[64], id[96];
    char ts[32], dur[32], pid[24], tid[24];
    char args[1024];
    char bp[4];
    size_t name_len;
} ev;

static void copy_raw(char *dst, size_t cap, const mst_json_slice *v) {
    size_t n = v->len < cap - 1 ? v->len : cap - 1;
    memcpy(dst, v->ptr, n);
    dst[n] = '\0';
}

/* Parses the whole file (must be valid JSON: an array of objects). */
static size_t parse_events(const char *text, size_t len, ev *out, size_t max) {
    mst_json_reader r;
    mst_arena a;
    mst_arena_init(&a);
    mst_json_reader_init(&r, text, len, 32);
    size_t n = 0;
    CHECK(mst_json_array_begin(&r));
    while (mst_json_array_next(&r) == 1) {
        ev e;
        memset(&e, 0, sizeof e);
        CHECK(mst_json_object_begin(&r));
        while (mst_json_object_next(&r) == 1) {
            mst_str k;
            CHECK(mst_json_read_key(&r, &a, &k));
            if (strcmp(k.ptr, "name") == 0 || strcmp(k.ptr, "ph") == 0 || strcmp(k.ptr, "cat") == 0 ||
                strcmp(k.ptr, "id") == 0 || strcmp(k.ptr, "bp") == 0) {
                mst_str v;
                CHECK(mst_json_read_str(&r, &a, &v));
                char *dst = k.ptr[0] == 'n' ? e.name : k.ptr[0] == 'p' ? e.ph : k.ptr[0] == 'c' ? e.cat
                          : k.ptr[0] == 'i' ? e.id : e.bp;
                size_t cap = k.ptr[0] == 'n' ? sizeof e.name : k.ptr[0] == 'p' ? sizeof e.ph
                           : k.ptr[0] == 'c' ? sizeof e.cat : k.ptr[0] == 'i' ? sizeof e.id : sizeof e.bp;
                size_t m = v.len < cap - 1 ? v.len : cap - 1;
                memcpy(dst, v.ptr, m);
                dst[m] = '\0';
                if (k.ptr[0] == 'n') e.name_len = v.len;
            } else {
                mst_json_slice v;
                CHECK(mst_json_read_raw(&r, &v));
                if (strcmp(k.ptr, "ts") == 0) copy_raw(e.ts, sizeof e.ts, &v);
                else if (strcmp(k.ptr, "dur") == 0) copy_raw(e.dur, sizeof e.dur, &v);
                else if (strcmp(k.ptr, "pid") == 0) copy_raw(e.pid, sizeof e.pid, &v);
                else if (strcmp(k.ptr, "tid") == 0) copy_raw(e.tid, sizeof e.tid, &v);
                else if (strcmp(k.ptr, "args") == 0) copy_raw(e.args, sizeof e.args, &v);
            }
        }
        if (n < max) out[n] = e;
        n++;
    }
    CHECK(mst_json_finish(&r));
    if (r.err) fprintf(stderr, "  parse error at %zu: %s\n", r.err_off, r.err);
    mst_arena_release(&a);
    return n;
}

static bool file_is_valid_json(const char *path) {
    size_t len;
    char *s = mst_test_read_file(path, &len);
    bool ok = s && mst_json_validate(s, len, 32, NULL, NULL);
    free(s);
    return ok;
}

#define T1 "11111111111111111111111111111111"
#define S2 "2222222222222222"
#define T3 "33333333333333333333333333333333"
#define S4 "4444444444444444"

static void test_seed_cross_trace_flow_late_source(void) {
    const char *path = tmp_path("hook_trace.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 4242, &w, err, sizeof err), MST_OK);
    char *p1 = make_packet("vllm.scheduler.schedule", T3, S4, 2000000, 3000000, T1, S2);
    char *p2 = make_packet("vllm.request", T1, S2, 1000000, 4000000, NULL, NULL);
    CHECK_EQ_INT(add_json(w, p1), MST_OK);
    mst_chrome_stats st;
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.flows_pending, 1);
    CHECK_EQ_INT(add_json(w, p2), MST_OK);
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.flows_pending, 0);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    free(p1);
    free(p2);

    size_t len;
    char *text = mst_test_read_file(path, &len);
    ev evs[16];
    size_t n = parse_events(text, len, evs, 16);
    const ev *x[4];
    const ev *flow[4];
    size_t nx = 0, nf = 0, nm = 0;
    for (size_t i = 0; i < n && i < 16; i++) {
        if (!strcmp(evs[i].ph, "X") && nx < 4) x[nx++] = &evs[i];
        else if ((!strcmp(evs[i].ph, "s") || !strcmp(evs[i].ph, "f")) && nf < 4) flow[nf++] = &evs[i];
        else if (!strcmp(evs[i].ph, "M")) nm++;
    }
    CHECK_EQ_INT(nx, 2);
    CHECK_EQ_INT(nf, 2);
    CHECK_EQ_INT(nm, 3); /* process_name for pid 100, once; the request thread's name and sort index */
    if (nx == 2 && nf == 2) {
        CHECK_EQ_STR(x[0]->name, "vllm.scheduler.schedule");
        CHECK_EQ_STR(x[1]->name, "vllm.request");
        CHECK_EQ_STR(x[0]->pid, "100");
        CHECK_EQ_STR(x[0]->tid, "200");
        CHECK_EQ_STR(x[0]->dur, "1000");
        CHECK_EQ_STR(x[0]->ts, "2000");
        CHECK_EQ_STR(x[0]->cat, "ms_service_profiler.hook.Tracing");
        CHECK(strstr(x[0]->args, "\"trace_id\":\"" T3 "\"") != NULL);
        CHECK(strstr(x[0]->args, "\"request.id\":\"request-1\"") != NULL);
        CHECK(strstr(x[0]->args, "\"service.name\":\"vllm\"") != NULL);
        CHECK(strstr(x[0]->args, "\"resource.service.name\":\"vllm\"") != NULL);
        CHECK(strstr(x[0]->args, "\"span.kind\":1") != NULL);
        CHECK(strstr(x[0]->args, "process.pid") == NULL);
        CHECK_EQ_STR(flow[0]->ph, "s");
        CHECK_EQ_STR(flow[1]->ph, "f");
        CHECK_EQ_STR(flow[0]->id, flow[1]->id);
        /* The id is a hexadecimal number (what Perfetto's JSON importer
         * accepts); the readable link is in both events' args. */
        CHECK(flow[0]->id && strlen(flow[0]->id) == 18 && strncmp(flow[0]->id, "0x", 2) == 0 &&
              strspn(flow[0]->id + 2, "0123456789abcdef") == 16);
        CHECK(strstr(flow[0]->args, "\"link\":\"" T1 ":" S2 ":" S4 "\"") != NULL);
        CHECK(strstr(flow[1]->args, "\"link\":\"" T1 ":" S2 ":" S4 "\"") != NULL);
        CHECK_EQ_STR(flow[0]->name, "request.link");
        CHECK_EQ_STR(flow[0]->cat, "Tracing.Flow");
        CHECK_EQ_STR(flow[0]->ts, "1000"); /* the source (request) span's start */
        CHECK_EQ_STR(flow[1]->ts, "2000"); /* the linking (schedule) span's start */
        CHECK_EQ_STR(flow[1]->bp, "e");
        CHECK(strstr(flow[0]->args, "\"source.span_id\":\"" S2 "\"") != NULL);
    }
    free(text);
    unlink(path);
}

/* A step and a model span link the requests they carried (marked by
 * request_links) and the model span links its step: the request links draw
 * no flow (request.ids joins them), the step link draws one. The requests'
 * spans come first, so every link could resolve at once. */
static void test_request_links_not_drawn(void) {
    const char *path = tmp_path("request_links.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 1, &w, err, sizeof err), MST_OK);
    char *r1 = make_packet("vllm.request", T1, S2, 1000000, 9000000, NULL, NULL);
    char *r2 = make_packet("vllm.request", T3, "6666666666666666", 1000000, 9000000, NULL, NULL);
    CHECK_EQ_INT(add_json(w, r1), MST_OK);
    CHECK_EQ_INT(add_json(w, r2), MST_OK);
    free(r1);
    free(r2);
#define REQ_LINKS "{\"trace_id\":\"" T1 "\",\"span_id\":\"" S2 "\"},{\"trace_id\":\"" T3 "\",\"span_id\":\"6666666666666666\"}"
#define STEP_SPAN(name, trace, span, start, links, n_req)                                                  \
    "{\"name\":\"" name "\",\"trace_id\":\"" trace "\",\"span_id\":\"" span "\",\"start_time_ns\":" start      \
    ",\"end_time_ns\":" start "500,\"attributes\":{\"process.pid\":100,\"thread.id\":300,"                  \
    "\"request.ids\":[\"request-1\",\"request-2\"],\"step.index\":1},\"links\":[" links "]" n_req "}"
    CHECK_EQ_INT(add_json(w, STEP_SPAN("vllm.scheduler.schedule", "77777777777777777777777777777777",
                                       S4, "2000000", REQ_LINKS, ",\"request_links\":2")),
                 MST_OK);
    CHECK_EQ_INT(add_json(w, STEP_SPAN("vllm.model.execute", "88888888888888888888888888888888",
                                       "9999999999999999", "3000000",
                                       "{\"trace_id\":\"77777777777777777777777777777777\",\"span_id\":\"" S4
                                       "\"}," REQ_LINKS,
                                       ",\"request_links\":2")),
                 MST_OK);
    /* The same step span without the mark: its links are user links, drawn. */
    CHECK_EQ_INT(add_json(w, STEP_SPAN("user.step", "99999999999999999999999999999999", "aaaaaaaaaaaaaaaa",
                                       "4000000", REQ_LINKS, "")),
                 MST_OK);
#undef STEP_SPAN
#undef REQ_LINKS
    CHECK_EQ_INT(mst_chrome_writer_flush(w), MST_OK);
    mst_chrome_stats st;
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.spans_written, 5);
    CHECK_EQ_INT(st.flows_written, 3); /* model -> step, user.step -> each request */
    CHECK_EQ_INT(st.flows_pending, 0);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    size_t len;
    char *text = mst_test_read_file(path, &len);
    CHECK(text && strstr(text, "\"link\":\"77777777777777777777777777777777:" S4 ":9999999999999999\"") != NULL);
    CHECK(text && strstr(text, ":" S2 ":" S4 "\"") == NULL);         /* no step -> request arrow */
    CHECK(text && strstr(text, ":" S2 ":9999999999999999\"") == NULL); /* no model -> request arrow */
    CHECK(text && strstr(text, ":" S2 ":aaaaaaaaaaaaaaaa\"") != NULL); /* unmarked: drawn */
    free(text);
    unlink(path);
}

static void test_source_first_emits_at_once(void) {
    const char *path = tmp_path("early.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 1, &w, err, sizeof err), MST_OK);
    char *p1 = make_packet("vllm.request", T1, S2, 1000000, 4000000, NULL, NULL);
    char *p2 = make_packet("vllm.scheduler.schedule", T3, S4, 2000000, 3000000, T1, S2);
    CHECK_EQ_INT(add_json(w, p1), MST_OK);
    CHECK_EQ_INT(add_json(w, p2), MST_OK);
    CHECK_EQ_INT(mst_chrome_writer_flush(w), MST_OK);
    mst_chrome_stats st;
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.spans_written, 2);
    CHECK_EQ_INT(st.flows_written, 1);
    CHECK_EQ_INT(st.flows_pending, 0);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    free(p1);
    free(p2);
    size_t len;
    char *text = mst_test_read_file(path, &len);
    ev evs[8];
    size_t n = parse_events(text, len, evs, 8);
    CHECK_EQ_INT(n, 7); /* M + X + X + s + f, and the request track (b + e) of vllm.request */
    free(text);
    unlink(path);
}

static void test_invalid_payload_leaves_empty_array(void) {
    const char *path = tmp_path("invalid.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 1, &w, err, sizeof err), MST_OK);
    mst_arena a;
    mst_pf_span s;
    mst_arena_init(&a);
    CHECK_EQ_INT(mst_perfetto_packet_decode((const uint8_t *)"binary-otlp", 11, &a, &s, err, sizeof err),
                 MST_ERR_PARSE);
    mst_arena_release(&a);
    CHECK_EQ_INT(add_json(w, "{\"trace_id\":1}"), MST_ERR_PARSE);
    CHECK_EQ_INT(mst_chrome_writer_flush(w), MST_OK);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    char *text = mst_test_read_file(path, NULL);
    CHECK_EQ_STR(text, "[]");
    free(text);
    unlink(path);
}

static void test_microsecond_formatting(void) {
    const char *path = tmp_path("ts.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 7, &w, err, sizeof err), MST_OK);
    struct { long long start, end; const char *ts, *dur; } cases[] = {
        {1500, 3000, "1.5", "1.5"},
        {1000000, 2000000, "1000", "1000"},
        {1, 2, "0.001", "0.001"},
        {1234567, 1234567, "1234.567", "0"},
        {5000, 1000, "5", "0"},                       /* end before start: dur 0 */
        {1700000000123456789LL, 1700000000123456999LL, "1700000000123456.789", "0.21"},
        {0, 9223372036854775807LL, "0", "9223372036854775.807"},
    };
    size_t nc = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < nc; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"name\":\"c%zu\",\"trace_id\":\"" T1 "\",\"span_id\":\"%016zx\",\"start_time_ns\":%lld,"
                 "\"end_time_ns\":%lld}",
                 i, i + 1, cases[i].start, cases[i].end);
        CHECK_EQ_INT(add_json(w, json), MST_OK);
    }
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    size_t len;
    char *text = mst_test_read_file(path, &len);
    ev evs[16];
    size_t n = parse_events(text, len, evs, 16);
    CHECK_EQ_INT(n, nc);
    for (size_t i = 0; i < nc && i < n; i++) {
        CHECK_EQ_STR(evs[i].ts, cases[i].ts);
        CHECK_EQ_STR(evs[i].dur, cases[i].dur);
        CHECK_EQ_STR(evs[i].pid, "7"); /* default pid */
        CHECK_EQ_STR(evs[i].tid, "0");
        CHECK(strstr(evs[i].args, "\"service.name\":\"ms_service_profiler\"") != NULL);
        CHECK(strstr(evs[i].args, "\"parent_span_id\":\"\"") != NULL);
    }
    free(text);
    unlink(path);
}

static void test_unicode_and_escapes_round_trip(void) {
    const char *path = tmp_path("unicode.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 7, &w, err, sizeof err), MST_OK);
    const char *json =
        "{\"name\":\"caf\\u00e9 \\\"q\\\" \\\\ \\n\\t\\u0001 \xe2\x9c\x93 \\ud83d\\ude00 \xf0\x9f\x98\x80 \\u0000end\","
        "\"trace_id\":\"" T1 "\",\"span_id\":\"" S2 "\","
        "\"attributes\":{\"k\\u00e9y\\n\":\"v\\\"al\\u2028\",\"list\":[\"a\",1,null,{\"x\":true}],"
        "\"thread.name\":\"worker \\u00e9\",\"trace_id\":\"spoofed\",\"resource.host\":\"attr-wins\"},"
        "\"resource_attributes\":{\"service.name\":\"svc \\\"x\\\"\",\"host\":\"res\",\"zone\":\"z1\"}}";
    CHECK_EQ_INT(add_json(w, json), MST_OK);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    size_t len;
    char *text = mst_test_read_file(path, &len);
    CHECK(mst_json_validate(text, len, 32, NULL, NULL));
    ev evs[8];
    size_t n = parse_events(text, len, evs, 8);
    CHECK_EQ_INT(n, 3); /* process_name, thread_name, X */
    if (n == 3) {
        CHECK_EQ_STR(evs[0].name, "process_name");
        CHECK(strstr(evs[0].args, "\"name\":\"svc \\\"x\\\"\"") != NULL);
        CHECK_EQ_STR(evs[1].name, "thread_name");
        const char *want = "caf\xc3\xa9 \"q\" \\ \n\t\x01 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xf0\x9f\x98\x80 \0end";
        size_t want_len = 34;
        CHECK_EQ_INT(evs[2].name_len, want_len);
        CHECK(memcmp(evs[2].name, want, want_len) == 0);
        const char *args = evs[2].args;
        CHECK(strstr(args, "\"trace_id\":\"" T1 "\"") != NULL);
        CHECK(strstr(args, "spoofed") == NULL);          /* fixed args win over attributes */
        CHECK(strstr(args, "\"resource.host\":\"attr-wins\"") != NULL);
        CHECK(strstr(args, "\"res\"") == NULL);          /* attribute won the collision */
        CHECK(strstr(args, "\"resource.zone\":\"z1\"") != NULL);
        CHECK(strstr(args, "\"list\":[\"a\",1,null,{\"x\":true}]") != NULL);
        CHECK(strstr(args, "\"k\xc3\xa9y\\n\":\"v\\\"al\\u2028\"") != NULL);
    }
    free(text);
    unlink(path);
}

static void test_valid_after_every_flush_and_names_once(void) {
    const char *path = tmp_path("flushes.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 7, &w, err, sizeof err), MST_OK);
    CHECK(file_is_valid_json(path));
    for (int i = 0; i < 50; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"name\":\"s%d\",\"trace_id\":\"" T1 "\",\"span_id\":\"%016x\",\"start_time_ns\":%d,"
                 "\"attributes\":{\"process.pid\":%d,\"thread.id\":%d,\"thread.name\":\"t%d\"},"
                 "\"resource_attributes\":{\"service.name\":\"svc\"}}",
                 i, i + 1, i * 1000, 10 + i % 2, i % 3, i % 3);
        CHECK_EQ_INT(add_json(w, json), MST_OK);
        if (i % 7 == 0) {
            CHECK_EQ_INT(mst_chrome_writer_flush(w), MST_OK);
            CHECK(file_is_valid_json(path));
        }
        CHECK_EQ_INT(mst_chrome_writer_flush(w), MST_OK); /* flushing twice is harmless */
        CHECK(file_is_valid_json(path));
    }
    mst_chrome_stats st;
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.spans_written, 50);
    CHECK_EQ_INT(st.write_errors, 0);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    size_t len;
    char *text = mst_test_read_file(path, &len);
    CHECK_EQ_INT((long long)st.bytes_written, (long long)len);
    ev *evs = calloc(64, sizeof *evs);
    size_t n = parse_events(text, len, evs, 64);
    /* 2 pids -> 2 process_name; (pid, tid) pairs: 6 thread_name; 50 X. */
    size_t pn = 0, tn = 0, nx = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (!strcmp(evs[i].name, "process_name")) pn++;
        else if (!strcmp(evs[i].name, "thread_name")) tn++;
        else if (!strcmp(evs[i].ph, "X")) nx++;
    }
    CHECK_EQ_INT(pn, 2);
    CHECK_EQ_INT(tn, 6);
    CHECK_EQ_INT(nx, 50);
    /* A reader tolerant of a missing ']' (SIGKILL case) sees the same
     * events: the bracket is the last byte and nothing follows it. */
    CHECK(len > 0 && text[len - 1] == ']');
    free(evs);
    free(text);
    unlink(path);
}

/* process.role names the process track "<role> (<service.name>)", once per
 * pid, escapes intact; without a service it is the role alone; a pid whose
 * first span has no role keeps the service name. */
static void test_process_role_names_the_process(void) {
    const char *path = tmp_path("roles.json");
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 7, &w, err, sizeof err), MST_OK);
    static const char *spans[] = {
        "{\"name\":\"a\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000001\","
        "\"attributes\":{\"process.pid\":11,\"process.role\":\"engine_core\"},"
        "\"resource_attributes\":{\"service.name\":\"vllm\"}}",
        "{\"name\":\"b\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000002\","
        "\"attributes\":{\"process.pid\":11,\"process.role\":\"other\"},"
        "\"resource_attributes\":{\"service.name\":\"vllm\"}}",
        "{\"name\":\"c\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000003\","
        "\"attributes\":{\"process.pid\":12,\"process.role\":\"w\\u00e9\\\"0\"},"
        "\"resource_attributes\":{\"service.name\":\"s\\n\"}}",
        "{\"name\":\"d\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000004\","
        "\"attributes\":{\"process.pid\":13,\"process.role\":\"worker_1\"}}",
        "{\"name\":\"e\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000005\","
        "\"attributes\":{\"process.pid\":14,\"process.role\":7},"
        "\"resource_attributes\":{\"service.name\":\"vllm\"}}",
    };
    for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++)
        CHECK_EQ_INT(add_json(w, spans[i]), MST_OK);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    size_t len;
    char *text = mst_test_read_file(path, &len);
    CHECK(mst_json_validate(text, len, 32, NULL, NULL));
    ev evs[16];
    size_t n = parse_events(text, len, evs, 16);
    const char *want[] = {"{\"name\":\"engine_core (vllm)\"}", "{\"name\":\"w\\u00e9\\\"0 (s\\n)\"}",
                          "{\"name\":\"worker_1\"}", "{\"name\":\"vllm\"}"};
    size_t pn = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(evs[i].name, "process_name") != 0) continue;
        if (pn < 4) CHECK_EQ_STR(evs[i].args, want[pn]);
        pn++;
    }
    CHECK_EQ_INT(pn, 4);
    free(text);
    unlink(path);
}

/* The eviction rules do not depend on the bound, so the tables are bounded
 * at BOUND here: with the production 100000 this test wrote 100001 spans and
 * timed out (300 s) under ASan on a loaded machine. */
enum { BOUND = 1000 };
static void test_tables_are_bounded(void) {
    const char *path = tmp_path("evict.json");
    mst_chrome_writer *w;
    char err[256];
    mst_chrome_writer_set_max_tracked(BOUND);
    CHECK_EQ_INT(mst_chrome_writer_open(path, 7, &w, err, sizeof err), MST_OK);
    mst_chrome_writer_set_max_tracked(0);
    /* MAX + 1 spans, each linking to a source that never arrives. */
    for (int i = 0; i <= BOUND; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"trace_id\":\"" T1 "\",\"span_id\":\"%016x\",\"links\":[{\"trace_id\":\"" T3
                 "\",\"span_id\":\"%016x\"}]}",
                 i + 1, i + 1);
        CHECK_EQ_INT(add_json(w, json), MST_OK);
    }
    mst_chrome_stats st;
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.positions_evicted, 1);
    CHECK_EQ_INT(st.pending_evicted, 1);
    CHECK_EQ_INT(st.flows_pending, BOUND);
    /* The oldest pending link (source ...0001) was evicted: its source now
     * produces no flow; the second oldest (...0002) still does. */
    CHECK_EQ_INT(add_json(w, "{\"trace_id\":\"" T3 "\",\"span_id\":\"0000000000000001\"}"), MST_OK);
    CHECK_EQ_INT(add_json(w, "{\"trace_id\":\"" T3 "\",\"span_id\":\"0000000000000002\"}"), MST_OK);
    CHECK_EQ_INT(mst_chrome_writer_flush(w), MST_OK);
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.flows_written, 1);
    CHECK_EQ_INT(st.flows_pending, BOUND - 1);
    /* The oldest position (T1/...0001) was evicted: linking to it waits. */
    CHECK_EQ_INT(add_json(w, "{\"trace_id\":\"" T3 "\",\"span_id\":\"ffffffffffff00aa\",\"links\":["
                             "{\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000001\"},"
                             "{\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000005\"}]}"),
                 MST_OK);
    CHECK_EQ_INT(mst_chrome_writer_flush(w), MST_OK);
    mst_chrome_writer_get_stats(w, &st);
    CHECK_EQ_INT(st.flows_written, 2);
    CHECK_EQ_INT(st.spans_written, BOUND + 4);
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    CHECK(file_is_valid_json(path));
    unlink(path);
}

static void test_open_refuses_bad_paths(void) {
    mst_chrome_writer *w = (mst_chrome_writer *)1;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open("trace.txt", 1, &w, err, sizeof err), MST_ERR_PATH);
    CHECK(w == NULL);
    CHECK_EQ_INT(mst_chrome_writer_open("trace.json;", 1, &w, err, sizeof err), MST_ERR_PATH);
    CHECK_EQ_INT(mst_chrome_writer_open("tr;ace.json", 1, &w, err, sizeof err), MST_ERR_PATH);
    CHECK(strstr(err, "unsupported character") != NULL);
}

/* ---- the fast paths against their references ---- */

static uint64_t next_rand(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The text of raw_us as printf would make it: integer microseconds, then
 * the fraction of up to 3 digits without trailing zeros. */
static void us_reference(char *out, size_t cap, bool neg, uint64_t ns) {
    char frac[8] = "";
    if (ns % 1000) {
        snprintf(frac, sizeof frac, ".%03u", (unsigned)(ns % 1000));
        size_t n = strlen(frac);
        while (frac[n - 1] == '0') frac[--n] = '\0';
    }
    snprintf(out, cap, "%s%llu%s", neg && ns ? "-" : "", (unsigned long long)(ns / 1000), frac);
}

static void check_numbers(int64_t v) {
    uint8_t room[256];
    mst_buf b = {.data = room, .cap = sizeof room};
    char want[64];
    raw_i64(&b, v);
    snprintf(want, sizeof want, "%lld", (long long)v);
    if (b.len != strlen(want) || memcmp(room, want, b.len) != 0) {
        fprintf(stderr, "raw_i64(%lld) = \"%.*s\"\n", (long long)v, (int)b.len, (const char *)room);
        CHECK(false);
    }
    b.len = 0;
    raw_ts(&b, v);
    bool neg = v < 0;
    us_reference(want, sizeof want, neg, neg ? 0u - (uint64_t)v : (uint64_t)v);
    if (b.len != strlen(want) || memcmp(room, want, b.len) != 0) {
        fprintf(stderr, "raw_ts(%lld) = \"%.*s\", want %s\n", (long long)v, (int)b.len,
                (const char *)room, want);
        CHECK(false);
    }
    b.len = 0;
    raw_us(&b, false, (uint64_t)v); /* durations: any uint64 */
    us_reference(want, sizeof want, false, (uint64_t)v);
    CHECK(b.len == strlen(want) && memcmp(room, want, b.len) == 0);
    char hex[17] = "", ref[17];
    hex16_text((uint64_t)v, hex);
    snprintf(ref, sizeof ref, "%016llx", (unsigned long long)v);
    CHECK(memcmp(hex, ref, 16) == 0);
}

static void test_number_and_hex_formatters_match_printf(void) {
    /* every power of ten and its neighbours (the digit-count boundaries),
     * both signs, the extremes, and random values of every magnitude */
    int64_t p = 1;
    for (int e = 0; e <= 18; e++) {
        for (int64_t d = -2; d <= 2; d++) {
            check_numbers(p + d);
            check_numbers(-(p + d));
        }
        if (e < 18) p *= 10;
    }
    check_numbers(INT64_MAX);
    check_numbers(INT64_MIN);
    check_numbers(INT64_MIN + 1);
    for (int64_t v = -1100; v <= 1100; v++) check_numbers(v);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 200000; i++) {
        uint64_t r = next_rand(&x);
        check_numbers((int64_t)(r >> (r % 64))); /* magnitudes from 0 to 2^64 */
    }
}

/* Writes every packet through a writer, with plain_text as the decoder
 * set it (`as_decoded`) or cleared (the checked path); returns the file. */
static char *write_packets(const char *name, const char *const *jsons, size_t n, bool as_decoded,
                           size_t *len, int *marked) {
    const char *path = tmp_path(name);
    mst_chrome_writer *w;
    char err[256];
    CHECK_EQ_INT(mst_chrome_writer_open(path, 7, &w, err, sizeof err), MST_OK);
    *marked = 0;
    for (size_t i = 0; i < n; i++) {
        size_t jn = strlen(jsons[i]);
        uint8_t *pkt = malloc(MST_PERFETTO_MAGIC_LEN + jn);
        memcpy(pkt, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
        memcpy(pkt + MST_PERFETTO_MAGIC_LEN, jsons[i], jn);
        mst_arena a;
        mst_pf_span s;
        mst_arena_init(&a);
        mst_status st = mst_perfetto_packet_decode(pkt, MST_PERFETTO_MAGIC_LEN + jn, &a, &s, err,
                                                   sizeof err);
        if (st != MST_OK) fprintf(stderr, "packet %zu: %s\n", i, err);
        CHECK_EQ_INT(st, MST_OK);
        *marked += st == MST_OK && s.plain_text;
        if (!as_decoded) s.plain_text = false;
        if (st == MST_OK) CHECK_EQ_INT(mst_chrome_writer_add_span(w, &s), MST_OK);
        mst_arena_release(&a);
        free(pkt);
    }
    CHECK_EQ_INT(mst_chrome_writer_close(w), MST_OK);
    char *text = mst_test_read_file(path, len);
    unlink(path);
    return text;
}

static void test_plain_text_spans_write_the_same_bytes(void) {
    /* Shapes that end attribute runs (emit_plain_attrs): pid/tid and fixed
     * keys in the middle, whitespace around ':' and ',', nested values,
     * "resource." attributes shadowing resource entries, keys the decoder
     * unescaped, an empty attribute object, links both ways. */
    static const char *const jsons[] = {
        "{\"name\":\"a\",\"category\":\"c\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000001\","
        "\"parent_span_id\":\"\",\"start_time_ns\":1700000000000000001,\"end_time_ns\":1700000000000500000,"
        "\"kind\":1,\"status\":1,\"attributes\":{\"x\":1,\"process.pid\":42,\"y\":\"s\",\"thread.id\":43,"
        "\"z\":[1,{\"q\":null}],\"trace_id\":\"spoof\",\"w\":true,\"v\":-0.5e3},"
        "\"resource_attributes\":{\"service.name\":\"vllm\",\"host.name\":\"n\"},"
        "\"links\":[{\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000002\"}]}",
        "{\"name\":\"b\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000002\","
        "\"parent_span_id\":\"0000000000000001\",\"start_time_ns\":5,\"end_time_ns\":7,"
        "\"attributes\":{ \"a\" : 1 , \"b\":2,\"c\" :3,\"d\": 4,\"e\":5 ,\"f\":6,\"resource.host.name\":\"won\","
        "\"g\\u0041\":7,\"h\":\"\\u00e9\"},\"resource_attributes\":{\"host.name\":\"lost\",\"zone\":\"z\"},"
        "\"links\":[{\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000001\"},"
        "{\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000003\"}]}",
        "{\"name\":\"c\",\"category\":\"c\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000003\","
        "\"start_time_ns\":100,\"end_time_ns\":50,\"attributes\":{},\"resource_attributes\":null}",
        "{\"name\":\"d\",\"trace_id\":\"" T1 "\",\"span_id\":\"0000000000000004\",\"start_time_ns\":0,"
        "\"end_time_ns\":9223372036854775807,\"attributes\":{\"span_id\":1,\"only\":\"one\"}}",
    };
    size_t n = sizeof jsons / sizeof jsons[0], la, lb;
    int marked_a, marked_b;
    char *a = write_packets("plain_a.json", jsons, n, true, &la, &marked_a);
    char *b = write_packets("plain_b.json", jsons, n, false, &lb, &marked_b);
    CHECK_EQ_INT(marked_a, (int)n); /* every one took the plain path */
    CHECK(a && b && la == lb && memcmp(a, b, la) == 0);
    CHECK(a && strstr(a, "\"x\":1,\"y\":\"s\",\"z\":[1,{\"q\":null}],\"w\":true,\"v\":-0.5e3,") != NULL);
    CHECK(a && strstr(a, "\"gA\":7") != NULL);
    free(a);
    free(b);
}

static void cleanup(void) {
    if (g_dir[0]) rmdir(g_dir);
}

static const mst_test_case TESTS[] = {
    {"seed_cross_trace_flow_late_source", test_seed_cross_trace_flow_late_source},
    {"request_links_not_drawn", test_request_links_not_drawn},
    {"source_first_emits_at_once", test_source_first_emits_at_once},
    {"invalid_payload_leaves_empty_array", test_invalid_payload_leaves_empty_array},
    {"microsecond_formatting", test_microsecond_formatting},
    {"unicode_and_escapes_round_trip", test_unicode_and_escapes_round_trip},
    {"valid_after_every_flush_and_names_once", test_valid_after_every_flush_and_names_once},
    {"process_role_names_the_process", test_process_role_names_the_process},
    {"tables_are_bounded", test_tables_are_bounded},
    {"open_refuses_bad_paths", test_open_refuses_bad_paths},
    {"number_and_hex_formatters_match_printf", test_number_and_hex_formatters_match_printf},
    {"plain_text_spans_write_the_same_bytes", test_plain_text_spans_write_the_same_bytes},
};

int main(int argc, char **argv) {
    atexit(cleanup);
    return mst_test_run_all(TESTS, sizeof TESTS / sizeof TESTS[0], argc, argv);
}
