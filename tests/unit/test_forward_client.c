/*
 * test_forward_client.c — the Perfetto forwarder client (forward_client.c)
 * against a real abstract-socket listener running in a thread of the test:
 * spans arrive as length-prefixed frames that decode; with no listener the
 * exporter fails at once and counts (an optional one logs one INFO line and
 * counts the spans skipped until it first connects); a listener that appears later (or
 * restarts) is picked up after the retry interval; a reader that stops
 * reading costs at most the send budget and every counted-exported frame
 * still arrives whole; a cancel (tracer shutdown out of time) stops a send
 * that waits on such a reader and every later batch, counting each span
 * once; a fork()ed child gets its own connection and the parent's keeps
 * working. No wall-clock assertions: waits are bounded loops.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "export/forward_client.h"
#include "frame_listener.h"
#include "testlib.h"
#include "wire/perfetto_packet.h"

/* ------------------------------------------------------------ helpers */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void unique_name(char *out, size_t n, const char *tag) {
    static atomic_int seq;
    snprintf(out, n, "mst-test-fwd-%d-%s-%d", (int)getpid(), tag, atomic_fetch_add(&seq, 1));
}

/* --------------------------------------------------------------- spans */

typedef struct span_set {
    mst_span *spans;
    const mst_span **ptrs;
    size_t n;
} span_set;

static mst_str S(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }

static span_set make_spans(size_t n, const char *name) {
    span_set set = {calloc(n, sizeof(mst_span)), calloc(n, sizeof(mst_span *)), n};
    for (size_t i = 0; i < n; i++) {
        mst_span *s = &set.spans[i];
        mst_arena_init(&s->arena);
        memset(s->trace_id.bytes, 0x11, 16);
        memset(s->span_id.bytes, 0x22, 8);
        s->span_id.bytes[0] = (uint8_t)(i + 1);
        s->name = S(name);
        s->kind = MST_SPAN_KIND_INTERNAL;
        s->start_ns = 1000 + i;
        s->end_ns = 2000 + i;
        s->attrs[0] = (mst_attr){.key = S("process.pid"), .type = MST_ATTR_INT, .v.i = 1};
        s->attrs[1] = (mst_attr){.key = S("request.id"), .type = MST_ATTR_STRING,
                                 .v.s = S("req-0000000000000000000000000000000000000000000000000000")};
        s->n_attrs = 2;
        set.ptrs[i] = s;
    }
    return set;
}

static void free_spans(span_set *set) {
    for (size_t i = 0; i < set->n; i++) mst_arena_release(&set->spans[i].arena);
    free(set->spans);
    free(set->ptrs);
}

static mst_status export(mst_exporter *e, span_set *set) {
    return e->ops->export_batch(e, set->ptrs, set->n);
}

static mst_exporter_stats stats(mst_exporter *e) {
    mst_exporter_stats st;
    e->ops->get_stats(e, &st);
    return st;
}

static mst_exporter *make_exporter(const char *name) {
    mst_exporter *e = NULL;
    CHECK_EQ_INT(mst_forward_exporter_create(name, &e), MST_OK);
    return e;
}

/* --------------------------------------------------------------- tests */

static void test_spans_arrive_as_frames(void) {
    char name[64];
    unique_name(name, sizeof name, "arrive");
    listener l;
    if (!listener_start(&l, name)) { CHECK(!"listener"); return; }
    mst_exporter *e = make_exporter(name);
    CHECK_EQ_STR(e->ops->name, "perfetto-forward");
    span_set set = make_spans(10, "vllm.model.execute");
    CHECK_EQ_INT(export(e, &set), MST_OK);
    CHECK(mst_forward_exporter_is_connected(e));
    CHECK(wait_frames(&l, 10));
    CHECK_EQ_INT(atomic_load(&l.bad), 0);
    CHECK_EQ_STR(l.names[0], "vllm.model.execute");
    CHECK_EQ_INT(export(e, &set), MST_OK); /* same connection */
    CHECK(wait_frames(&l, 20));
    CHECK_EQ_INT(atomic_load(&l.accepted), 1);
    mst_exporter_stats st = stats(e);
    CHECK_EQ_INT(st.spans_exported, 20);
    CHECK_EQ_INT(st.spans_failed, 0);
    CHECK_EQ_INT(st.batches_ok, 2);
    CHECK_EQ_INT(st.batches_failed, 0);
    CHECK_EQ_INT(e->ops->flush(e, 100), MST_OK);
    e->ops->destroy(e);
    listener_stop(&l);
    free_spans(&set);
}

