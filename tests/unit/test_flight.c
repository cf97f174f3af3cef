/*
 * test_flight.c — the flight recorder's parts without a daemon: the strict
 * parsers of triggers, sizes and durations; the ring (a span read back is
 * the span that went in, eviction by space and age keeps its counts exact,
 * wrap-around keeps the order); the running percentile; and the recorder
 * as an output (output_sink.h) driven with its own clock: a slow request
 * fires once, the rate budget suppresses and counts, triggers that fire
 * together are merged into one dump.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "forward/flight_ring.h"
#include "forward/flight_sink.h"
#include "forward/flight_trigger.h"
#include "testlib.h"
#include "wire/perfetto_packet.h"

static void parse_ok(const char *text, mst_flight_trigger_kind kind, int metric, int64_t ns,
                     double pct, unsigned window) {
    mst_flight_trigger t;
    char err[200] = "";
    CHECK_EQ_INT(mst_flight_parse_trigger(text, &t, err, sizeof err), MST_OK);
    CHECK_EQ_INT(t.kind, kind);
    if (kind != MST_FLIGHT_ON_ERROR) CHECK_EQ_INT(t.metric, metric);
    if (kind == MST_FLIGHT_ABOVE) CHECK_EQ_INT(t.threshold_ns, ns);
    if (kind == MST_FLIGHT_ABOVE_PCT) {
        CHECK(t.percentile == pct);
        CHECK_EQ_INT(t.window_min, window);
    }
}

static void parse_bad(const char *text, const char *says) {
    mst_flight_trigger t;
    char err[200] = "";
    CHECK_EQ_INT(mst_flight_parse_trigger(text, &t, err, sizeof err), MST_ERR_PARSE);
    if (!strstr(err, says)) fprintf(stderr, "  '%s' -> '%s' (wanted '%s')\n", text, err, says);
    CHECK(strstr(err, says) != NULL);
    CHECK(strchr(err, '\n') == NULL);
}

static void test_trigger_grammar(void) {
    parse_ok("error", MST_FLIGHT_ON_ERROR, 0, 0, 0, 0);
    parse_ok("e2e>2s", MST_FLIGHT_ABOVE, MST_FLIGHT_E2E, 2000000000, 0, 0);
    parse_ok("ttft>1.5ms", MST_FLIGHT_ABOVE, MST_FLIGHT_TTFT, 1500000, 0, 0);
    parse_ok("tpot > 50us", MST_FLIGHT_ABOVE, MST_FLIGHT_TPOT, 50000, 0, 0);
    parse_ok("queue>2m", MST_FLIGHT_ABOVE, MST_FLIGHT_QUEUE, 120000000000ll, 0, 0);
    parse_ok("e2e>p99", MST_FLIGHT_ABOVE_PCT, MST_FLIGHT_E2E, 0, 99.0, 5);
    parse_ok("ttft>p99.9@10m", MST_FLIGHT_ABOVE_PCT, MST_FLIGHT_TTFT, 0, 99.9, 10);
    parse_bad("", "empty trigger");
    parse_bad("e2e", "expected METRIC>THRESHOLD");
    parse_bad("E2E>2s", "unknown metric");
    parse_bad("e2e>", "missing threshold");
    parse_bad("e2e>2", "needs a unit");
    parse_bad("e2e>2 s", "unknown unit");
    parse_bad("e2e>0s", "more than 0");
    parse_bad("e2e>1.5ns", "whole number of ns");
    parse_bad("e2e>1..5s", "malformed number");
    parse_bad("e2e>-1s", "must start with a number");
    parse_bad("e2e>99999999999h", "out of range");
    parse_bad("e2e>p0", "percentile");
    parse_bad("e2e>p100", "percentile");
    parse_bad("e2e>p99.9999", "percentile");
    parse_bad("e2e>p99@30s", "whole minutes");
    parse_bad("e2e>p99@61m", "whole minutes");
    parse_bad("e2e>p99@", "window");
    parse_bad("errors", "expected METRIC>THRESHOLD");
}

static void test_sizes_and_capacity(void) {
    uint64_t b;
    int64_t ns;
    char err[200];
    CHECK_EQ_INT(mst_flight_parse_capacity("256MiB", &b, &ns, err, sizeof err), MST_OK);
    CHECK_EQ_INT(b, 256ull << 20);
    CHECK_EQ_INT(ns, 0);
    CHECK_EQ_INT(mst_flight_parse_capacity("120s,1.5GiB", &b, &ns, err, sizeof err), MST_OK);
    CHECK_EQ_INT(b, 3ull << 29);
    CHECK_EQ_INT(ns, 120000000000ll);
    CHECK_EQ_INT(mst_flight_parse_capacity("2min", &b, &ns, err, sizeof err), MST_OK);
    CHECK_EQ_INT(ns, 120000000000ll);
    CHECK_EQ_INT(mst_flight_parse_capacity("1s,2s", &b, &ns, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "two durations"));
    CHECK_EQ_INT(mst_flight_parse_capacity("1s,1MiB,1m", &b, &ns, err, sizeof err), MST_ERR_PARSE);
    CHECK_EQ_INT(mst_flight_parse_capacity("", &b, &ns, err, sizeof err), MST_ERR_PARSE);
    CHECK_EQ_INT(mst_flight_parse_capacity("1.5B", &b, &ns, err, sizeof err), MST_ERR_PARSE);
    CHECK_EQ_INT(mst_flight_parse_size("20000000000TiB", 14, &b, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "out of range"));
    CHECK_EQ_INT(mst_flight_parse_size("64KB", 4, &b, err, sizeof err), MST_OK);
    CHECK_EQ_INT(b, 64000);
    /* Only `len` bytes are read. */
    CHECK_EQ_INT(mst_flight_parse_duration("5msXX", 3, &ns, err, sizeof err), MST_OK);
    CHECK_EQ_INT(ns, 5000000);
}

