/*
 * resource.h — the OTel resource of a tracer: attributes that describe the
 * process (service.name, process.pid, telemetry.sdk.*, and whatever
 * OTEL_RESOURCE_ATTRIBUTES says). Built once per tracer (and rebuilt once in
 * a forked child, whose pid differs, by the tracer's fork handler); every
 * exporter reads it through the spans it is handed (mst_span_resource in
 * span.h), never builds its own.
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

/* The resource of spans that no tracer recorded (spans built by hand, as the
 * library's own exporter tests do): built from the environment on first
 * use, once per process, and again on first use in a forked child. NULL
 * when it cannot be built (out of memory; tried again on the next call).
 * Thread-safe. Spans recorded by a tracer carry their tracer's resource. */
const mst_resource *mst_resource_untraced(void);

#endif /* MST_CORE_RESOURCE_H */