static void test_large_batch_is_chunked_and_complete(void) {
    char name[64];
    unique_name(name, sizeof name, "large");
    listener l;
    if (!listener_start(&l, name)) { CHECK(!"listener"); return; }
    mst_exporter *e = make_exporter(name);
    mst_forward_exporter_set_send_budget_ms(e, 10000); /* the reader keeps up */
    span_set set = make_spans(3000, "big"); /* > MST_FORWARD_CHUNK_BYTES */
    CHECK_EQ_INT(export(e, &set), MST_OK);
    CHECK(wait_frames(&l, 3000));
    CHECK_EQ_INT(atomic_load(&l.bad), 0);
    CHECK_EQ_INT(stats(e).spans_exported, 3000);
    e->ops->destroy(e);
    listener_stop(&l);
    free_spans(&set);
}

static void test_no_listener_fails_fast_and_counts(void) {
    char name[64];
    unique_name(name, sizeof name, "absent");
    mst_exporter *e = make_exporter(name);
    span_set set = make_spans(5, "x");
    CHECK_EQ_INT(export(e, &set), MST_ERR_UNAVAILABLE);
    CHECK(!mst_forward_exporter_is_connected(e));
    /* Inside the 5 s interval: no new connect attempt, still counted. */
    CHECK_EQ_INT(export(e, &set), MST_ERR_UNAVAILABLE);
    mst_exporter_stats st = stats(e);
    CHECK_EQ_INT(st.spans_failed, 10);
    CHECK_EQ_INT(st.spans_exported, 0);
    CHECK_EQ_INT(st.batches_failed, 2);
    CHECK_EQ_INT(st.retries, 0);
    e->ops->destroy(e);
    free_spans(&set);
}