/* ---- ring ---- */

static mst_arena g_arena;

static mst_pf_span decode(char *json, int n, const char *name, int64_t start, int status,
                          const char *attrs) {
    snprintf(json, 4096,
             MST_PERFETTO_MAGIC
             "{\"name\":\"%s\",\"category\":\"cat.%d\",\"trace_id\":\"%032x\",\"span_id\":\"%016x\","
             "\"parent_span_id\":\"%s\",\"start_time_ns\":%lld,\"end_time_ns\":%lld,\"kind\":2,"
             "\"status\":%d,\"attributes\":{\"process.pid\":%d,\"thread.id\":9%s%s},"
             "\"resource_attributes\":{\"service.name\":\"svc-%d\"},"
             "\"links\":[{\"trace_id\":\"%032x\",\"span_id\":\"%016x\"}]}",
             name, n % 3, n + 1, n + 1, n % 2 ? "00000000000000aa" : "", (long long)start,
             (long long)start + 1000, status, 100 + n % 2, attrs[0] ? "," : "", attrs, n % 2,
             n + 77, n + 78);
    mst_pf_span s;
    char err[200];
    CHECK_EQ_INT(mst_perfetto_packet_decode((const uint8_t *)json, strlen(json), &g_arena, &s, err,
                                            sizeof err), MST_OK);
    return s;
}

static bool kv_same(const mst_pf_kv *a, const mst_pf_kv *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i].key.len != b[i].key.len || memcmp(a[i].key.ptr, b[i].key.ptr, a[i].key.len) ||
            a[i].value.len != b[i].value.len || memcmp(a[i].value.ptr, b[i].value.ptr, a[i].value.len))
            return false;
    return true;
}

static void test_ring_round_trip(void) {
    mst_arena_init(&g_arena);
    mst_flight_ring *r = mst_flight_ring_new(1 << 20, 0);
    char json[4096];
    mst_pf_span in = decode(json, 3, "vllm.scheduler.schedule", 5000, 2,
                            "\"request.ids\":[\"a\",\"b\\\"q\"],\"x\":1.5,\"o\":{\"k\":[1,null]}");
    CHECK_EQ_INT(mst_flight_ring_add_span(r, &in, in.pid, 1), 1);
    mst_flight_rec *rec = mst_flight_ring_first(r);
    CHECK(rec && rec->type == MST_FLIGHT_REC_SPAN && rec->status == 2);
    CHECK_EQ_INT(rec->ids_len, strlen("[\"a\",\"b\\\"q\"]"));
    CHECK(memcmp(mst_flight_rec_text(rec, rec->ids_off), "[\"a\",", 5) == 0);
    mst_pf_span out;
    CHECK(mst_flight_ring_span(r, rec, &g_arena, &out));
    CHECK(out.name.len == in.name.len && memcmp(out.name.ptr, in.name.ptr, in.name.len) == 0);
    CHECK(out.category.len == in.category.len && memcmp(out.category.ptr, in.category.ptr, in.category.len) == 0);
    CHECK_EQ_STR(out.trace_id, in.trace_id);
    CHECK_EQ_STR(out.span_id, in.span_id);
    CHECK_EQ_STR(out.parent_span_id, in.parent_span_id);
    CHECK(out.start_ns == in.start_ns && out.end_ns == in.end_ns && out.kind == in.kind &&
          out.status == in.status && out.pid == in.pid && out.tid == in.tid &&
          out.has_pid == in.has_pid && out.has_tid == in.has_tid);
    CHECK(out.n_attrs == in.n_attrs && kv_same(out.attrs, in.attrs, in.n_attrs));
    CHECK(out.n_resource == in.n_resource && kv_same(out.resource, in.resource, in.n_resource));
    CHECK(out.n_links == 1 && strcmp(out.links[0].trace_id, in.links[0].trace_id) == 0 &&
          strcmp(out.links[0].span_id, in.links[0].span_id) == 0);
    CHECK(mst_flight_ring_next(r, rec) == NULL);
    mst_flight_ring_free(r);
    mst_arena_release(&g_arena);
}

