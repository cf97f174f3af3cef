/*
 * test_forward_shutdown.c — mst_tracer_shutdown with the Perfetto forwarder
 * client when the forwarder is alive but does not read (stopped with
 * SIGSTOP, stalled, its socket buffer full): shutdown's flush runs out of
 * time, the send in flight is cancelled (the client's cancel op) and
 * shutdown returns, with every span accounted for exactly once.
 *
 * The client's send budget is set to 10 minutes, so without the cancel the
 * join would wait for a forwarder that is only resumed after shutdown
 * returns: the old code hangs here (the 60 s alarm fails the test) instead
 * of passing slowly. Nothing is asserted on time.
 *
 * Two ways to run:
 *   - no arguments (ctest): against a listener in this process that accepts
 *     and reads nothing (frame_listener.h, paused); after shutdown it reads
 *     what the kernel holds to EOF and decodes the whole frames: exactly
 *     the exporter's spans_exported, none bad.
 *   - driver (tests/integration/test_forward_shutdown.py):
 *     `--socket NAME --spans N`: against a real `mstrace forward`; exports
 *     10 warm-up spans, prints "ready", waits for a line on stdin (the test
 *     SIGSTOPs the daemon meanwhile), then exports N spans, shuts down and
 *     prints the counters as one JSON line.
 */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "export/forward_client.h"
#include "frame_listener.h"
#include "observer_exporter.h"
#include "testlib.h"

#define WARMUP_SPANS 10
#define HANG_GUARD_S 60u

/* ------------------------------------------------------------ scenario */

typedef struct outcome {
    mst_status shutdown;
    mst_test_observer obs; /* wraps the client: what it was handed, its final counters */
} outcome;

static void spans(mst_tracer *t, const char *name, int n) {
    for (int i = 0; i < n; i++) {
        mst_span *s = mst_span_start(t, NULL, name, MST_SPAN_KIND_INTERNAL, NULL, 0);
        if (!s) continue;
        mst_span_set_str(s, "request.id", "req-00000000000000000000000000000000000000000000");
        mst_span_set_int(s, "seq", i);
        mst_span_end(s, 0);
    }
}

/* Warm-up spans (flushed: the connection is up), then `stall()` (the
 * forwarder stops reading), then n spans and a shutdown that must cancel. */
static bool run_scenario(const char *socket_name, int n, void (*stall)(void *), void *ctx, outcome *out) {
    memset(out, 0, sizeof *out);
    mst_test_observer *o = &out->obs;
    /* A send budget far beyond the hang guard: a send that ends by itself
     * ends only after 10 minutes; only the cancel ends it sooner. */
    mst_tracer *t = mst_test_forward_tracer(socket_name, 600000, 0, o);
    if (!t) return false;
    spans(t, "warmup", WARMUP_SPANS);
    if (!mst_test_warmup_reached(t, o)) return false;
    stall(ctx);
    alarm(HANG_GUARD_S); /* default action: the test dies, visibly */
    spans(t, "stalled", n);
    /* Shut down only once a batch of them is in the client's hands (however
     * late the exporter thread gets the CPU): the export in flight is then
     * the one the cancel must end, and the flush cannot finish before. */
    while (atomic_load(&o->handed) <= WARMUP_SPANS) sched_yield();
    out->shutdown = mst_tracer_shutdown(t, 200);
    alarm(0);
    return o->destroyed;
}

/* Every span accounted for once: by the tracer (started = exported + failed
 * + dropped; a batch the client did not deliver whole counts failed), and by
 * the client (exported + failed = handed to it). */
static void check_outcome(const outcome *r, int n) {
    const mst_test_observer *o = &r->obs;
    CHECK_EQ_INT(r->shutdown, MST_ERR_TIMEOUT);
    CHECK_EQ_INT(atomic_load(&o->cancels), 1);
    CHECK_EQ_INT(atomic_load(&o->last_status), MST_ERR_CLOSED); /* cancelled, not timed out */
    uint64_t handed = atomic_load(&o->handed);
    CHECK_EQ_INT(o->final.spans_exported + o->final.spans_failed, handed);
    CHECK_EQ_INT(o->final.spans_skipped, 0);
    CHECK(o->final.spans_failed > 0);
    CHECK(o->final.spans_exported >= WARMUP_SPANS);
    CHECK(o->final.batches_failed >= 1);
    const mst_tracer_stats *ts = &o->tracer_final;
    CHECK_EQ_INT(ts->spans_started, (uint64_t)n + WARMUP_SPANS);
    CHECK_EQ_INT(ts->spans_ended, ts->spans_started);
    CHECK_EQ_INT(ts->spans_exported + ts->spans_failed + ts->spans_dropped + ts->spans_filtered,
                 ts->spans_started);
    CHECK_EQ_INT(ts->queue_depth, 0);
    /* The tracer counts whole batches: those the client delivered whole are
     * exported there, the batch cut by the cancel failed (some of its frames
     * did reach the forwarder, so the client's own count is higher), and
     * what was still queued at the cancel failed without reaching it. */
    CHECK(ts->spans_exported <= o->final.spans_exported);
    CHECK(handed >= ts->spans_exported && handed - ts->spans_exported <= ts->spans_failed);
}