/* stderr of the code between begin and end, in a temp file (log lines). */
typedef struct captured { int saved; FILE *f; } captured;
static captured capture_stderr_begin(void) {
    captured c = {dup(STDERR_FILENO), tmpfile()};
    fflush(stderr);
    if (c.f) dup2(fileno(c.f), STDERR_FILENO);
    return c;
}
static char *capture_stderr_end(captured c) {
    fflush(stderr);
    dup2(c.saved, STDERR_FILENO);
    close(c.saved);
    if (!c.f) return calloc(1, 1);
    long n = ftell(c.f);
    char *text = calloc(1, n > 0 ? (size_t)n + 1 : 1);
    rewind(c.f);
    if (n > 0 && fread(text, 1, (size_t)n, c.f) != (size_t)n) text[0] = '\0';
    fclose(c.f);
    return text;
}
static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* Optional (the vLLM plugin's default): with no forwarder, one INFO line and
 * the spans are skipped, never failed, reconnects are not retries; once a
 * forwarder was reached, losing it is a warning and failed spans, as for a
 * required client. A fork()ed child starts over (its own INFO line). */
static void test_optional_absent_forwarder_is_quiet(void) {
    char name[64];
    unique_name(name, sizeof name, "optional");
    mst_exporter *e = make_exporter(name);
    mst_forward_exporter_set_optional(e, true);
    mst_forward_exporter_set_retry_interval_ms(e, 0); /* a connect try per batch */
    span_set set = make_spans(5, "o");
    captured c = capture_stderr_begin();
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(export(e, &set), MST_ERR_UNAVAILABLE);
    char *log = capture_stderr_end(c);
    CHECK_EQ_INT(count_of(log, "mstrace INFO"), 1);
    CHECK_EQ_INT(count_of(log, "no Perfetto forwarder listens on @"), 1);
    CHECK_EQ_INT(count_of(log, "WARNING"), 0);
    free(log);
    mst_exporter_stats s = stats(e);
    CHECK_EQ_INT(s.spans_skipped, 20);
    CHECK_EQ_INT(s.spans_failed, 0);
    CHECK_EQ_INT(s.batches_failed, 0);
    CHECK_EQ_INT(s.retries, 0);

    listener l;
    if (!listener_start(&l, name)) { CHECK(!"listener"); return; }
    CHECK_EQ_INT(export(e, &set), MST_OK);
    CHECK(wait_frames(&l, 5));
    listener_stop(&l);
    c = capture_stderr_begin();
    CHECK(export(e, &set) != MST_OK); /* it was there: now a real loss */
    CHECK(export(e, &set) != MST_OK);
    log = capture_stderr_end(c);
    CHECK_EQ_INT(count_of(log, "WARNING"), 1);
    free(log);
    s = stats(e);
    CHECK_EQ_INT(s.spans_exported, 5);
    CHECK_EQ_INT(s.spans_failed, 10);
    CHECK_EQ_INT(s.spans_skipped, 20);

    e->ops->after_fork_child(e); /* as in a forked child: not connected yet there */
    c = capture_stderr_begin();
    CHECK_EQ_INT(export(e, &set), MST_ERR_UNAVAILABLE);
    log = capture_stderr_end(c);
    CHECK_EQ_INT(count_of(log, "no Perfetto forwarder listens on @"), 1);
    free(log);
    s = stats(e);
    CHECK_EQ_INT(s.spans_skipped, 5);
    CHECK_EQ_INT(s.spans_failed, 0);
    e->ops->destroy(e);
    free_spans(&set);
}

static void test_listener_appearing_later_is_picked_up(void) {
    char name[64];
    unique_name(name, sizeof name, "later");
    mst_exporter *e = make_exporter(name);
    mst_forward_exporter_set_retry_interval_ms(e, 60000);
    span_set set = make_spans(3, "late");
    CHECK_EQ_INT(export(e, &set), MST_ERR_UNAVAILABLE);
    listener l;
    if (!listener_start(&l, name)) { CHECK(!"listener"); return; }
    /* The interval has not passed: the new listener is not tried yet. */
    CHECK_EQ_INT(export(e, &set), MST_ERR_UNAVAILABLE);
    CHECK_EQ_INT(atomic_load(&l.accepted), 0);
    /* A short interval: some export after it reconnects. */
    mst_forward_exporter_set_retry_interval_ms(e, 50);
    mst_status st = MST_ERR_UNAVAILABLE;
    for (int i = 0; i < 500 && st != MST_OK; i++) {
        st = export(e, &set);
        if (st != MST_OK) sleep_ms(10);
    }
    CHECK_EQ_INT(st, MST_OK);
    CHECK(wait_frames(&l, 3));
    mst_exporter_stats s = stats(e);
    CHECK_EQ_INT(s.spans_exported, 3);
    CHECK_EQ_INT(s.spans_exported + s.spans_failed, 3 * (s.batches_ok + s.batches_failed));
    CHECK(s.retries >= 1);
    e->ops->destroy(e);
    listener_stop(&l);
    free_spans(&set);
}

static void test_forwarder_restart_is_picked_up(void) {
    char name[64];
    unique_name(name, sizeof name, "restart");
    mst_exporter *e = make_exporter(name);
    mst_forward_exporter_set_retry_interval_ms(e, 0);
    span_set set = make_spans(4, "r");
    listener l1;
    if (!listener_start(&l1, name)) { CHECK(!"listener"); return; }
    CHECK_EQ_INT(export(e, &set), MST_OK);
    CHECK(wait_frames(&l1, 4));
    listener_stop(&l1); /* closes the accepted connection and the listen socket */
    CHECK(export(e, &set) != MST_OK);
    CHECK(!mst_forward_exporter_is_connected(e));
    listener l2;
    if (!listener_start(&l2, name)) { CHECK(!"listener"); return; }
    CHECK_EQ_INT(export(e, &set), MST_OK);
    CHECK(wait_frames(&l2, 4));
    mst_exporter_stats s = stats(e);
    CHECK_EQ_INT(s.spans_exported, 8);
    CHECK_EQ_INT(s.spans_failed, 4);
    e->ops->destroy(e);
    listener_stop(&l2);
    free_spans(&set);
}

static void test_stalled_reader_costs_the_budget_and_frames_stay_whole(void) {
    char name[64];
    unique_name(name, sizeof name, "stall");
    listener l;
    if (!listener_start(&l, name)) { CHECK(!"listener"); return; }
    atomic_store(&l.paused, true);
    mst_exporter *e = make_exporter(name);
    mst_forward_exporter_set_send_budget_ms(e, 20);
    mst_forward_exporter_set_retry_interval_ms(e, 0);
    span_set set = make_spans(40000, "stall"); /* ~10 MB: more than a socket buffer (4 MiB asked) */
    mst_status st = export(e, &set);
    CHECK_EQ_INT(st, MST_ERR_TIMEOUT);
    mst_exporter_stats s = stats(e);
    CHECK(s.spans_failed > 0);
    CHECK_EQ_INT(s.spans_exported + s.spans_failed, 40000);
    CHECK_EQ_INT(s.batches_failed, 1);
    atomic_store(&l.paused, false);
    /* Every frame counted as exported arrives whole; a cut one is dropped. */
    CHECK(wait_frames(&l, (int)s.spans_exported));
    CHECK_EQ_INT(atomic_load(&l.bad), 0);
    e->ops->destroy(e);
    listener_stop(&l);
    free_spans(&set);
}

typedef struct export_job {
    mst_exporter *e;
    span_set *set;
    mst_status st;
} export_job;

static void *export_in_thread(void *arg) {
    export_job *j = arg;
    j->st = export(j->e, j->set);
    return NULL;
}

/* Unread bytes queued for the listener's first connection (0 before it is
 * accepted). */
static int unread_bytes(listener *l) {
    int n = 0;
    if (atomic_load(&l->accepted) < 1 || ioctl(l->conns[0].fd, FIONREAD, &n) != 0) return 0;
    return n;
}

/* A reader that accepts and never reads, a send budget of 10 minutes: only
 * the cancel ends the send (the 60 s alarm catches a client without one). */
static void test_cancel_stops_a_send_to_a_reader_that_never_reads(void) {
    char name[64];
    unique_name(name, sizeof name, "cancel");
    listener l;
    if (!listener_start(&l, name)) { CHECK(!"listener"); return; }
    atomic_store(&l.paused, true);
    mst_exporter *e = make_exporter(name);
    CHECK(e->ops->cancel != NULL);
    if (!e->ops->cancel) { e->ops->destroy(e); listener_stop(&l); return; }
    mst_forward_exporter_set_send_budget_ms(e, 600000);
    span_set set = make_spans(40000, "cancelled"); /* ~10 MB: more than a socket buffer (4 MiB asked) */
    export_job job = {e, &set, MST_OK};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, export_in_thread, &job) == 0);
    /* The send is under way once bytes wait unread (the alarm guards). */
    alarm(60);
    while (unread_bytes(&l) == 0) sleep_ms(5);
    e->ops->cancel(e);
    pthread_join(th, NULL);
    alarm(0);
    CHECK_EQ_INT(job.st, MST_ERR_CLOSED);
    mst_exporter_stats s = stats(e);
    CHECK(s.spans_failed > 0);
    CHECK_EQ_INT(s.spans_exported + s.spans_failed, 40000);
    CHECK_EQ_INT(s.batches_failed, 1);
    /* Later batches fail at once, counted; no connect, no send. */
    CHECK_EQ_INT(export(e, &set), MST_ERR_CLOSED);
    s = stats(e);
    CHECK_EQ_INT(s.spans_exported + s.spans_failed, 80000);
    CHECK_EQ_INT(s.batches_failed, 2);
    /* Every frame counted as exported arrives whole, none other. */
    atomic_store(&l.paused, false);
    CHECK(wait_frames(&l, (int)s.spans_exported));
    CHECK_EQ_INT(atomic_load(&l.bad), 0);
    e->ops->destroy(e);
    listener_stop(&l);
    CHECK_EQ_INT(atomic_load(&l.frames), (int)s.spans_exported);
    free_spans(&set);
}