static void check_ring_counts(mst_flight_ring *r) {
    mst_flight_ring_stats st;
    mst_flight_ring_get_stats(r, &st);
    CHECK_EQ_INT(st.spans_seen, st.spans_held + st.spans_evicted + st.spans_not_held);
    uint64_t spans = 0, counters = 0, last = 0, bytes = 0;
    for (mst_flight_rec *x = mst_flight_ring_first(r); x; x = mst_flight_ring_next(r, x)) {
        bytes += x->size;
        if (x->type == MST_FLIGHT_REC_COUNTER) {
            counters++;
            continue;
        }
        spans++;
        CHECK(x->seq > last); /* oldest first, across the wrap */
        last = x->seq;
    }
    CHECK_EQ_INT(spans, st.spans_held);
    CHECK_EQ_INT(counters, st.counters_held);
    CHECK_EQ_INT(bytes, st.bytes_used);
    CHECK(st.bytes_used <= st.bytes_cap);
}

static void test_ring_evicts_by_space_and_age(void) {
    mst_arena_init(&g_arena);
    mst_flight_ring *r = mst_flight_ring_new(1 << 20, 5000);
    char json[4096];
    char big[3000];
    memset(big, 'z', sizeof big);
    big[sizeof big - 1] = 0;
    char attrs[3100];
    uint64_t now = 1;
    for (int i = 0; i < 4000; i++) {
        snprintf(attrs, sizeof attrs, "\"request.id\":\"r%d\",\"pad\":\"%.*s\"", i, i % 2900, big);
        mst_pf_span s = decode(json, i, "s", 1000 * i, 1, attrs);
        mst_flight_ring_add_span(r, &s, s.pid, now);
        mst_tl_counter c = {"scheduler.running", 5, 1000 * i, false, i, 0, NULL, 0};
        mst_flight_ring_add_counter(r, &c, now);
        mst_arena_reset_keep(&g_arena, 1 << 16);
        if (i % 97 == 0) check_ring_counts(r);
    }
    check_ring_counts(r);
    mst_flight_ring_stats st;
    mst_flight_ring_get_stats(r, &st);
    CHECK(st.spans_evicted > 1000 && st.counters_evicted > 0 && st.spans_not_held == 0);
    /* The newest span is the last one added, and reads back. */
    mst_flight_rec *last = NULL;
    for (mst_flight_rec *x = mst_flight_ring_first(r); x; x = mst_flight_ring_next(r, x))
        if (x->type == MST_FLIGHT_REC_SPAN) last = x;
    CHECK(last && last->seq == 4000);
    mst_tl_counter c;
    mst_flight_rec *tail = mst_flight_ring_next(r, last);
    CHECK(tail && tail->type == MST_FLIGHT_REC_COUNTER && tail->seq == 0);
    mst_flight_ring_counter(tail, &c);
    CHECK(c.i == 3999 && strcmp(c.name, "scheduler.running") == 0 && c.pid == 5);
    /* Age: everything older than 5 s goes. */
    mst_flight_ring_expire(r, now + 5001);
    mst_flight_ring_get_stats(r, &st);
    CHECK_EQ_INT(st.spans_held, 0);
    CHECK_EQ_INT(st.counters_held, 0);
    CHECK(mst_flight_ring_first(r) == NULL);
    check_ring_counts(r);
    /* A record over a quarter of the ring is refused, counted. */
    static char huge[300000];
    memset(huge, 'y', sizeof huge - 1);
    static char hattrs[300100], hjson[310000];
    snprintf(hattrs, sizeof hattrs, "\"pad\":\"%s\"", huge);
    snprintf(hjson, sizeof hjson,
             MST_PERFETTO_MAGIC "{\"name\":\"n\",\"trace_id\":\"%032x\",\"span_id\":\"%016x\","
             "\"attributes\":{%s}}", 1, 1, hattrs);
    mst_pf_span s;
    char err[200];
    CHECK_EQ_INT(mst_perfetto_packet_decode((const uint8_t *)hjson, strlen(hjson), &g_arena, &s, err,
                                            sizeof err), MST_OK);
    CHECK_EQ_INT(mst_flight_ring_add_span(r, &s, 1, now), 0);
    mst_flight_ring_get_stats(r, &st);
    CHECK_EQ_INT(st.spans_not_held, 1);
    check_ring_counts(r);
    mst_flight_ring_free(r);
    mst_arena_release(&g_arena);
}

