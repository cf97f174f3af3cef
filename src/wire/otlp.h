/*
 * otlp.h — OTLP trace encoding (opentelemetry-proto v1, docs/reference/otlp.md):
 * ExportTraceServiceRequest in binary protobuf and in the OTLP/JSON mapping,
 * one ResourceSpans per call and one ScopeSpans per instrumentation scope,
 * and the scope grouping both encoders use. The decoder (for the MindIE relay
 * and for tests) is otlp_decode.h.
 */
#ifndef MST_WIRE_OTLP_H
#define MST_WIRE_OTLP_H

#include "core/resource.h"
#include "core/span.h"
#include "core/visibility.h"
#include "wire/buf.h"

/* Appends one ExportTraceServiceRequest holding `spans` (grouped by scope,
 * in first-seen order) to `out`. Returns MST_ERR_NOMEM when out->failed. */
MST_SHARED_INTERNAL
mst_status mst_otlp_encode_proto(const mst_resource *res, const mst_span *const *spans,
                                 size_t n, mst_buf *out);
MST_SHARED_INTERNAL
mst_status mst_otlp_encode_json(const mst_resource *res, const mst_span *const *spans,
                                size_t n, mst_buf *out);

/* Shared by the two encoders (otlp_group.c): spans grouped by scope
 * pointer, scopes in first-seen order, spans in input order within a scope.
 * Group k = spans[order[start[k]] .. order[start[k + 1] - 1]]. */
typedef struct mst_otlp_groups {
    const mst_scope **scopes;
    uint32_t n_scopes;
    uint32_t *order;
    uint32_t *start;
    void *mem;
} mst_otlp_groups;

mst_status mst_otlp_group_spans(const mst_span *const *spans, size_t n, mst_otlp_groups *g);
void mst_otlp_groups_free(mst_otlp_groups *g);

#endif /* MST_WIRE_OTLP_H */
