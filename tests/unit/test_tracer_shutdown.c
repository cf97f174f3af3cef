/* test_tracer_shutdown.c — mst_tracer_shutdown honours its timeout when an
 * export hangs: the real OTLP exporter sends to a real loopback socket whose
 * "collector" reads the request and never answers; shutdown's flush times
 * out and the export in flight is cancelled (the exporter's cancel op sets
 * the transport's cancel flag), instead of the join waiting for the export
 * timeout. Asserted by state, not by time: what export_batch returned
 * (MST_ERR_CLOSED = cancelled, where it used to be MST_ERR_TIMEOUT after the
 * whole export timeout) and the exporter's counters, read just before the
 * tracer destroys it. An observing exporter (observer_exporter.c) wraps the
 * OTLP one to see both. */
#include "testlib.h"
#include "core/tracer.h"
#include "mstrace_otlp.h"
#include "observer_exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------- a collector that never answers */

typedef struct silent_collector {
    int lfd;
    uint16_t port;
    pthread_t thread;
    _Atomic int connections;
    _Atomic long bytes; /* request bytes read: the export is in flight */
} silent_collector;

static void *silent_main(void *arg) {
    silent_collector *c = arg;
    for (;;) {
        int fd = accept(c->lfd, NULL, NULL);
        if (fd < 0) return NULL; /* listening socket shut down: stop */
        atomic_fetch_add(&c->connections, 1);
        char buf[4096];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0) atomic_fetch_add(&c->bytes, (long)n);
        close(fd); /* the client gave up (cancelled) */
    }
}

static bool silent_start(silent_collector *c) {
    memset(c, 0, sizeof *c);
    c->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(c->lfd, 8) != 0 ||
        getsockname(c->lfd, (struct sockaddr *)&a, &len) != 0)
        return false;
    c->port = ntohs(a.sin_port);
    return pthread_create(&c->thread, NULL, silent_main, c) == 0;
}

static void silent_stop(silent_collector *c) {
    shutdown(c->lfd, SHUT_RDWR);
    pthread_join(c->thread, NULL);
    close(c->lfd);
}

/* ---------------------------------------------------------------- tests */

static void test_shutdown_cancels_an_export_to_a_silent_collector(void) {
    silent_collector c;
    CHECK(silent_start(&c));
    mst_otlp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "http://127.0.0.1:%u/v1/traces", c.port);
    cfg.protocol = MST_OTLP_HTTP_PROTOBUF;
    /* Far beyond the shutdown timeout: an export that ends by itself ends
     * with MST_ERR_TIMEOUT after 30 s; only the cancel gives MST_ERR_CLOSED. */
    cfg.timeout_ms = 30000;
    mst_test_observer *o = calloc(1, sizeof *o);
    mst_exporter *otlp = NULL;
    CHECK_EQ_INT(mst_otlp_exporter_create(&cfg, &otlp), MST_OK);
    mst_test_observer_init(o, otlp, NULL);
    CHECK(o->inner->ops->cancel != NULL);

    mst_tracer *t;
    mst_tracer_options opts = {.max_queue_size = 64, .max_export_batch_size = 16, .schedule_delay_ms = 600000};
    CHECK_EQ_INT(mst_tracer_create(&opts, &t), MST_OK);
    CHECK_EQ_INT(mst_tracer_add_exporter(t, &o->base), MST_OK);
    for (int i = 0; i < 3; i++) {
        mst_span *s = mst_span_start(t, NULL, "hangs", MST_SPAN_KIND_INTERNAL, NULL, 0);
        mst_span_end(s, 0);
    }
    /* Start the export, then wait (bounded by the collector, not a clock)
     * until the request is on the wire: the exporter thread now waits for
     * an answer that never comes. */
    CHECK_EQ_INT(mst_tracer_flush(t, 1), MST_ERR_TIMEOUT);
    while (atomic_load(&c.bytes) == 0) sched_yield();
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    CHECK_EQ_INT(st.spans_ended, 3);

    CHECK_EQ_INT(mst_tracer_shutdown(t, 100), MST_ERR_TIMEOUT);
    CHECK(o->destroyed);
    CHECK_EQ_INT(atomic_load(&o->cancels), 1);
    CHECK_EQ_INT(atomic_load(&o->batches), 1);
    CHECK_EQ_INT(atomic_load(&o->last_status), MST_ERR_CLOSED); /* cancelled, not timed out */
    CHECK_EQ_INT(o->final.spans_failed, 3);
    CHECK_EQ_INT(o->final.batches_failed, 1);
    CHECK_EQ_INT(o->final.spans_exported, 0);
    CHECK_EQ_INT(o->final.retries, 0);
    CHECK_EQ_INT(atomic_load(&c.connections), 1);
    silent_stop(&c);
    free(o);
}

static void test_shutdown_in_time_cancels_nothing(void) {
    /* A flush that finishes within the timeout: nothing to cancel. */
    mst_test_observer *o = calloc(1, sizeof *o);
    mst_test_observer_init(o, mst_null_exporter_create(), NULL);
    mst_tracer *t;
    mst_tracer_options opts = {.max_queue_size = 64, .max_export_batch_size = 16, .schedule_delay_ms = 600000};
    CHECK_EQ_INT(mst_tracer_create(&opts, &t), MST_OK);
    CHECK_EQ_INT(mst_tracer_add_exporter(t, &o->base), MST_OK);
    mst_span *s = mst_span_start(t, NULL, "quick", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 5000), MST_OK);
    CHECK(o->destroyed);
    CHECK_EQ_INT(atomic_load(&o->cancels), 0);
    CHECK_EQ_INT(atomic_load(&o->last_status), MST_OK);
    free(o);
}

static const mst_test_case tests[] = {
    {"shutdown_cancels_an_export_to_a_silent_collector", test_shutdown_cancels_an_export_to_a_silent_collector},
    {"shutdown_in_time_cancels_nothing", test_shutdown_in_time_cancels_nothing},
};
MST_TEST_MAIN(tests)
