/*
 * span_readout.c — the public read-out API of a finished span (mstrace.h,
 * "read-out"): what an exporter written outside the library needs to turn
 * a span into its own format, without copying anything.
 *
 * Why functions and not the record: the record (span.h) changes whenever
 * the hot path does (pool, arena, caps); the element types it hands out
 * (mst_str, mst_attr, mst_link, mst_event) are small and stable, so they are
 * public and returned as pointers into the record. Every function accepts
 * NULL and returns empty values, as the setters do.
 */
#include "core/span.h"
#include "core/span_links.h"

#include "core/tracer.h"

static const char k_empty[] = "";
static const mst_trace_id k_zero_trace;
static const mst_span_id k_zero_span;

static mst_str empty_str(void) {
    mst_str s = {k_empty, 0};
    return s;
}

static mst_str or_empty(mst_str s) { return s.ptr ? s : empty_str(); }

const char *mst_span_name(const mst_span *span) { return span ? span->name.ptr : k_empty; }

const char *mst_span_scope_name(const mst_span *span) {
    return (span && span->scope) ? span->scope->name.ptr : k_empty;
}

uint64_t mst_span_start_ns(const mst_span *span) { return span ? span->start_ns : 0; }
uint64_t mst_span_end_ns(const mst_span *span) { return span ? span->end_ns : 0; }

const mst_trace_id *mst_span_get_trace_id(const mst_span *span) {
    return span ? &span->trace_id : &k_zero_trace;
}

const mst_span_id *mst_span_get_span_id(const mst_span *span) {
    return span ? &span->span_id : &k_zero_span;
}

const mst_span_id *mst_span_get_parent_id(const mst_span *span) {
    return span && span->has_parent ? &span->parent_span_id : NULL;
}

bool mst_span_get_parent_is_remote(const mst_span *span) {
    return span && span->has_parent && span->parent_is_remote;
}

uint8_t mst_span_get_trace_flags(const mst_span *span) { return span ? span->trace_flags : 0; }

mst_str mst_span_get_trace_state(const mst_span *span) {
    return span ? or_empty(span->trace_state) : empty_str();
}

mst_span_kind mst_span_get_kind(const mst_span *span) {
    return span ? span->kind : MST_SPAN_KIND_UNSPECIFIED;
}

mst_status_code mst_span_get_status(const mst_span *span, mst_str *message) {
    if (message) *message = span ? or_empty(span->status_message) : empty_str();
    return span ? span->status_code : MST_STATUS_UNSET;
}

const mst_scope *mst_span_get_scope(const mst_span *span) { return span ? span->scope : NULL; }

mst_str mst_scope_get_name(const mst_scope *scope) {
    return scope ? or_empty(scope->name) : empty_str();
}

mst_str mst_scope_get_version(const mst_scope *scope) {
    return scope ? or_empty(scope->version) : empty_str();
}

const mst_attr *mst_span_get_attrs(const mst_span *span, size_t *n) {
    if (n) *n = span ? span->n_attrs : 0;
    return span ? span->attrs : NULL;
}

const mst_link *mst_span_get_links(const mst_span *span, size_t *n) {
    /* A pending link block becomes links now (the reader is the span's only
     * user: its exporter, or the test capture before the span ends). */
    if (span && span->n_link_block) mst_span_expand_links((mst_span *)span);
    if (n) *n = span ? span->n_links : 0;
    return span ? span->links : NULL;
}

const mst_event *mst_span_get_events(const mst_span *span, size_t *n) {
    if (n) *n = span ? span->n_events : 0;
    return span ? span->events : NULL;
}

void mst_span_get_dropped(const mst_span *span, mst_span_dropped *out) {
    if (!out) return;
    out->attrs = span ? span->dropped_attrs : 0;
    out->links = span ? span->dropped_links : 0;
    out->events = span ? span->dropped_events : 0;
}

const mst_attr *mst_span_get_resource(const mst_span *span, size_t *n) {
    const mst_resource *res = span ? mst_tracer_resource(span->tracer) : NULL;
    if (n) *n = res ? res->n_attrs : 0;
    return res ? res->attrs : NULL;
}