static void test_percentile_needs_samples_and_fires_above(void) {
    mst_flight_trigger t;
    char err[200];
    CHECK_EQ_INT(mst_flight_parse_trigger("e2e>p99", &t, err, sizeof err), MST_OK);
    mst_flight_rules *r = mst_flight_rules_new(&t, 1);
    mst_flight_metrics m = {{10000000, -1, -1, -1}};
    char reason[160];
    uint64_t now = 120000;
    for (int i = 0; i < 99; i++) CHECK_EQ_INT(mst_flight_rules_check(r, &m, false, now, reason, sizeof reason), -1);
    m.v[0] = 500000000; /* 99 samples so far: no estimate yet */
    CHECK_EQ_INT(mst_flight_rules_check(r, &m, false, now, reason, sizeof reason), -1);
    m.v[0] = 10000000;
    for (int i = 0; i < 900; i++) mst_flight_rules_check(r, &m, false, now, reason, sizeof reason);
    int64_t p = mst_flight_rules_percentile(r, MST_FLIGHT_E2E, 99, 5, now);
    CHECK(p >= 10000000 && p <= 11250000);
    m.v[0] = 10200000; /* inside the percentile's bucket */
    CHECK_EQ_INT(mst_flight_rules_check(r, &m, false, now, reason, sizeof reason), -1);
    m.v[0] = 12000000;
    CHECK_EQ_INT(mst_flight_rules_check(r, &m, false, now, reason, sizeof reason), 0);
    CHECK(strstr(reason, "e2e=12ms>p99(") != NULL);
    /* Six minutes later the window (5 m) has forgotten them. */
    CHECK_EQ_INT(mst_flight_rules_percentile(r, MST_FLIGHT_E2E, 99, 5, now + 6 * 60000), -1);
    mst_flight_rules_free(r);
}

/* ---- the recorder as an output ---- */

static char g_dir[] = "/tmp/mst-flight-XXXXXX";

static size_t count_dumps(void) {
    DIR *d = opendir(g_dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, "run.", 4) == 0) n++;
    if (d) closedir(d);
    return n;
}

/* A request of e2e `ms` with one step span, as spans. */
static void request(const mst_output_sink *o, int n, int64_t t0, int64_t ms) {
    char json[4096], attrs[200];
    snprintf(attrs, sizeof attrs, "\"request.id\":\"req-%d\"", n);
    mst_pf_span s = decode(json, n, "vllm.request", t0, 1, attrs);
    s.end_ns = t0 + ms * 1000000;
    snprintf(attrs, sizeof attrs, "\"request.ids\":[\"req-%d\"],\"scheduler.running\":1", n);
    mst_pf_span step = decode(json + 2048, n + 1000, "vllm.scheduler.schedule", t0 + 1000, 1, attrs);
    CHECK_EQ_INT(o->ops->add_span(o->self, &step), MST_OK);
    CHECK_EQ_INT(o->ops->add_span(o->self, &s), MST_OK);
    mst_arena_reset_keep(&g_arena, 1 << 16);
}

