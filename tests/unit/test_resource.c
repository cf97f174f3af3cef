/* test_resource.c — one resource per tracer, handed to the exporters through
 * the spans (mst_span_resource, what the OTLP exporter and the forwarder
 * client encode with): every span of a tracer, in every batch, yields the
 * tracer's own resource, built when the tracer was created (a later change
 * of OTEL_SERVICE_NAME does not reach it); a forked child's tracer carries
 * the child's process.pid; spans no tracer recorded get the one untraced
 * resource, which a forked child rebuilds with its own pid. A process role
 * sets the instance attributes in the base's namespace and, with
 * MSTRACE_SERVICE_PER_ROLE=1, names the service per role kind (base,
 * base.engine_core, base.worker); the user's own
 * namespace and instance id stay; a forked child keeps its role; a role set
 * after the exporter thread started leaves the resource alone. */
#include "testlib.h"

#include "core/resource.h"
#include "core/span.h"
#include "core/tracer.h"

#include <stdio.h>
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

static const mst_attr *attr_of(const mst_resource *res, const char *key) {
    for (uint32_t i = 0; res && i < res->n_attrs; i++)
        if (strcmp(res->attrs[i].key.ptr, key) == 0) return &res->attrs[i];
    return NULL;
}

static const char *str_of(const mst_resource *res, const char *key) {
    const mst_attr *a = attr_of(res, key);
    return a && a->type == MST_ATTR_STRING ? a->v.s.ptr : "(absent)";
}

static int64_t int_of(const mst_resource *res, const char *key) {
    const mst_attr *a = attr_of(res, key);
    return a && a->type == MST_ATTR_INT ? a->v.i : -1;
}

static void test_role_names_the_service(void) {
    setenv("OTEL_SERVICE_NAME", "chat", 1);
    unsetenv("OTEL_RESOURCE_ATTRIBUTES");
    setenv("MSTRACE_SERVICE_PER_ROLE", "1", 1);
    mst_resource r;
    CHECK_EQ_INT(mst_resource_init_from_env(&r), MST_OK);
    CHECK(attr_of(&r, "service.namespace") == NULL); /* no role: as before */
    CHECK(attr_of(&r, "process.role") == NULL);
    CHECK_EQ_INT(mst_resource_set_role(&r, "engine_core_dp1"), MST_OK);
    CHECK_EQ_STR(r.service_name.ptr, "chat.engine_core");
    CHECK_EQ_STR(str_of(&r, "service.name"), "chat.engine_core");
    CHECK_EQ_STR(str_of(&r, "service.namespace"), "chat");
    CHECK_EQ_STR(str_of(&r, "process.role"), "engine_core_dp1");
    CHECK_EQ_INT(int_of(&r, "vllm.dp_rank"), 1);
    CHECK(attr_of(&r, "vllm.worker.rank") == NULL);
    char want[64];
    snprintf(want, sizeof want, ":%ld", (long)getpid());
    const char *inst = str_of(&r, "service.instance.id");
    CHECK(strncmp(inst, "engine_core_dp1@", 16) == 0);
    CHECK(strlen(inst) > strlen(want) && strcmp(inst + strlen(inst) - strlen(want), want) == 0);
    CHECK_EQ_INT(pid_of(&r), getpid());

    CHECK_EQ_INT(mst_resource_set_role(&r, "worker_3"), MST_OK);
    CHECK_EQ_STR(r.service_name.ptr, "chat.worker");
    CHECK_EQ_INT(int_of(&r, "vllm.worker.rank"), 3);
    CHECK(attr_of(&r, "vllm.dp_rank") == NULL);

    CHECK_EQ_INT(mst_resource_set_role(&r, "api_server"), MST_OK); /* the front door keeps the name */
    CHECK_EQ_STR(r.service_name.ptr, "chat");
    CHECK_EQ_STR(str_of(&r, "service.namespace"), "chat");
    CHECK_EQ_STR(str_of(&r, "process.role"), "api_server");

    CHECK_EQ_INT(mst_resource_set_role(&r, NULL), MST_OK);
    CHECK_EQ_STR(r.service_name.ptr, "chat");
    CHECK(attr_of(&r, "process.role") == NULL);

    unsetenv("MSTRACE_SERVICE_PER_ROLE"); /* the default: one name, the role in the attributes */
    CHECK_EQ_INT(mst_resource_set_role(&r, "engine_core_dp1"), MST_OK);
    CHECK_EQ_STR(r.service_name.ptr, "chat");
    CHECK_EQ_STR(str_of(&r, "service.namespace"), "chat");
    CHECK_EQ_STR(str_of(&r, "process.role"), "engine_core_dp1");
    CHECK_EQ_INT(int_of(&r, "vllm.dp_rank"), 1);
    CHECK(strncmp(str_of(&r, "service.instance.id"), "engine_core_dp1@", 16) == 0);
    mst_resource_release(&r);
    unsetenv("OTEL_SERVICE_NAME");
}

