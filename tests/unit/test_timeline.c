/*
 * test_timeline.c — the shared timeline model (forward/timeline.h): request
 * tracks and their phases from the request span and the spans naming the
 * request, steps-only requests completed at the end, late spans after the
 * request span, the bounded table, counters from span attributes, the
 * forwarder's own counters, flow ids.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "forward/timeline.h"
#include "testlib.h"
#include "wire/perfetto_packet.h"

typedef struct got {
    mst_tl_request req[16];
    char ids[16][32];
    size_t n_req;
    mst_tl_counter ctr[32];
    size_t n_ctr;
    mst_tl_step steps[16];
    size_t n_steps;
} got;

static void on_request(void *self, const mst_tl_request *r) {
    got *g = self;
    if (g->n_req >= 16) return;
    g->req[g->n_req] = *r;
    snprintf(g->ids[g->n_req], sizeof g->ids[0], "%.*s", (int)r->id_len, r->id);
    g->req[g->n_req].id = g->ids[g->n_req];
    g->n_req++;
}

static void on_counter(void *self, const mst_tl_counter *c) {
    got *g = self;
    if (g->n_ctr < 32) g->ctr[g->n_ctr++] = *c;
}

static void on_step(void *self, const mst_tl_step *st) {
    got *g = self;
    if (g->n_steps < 16) g->steps[g->n_steps++] = *st;
}

/* Decodes one span packet (magic + JSON) into *s, its text in arena *a
 * (initialised here, released by the caller). */
static void decode(const char *json, mst_arena *a, mst_pf_span *s) {
    mst_arena_init(a);
    char err[200];
    CHECK_EQ_INT(mst_perfetto_packet_decode((const uint8_t *)json, strlen(json), a, s, err,
                                            sizeof err), MST_OK);
}

/* Decodes one span from its JSON body and feeds it to the timeline. */
static void feed(mst_timeline *tl, got *g, const char *name, const char *span_id, long long start,
                 long long end, const char *attrs) {
    char json[2048];
    snprintf(json, sizeof json,
             MST_PERFETTO_MAGIC
             "{\"name\":\"%s\",\"category\":\"c\",\"trace_id\":\"%032d\",\"span_id\":\"%s\","
             "\"parent_span_id\":\"\",\"start_time_ns\":%lld,\"end_time_ns\":%lld,\"kind\":1,"
             "\"status\":1,\"attributes\":{\"process.pid\":7%s%s},\"resource_attributes\":{},"
             "\"links\":[]}",
             name, 1, span_id, start, end, attrs[0] ? "," : "", attrs);
    mst_arena a;
    mst_pf_span s;
    decode(json, &a, &s);
    mst_tl_sink sink = {g, on_request, on_counter, NULL};
    CHECK(mst_timeline_add_span(tl, &s, s.pid, &a, &sink));
    mst_arena_release(&a);
}

static const mst_tl_request *find_req(const got *g, const char *id) {
    for (size_t i = 0; i < g->n_req; i++)
        if (strcmp(g->req[i].id, id) == 0) return &g->req[i];
    return NULL;
}

static void tick(mst_timeline *tl, got *g, uint64_t now_ms) {
    mst_timeline_tick(tl, now_ms, &(mst_tl_sink){g, on_request, on_counter, NULL});
}

static void test_request_span_gives_track_and_phases(void) {
    mst_timeline *tl = mst_timeline_new(100);
    got g = {0};
    tick(tl, &g, 1000);
    const char *step = "\"request.ids\":[\"r1\"],\"batch.scheduled_tokens\":4";
    /* the API server's request span first: the engine's spans of the same
     * request often arrive later (their exporters batch for seconds) */
    feed(tl, &g, "vllm.request", "0000000000000001", 100, 600, "\"request.id\":\"r1\"");
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000002", 300, 310, step);
    tick(tl, &g, 1000 + MST_TL_REQUEST_GRACE_MS - 1);
    feed(tl, &g, "vllm.model", "0000000000000003", 310, 390, "\"request.ids\":[\"r1\"]");
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000004", 400, 410, step);
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000005", 500, 510, step);
    CHECK_EQ_INT(g.n_req, 0); /* held for the grace period */
    CHECK_EQ_INT(mst_timeline_open_requests(tl), 1);
    tick(tl, &g, 1000 + MST_TL_REQUEST_GRACE_MS + MST_TL_SCAN_EVERY_MS);
    CHECK_EQ_INT(g.n_req, 1);
    CHECK_EQ_INT(mst_timeline_open_requests(tl), 0);
    const mst_tl_request *r = find_req(&g, "r1");
    CHECK(r && r->has_request_span);
    CHECK_EQ_INT(r->pid, 7);
    CHECK_EQ_INT(r->start_ns, 100);
    CHECK_EQ_INT(r->end_ns, 600);
    CHECK_EQ_INT(r->steps, 3);
    CHECK_EQ_INT(r->n_phases, 3);
    CHECK_EQ_STR(r->phases[0].name, "queued");
    CHECK_EQ_INT(r->phases[0].start_ns, 100);
    CHECK_EQ_INT(r->phases[0].end_ns, 300);
    CHECK_EQ_STR(r->phases[1].name, "prefill");
    CHECK_EQ_INT(r->phases[1].end_ns, 400);
    CHECK_EQ_STR(r->phases[2].name, "decode");
    CHECK_EQ_INT(r->phases[2].start_ns, 400);
    CHECK_EQ_INT(r->phases[2].end_ns, 600);
    /* a span naming it after its track was written: no second track */
    feed(tl, &g, "vllm.output", "0000000000000006", 650, 660, "\"request.ids\":[\"r1\"]");
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    CHECK_EQ_INT(g.n_req, 1);
    mst_timeline_free(tl);
}

static void test_steps_only_request_completes_when_idle(void) {
    mst_timeline *tl = mst_timeline_new(100);
    got g = {0};
    tick(tl, &g, 5000);
    feed(tl, &g, "s", "0000000000000001", 200, 250, "\"request.ids\":[\"idle\"]");
    tick(tl, &g, 5000 + MST_TL_STEPS_IDLE_MS - MST_TL_SCAN_EVERY_MS);
    CHECK_EQ_INT(g.n_req, 0);
    tick(tl, &g, 5000 + MST_TL_STEPS_IDLE_MS + MST_TL_SCAN_EVERY_MS);
    CHECK_EQ_INT(g.n_req, 1);
    CHECK(!g.req[0].has_request_span);
    mst_timeline_free(tl);
}