static void test_budget_suppresses_and_merges(void) {
    mst_arena_init(&g_arena);
    CHECK(mkdtemp(g_dir) != NULL);
    char path[200];
    snprintf(path, sizeof path, "%s/run.pftrace", g_dir);
    mst_flight_options opt;
    memset(&opt, 0, sizeof opt);
    opt.ring_bytes = 1 << 20;
    char err[300];
    CHECK_EQ_INT(mst_flight_parse_trigger("e2e>1s", &opt.triggers[0], err, sizeof err), MST_OK);
    opt.n_triggers = 1;
    opt.max_dumps_per_min = 1;
    mst_output_sink o;
    CHECK_EQ_INT(mst_flight_sink_open(path, MST_PERFETTO_FORMAT_AUTO, &opt, &o, err, sizeof err), MST_OK);
    uint64_t now = 1000;
    o.ops->tick(o.self, now);
    request(&o, 1, 1000000000, 2000); /* slow */
    request(&o, 2, 1000000000, 50);   /* not */
    o.ops->tick(o.self, now += MST_TL_REQUEST_GRACE_MS + 1000);
    o.ops->tick(o.self, now += MST_TL_SCAN_EVERY_MS);
    CHECK_EQ_INT(count_dumps(), 1);
    request(&o, 3, 5000000000, 3000); /* slow, within the same minute: suppressed */
    o.ops->tick(o.self, now += MST_TL_REQUEST_GRACE_MS + 1000);
    CHECK_EQ_INT(count_dumps(), 1);
    now += 60000;
    request(&o, 4, 9000000000, 3000); /* a minute later: two at once, one dump */
    request(&o, 5, 9000000000, 4000);
    o.ops->tick(o.self, now);
    o.ops->tick(o.self, now += MST_TL_REQUEST_GRACE_MS + 1000);
    CHECK_EQ_INT(count_dumps(), 2);
    CHECK_EQ_INT(o.ops->finish(o.self), MST_OK);
    char line[400] = "", id[256] = "";
    o.ops->describe(o.self, line, sizeof line);
    CHECK(strstr(line, "triggers_fired=4 suppressed=1 merged=1 dumps=2 ") != NULL);
    CHECK(o.ops->identity(o.self, id, sizeof id));
    CHECK(strstr(id, "triggers=4 = dumps=2 (failed=0) + merged=1 + suppressed=1") != NULL);
    mst_chrome_stats cs;
    o.ops->get_stats(o.self, &cs);
    CHECK_EQ_INT(cs.spans_written, 10);
    CHECK_EQ_INT(o.ops->close(o.self, NULL), MST_OK);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK_EQ_INT(system(cmd), 0);
    mst_arena_release(&g_arena);
}

/* With an age bound, spans added before the first tick are as old as the
 * moment they came, not as old as the clock (they were evicted at once). */
static void test_age_bound_counts_from_arrival(void) {
    mst_arena_init(&g_arena);
    char dir[] = "/tmp/mst-flight-age-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[200], err[300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    mst_flight_options opt;
    memset(&opt, 0, sizeof opt);
    opt.ring_bytes = 1 << 20;
    opt.ring_duration_ns = 60ll * 1000000000ll;
    mst_output_sink o;
    CHECK_EQ_INT(mst_flight_sink_open(path, MST_PERFETTO_FORMAT_AUTO, &opt, &o, err, sizeof err), MST_OK);
    request(&o, 1, 1000000000, 10);
    o.ops->tick(o.self, mst_clock_monotonic_ms());
    char line[400] = "";
    o.ops->describe(o.self, line, sizeof line);
    CHECK(strstr(line, " held=2 evicted=0 ") != NULL);
    o.ops->tick(o.self, mst_clock_monotonic_ms() + 61000); /* a minute later: gone */
    line[0] = 0;
    o.ops->describe(o.self, line, sizeof line);
    CHECK(strstr(line, " held=0 evicted=2 ") != NULL);
    CHECK_EQ_INT(o.ops->close(o.self, NULL), MST_OK);
    rmdir(dir);
    mst_arena_release(&g_arena);
}

static const mst_test_case TESTS[] = {
    {"age_bound_counts_from_arrival", test_age_bound_counts_from_arrival},
    {"trigger_grammar", test_trigger_grammar},
    {"sizes_and_capacity", test_sizes_and_capacity},
    {"ring_round_trip", test_ring_round_trip},
    {"ring_evicts_by_space_and_age", test_ring_evicts_by_space_and_age},
    {"percentile_needs_samples_and_fires_above", test_percentile_needs_samples_and_fires_above},
    {"budget_suppresses_and_merges", test_budget_suppresses_and_merges},
};
MST_TEST_MAIN(TESTS)
