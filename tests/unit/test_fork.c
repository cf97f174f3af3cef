/* test_fork.c — tracing keeps working in a fork()ed child: the child's
 * spans reach an exporter in the child (after_fork_child is called first),
 * the spans the parent had queued are exported once (by the parent, not
 * duplicated by the child), the child gets fresh ids and its own pid in the
 * resource; a span open across the fork is exported once, by the process
 * that ends it first, with both processes' counters exact. The exporter
 * writes one line per span to a pipe. */
#include "testlib.h"
#include "core/tracer.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* AddressSanitizer runtimes without fork handlers (GCC's libasan before 14,
 * clang's before 17) do not lock their allocator around fork(): a child
 * forked while another thread is inside malloc/free inherits that allocator
 * lock held, and its first allocation of that size class (the new exporter
 * thread's start-up calloc) blocks for ever. glibc's own malloc has fork
 * handlers, so only these runtimes are affected. */
#if defined(__SANITIZE_ADDRESS__) && !defined(__clang__) && __GNUC__ < 14
#define ASAN_FORK_UNSAFE 1
#elif defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) && __clang_major__ < 17
#define ASAN_FORK_UNSAFE 1
#endif
#endif
#ifndef ASAN_FORK_UNSAFE
#define ASAN_FORK_UNSAFE 0
#endif

/* Returns once the tracer's exporter thread has started and sleeps on its
 * condition variable (it allocates nothing from then until it has work), so
 * a fork() now cannot catch it inside the allocator. A freshly created
 * thread allocates during its start-up (glibc's pthread_getattr_np under
 * ASan), which is what a fork right after the first span used to race. */
static void wait_exporter_idle(mst_tracer *t) {
    while (atomic_load(&t->thread_state) == MST_THREAD_RUNNING && !atomic_load(&t->sleeping)) sched_yield();
}

typedef struct pipe_exporter {
    mst_exporter base;
    int fd;
    int after_fork_calls;
} pipe_exporter;

static mst_status pipe_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    pipe_exporter *e = (pipe_exporter *)self;
    for (size_t i = 0; i < n; i++) {
        char line[256];
        int len = snprintf(line, sizeof line, "%d %d %s\n", (int)getpid(), e->after_fork_calls,
                           mst_span_name(spans[i]));
        if (write(e->fd, line, (size_t)len) != len) return MST_ERR_IO;
    }
    return MST_OK;
}
static void pipe_after_fork(mst_exporter *self) { ((pipe_exporter *)self)->after_fork_calls++; }
static void pipe_destroy(mst_exporter *self) { free(self); }
static const mst_exporter_ops pipe_ops = {.name = "pipe",
                                          .export_batch = pipe_export,
                                          .after_fork_child = pipe_after_fork,
                                          .destroy = pipe_destroy};

static void span_named(mst_tracer *t, const char *name) {
    mst_span *s = mst_span_start(t, NULL, name, MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_end(s, 0);
}

static int count_lines(const char *buf, const char *needle) {
    int n = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++) n++;
    return n;
}

static void test_child_spans_exported_in_child(void) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    mst_tracer *t;
    /* Long delay, big batch: parent spans stay queued across the fork. */
    mst_tracer_options o = {.max_queue_size = 128, .max_export_batch_size = 64, .schedule_delay_ms = 600000};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    pipe_exporter *e = calloc(1, sizeof *e);
    e->base.ops = &pipe_ops;
    e->fd = fds[1];
    mst_tracer_add_exporter(t, &e->base);
    for (int i = 0; i < 5; i++) span_named(t, "parent-before-fork");
    mst_trace_id parent_next = mst_trace_id_random();
    wait_exporter_idle(t); /* the 5 spans stay queued: below a batch, 10 min delay */
    pid_t pid = fork();
    if (pid == 0) {
        mst_trace_id child_next = mst_trace_id_random();
        int rc = 0;
        if (memcmp(parent_next.bytes, child_next.bytes, 16) == 0) rc |= 1; /* would be a repeat */
        const mst_resource *r = mst_tracer_resource(t);
        for (uint32_t i = 0; i < r->n_attrs; i++)
            if (!strcmp(r->attrs[i].key.ptr, "process.pid") && r->attrs[i].v.i != getpid()) rc |= 2;
        mst_tracer_stats st;
        mst_tracer_get_stats(t, &st);
        if (st.queue_depth != 0 || st.spans_started != 0) rc |= 4; /* inherited queue dropped */
        for (int i = 0; i < 3; i++) span_named(t, "child-span");
        if (mst_tracer_flush(t, 5000) != MST_OK) rc |= 8;
        mst_tracer_get_stats(t, &st);
        if (st.spans_exported != 3) rc |= 16;
        if (mst_tracer_shutdown(t, 5000) != MST_OK) rc |= 32;
        _exit(rc);
    }
    CHECK(pid > 0);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
    span_named(t, "parent-after-fork");
    CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 5000), MST_OK);
    close(fds[1]);
    static char buf[65536];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    buf[n] = '\0';
    close(fds[0]);
    CHECK_EQ_INT(count_lines(buf, "parent-before-fork"), 5); /* exported once, by the parent */
    CHECK_EQ_INT(count_lines(buf, "parent-after-fork"), 1);
    CHECK_EQ_INT(count_lines(buf, "child-span"), 3);
    char want[64];
    snprintf(want, sizeof want, "%d 1 child-span", (int)pid); /* in the child, after_fork_child ran */
    CHECK_EQ_INT(count_lines(buf, want), 3);
    snprintf(want, sizeof want, "%d 0 parent-before-fork", (int)getpid());
    CHECK_EQ_INT(count_lines(buf, want), 5);
}