static void test_steps_only_request_completes_at_the_end(void) {
    mst_timeline *tl = mst_timeline_new(100);
    got g = {0};
    /* spans arrive by end time: the later step first */
    feed(tl, &g, "s", "0000000000000002", 400, 450,
         "\"request.ids\":[\"a\",\"b\"],\"batch.scheduled_tokens\":2");
    feed(tl, &g, "s", "0000000000000001", 200, 250,
         "\"request.ids\":[\"a\"],\"batch.scheduled_tokens\":9");
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    CHECK_EQ_INT(g.n_req, 2);
    const mst_tl_request *a = find_req(&g, "a"), *b = find_req(&g, "b");
    CHECK(a && b && !a->has_request_span);
    CHECK_EQ_INT(a->start_ns, 200);
    CHECK_EQ_INT(a->end_ns, 450);
    CHECK_EQ_INT(a->n_phases, 2); /* prefill 200..400, decode 400..450 */
    CHECK_EQ_INT(a->phases[0].end_ns, 400);
    CHECK_EQ_INT(b->n_phases, 1); /* prefill only */
    CHECK_EQ_INT(b->start_ns, 400);
    mst_timeline_free(tl);
}

static void test_schedule_steps_win_over_model_steps(void) {
    mst_timeline *tl = mst_timeline_new(100);
    got g = {0};
    const char *sched = "\"request.ids\":[\"m\"],\"batch.scheduled_tokens\":4,\"scheduler.running\":1";
    const char *model = "\"request.ids\":[\"m\"],\"batch.scheduled_tokens\":4";
    feed(tl, &g, "schedule", "0000000000000002", 300, 310, sched);
    feed(tl, &g, "model", "0000000000000003", 310, 390, model);
    feed(tl, &g, "schedule", "0000000000000004", 400, 410, sched);
    feed(tl, &g, "model", "0000000000000005", 410, 490, model);
    feed(tl, &g, "vllm.request", "0000000000000001", 100, 600, "\"request.id\":\"m\"");
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    const mst_tl_request *r = find_req(&g, "m");
    CHECK(r != NULL);
    CHECK_EQ_INT(r->steps, 2);
    CHECK_EQ_INT(r->n_phases, 3);
    CHECK_EQ_INT(r->phases[1].start_ns, 300); /* prefill: schedule to schedule, */
    CHECK_EQ_INT(r->phases[1].end_ns, 400);   /* not to the model step at 310 */
    mst_timeline_free(tl);
}

static void test_table_is_bounded_and_evicts_oldest(void) {
    mst_timeline *tl = mst_timeline_new(4);
    got g = {0};
    for (int i = 0; i < 6; i++) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, "\"request.ids\":[\"q%d\"]", i);
        feed(tl, &g, "s", "0000000000000001", 100 + i, 200 + i, attrs);
    }
    CHECK_EQ_INT(g.n_req, 2); /* q0 and q1 completed early */
    CHECK(find_req(&g, "q0") && find_req(&g, "q1"));
    mst_tl_stats st;
    mst_timeline_get_stats(tl, &st);
    CHECK_EQ_INT(st.requests_evicted, 2);
    mst_timeline_free(tl);
}

