/*
 * test_forward_loss.c — a forwarder that stops reading for longer than the
 * client's send budget, then reads again: the spans after the stall reach
 * it, and the spans lost in the stall are reported to it (loss reports,
 * wire/loss_report.h), so the loss shows where users look.
 *
 * This is the mechanism of the real-vLLM loss (tests/vllm/
 * test_real_vllm_long_load.py): the budget ran out on a frame boundary or
 * in the middle of a frame (then the client closes the connection, the
 * stream being unusable), the rest of the batch counted as failed in the
 * process and nowhere else; and a cut within the reconnect interval after
 * the connect (the interval counted from the connect at the load's start)
 * failed every batch until it passed. Here the interval is 10 minutes, so
 * only the reconnect-at-once rule for a connection that broke can deliver
 * the later spans; the budget is 100 ms so the stall ends a batch quickly.
 * Nothing is asserted on time: the stall lasts until the client has failed
 * a batch (counted work), however long that takes.
 *
 * Two ways to run:
 *   - no arguments (ctest): against the in-process listener (frame_listener.h,
 *     paused, then resumed).
 *   - driver (tests/integration/test_forward_loss.py): `--socket NAME`:
 *     against a real `mstrace forward`; prints "ready" after the warm-up
 *     spans and waits for a line on stdin (the test SIGSTOPs the daemon),
 *     prints "stalled" once a batch failed and waits again (the test
 *     SIGCONTs it), then sends the later spans, shuts down and prints the
 *     counters as one JSON line.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export/forward_client.h"
#include "frame_listener.h"
#include "observer_exporter.h"
#include "testlib.h"

#define WARMUP_SPANS 10
#define AFTER_SPANS 300
#define STALL_ROUND_SPANS 2000 /* ~4 MB of frames a round: more than a socket buffer */
#define MAX_STALL_ROUNDS 50
#define HANG_GUARD_S 120u

typedef struct outcome {
    mst_status shutdown;
    mst_test_observer obs;
    uint64_t stall_rounds;
} outcome;

/* Spans of about the size of an engine step with its step record. */
static void spans(mst_tracer *t, const char *name, int n) {
    static char payload[2048];
    if (!payload[0]) memset(payload, 'x', sizeof payload - 1);
    for (int i = 0; i < n; i++) {
        mst_span *s = mst_span_start(t, NULL, name, MST_SPAN_KIND_INTERNAL, NULL, 0);
        if (!s) continue;
        mst_span_set_int(s, "seq", i);
        mst_span_set_str(s, "payload", payload);
        mst_span_end(s, 0);
    }
}

static uint64_t client_failed(mst_exporter *fwd) {
    mst_exporter_stats es;
    memset(&es, 0, sizeof es);
    mst_exporter_get_stats(fwd, &es);
    return es.spans_failed;
}

/* Warm-up (the connection is up), stall(), spans until the client failed
 * some, resume(), the later spans, shutdown. */
static bool run_scenario(const char *socket_name, void (*stall)(void *), void (*resume)(void *), void *ctx,
                         outcome *out) {
    memset(out, 0, sizeof *out);
    mst_test_observer *o = &out->obs;
    mst_tracer *t = mst_test_forward_tracer(socket_name, 100, 600000, o);
    if (!t) return false;
    mst_exporter *fwd = o->inner;
    alarm(HANG_GUARD_S);
    spans(t, "warmup", WARMUP_SPANS);
    if (!mst_test_warmup_reached(t, o)) return false;
    stall(ctx);
    while (client_failed(fwd) == 0 && out->stall_rounds < MAX_STALL_ROUNDS) {
        out->stall_rounds++;
        spans(t, "stalled", STALL_ROUND_SPANS);
        mst_tracer_flush(t, 60000); /* returns once every batch was sent or failed */
    }
    resume(ctx);
    spans(t, "after", AFTER_SPANS);
    mst_tracer_flush(t, 60000);
    out->shutdown = mst_tracer_shutdown(t, 60000);
    alarm(0);
    return o->destroyed;
}