static void test_fork_child_gets_its_own_connection(void) {
    char name[64];
    unique_name(name, sizeof name, "fork");
    listener l;
    if (!listener_start(&l, name)) { CHECK(!"listener"); return; }
    mst_exporter *e = make_exporter(name);
    span_set set = make_spans(2, "f");
    CHECK_EQ_INT(export(e, &set), MST_OK);
    CHECK(wait_frames(&l, 2));
    /* The child reports through a pipe, not its exit code: under valgrind a
     * forked child runs its own leak check (the parent's listener buffers
     * look lost there) and may change the exit code. */
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        e->ops->after_fork_child(e);
        uint8_t rc = 0;
        if (mst_forward_exporter_is_connected(e)) rc |= 1;
        if (stats(e).spans_exported != 0) rc |= 2;
        if (export(e, &set) != MST_OK) rc |= 4;
        if (stats(e).spans_exported != 2) rc |= 8;
        e->ops->destroy(e);
        if (write(fds[1], &rc, 1) != 1) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    uint8_t child_rc = 0xff;
    CHECK(pid > 0 && read(fds[0], &child_rc, 1) == 1);
    CHECK_EQ_INT(child_rc, 0);
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    /* The parent's connection survived the child's close(). */
    CHECK_EQ_INT(export(e, &set), MST_OK);
    CHECK(wait_frames(&l, 6));
    CHECK_EQ_INT(atomic_load(&l.accepted), 2);
    CHECK_EQ_INT(stats(e).spans_exported, 4);
    e->ops->destroy(e);
    listener_stop(&l);
    free_spans(&set);
}