static void test_counters_from_attributes(void) {
    mst_timeline *tl = mst_timeline_new(16);
    got g = {0};
    feed(tl, &g, "s", "0000000000000001", 100, 200,
         "\"batch.request_count\":3,\"batch.scheduled_tokens\":-5,\"scheduler.waiting\":0,"
         "\"scheduler.running\":\"x\",\"kv_cache.usage\":0.25,\"other\":1");
    CHECK_EQ_INT(g.n_ctr, 4); /* the string is not a number */
    CHECK_EQ_STR(g.ctr[0].name, "batch size (requests)"); /* named with the unit */
    CHECK_EQ_STR(g.ctr[0].json_name, "batch size");
    CHECK_EQ_STR(g.ctr[0].json_key, "(requests)");
    CHECK_EQ_INT(g.ctr[0].i, 3);
    CHECK_EQ_INT(g.ctr[0].ts_ns, 200);
    CHECK_EQ_INT(g.ctr[0].pid, 7);
    CHECK_EQ_INT(g.ctr[1].i, -5);
    CHECK(g.ctr[3].is_double && g.ctr[3].d == 25.0); /* KV cache usage in % */
    CHECK_EQ_STR(g.ctr[3].name, "KV cache usage (%)");
    CHECK(g.ctr[3].raw == NULL);
    /* the same attributes on a span that is no scheduling step (a model or
     * output span): no second sample */
    feed(tl, &g, "m", "0000000000000002", 100, 210, "\"batch.request_count\":3,\"batch.scheduled_tokens\":4");
    CHECK_EQ_INT(g.n_ctr, 4);
    mst_timeline_forwarder_counters(tl, 99, 1000, 10, 8, 2, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    CHECK_EQ_INT(g.n_ctr, 7);
    /* unchanged: no sample (an idle forwarder does not stretch the file) */
    mst_timeline_forwarder_counters(tl, 99, 2000, 10, 8, 2, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    CHECK_EQ_INT(g.n_ctr, 7);
    CHECK_EQ_STR(g.ctr[4].name, MST_TL_FWD_RECEIVED);
    CHECK_EQ_INT(g.ctr[6].i, 2);
    CHECK_EQ_INT(g.ctr[6].pid, 99);
    /* sampled at 1000 on the daemon's clock, held at the last span's end:
     * spans reach the daemon after they end, the file ends with them */
    CHECK_EQ_INT(g.ctr[4].ts_ns, 210);
    CHECK_EQ_INT(g.ctr[6].ts_ns, 210);
    /* a later span: a sample before its end keeps the daemon's time ... */
    feed(tl, &g, "m", "0000000000000003", 300, 5000, "\"other\":1");
    mst_timeline_forwarder_counters(tl, 99, 3000, 11, 9, 2, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    CHECK_EQ_INT(g.n_ctr, 10);
    CHECK_EQ_INT(g.ctr[7].ts_ns, 3000);
    CHECK_EQ_INT(g.ctr[7].i, 11);
    /* ... one after it is held there, with the counts as of now */
    mst_timeline_forwarder_counters(tl, 99, 9000, 12, 12, 2, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    CHECK_EQ_INT(g.n_ctr, 13);
    CHECK_EQ_INT(g.ctr[10].ts_ns, 5000);
    CHECK_EQ_INT(g.ctr[11].i, 12);
    mst_timeline_free(tl);
}

static void test_flow_ids(void) {
    const char *t1 = "0123456789abcdef0123456789abcdef", *t2 = "1123456789abcdef0123456789abcdef";
    uint64_t a = mst_tl_flow_id(t1, "00000000000000aa");
    CHECK(a != 0);
    CHECK(a == mst_tl_flow_id(t1, "00000000000000aa"));
    CHECK(a != mst_tl_flow_id(t2, "00000000000000aa")); /* same span id, other trace */
    CHECK(a != mst_tl_flow_id(t1, "00000000000000ab"));
    CHECK(mst_tl_flow_id("", "") != 0);
}

/* The inline conversion of a span's ids (16 digits at a time) gives
 * mst_tl_flow_id's value for every id, decoded (lowercase) or not: upper
 * case, short, empty, and a digit replaced by each byte just outside the
 * hex ranges, a NUL or a byte >= 0x80, at every position. */
static void test_span_flow_id_as_general(void) {
    char trace[33], span[17];
    static const char bad[] = {'/', ':', '@', 'G', '`', 'g', 'A', 'F', '\0', (char)0x80, (char)0xff};
    for (int pos = -1; pos < 48; pos++)
        for (size_t b = 0; b < (pos < 0 ? 1 : sizeof bad); b++) {
            snprintf(trace, sizeof trace, "%016llx%016llx", 0x0123456789abcdefull, 0xfedcba9876543210ull);
            snprintf(span, sizeof span, "%016llx", 0xa1b2c3d4e5f60718ull + (unsigned)pos);
            if (pos >= 0 && pos < 32) trace[pos] = bad[b];
            else if (pos >= 32) span[pos - 32] = bad[b];
            CHECK(mst_tl_span_flow_id(trace, span) == mst_tl_flow_id(trace, span));
        }
    snprintf(trace, sizeof trace, "%s", "0123456789ABCDEF0123456789abcdef");
    snprintf(span, sizeof span, "%s", "00000000000000AA");
    CHECK(mst_tl_span_flow_id(trace, span) == mst_tl_flow_id(trace, span));
    CHECK(mst_tl_span_flow_id(trace, span) ==
          mst_tl_flow_id("0123456789abcdef0123456789abcdef", "00000000000000aa"));
    memset(trace, 0, sizeof trace);
    memset(span, 0, sizeof span);
    CHECK(mst_tl_span_flow_id(trace, span) == mst_tl_flow_id("", ""));
    snprintf(trace, sizeof trace, "abc");
    snprintf(span, sizeof span, "12");
    CHECK(mst_tl_span_flow_id(trace, span) == mst_tl_flow_id("abc", "12"));
}

/* The inline number reader (integers and plain decimals) gives what
 * strtoll / strtod give, bit for bit; other texts go out of line. */
static void test_json_numbers_as_libc(void) {
    static const char *const texts[] = {
        "0", "7", "-7", "-0", "123456789012345678", "-12345678901234567", "0.4375", "-0.4375",
        "0.1", "0.3", "0.7", "2.675", "0.123456789", "0.30000000000000004", "123.456", "-0.0", "9007199254740993.5", "1.5e3",
        "1E-7", "12345678901234567890", "99999999999999999.9", "3.14159265358979",
        "0.000000000000001", "1e400", "4.9e-324",
        /* integers of 19+ characters go out of line: int64's edges */
        "1234567890123456789", "-123456789012345678", "9223372036854775807",
        "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "9999999999999999999"};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        mst_json_slice v = {texts[t], strlen(texts[t])};
        bool dbl = false;
        int64_t i = 0;
        double d = 0;
        bool ok = mst_tl_json_number(&v, &dbl, &i, &d);
        bool want_dbl = strpbrk(texts[t], ".eE") != NULL;
        /* What libc makes of the text; out of range (ERANGE: beyond int64,
         * or a double that overflows or underflows) is not a number here. */
        char *end;
        errno = 0;
        double want_d = want_dbl ? strtod(texts[t], &end) : 0;
        long long want_i = want_dbl ? 0 : strtoll(texts[t], &end, 10);
        bool erange = errno == ERANGE;
        CHECK_EQ_INT(ok, !erange);
        if (!ok) continue;
        CHECK_EQ_INT(dbl, want_dbl);
        if (dbl) CHECK(memcmp(&d, &want_d, sizeof d) == 0);
        else CHECK_EQ_INT(i, want_i);
    }
}

/* The step record of each schedule span (docs/architecture.md "1a") gives
 * the request's phases: queued from step.queued_ns, one slice per prefill
 * chunk, decode, preempted between the preempting and the resuming step,
 * zero-length markers there, and the preemptions counter per engine. */
static void test_step_record_phases(void) {
    mst_timeline *tl = mst_timeline_new(100);
    got g = {0};
    tick(tl, &g, 1000);
    feed(tl, &g, "vllm.request", "0000000000000001", 100, 2000, "\"request.id\":\"r1\"");
#define SCHED(...) "\"scheduler.waiting\":1,\"scheduler.running\":1," __VA_ARGS__
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000002", 300, 310,
         SCHED("\"request.ids\":[\"r1\"],\"step.phase\":\"p\",\"step.new_ids\":[\"r1\"],"
               "\"step.queued_ns\":[\"200\"]"));
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000003", 400, 410,
         SCHED("\"request.ids\":[\"r1\"],\"step.phase\":\"P\""));
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000004", 500, 510,
         SCHED("\"request.ids\":[\"r1\"],\"step.phase\":\"d\""));
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000005", 600, 610,
         SCHED("\"request.ids\":[\"r1\"],\"step.phase\":\"d\""));
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000006", 700, 710,
         SCHED("\"request.ids\":[\"r2\"],\"step.phase\":\"P\",\"step.preempted_ids\":[\"r1\"]"));
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000007", 900, 910,
         SCHED("\"request.ids\":[\"r2\",\"r1\"],\"step.phase\":\"dP\",\"step.resumed_ids\":[\"r1\"]"));
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000008", 1000, 1010,
         SCHED("\"request.ids\":[\"r1\"],\"step.phase\":\"d\""));