static void test_role_suffixes(void) {
    CHECK_EQ_STR(mst_resource_role_service_suffix("engine_core"), ".engine_core");
    CHECK_EQ_STR(mst_resource_role_service_suffix("engine_core_dp12"), ".engine_core");
    CHECK_EQ_STR(mst_resource_role_service_suffix("worker_0"), ".worker");
    CHECK_EQ_STR(mst_resource_role_service_suffix("worker_"), "");
    CHECK_EQ_STR(mst_resource_role_service_suffix("worker_x"), "");
    CHECK_EQ_STR(mst_resource_role_service_suffix("engine_core_dp"), "");
    CHECK_EQ_STR(mst_resource_role_service_suffix("api_server_1"), "");
    CHECK_EQ_STR(mst_resource_role_service_suffix("main"), "");
    CHECK_EQ_STR(mst_resource_role_service_suffix(NULL), "");
    int n = 0;
    while (mst_resource_role_suffixes[n]) n++;
    CHECK_EQ_INT(n, 2);
}

static void test_user_settings_stay(void) {
    setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,service.namespace=team,service.instance.id=mine", 1);
    unsetenv("OTEL_SERVICE_NAME");
    setenv("MSTRACE_SERVICE_PER_ROLE", "0", 1);
    mst_resource r;
    CHECK_EQ_INT(mst_resource_init_from_env(&r), MST_OK);
    CHECK_EQ_INT(mst_resource_set_role(&r, "worker_2"), MST_OK);
    CHECK_EQ_STR(r.service_name.ptr, "from-attrs"); /* per-role names off */
    CHECK_EQ_STR(str_of(&r, "service.namespace"), "team");
    CHECK_EQ_STR(str_of(&r, "service.instance.id"), "mine");
    CHECK_EQ_STR(str_of(&r, "process.role"), "worker_2");
    CHECK_EQ_INT(int_of(&r, "vllm.worker.rank"), 2);
    setenv("MSTRACE_SERVICE_PER_ROLE", "true", 1);
    CHECK_EQ_INT(mst_resource_set_role(&r, "worker_2"), MST_OK);
    CHECK_EQ_STR(r.service_name.ptr, "from-attrs.worker");
    CHECK_EQ_STR(str_of(&r, "service.namespace"), "team");
    mst_resource_release(&r);
    unsetenv("OTEL_RESOURCE_ATTRIBUTES");
    unsetenv("MSTRACE_SERVICE_PER_ROLE");
}

static void test_tracer_role_before_export_and_after_fork(void) {
    setenv("OTEL_SERVICE_NAME", "svc", 1);
    setenv("MSTRACE_SERVICE_PER_ROLE", "1", 1);
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 4, .schedule_delay_ms = 10000};
    mst_tracer *t = NULL;
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    CHECK_EQ_INT(mst_tracer_set_process_role(t, "engine_core"), MST_OK);
    CHECK_EQ_STR(mst_tracer_resource(t)->service_name.ptr, "svc.engine_core");
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        const mst_resource *cr = mst_tracer_resource(t);
        int bad = 0;
        if (strcmp(cr->service_name.ptr, "svc.engine_core") != 0) bad |= 1; /* role kept */
        if (pid_of(cr) != getpid()) bad |= 2;
        if (mst_tracer_set_process_role(t, "worker_1") != MST_OK) bad |= 4; /* nothing exported here yet */
        if (strcmp(cr->service_name.ptr, "svc.worker") != 0 || int_of(cr, "vllm.worker.rank") != 1) bad |= 8;
        _exit(bad);
    }
    int status = 0;
    CHECK_EQ_INT(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
    probe_exporter p = {.base.ops = &probe_ops};
    CHECK_EQ_INT(mst_tracer_add_exporter(t, &p.base), MST_OK);
    const mst_scope *sc = mst_tracer_scope(t, "test", NULL);
    mst_span_end(mst_span_start(t, sc, "s", MST_SPAN_KIND_INTERNAL, NULL, 0), 0); /* starts the exporter thread */
    CHECK_EQ_INT(mst_tracer_set_process_role(t, "worker_1"), MST_ERR_UNSUPPORTED);
    CHECK_EQ_STR(mst_tracer_resource(t)->service_name.ptr, "svc.engine_core");
    CHECK_EQ_INT(mst_tracer_flush(t, 120000), MST_OK);
    CHECK_EQ_INT(p.spans, 1);
    CHECK(p.seen[0] == mst_tracer_resource(t));
    CHECK_EQ_INT(mst_tracer_shutdown(t, 120000), MST_OK);
    unsetenv("OTEL_SERVICE_NAME");
    unsetenv("MSTRACE_SERVICE_PER_ROLE");
}

static const mst_test_case tests[] = {
    {"role_names_the_service", test_role_names_the_service},
    {"role_suffixes", test_role_suffixes},
    {"user_settings_stay", test_user_settings_stay},
    {"tracer_role_before_export_and_after_fork", test_tracer_role_before_export_and_after_fork},
    {"exporters_get_the_tracers_resource", test_exporters_get_the_tracers_resource},
    {"forked_child_gets_its_own_pid", test_forked_child_gets_its_own_pid},
};
MST_TEST_MAIN(tests)
