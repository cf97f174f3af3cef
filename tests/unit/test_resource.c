/* test_resource.c — one resource per tracer, handed to the exporters through
 * the spans (mst_span_resource, what the OTLP exporter and the forwarder
 * client encode with): every span of a tracer, in every batch, yields the
 * tracer's own resource, built when the tracer was created (a later change
 * of OTEL_SERVICE_NAME does not reach it); a forked child's tracer carries
 * the child's process.pid; spans no tracer recorded get the one untraced
 * resource, which a forked child rebuilds with its own pid. */
#include "testlib.h"

#include "core/resource.h"
#include "core/span.h"
#include "core/tracer.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int64_t pid_of(const mst_resource *res) {
    for (uint32_t i = 0; res && i < res->n_attrs; i++)
        if (strcmp(res->attrs[i].key.ptr, "process.pid") == 0 && res->attrs[i].type == MST_ATTR_INT)
            return res->attrs[i].v.i;
    return -1;
}

/* An exporter that records which resource each batch would be encoded with. */
typedef struct probe_exporter {
    mst_exporter base;
    const mst_resource *seen[8];
    int batches, spans, mixed;
} probe_exporter;

static mst_status probe_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    probe_exporter *p = (probe_exporter *)self;
    const mst_resource *res = mst_span_resource(spans[0]);
    for (size_t i = 1; i < n; i++)
        if (mst_span_resource(spans[i]) != res) p->mixed++;
    if (p->batches < 8) p->seen[p->batches] = res;
    p->batches++;
    p->spans += (int)n;
    return MST_OK;
}
static void probe_destroy(mst_exporter *self) { (void)self; }
static const mst_exporter_ops probe_ops = {.name = "probe", .export_batch = probe_export,
                                           .destroy = probe_destroy};

static void test_exporters_get_the_tracers_resource(void) {
    setenv("OTEL_SERVICE_NAME", "resource-at-create", 1);
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 4, .schedule_delay_ms = 10000};
    mst_tracer *t = NULL;
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    setenv("OTEL_SERVICE_NAME", "changed-later", 1);
    probe_exporter p = {.base.ops = &probe_ops};
    CHECK_EQ_INT(mst_tracer_add_exporter(t, &p.base), MST_OK);
    const mst_scope *sc = mst_tracer_scope(t, "test", NULL);
    for (int i = 0; i < 10; i++) mst_span_end(mst_span_start(t, sc, "s", MST_SPAN_KIND_INTERNAL, NULL, 0), 0);
    CHECK_EQ_INT(mst_tracer_flush(t, 120000), MST_OK);
    const mst_resource *own = mst_tracer_resource(t);
    CHECK(own != NULL);
    CHECK_EQ_INT(p.spans, 10);
    CHECK(p.batches >= 3); /* batches of at most 4 */
    CHECK_EQ_INT(p.mixed, 0);
    for (int i = 0; i < p.batches && i < 8; i++) CHECK(p.seen[i] == own);
    CHECK_EQ_STR(own->service_name.ptr, "resource-at-create");
    CHECK_EQ_INT(pid_of(own), getpid());
    CHECK_EQ_INT(mst_tracer_shutdown(t, 120000), MST_OK);
    unsetenv("OTEL_SERVICE_NAME");
}

static void test_forked_child_gets_its_own_pid(void) {
    mst_tracer *t = NULL;
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    mst_span hand_built; /* recorded by no tracer */
    memset(&hand_built, 0, sizeof hand_built);
    const mst_resource *untraced = mst_span_resource(&hand_built);
    CHECK(untraced != NULL);
    CHECK(untraced == mst_resource_untraced());
    CHECK_EQ_INT(pid_of(untraced), getpid());
    CHECK_EQ_INT(pid_of(mst_tracer_resource(t)), getpid());
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        int bad = 0;
        if (pid_of(mst_tracer_resource(t)) != getpid()) bad |= 1;
        if (pid_of(mst_span_resource(&hand_built)) != getpid()) bad |= 2;
        _exit(bad);
    }
    int status = 0;
    CHECK_EQ_INT(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0); /* 1: tracer's resource, 2: untraced one kept the parent's pid */
    CHECK_EQ_INT(pid_of(mst_resource_untraced()), getpid());
    CHECK_EQ_INT(mst_tracer_shutdown(t, 120000), MST_OK);
}

static const mst_test_case tests[] = {
    {"exporters_get_the_tracers_resource", test_exporters_get_the_tracers_resource},
    {"forked_child_gets_its_own_pid", test_forked_child_gets_its_own_pid},
};
MST_TEST_MAIN(tests)