#undef SCHED
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    const mst_tl_request *r = find_req(&g, "r1");
    CHECK(r != NULL);
    if (!r) {
        mst_timeline_free(tl);
        return;
    }
    static const struct { const char *name; int64_t start, end; } want[] = {
        {"queued", 200, 300},          {"prefill chunk 1", 300, 400}, {"prefill chunk 2", 400, 500},
        {"decode", 500, 700},          {"preemption", 700, 700},      {"preempted", 700, 900},
        {"resume", 900, 900},          {"prefill chunk 1", 900, 1000}, {"decode", 1000, 2000},
    };
    CHECK_EQ_INT(r->n_phases, sizeof want / sizeof want[0]);
    for (unsigned i = 0; i < r->n_phases && i < sizeof want / sizeof want[0]; i++) {
        CHECK_EQ_STR(r->phases[i].name, want[i].name);
        CHECK_EQ_INT(r->phases[i].start_ns, want[i].start);
        CHECK_EQ_INT(r->phases[i].end_ns, want[i].end);
    }
    CHECK_EQ_INT(r->preemptions, 1);
    CHECK_EQ_INT(r->steps, 6);
    /* the preemptions counter: 0 at the engine's first step record, 1 after */
    int64_t seen[2][2];
    size_t n = 0;
    for (size_t i = 0; i < g.n_ctr; i++)
        if (strcmp(g.ctr[i].name, MST_TL_PREEMPTIONS) == 0 && n < 2) {
            seen[n][0] = g.ctr[i].ts_ns;
            seen[n][1] = g.ctr[i].i;
            n++;
        }
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_INT(seen[0][0], 310);
        CHECK_EQ_INT(seen[0][1], 0);
        CHECK_EQ_INT(seen[1][0], 710);
        CHECK_EQ_INT(seen[1][1], 1);
    }
    mst_tl_stats st;
    mst_timeline_get_stats(tl, &st);
    CHECK_EQ_INT(st.phases_dropped, 0);
    mst_timeline_free(tl);
}

/* A prefill in more chunks than a request keeps: the last kept chunk
 * stands for the rest, the decode is still recorded, the drop is counted. */
static void test_step_record_phases_are_bounded(void) {
    mst_timeline *tl = mst_timeline_new(10);
    got g = {0};
    char id[17];
    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof id, "%016x", i + 1);
        feed(tl, &g, "vllm.scheduler.schedule", id, 100 + i * 10, 105 + i * 10,
             "\"scheduler.running\":1,\"request.ids\":[\"long\"],\"step.phase\":\"p\"");
    }
    feed(tl, &g, "vllm.scheduler.schedule", "00000000000000ff", 2000, 2005,
         "\"scheduler.running\":1,\"request.ids\":[\"long\"],\"step.phase\":\"d\"");
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    const mst_tl_request *r = find_req(&g, "long");
    CHECK(r && r->n_phases == MST_TL_MAX_STEP_PHASES - 4 + 1);
    if (r) {
        CHECK_EQ_STR(r->phases[r->n_phases - 1].name, "decode");
        CHECK_EQ_INT(r->phases[r->n_phases - 1].start_ns, 2000);
        CHECK_EQ_INT(r->phases[r->n_phases - 2].end_ns, 2000);
    }
    mst_tl_stats st;
    mst_timeline_get_stats(tl, &st);
    CHECK_EQ_INT(st.phases_dropped, 100 - (MST_TL_MAX_STEP_PHASES - 4));
    mst_timeline_free(tl);
}

/* Feeds a span of process pid, thread tid as a writer does: first asks
 * which written step it joins (its position: ts = start, flow = its span's
 * own id), then adds it. Returns whether it joined one, with the step's
 * position in *step. */
static bool feed_joining_in(mst_timeline *tl, got *g, const char *name, const char *span_id,
                            int pid, int tid, long long start, long long end, const char *attrs,
                            mst_tl_pos *step) {
    char json[2048];
    snprintf(json, sizeof json,
             MST_PERFETTO_MAGIC
             "{\"name\":\"%s\",\"category\":\"c\",\"trace_id\":\"%032d\",\"span_id\":\"%s\","
             "\"parent_span_id\":\"\",\"start_time_ns\":%lld,\"end_time_ns\":%lld,\"kind\":1,"
             "\"status\":1,\"attributes\":{\"process.pid\":%d,\"thread.id\":%d%s%s},"
             "\"resource_attributes\":{},\"links\":[]}",
             name, 1, span_id, start, end, pid, tid, attrs[0] ? "," : "", attrs);
    mst_arena a;
    mst_pf_span s;
    decode(json, &a, &s);
    mst_tl_sink sink = {g, on_request, on_counter, on_step};
    mst_tl_pos at = {s.pid, s.tid, s.start_ns, mst_tl_span_flow_id(s.trace_id, s.span_id)};
    bool joined = mst_timeline_join_step(tl, &s, &at, step);
    CHECK(mst_timeline_add_span(tl, &s, s.pid, &a, &sink));
    mst_arena_release(&a);
    return joined;
}

/* feed_joining_in of a span of process 7, thread 70. */
static bool feed_joining(mst_timeline *tl, got *g, const char *name, const char *span_id,
                         long long start, long long end, const char *attrs, mst_tl_pos *step) {
    return feed_joining_in(tl, g, name, span_id, 7, 70, start, end, attrs, step);
}

/* Engine steps: schedule (step.index) -> update_from_output on the engine
 * thread, joined to the worker forward within it and to the next output
 * processing, whichever arrives first; a step without its update ends at
 * the next schedule (or at the end). */
