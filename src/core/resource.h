/*
 * resource.h — the OTel resource of a tracer: attributes that describe the
 * process (service.name, process.pid, telemetry.sdk.*, and whatever
 * OTEL_RESOURCE_ATTRIBUTES says). Built once per tracer (and rebuilt once in
 * a forked child, whose pid differs, by the tracer's fork handler); every
 * exporter reads it through the spans it is handed (mst_span_resource in
 * span.h), never builds its own.
 *
 * A process role (the vLLM process kind: api_server, engine_core_dp0,
 * worker_1 ...; mst_resource_set_role) makes one run's processes tell
 * themselves apart the OpenTelemetry way: service.namespace is the base
 * service name (the user's); service.instance.id, process.role,
 * vllm.dp_rank and vllm.worker.rank tell the processes apart; and with
 * MSTRACE_SERVICE_PER_ROLE=1 service.name is the base for the API server
 * and the base plus ".engine_core" / ".worker" for the engine and its
 * workers (by default the base everywhere, as OTEL_SERVICE_NAME says).
 */
#ifndef MST_CORE_RESOURCE_H
#define MST_CORE_RESOURCE_H

#include "mstrace.h"
#include "core/arena.h"
#include "core/visibility.h"

typedef struct mst_resource {
    mst_attr attrs[MST_MAX_ATTRIBUTES];
    uint32_t n_attrs;
    uint32_t dropped_attrs;
    mst_str service_name;   /* also present in attrs as service.name */
    char role[128];         /* the process role it was built with; "" = none */
    mst_arena arena;
} mst_resource;

/* Fills `res` from OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES (W3C baggage
 * style "k=v,k2=v2", percent-decoded; bad entries warned and skipped) and the
 * process (process.pid, process.executable.name, telemetry.sdk.*).
 * service.name: OTEL_SERVICE_NAME, else the one in OTEL_RESOURCE_ATTRIBUTES,
 * else "unknown_service". */
MST_SHARED_INTERNAL mst_status mst_resource_init_from_env(mst_resource *res);
/* Adds or replaces a string attribute. */
mst_status mst_resource_set_str(mst_resource *res, const char *key, const char *value);
MST_SHARED_INTERNAL void mst_resource_release(mst_resource *res);

/* Rebuilds `res` (built before) from the environment for a process of
 * role `role` (NULL or "" = none; cut to 127 bytes on a character
 * boundary): the role attributes and service names of the header comment
 * on top of what mst_resource_init_from_env sets. */
mst_status mst_resource_set_role(mst_resource *res, const char *role);
/* Rebuilds `res` from the environment with the role it had (a forked
 * child: its pid changed). */
mst_status mst_resource_rebuild(mst_resource *res);
/* The service-name suffix of a role (".engine_core", ".worker"), "" for
 * a role whose processes keep the base name (api_server*, main, any
 * other). */
const char *mst_resource_role_service_suffix(const char *role);

/* Every suffix mst_resource_role_service_suffix gives, NULL-terminated:
 * what a reader adds to a base name to find a whole run's services. */
extern const char *const mst_resource_role_suffixes[];

/* The resource of spans that no tracer recorded (spans built by hand, as the
 * library's own exporter tests do): built from the environment on first
 * use, once per process, and again on first use in a forked child. NULL
 * when it cannot be built (out of memory; tried again on the next call).
 * Thread-safe. Spans recorded by a tracer carry their tracer's resource. */
const mst_resource *mst_resource_untraced(void);

#endif /* MST_CORE_RESOURCE_H */
