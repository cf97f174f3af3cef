/* test_fork.c — tracing keeps working in a fork()ed child: the child's
 * spans reach an exporter in the child (after_fork_child is called first),
 * the spans the parent had queued are exported once (by the parent, not
 * duplicated by the child), the child gets fresh ids and its own pid in the
 * resource. The exporter writes one line per span to a pipe. */
#include "testlib.h"
#include "core/tracer.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

static void test_fork_with_running_exporter_thread(void) {
    /* Fork repeatedly while another thread produces spans: the child must
     * never deadlock on inherited locks and must export its own spans. */
    mst_tracer *t;
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 4, .schedule_delay_ms = 1};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    mst_tracer_add_exporter(t, mst_null_exporter_create());
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 50; i++) span_named(t, "busy");
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
};
MST_TEST_MAIN(tests)