static void test_bad_arguments(void) {
    mst_exporter *e = NULL;
    CHECK_EQ_INT(mst_forward_exporter_create("x", NULL), MST_ERR_INVALID_ARG);
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK_EQ_INT(mst_forward_exporter_create(longname, &e), MST_ERR_INVALID_ARG);
    CHECK(e == NULL);
    CHECK_EQ_INT(mst_forward_exporter_create(NULL, &e), MST_OK); /* default name */
    CHECK(e != NULL);
    CHECK(!mst_forward_exporter_is_connected(e));
    CHECK_EQ_INT(e->ops->export_batch(e, NULL, 0), MST_OK);
    e->ops->destroy(e);
}

static const mst_test_case tests[] = {
    {"spans_arrive_as_frames", test_spans_arrive_as_frames},
    {"large_batch_is_chunked_and_complete", test_large_batch_is_chunked_and_complete},
    {"no_listener_fails_fast_and_counts", test_no_listener_fails_fast_and_counts},
    {"optional_absent_forwarder_is_quiet", test_optional_absent_forwarder_is_quiet},
    {"listener_appearing_later_is_picked_up", test_listener_appearing_later_is_picked_up},
    {"forwarder_restart_is_picked_up", test_forwarder_restart_is_picked_up},
    {"stalled_reader_costs_the_budget_and_frames_stay_whole",
     test_stalled_reader_costs_the_budget_and_frames_stay_whole},
    {"cancel_stops_a_send_to_a_reader_that_never_reads", test_cancel_stops_a_send_to_a_reader_that_never_reads},
    {"fork_child_gets_its_own_connection", test_fork_child_gets_its_own_connection},
    {"bad_arguments", test_bad_arguments},
};
MST_TEST_MAIN(tests)