static void test_engine_steps_and_their_flows(void) {
    mst_timeline *tl = mst_timeline_new(16);
    got g = {0};
    mst_tl_pos step;
    const char *sched0 = "\"step.index\":0,\"scheduler.running\":1,\"batch.request_count\":2,"
                         "\"batch.scheduled_tokens\":5";
    /* the worker's forward arrives before its step (another process) */
    CHECK(!feed_joining(tl, &g, "vllm.worker.execute_model", "00000000000000a1", 120, 150, "", &step));
    CHECK(!feed_joining(tl, &g, "vllm.scheduler.schedule", "0000000000000001", 100, 110, sched0, &step));
    CHECK(!feed_joining(tl, &g, "vllm.model.execute", "0000000000000002", 111, 155, "", &step));
    CHECK_EQ_INT(g.n_steps, 0);
    CHECK(!feed_joining(tl, &g, "vllm.scheduler.update_from_output", "0000000000000003", 160, 170, "",
                        &step));
    CHECK_EQ_INT(g.n_steps, 1);
    const mst_tl_step *s0 = &g.steps[0];
    CHECK_EQ_INT(s0->index, 0);
    CHECK_EQ_INT(s0->start_ns, 100);
    CHECK_EQ_INT(s0->end_ns, 170);
    CHECK_EQ_INT(s0->requests, 2);
    CHECK_EQ_INT(s0->tokens, 5);
    CHECK_EQ_INT(s0->tid, 70);
    CHECK_EQ_INT(s0->n_joined, 1);
    CHECK_EQ_INT(s0->joined[0].ts_ns, 120);
    CHECK_EQ_INT(s0->joined[0].flow, mst_tl_flow_id("00000000000000000000000000000001", "00000000000000a1"));
    CHECK_EQ_INT(s0->n_later, 1); /* its output processing is still to come */
    /* the output processing after it joins the written step */
    CHECK(feed_joining(tl, &g, "vllm.output.process", "0000000000000004", 180, 190, "", &step));
    CHECK_EQ_INT(step.ts_ns, 100);
    CHECK_EQ_INT(step.flow, s0->later[0]);
    /* ... once: a second one does not */
    CHECK(!feed_joining(tl, &g, "vllm.output.process", "0000000000000005", 185, 195, "", &step));
    /* a step without its update ends where the engine's last span ended */
    CHECK(!feed_joining(tl, &g, "vllm.scheduler.schedule", "0000000000000006", 200, 210,
                        "\"step.index\":1,\"scheduler.running\":1", &step));
    CHECK(!feed_joining(tl, &g, "vllm.scheduler.schedule", "0000000000000007", 300, 310,
                        "\"step.index\":2,\"scheduler.running\":1", &step));
    CHECK_EQ_INT(g.n_steps, 2);
    CHECK_EQ_INT(g.steps[1].index, 1);
    CHECK_EQ_INT(g.steps[1].end_ns, 210);
    CHECK_EQ_INT(g.steps[1].requests, -1);
    /* the waiting second output (185) was joined to step 1 (it ends at 210: no) */
    CHECK_EQ_INT(g.steps[1].n_joined, 0);
    /* a worker forward inside step 1, arriving late, joins it */
    CHECK(feed_joining(tl, &g, "vllm.worker.execute_model", "00000000000000a2", 205, 209, "", &step));
    CHECK_EQ_INT(step.ts_ns, 200);
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, on_step});
    CHECK_EQ_INT(g.n_steps, 3);
    CHECK_EQ_INT(g.steps[2].index, 2);
    CHECK_EQ_INT(g.steps[2].end_ns, 310);
    CHECK(g.steps[0].flow != g.steps[1].flow);
    mst_timeline_free(tl);
}

/* Spans waiting for their step are a bounded ring: the oldest are
 * forgotten once more than MST_TL_WAITING_SPANS wait, the rest still join
 * (after the ring wrapped), and of two output processings starting at the
 * same time after a step the one that waited longer joins it. */
static void test_waiting_spans_ring(void) {
    mst_timeline *tl = mst_timeline_new(16);
    got g = {0};
    mst_tl_pos step;
    char id[17];
    const int over = 10, n = MST_TL_WAITING_SPANS + over;
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%016x", 0x100000 + i);
        CHECK(!feed_joining(tl, &g, "vllm.worker.execute_model", id, 1000 + i, 1000 + i, "", &step));
    }
    /* two outputs at the same time; the first waits longer */
    CHECK(!feed_joining(tl, &g, "vllm.output.process", "00000000000000b1", 900000, 900001, "", &step));
    CHECK(!feed_joining(tl, &g, "vllm.output.process", "00000000000000b2", 900000, 900002, "", &step));
    /* a step over the forgotten forwards joins none of them (and the
     * output after it) */
    CHECK(!feed_joining(tl, &g, "vllm.scheduler.schedule", "0000000000000001", 1000, 1000 + over - 1,
                        "\"step.index\":0,\"scheduler.running\":1", &step));
    CHECK(!feed_joining(tl, &g, "vllm.scheduler.update_from_output", "0000000000000002", 1000 + over - 1,
                        1000 + over - 1, "", &step));
    CHECK_EQ_INT(g.n_steps, 1);
    CHECK_EQ_INT(g.steps[0].n_joined, 1);
    CHECK_EQ_INT(g.steps[0].joined[0].flow,
                 mst_tl_flow_id("00000000000000000000000000000001", "00000000000000b1"));
    /* the oldest kept forward (the two outputs took the slots of the two
     * before it) and the newest one join their steps */
    int kept[2] = {over + 2, n - 1};
    for (int k = 0; k < 2; k++) {
        long long t = 1000 + kept[k];
        char sp[17];
        snprintf(sp, sizeof sp, "%016x", 0x10 + 2 * k);
        char attrs[64];
        snprintf(attrs, sizeof attrs, "\"step.index\":%d,\"scheduler.running\":1", k + 1);
        CHECK(!feed_joining(tl, &g, "vllm.scheduler.schedule", sp, t, t, attrs, &step));
        snprintf(sp, sizeof sp, "%016x", 0x11 + 2 * k);
        CHECK(!feed_joining(tl, &g, "vllm.scheduler.update_from_output", sp, t, t, "", &step));
        CHECK_EQ_INT(g.n_steps, 2 + k);
        const mst_tl_step *st = &g.steps[1 + k];
        CHECK(st->n_joined >= 1);
        snprintf(id, sizeof id, "%016x", 0x100000 + kept[k]);
        CHECK_EQ_INT(st->joined[0].flow, mst_tl_flow_id("00000000000000000000000000000001", id));
        CHECK_EQ_INT(st->joined[0].ts_ns, t);
    }
    /* the second output, still waiting, went to the first step after the
     * one that took the first output */
    CHECK_EQ_INT(g.steps[2].n_joined, 1);
    CHECK_EQ_INT(g.steps[1].n_joined, 2);
    CHECK_EQ_INT(g.steps[1].joined[1].flow,
                 mst_tl_flow_id("00000000000000000000000000000001", "00000000000000b2"));
    mst_timeline_free(tl);
}

