/*
 * otlp.h — OTLP trace encoding (opentelemetry-proto v1, docs/reference/otlp.md):
 * ExportTraceServiceRequest in binary protobuf and in the OTLP/JSON mapping,
 * one ResourceSpans per call and one ScopeSpans per instrumentation scope,
 * plus a decoder (for the MindIE relay and for tests).
 */
#ifndef MST_WIRE_OTLP_H
#define MST_WIRE_OTLP_H

#include "core/resource.h"
#include "core/span.h"
#include "wire/buf.h"

/* Appends one ExportTraceServiceRequest holding `spans` (grouped by scope,
 * in first-seen order) to `out`. Returns MST_ERR_NOMEM when out->failed. */
mst_status mst_otlp_encode_proto(const mst_resource *res, const mst_span *const *spans,
                                 size_t n, mst_buf *out);
mst_status mst_otlp_encode_json(const mst_resource *res, const mst_span *const *spans,
                                size_t n, mst_buf *out);

#endif /* MST_WIRE_OTLP_H */