/* A span open across fork() (fork inside a traced call) is in both
 * processes; it is exported once, by the process that ends it first. */
typedef enum { CHILD_ENDS_FIRST, PARENT_ENDS_FIRST, CHILD_NEVER_ENDS } fork_end_order;

static void check_open_span_across_fork(fork_end_order order) {
    int out[2], go[2];
    CHECK(pipe(out) == 0 && pipe(go) == 0);
    mst_tracer *t;
    mst_tracer_options o = {.max_queue_size = 128, .max_export_batch_size = 64, .schedule_delay_ms = 600000};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    pipe_exporter *e = calloc(1, sizeof *e);
    e->base.ops = &pipe_ops;
    e->fd = out[1];
    mst_tracer_add_exporter(t, &e->base);
    mst_span *open = mst_span_start(t, NULL, "open-across-fork", MST_SPAN_KIND_INTERNAL, NULL, 0);
    CHECK(open != NULL);
    wait_exporter_idle(t);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = 0;
        char c;
        if (order == PARENT_ENDS_FIRST && read(go[0], &c, 1) != 1) rc |= 1;
        if (order != CHILD_NEVER_ENDS) mst_span_end(open, 0);
        else mst_span_discard(open); /* frees the child's copy, counted nowhere */
        span_named(t, "child-own");
        if (mst_tracer_flush(t, 5000) != MST_OK) rc |= 2;
        mst_tracer_stats st;
        mst_tracer_get_stats(t, &st);
        /* The child's counters describe the child: its own span, plus the
         * inherited one only if the child exported it. */
        uint64_t mine = order == CHILD_ENDS_FIRST ? 2 : 1;
        if (st.spans_started != mine || st.spans_ended != mine || st.spans_exported != mine ||
            st.spans_filtered != 0)
            rc |= 4;
        mst_tracer_shutdown(t, 5000);
        _exit(rc);
    }
    CHECK(pid > 0);
    int status = 0;
    if (order == PARENT_ENDS_FIRST) {
        mst_span_end(open, 0);
        CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
        CHECK(write(go[1], "g", 1) == 1);
        waitpid(pid, &status, 0);
    } else {
        waitpid(pid, &status, 0); /* the child ended (or dropped) it first */
        mst_span_end(open, 0);
        CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
    }
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    CHECK_EQ_INT(st.spans_started, 1);
    CHECK_EQ_INT(st.spans_ended, 1);
    CHECK_EQ_INT(st.spans_exported, order == CHILD_ENDS_FIRST ? 0 : 1);
    CHECK_EQ_INT(st.spans_filtered, order == CHILD_ENDS_FIRST ? 1 : 0);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 5000), MST_OK);
    close(out[1]);
    close(go[0]);
    close(go[1]);
    static char buf[65536];
    size_t n = 0;
    ssize_t r;
    while ((r = read(out[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    buf[n] = '\0';
    close(out[0]);
    CHECK_EQ_INT(count_lines(buf, "open-across-fork"), 1);
    CHECK_EQ_INT(count_lines(buf, "child-own"), 1);
    char want[64];
    snprintf(want, sizeof want, "%d %d open-across-fork", order == CHILD_ENDS_FIRST ? (int)pid : (int)getpid(),
             order == CHILD_ENDS_FIRST ? 1 : 0);
    CHECK_EQ_INT(count_lines(buf, want), 1);
}

static void test_open_span_across_fork_child_ends_first(void) { check_open_span_across_fork(CHILD_ENDS_FIRST); }
static void test_open_span_across_fork_parent_ends_first(void) { check_open_span_across_fork(PARENT_ENDS_FIRST); }
static void test_open_span_across_fork_child_never_ends(void) { check_open_span_across_fork(CHILD_NEVER_ENDS); }

static void test_fork_with_running_exporter_thread(void) {
    /* Fork repeatedly while another thread produces spans: the child must
     * never deadlock on inherited locks and must export its own spans. */
    mst_tracer *t;
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 4, .schedule_delay_ms = 1};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    mst_tracer_add_exporter(t, mst_null_exporter_create());
    if (ASAN_FORK_UNSAFE)
        printf("note fork_with_running_exporter_thread: this AddressSanitizer runtime has no fork handler "
               "(GCC < 14 / clang < 17): a fork while the exporter thread allocates can leave the child "
               "blocked on the sanitizer's allocator lock, so here each fork waits until the exporter "
               "thread is idle; the busy-fork case runs in the release build\n");
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 50; i++) span_named(t, "busy");
        if (ASAN_FORK_UNSAFE) {
            CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
            wait_exporter_idle(t);
        }
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 10; i++) span_named(t, "c");
            mst_tracer_flush(t, 5000);
            mst_tracer_stats st;
            mst_tracer_get_stats(t, &st);
            int ok = st.spans_started == 10 && st.spans_exported + st.spans_dropped == 10;
            mst_tracer_shutdown(t, 5000);
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK_EQ_INT(mst_tracer_shutdown(t, 5000), MST_OK);
}

static const mst_test_case tests[] = {
    {"child_spans_exported_in_child", test_child_spans_exported_in_child},
    {"fork_with_running_exporter_thread", test_fork_with_running_exporter_thread},
    {"open_span_across_fork_child_ends_first", test_open_span_across_fork_child_ends_first},
    {"open_span_across_fork_parent_ends_first", test_open_span_across_fork_parent_ends_first},
    {"open_span_across_fork_child_never_ends", test_open_span_across_fork_child_never_ends},
};
MST_TEST_MAIN(tests)