/* Two engines (data parallel: engine A pid 100, B pid 200, their workers
 * 110 and 210, one API server 50) whose steps overlap in time: a worker
 * forward or an output processing joins a step of the engine that
 * scheduled its first request, also where another engine's step fits the
 * time better, whether it arrives after its step (the done steps) or
 * before (the waiting ring); a request no step named yet waits for its
 * engine's step; a worker's forward naming no request joins its process's
 * engine's step. */
static void test_joins_with_two_engines(void) {
    mst_timeline *tl = mst_timeline_new(64);
    got g = {0};
    mst_tl_pos step;
    const char *a_ids = "\"request.ids\":[\"a1\",\"a2\"]", *b_ids = "\"request.ids\":[\"b1\"]";
    char attrs[160];
#define SCHED(idx, ids) (snprintf(attrs, sizeof attrs, "\"step.index\":%d,\"scheduler.running\":1,%s", idx, ids), attrs)
    /* A0 = [1000, 1100], B0 = [1020, 1200]: B0 closes first */
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000a0", 100, 101, 1000, 1010, SCHED(0, a_ids), &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000b0", 200, 201, 1020, 1030, SCHED(0, b_ids), &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000b9", 200, 201, 1190, 1200, "", &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000a9", 100, 101, 1090, 1100, "", &step));
    CHECK_EQ_INT(g.n_steps, 2);
    CHECK_EQ_INT(g.steps[0].pid, 200);
    CHECK_EQ_INT(g.steps[1].pid, 100);
    /* B's forward at 1050 is in both steps: it joins B0 */
    CHECK(feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000c1", 210, 211, 1050, 1080, b_ids, &step));
    CHECK_EQ_INT(step.pid, 200);
    CHECK_EQ_INT(step.ts_ns, 1020);
    /* ... and A's at 1060 A0 */
    CHECK(feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000c2", 110, 111, 1060, 1080, a_ids, &step));
    CHECK_EQ_INT(step.pid, 100);
    CHECK_EQ_INT(step.ts_ns, 1000);
    /* outputs after both steps ended: each its engine's, not the one that
     * ended last (B0) */
    CHECK(feed_joining_in(tl, &g, "vllm.output.process", "00000000000000d1", 50, 51, 1250, 1260, a_ids, &step));
    CHECK_EQ_INT(step.pid, 100);
    CHECK_EQ_INT(step.flow, g.steps[1].later[1]); /* later: its worker's flow, then its output's */
    CHECK(feed_joining_in(tl, &g, "vllm.output.process", "00000000000000d2", 50, 51, 1255, 1265, b_ids, &step));
    CHECK_EQ_INT(step.pid, 200);
    CHECK_EQ_INT(step.flow, g.steps[0].later[1]);
    /* arriving before their steps: outputs of B1 and A1 (B's first), the
     * forwards of B1 and A1, and a forward of B2 naming a request no step
     * named yet (its engine is told when B2 names it) */
    CHECK(!feed_joining_in(tl, &g, "vllm.output.process", "00000000000000e1", 50, 51, 1420, 1430, b_ids, &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.output.process", "00000000000000e2", 50, 51, 1425, 1435, "\"request.ids\":[\"a2\",\"a1\"]", &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000e3", 210, 211, 1318, 1330, b_ids, &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000e4", 110, 111, 1320, 1330, a_ids, &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000e5", 210, 211, 1520, 1530, "\"request.ids\":[\"c1\"]", &step));
    /* A1 = [1300, 1390], B1 = [1305, 1400], A2 = [1500, 1600], B2 = [1510, 1610] */
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000a1", 100, 101, 1300, 1310, SCHED(1, a_ids), &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000a8", 100, 101, 1380, 1390, "", &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000b1", 200, 201, 1305, 1315, SCHED(1, b_ids), &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000b8", 200, 201, 1395, 1400, "", &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000a2", 100, 101, 1500, 1510, SCHED(2, a_ids), &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000a7", 100, 101, 1590, 1600, "", &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000b2", 200, 201, 1510, 1515, SCHED(2, "\"request.ids\":[\"b1\",\"c1\"]"), &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000b7", 200, 201, 1600, 1610, "", &step));
#undef SCHED
    CHECK_EQ_INT(g.n_steps, 6);
    const mst_tl_step *a1 = &g.steps[2], *b1 = &g.steps[3], *a2 = &g.steps[4], *b2 = &g.steps[5];
    CHECK_EQ_INT(a1->pid, 100);
    CHECK_EQ_INT(a1->n_joined, 2);
    CHECK_EQ_INT(a1->joined[0].ts_ns, 1320); /* not B's forward at 1318 */
    CHECK_EQ_INT(a1->joined[0].pid, 110);
    CHECK_EQ_INT(a1->joined[1].ts_ns, 1425); /* not B's output at 1420 */
    CHECK_EQ_INT(b1->pid, 200);
    CHECK_EQ_INT(b1->n_joined, 2);
    CHECK_EQ_INT(b1->joined[0].ts_ns, 1318);
    CHECK_EQ_INT(b1->joined[1].ts_ns, 1420);
    CHECK_EQ_INT(a2->n_joined, 0); /* c1's forward is not A2's */
    CHECK_EQ_INT(b2->pid, 200);
    CHECK_EQ_INT(b2->n_joined, 1);
    CHECK_EQ_INT(b2->joined[0].ts_ns, 1520);
    /* a span naming no request joins by time alone: of the steps
     * containing it whose forward is not joined yet, the one that started
     * last (B2 started later, but its forward was joined: A2) */
    CHECK(feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000f1", 300, 301, 1550, 1560, "", &step));
    CHECK_EQ_INT(step.pid, 100);
    CHECK(!feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000f2", 300, 301, 1555, 1560, "", &step));
    /* A worker's forward naming no request (an idle data-parallel engine's
     * dummy batch) is its process's engine's: workers 110 and 210 named A's
     * and B's requests before. A3 = [1700, 1800] and B3 = [1710, 1810] both
     * contain both forwards, and B3 started last */
    const char *idle = "\"step.index\":%d,\"scheduler.running\":0,\"batch.request_count\":0";
    snprintf(attrs, sizeof attrs, idle, 3);
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000a3", 100, 101, 1700, 1705, attrs, &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000b3", 200, 201, 1710, 1715, attrs, &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000a6", 100, 101, 1790, 1800, "", &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000b6", 200, 201, 1800, 1810, "", &step));
    CHECK(feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000f3", 110, 111, 1750, 1760, "", &step));
    CHECK_EQ_INT(step.pid, 100);
    CHECK_EQ_INT(step.ts_ns, 1700);
    CHECK(feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000f4", 210, 211, 1752, 1760, "", &step));
    CHECK_EQ_INT(step.pid, 200);
    /* ... also when it waits for its step: B's idle forward, in A4 = [1900,
     * 2000] and B4 = [1910, 2010], is not taken by A4, which closes first */
    CHECK(!feed_joining_in(tl, &g, "vllm.worker.execute_model", "00000000000000f5", 210, 211, 1920, 1930, "", &step));
    snprintf(attrs, sizeof attrs, idle, 4);
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000a4", 100, 101, 1900, 1905, attrs, &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000a5", 100, 101, 1990, 2000, "", &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.schedule", "00000000000000b4", 200, 201, 1910, 1915, attrs, &step));
    CHECK(!feed_joining_in(tl, &g, "vllm.scheduler.update_from_output", "00000000000000b5", 200, 201, 2000, 2010, "", &step));
    CHECK_EQ_INT(g.n_steps, 10);
    CHECK_EQ_INT(g.steps[8].pid, 100);
    CHECK_EQ_INT(g.steps[8].n_joined, 0);
    CHECK_EQ_INT(g.steps[9].pid, 200);
    CHECK_EQ_INT(g.steps[9].n_joined, 1);
    CHECK_EQ_INT(g.steps[9].joined[0].ts_ns, 1920);
    mst_timeline_free(tl);
}

/* One engine's done steps are a bounded ring kept in order of their end:
 * a late span finds its step among the last TL_DONE_STEPS (1,024) of its
 * engine, also after the ring wrapped, and a step that closed out of order
 * is found by its time. */
static void test_done_steps_ring(void) {
    mst_timeline *tl = mst_timeline_new(64);
    got g = {0};
    mst_tl_pos step;
    char sp[17], attrs[96];
    const int steps = 1024 + 300;
    for (int i = 0; i < steps; i++) {
        long long t = 10000 + 100ll * i;
        snprintf(sp, sizeof sp, "%016x", 0x1000 + i);
        snprintf(attrs, sizeof attrs, "\"step.index\":%d,\"scheduler.running\":1,\"request.ids\":[\"r\"]", i);
        CHECK(!feed_joining(tl, &g, "vllm.scheduler.schedule", sp, t, t + 10, attrs, &step));
    }
    /* a forward in the oldest step still kept (the last one is still open) */
    long long t_old = 10000 + 100ll * (steps - 1 - 1024) + 5;
    CHECK(feed_joining(tl, &g, "vllm.worker.execute_model", "00000000000000f1", t_old, t_old + 1,
                       "\"request.ids\":[\"r\"]", &step));
    CHECK_EQ_INT(step.ts_ns, t_old - 5);
    /* ... one in the step before it was forgotten: it waits */
    CHECK(!feed_joining(tl, &g, "vllm.worker.execute_model", "00000000000000f2", t_old - 100,
                        t_old - 99, "\"request.ids\":[\"r\"]", &step));
    /* outputs: the last step that ended at or before their start */
    long long t_out = 10000 + 100ll * 700 + 50;
    CHECK(feed_joining(tl, &g, "vllm.output.process", "00000000000000f3", t_out, t_out + 1,
                       "\"request.ids\":[\"r\"]", &step));
    CHECK_EQ_INT(step.ts_ns, t_out - 50);
    /* a step ending before the last one kept (out of order) is found */
    snprintf(attrs, sizeof attrs, "\"step.index\":%d,\"scheduler.running\":1,\"request.ids\":[\"r\"]", steps);
    CHECK(!feed_joining(tl, &g, "vllm.scheduler.schedule", "0000000000009000", 1, 2, attrs, &step));
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, on_step});
    CHECK(feed_joining(tl, &g, "vllm.worker.execute_model", "00000000000000f4", 1, 1,
                       "\"request.ids\":[\"r\"]", &step));
    CHECK_EQ_INT(step.ts_ns, 1);
    mst_timeline_free(tl);
}

