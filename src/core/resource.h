/*
 * resource.h — the OTel resource of a tracer: attributes that describe the
 * process (service.name, process.pid, telemetry.sdk.*, and whatever
 * OTEL_RESOURCE_ATTRIBUTES says). Built once per tracer (and rebuilt in a
 * forked child, whose pid differs), read by every encoder.
 */
#ifndef MST_CORE_RESOURCE_H
#define MST_CORE_RESOURCE_H

#include "core/span.h"
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

#endif /* MST_CORE_RESOURCE_H */