/* What the client says, whatever the forwarder: every span it was handed
 * exported or failed, some failed in the stall, all later ones exported. */
static void check_client(const outcome *r) {
    const mst_test_observer *o = &r->obs;
    CHECK_EQ_INT(r->shutdown, MST_OK);
    CHECK(r->stall_rounds < MAX_STALL_ROUNDS);
    CHECK_EQ_INT(o->final.spans_exported + o->final.spans_failed, atomic_load(&o->handed));
    CHECK(o->final.spans_failed > 0);
    CHECK_EQ_INT(o->tracer_final.spans_dropped, 0);
    CHECK_EQ_INT(atomic_load(&o->last_status), MST_OK); /* the later spans went out */
}

/* ------------------------------------------------ the in-process listener */

static void pause_listener(void *ctx) { atomic_store(&((listener *)ctx)->paused, true); }
static void resume_listener(void *ctx) { atomic_store(&((listener *)ctx)->paused, false); }

static void test_spans_after_a_stall_arrive_and_the_loss_is_reported(void) {
    char name[64];
    snprintf(name, sizeof name, "mst-test-fwd-loss-%d", (int)getpid());
    static listener l;
    if (!listener_start(&l, name)) {
        CHECK(!"listener");
        return;
    }
    static outcome r;
    CHECK(run_scenario(name, pause_listener, resume_listener, &l, &r));
    check_client(&r);
    /* The client closed its connection at shutdown: everything it counted
     * exported arrived, and the loss report said exactly what it failed. */
    CHECK(wait_all_closed(&l));
    CHECK_EQ_INT(atomic_load(&l.frames), r.obs.final.spans_exported);
    CHECK_EQ_INT(atomic_load(&l.bad), 0);
    CHECK(atomic_load(&l.reports) >= 1);
    CHECK_EQ_INT(atomic_load(&l.reported_failed), r.obs.final.spans_failed);
    CHECK_EQ_INT(atomic_load(&l.reported_dropped), 0);
    listener_stop(&l);
}

/* ---------------------------------------------------------------- driver */

static void wait_for_go(void *ctx) {
    printf("%s\n", (const char *)ctx);
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) fprintf(stderr, "driver: no go line on stdin\n");
}

static void say_ready(void *ctx) { (void)ctx; wait_for_go("ready"); }
static void say_stalled(void *ctx) { (void)ctx; wait_for_go("stalled"); }

static int driver_main(int argc, char **argv) {
    const char *socket_name = NULL;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--socket")) socket_name = argv[i + 1];
    if (!socket_name) {
        fprintf(stderr, "usage: %s --socket NAME\n", argv[0]);
        return 2;
    }
    static outcome r;
    if (!run_scenario(socket_name, say_ready, say_stalled, NULL, &r)) return 1;
    const mst_test_observer *o = &r.obs;
    printf("{\"shutdown\":%d,\"last_status\":%d,\"handed\":%llu,\"exported\":%llu,\"failed\":%llu,"
           "\"stall_rounds\":%llu,\"tracer_dropped\":%llu,\"warmup\":%d,\"after\":%d}\n",
           (int)r.shutdown, atomic_load(&o->last_status), (unsigned long long)atomic_load(&o->handed),
           (unsigned long long)o->final.spans_exported, (unsigned long long)o->final.spans_failed,
           (unsigned long long)r.stall_rounds, (unsigned long long)o->tracer_final.spans_dropped,
           WARMUP_SPANS, AFTER_SPANS);
    return 0;
}

static const mst_test_case tests[] = {
    {"spans_after_a_stall_arrive_and_the_loss_is_reported",
     test_spans_after_a_stall_arrive_and_the_loss_is_reported},
};

int main(int argc, char **argv) {
    if (argc > 1 && strncmp(argv[1], "--", 2) == 0) return driver_main(argc, argv);
    return mst_test_run_all(tests, sizeof tests / sizeof tests[0], argc, argv);
}