/* Feeds one span to two timelines: `plain` reads its lists as JSON, `split`
 * gets request.ids and step.new_ids split, with hint words kept per id
 * text in hints[] (texts one character long: "a", "b", ...). */
static void feed_both(mst_timeline *plain, mst_timeline *split, got *gp, got *gs, long long start,
                      const char *ids, const char *new_ids, uint64_t hints[26]) {
    char json[2048];
    snprintf(json, sizeof json,
             MST_PERFETTO_MAGIC
             "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"c\",\"trace_id\":\"%032d\","
             "\"span_id\":\"%016llx\",\"parent_span_id\":\"\",\"start_time_ns\":%lld,"
             "\"end_time_ns\":%lld,\"kind\":1,\"status\":1,\"attributes\":{\"process.pid\":7,"
             "\"scheduler.running\":1,\"request.ids\":%s,\"step.new_ids\":%s,\"step.phase\":\"%.*s\"},"
             "\"resource_attributes\":{},\"links\":[]}",
             1, start + 1, start, start + 5, ids, new_ids, (int)(strlen(ids) / 4), "ddddddddddddddddd");
    mst_arena a;
    mst_pf_span s;
    decode(json, &a, &s);
    mst_tl_sink sp = {gp, on_request, on_counter, NULL}, ss = {gs, on_request, on_counter, NULL};
    CHECK(mst_timeline_add_span(plain, &s, s.pid, &a, &sp));
    mst_tl_id_item items[2][16];
    mst_tl_split_list lists[2];
    size_t n_lists = 0;
    for (size_t i = 0; i < s.n_attrs; i++) {
        const mst_str *k = &s.attrs[i].key;
        bool is_ids = k->len == 11 && memcmp(k->ptr, "request.ids", 11) == 0;
        bool is_new = k->len == 12 && memcmp(k->ptr, "step.new_ids", 12) == 0;
        if (!is_ids && !is_new) continue;
        const mst_json_slice *v = &s.attrs[i].value;
        size_t n = 0;
        for (size_t j = 0; j < v->len; j++)
            if (v->ptr[j] >= 'a' && v->ptr[j] <= 'z')
                items[n_lists][n++] = (mst_tl_id_item){v->ptr + j, 1, &hints[v->ptr[j] - 'a']};
        lists[n_lists] = (mst_tl_split_list){.value = v, .items = items[n_lists], .n = n};
        n_lists++;
    }
    CHECK_EQ_INT(n_lists, 2);
    CHECK(mst_timeline_add_span_split(split, &s, s.pid, &a, &ss, lists, n_lists));
    mst_arena_release(&a);
}