/* ----------------------------------- against a listener that stops reading */

/* Nothing to do: the listener is paused from the start (it accepts the
 * connection and reads nothing), so the warm-up frames wait in the socket
 * buffer and the spans after them fill it. */
static void listener_already_paused(void *ctx) { (void)ctx; }

static void test_shutdown_cancels_a_send_to_a_reader_that_never_reads(void) {
    char name[64];
    snprintf(name, sizeof name, "mst-test-fwd-shutdown-%d", (int)getpid());
    static listener l;
    if (!listener_start(&l, name)) {
        CHECK(!"listener");
        return;
    }
    atomic_store(&l.paused, true);
    enum { N = 20000 }; /* ~5 MB of frames: far more than a socket buffer holds */
    static outcome r;
    CHECK(run_scenario(name, N, listener_already_paused, NULL, &r));
    check_outcome(&r, N);
    /* Read what the kernel holds, to the EOF of the client's close at
     * shutdown: every span counted exported arrived whole and decodes; the
     * frame cut by the cancel is dropped, as the forwarder drops it. */
    atomic_store(&l.paused, false);
    alarm(HANG_GUARD_S);
    while (atomic_load(&l.closed) < 1) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    alarm(0);
    CHECK_EQ_INT(atomic_load(&l.accepted), 1);
    CHECK_EQ_INT(atomic_load(&l.frames), r.obs.final.spans_exported);
    CHECK_EQ_INT(atomic_load(&l.bad), 0);
    listener_stop(&l);
}

/* ---------------------------------------------------------------- driver */

static void wait_for_go(void *ctx) {
    (void)ctx;
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) fprintf(stderr, "driver: no go line on stdin\n");
}

static int driver_main(int argc, char **argv) {
    const char *socket_name = NULL;
    int n = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--socket")) socket_name = argv[i + 1];
        else if (!strcmp(argv[i], "--spans")) n = atoi(argv[i + 1]);
    }
    if (!socket_name || n < 1) {
        fprintf(stderr, "usage: %s --socket NAME --spans N\n", argv[0]);
        return 2;
    }
    static outcome r;
    if (!run_scenario(socket_name, n, wait_for_go, NULL, &r)) return 1;
    const mst_test_observer *o = &r.obs;
    const mst_tracer_stats *ts = &o->tracer_final;
    printf("{\"shutdown\":%d,\"last_status\":%d,\"cancels\":%d,\"handed\":%llu,\"exported\":%llu,"
           "\"failed\":%llu,\"skipped\":%llu,\"batches_failed\":%llu,\"tracer_started\":%llu,"
           "\"tracer_exported\":%llu,\"tracer_failed\":%llu,\"tracer_dropped\":%llu,\"tracer_filtered\":%llu}\n",
           (int)r.shutdown, atomic_load(&o->last_status), atomic_load(&o->cancels),
           (unsigned long long)atomic_load(&o->handed), (unsigned long long)o->final.spans_exported,
           (unsigned long long)o->final.spans_failed, (unsigned long long)o->final.spans_skipped,
           (unsigned long long)o->final.batches_failed, (unsigned long long)ts->spans_started,
           (unsigned long long)ts->spans_exported, (unsigned long long)ts->spans_failed,
           (unsigned long long)ts->spans_dropped, (unsigned long long)ts->spans_filtered);
    return 0;
}

static const mst_test_case tests[] = {
    {"shutdown_cancels_a_send_to_a_reader_that_never_reads",
     test_shutdown_cancels_a_send_to_a_reader_that_never_reads},
};

int main(int argc, char **argv) {
    if (argc > 1 && strncmp(argv[1], "--", 2) == 0) return driver_main(argc, argv);
    return mst_test_run_all(tests, sizeof tests / sizeof tests[0], argc, argv);
}