/* Lists a writer split are read as their JSON: the same request tracks,
 * also when the bounded table evicts requests and makes them again in
 * slots their ids' hints still name. */
static void test_split_lists_read_as_json(void) {
    mst_timeline *plain = mst_timeline_new(4), *split = mst_timeline_new(4);
    got gp = {0}, gs = {0};
    uint64_t hints[26] = {0};
    static const char *const steps[][2] = {
        {"[\"a\",\"b\",\"c\"]", "[\"a\",\"b\",\"c\"]"},
        {"[\"a\",\"b\",\"c\",\"d\"]", "[\"d\"]"},
        {"[\"b\",\"c\",\"d\",\"e\"]", "[\"e\"]"},       /* the table is full: a is evicted */
        {"[\"a\",\"e\"]", "[\"a\"]"},                   /* a again (a new entry), b evicted */
        {"[\"f\",\"a\",\"e\",\"b\"]", "[\"f\",\"b\"]"},
        {"[\"b\",\"f\"]", "[]"},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        feed_both(plain, split, &gp, &gs, 100 + 10 * (long long)i, steps[i][0], steps[i][1], hints);
    mst_timeline_finish_all(plain, &(mst_tl_sink){&gp, on_request, on_counter, NULL});
    mst_timeline_finish_all(split, &(mst_tl_sink){&gs, on_request, on_counter, NULL});
    CHECK(gp.n_req >= 6);
    CHECK_EQ_INT(gs.n_req, gp.n_req);
    for (size_t i = 0; i < gp.n_req && i < gs.n_req; i++) {
        CHECK_EQ_STR(gs.req[i].id, gp.req[i].id);
        CHECK_EQ_INT(gs.req[i].start_ns, gp.req[i].start_ns);
        CHECK_EQ_INT(gs.req[i].end_ns, gp.req[i].end_ns);
        CHECK_EQ_INT(gs.req[i].steps, gp.req[i].steps);
        CHECK_EQ_INT(gs.req[i].lane, gp.req[i].lane);
        CHECK_EQ_INT(gs.req[i].n_phases, gp.req[i].n_phases);
        for (unsigned k = 0; k < gp.req[i].n_phases && k < gs.req[i].n_phases; k++) {
            CHECK_EQ_STR(gs.req[i].phases[k].name, gp.req[i].phases[k].name);
            CHECK_EQ_INT(gs.req[i].phases[k].start_ns, gp.req[i].phases[k].start_ns);
            CHECK_EQ_INT(gs.req[i].phases[k].end_ns, gp.req[i].phases[k].end_ns);
        }
    }
    CHECK(hints[0] != 0 && hints[5] != 0); /* the split timeline kept its lookups */
    mst_timeline_free(plain);
    mst_timeline_free(split);
}

/* A request span's lane is its entry's: the same for later spans naming
 * it, another for each request. */
static void test_request_lanes(void) {
    mst_timeline *tl = mst_timeline_new(16);
    got g = {0};
    mst_tl_pos step;
    feed(tl, &g, "vllm.scheduler.schedule", "0000000000000001", 100, 110,
         "\"scheduler.running\":1,\"request.ids\":[\"b\"]");
    (void)feed_joining(tl, &g, "vllm.request", "0000000000000002", 50, 500, "\"request.id\":\"a\"", &step);
    (void)feed_joining(tl, &g, "vllm.request", "0000000000000003", 60, 600, "\"request.id\":\"b\"", &step);
    mst_timeline_finish_all(tl, &(mst_tl_sink){&g, on_request, on_counter, NULL});
    const mst_tl_request *a = find_req(&g, "a"), *b = find_req(&g, "b");
    CHECK(a && b && a->lane && b->lane && a->lane != b->lane);
    CHECK(b && b->lane == 1); /* first seen */
    CHECK(mst_timeline_arrival_rank(tl, 50000000) < mst_timeline_arrival_rank(tl, 60000000)); /* ms */
    CHECK(mst_timeline_arrival_rank(tl, 60) >= 1);
    mst_timeline_free(tl);
}

static const mst_test_case TESTS[] = {
    {"engine_steps_and_their_flows", test_engine_steps_and_their_flows},
    {"request_lanes", test_request_lanes},
    {"waiting_spans_ring", test_waiting_spans_ring},
    {"joins_with_two_engines", test_joins_with_two_engines},
    {"done_steps_ring", test_done_steps_ring},
    {"split_lists_read_as_json", test_split_lists_read_as_json},
    {"request_span_gives_track_and_phases", test_request_span_gives_track_and_phases},
    {"steps_only_request_completes_at_the_end", test_steps_only_request_completes_at_the_end},
    {"steps_only_request_completes_when_idle", test_steps_only_request_completes_when_idle},
    {"schedule_steps_win_over_model_steps", test_schedule_steps_win_over_model_steps},
    {"table_is_bounded_and_evicts_oldest", test_table_is_bounded_and_evicts_oldest},
    {"counters_from_attributes", test_counters_from_attributes},
    {"flow_ids", test_flow_ids},
    {"json_numbers_as_libc", test_json_numbers_as_libc},
    {"span_flow_id_as_general", test_span_flow_id_as_general},
    {"step_record_phases", test_step_record_phases},
    {"step_record_phases_are_bounded", test_step_record_phases_are_bounded},
};

MST_TEST_MAIN(TESTS)
