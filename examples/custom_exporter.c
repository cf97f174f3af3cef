/*
 * custom_exporter.c — an exporter written outside the library, on the
 * public read-out API alone (mstrace.h, "read-out"; docs/c-api.md, "Writing
 * an exporter"). It writes every finished span as one JSON object per line
 * (JSON Lines) to a file or stdout: ids, parent, kind, status, scope,
 * attributes, links, events, dropped counts and the resource; and keeps its
 * counters with mst_exporter_counters, as the built-in exporters do.
 *
 * It links libmstrace only (no libcurl, no zlib): an engine that wants its
 * spans in its own format or store needs nothing else.
 *
 *   example_custom_exporter [OUT.jsonl]     (default: stdout)
 *
 * The program records a small request: a SERVER span with attributes of
 * every type, a child INTERNAL span with a link, an event and an ERROR
 * status, and a remote-parented span from a traceparent header. The test
 * suite runs it and checks every field (tests/integration/test_custom_exporter.py).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mstrace.h"

/* ------------------------------------------------------------ the exporter */

typedef struct jsonl_exporter {
    mst_exporter base;   /* first: the pipeline hands us &base */
    FILE *out;
    bool close_out;
    mst_exporter_counters counters; /* exact, readable from any thread */
} jsonl_exporter;

static void put_str(FILE *f, mst_str s) {
    fputc('"', f);
    for (uint32_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void put_cstr(FILE *f, const char *s) {
    mst_str v = {s, (uint32_t)strlen(s)};
    put_str(f, v);
}

static void put_attrs(FILE *f, const mst_attr *attrs, size_t n) {
    fputc('{', f);
    for (size_t i = 0; i < n; i++) {
        const mst_attr *a = &attrs[i];
        if (i) fputc(',', f);
        put_str(f, a->key);
        fputc(':', f);
        switch (a->type) {
        case MST_ATTR_STRING: put_str(f, a->v.s); break;
        case MST_ATTR_INT: fprintf(f, "%" PRId64, a->v.i); break;
        case MST_ATTR_DOUBLE: fprintf(f, "%.17g", a->v.d); break;
        case MST_ATTR_BOOL: fputs(a->v.b ? "true" : "false", f); break;
        case MST_ATTR_STRING_LIST:
            fputc('[', f);
            for (uint32_t k = 0; k < a->v.list.count; k++) {
                if (k) fputc(',', f);
                put_str(f, a->v.list.items[k]);
            }
            fputc(']', f);
            break;
        }
    }
    fputc('}', f);
}

static void put_trace_id(FILE *f, const mst_trace_id *id) {
    char hex[33];
    mst_trace_id_to_hex(id, hex);
    fprintf(f, "\"%s\"", hex);
}

static void put_span_id(FILE *f, const mst_span_id *id) {
    char hex[17];
    mst_span_id_to_hex(id, hex);
    fprintf(f, "\"%s\"", hex);
}

static void write_span(FILE *f, const mst_span *sp) {
    static const char *const kinds[] = {"UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"};
    static const char *const codes[] = {"UNSET", "OK", "ERROR"};
    size_t n;

    fputs("{\"name\":", f);
    put_cstr(f, mst_span_name(sp));
    fputs(",\"trace_id\":", f);
    put_trace_id(f, mst_span_get_trace_id(sp));
    fputs(",\"span_id\":", f);
    put_span_id(f, mst_span_get_span_id(sp));
    const mst_span_id *parent = mst_span_get_parent_id(sp);
    fputs(",\"parent_span_id\":", f);
    if (parent) put_span_id(f, parent);
    else fputs("null", f);
    fprintf(f, ",\"parent_is_remote\":%s", mst_span_get_parent_is_remote(sp) ? "true" : "false");
    fprintf(f, ",\"trace_flags\":%u,\"trace_state\":", (unsigned)mst_span_get_trace_flags(sp));
    put_str(f, mst_span_get_trace_state(sp));
    unsigned kind = (unsigned)mst_span_get_kind(sp);
    fprintf(f, ",\"kind\":\"%s\"", kind < 6 ? kinds[kind] : "?");
    mst_str message;
    unsigned code = (unsigned)mst_span_get_status(sp, &message);
    fprintf(f, ",\"status\":{\"code\":\"%s\",\"message\":", code < 3 ? codes[code] : "?");
    put_str(f, message);
    const mst_scope *scope = mst_span_get_scope(sp);
    fputs("},\"scope\":{\"name\":", f);
    put_str(f, mst_scope_get_name(scope));
    fputs(",\"version\":", f);
    put_str(f, mst_scope_get_version(scope));
    fprintf(f, "},\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64, mst_span_start_ns(sp), mst_span_end_ns(sp));

    const mst_attr *attrs = mst_span_get_attrs(sp, &n);
    fputs(",\"attributes\":", f);
    put_attrs(f, attrs, n);

    const mst_link *links = mst_span_get_links(sp, &n);
    fputs(",\"links\":[", f);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        fputs("{\"trace_id\":", f);
        put_trace_id(f, &links[i].trace_id);
        fputs(",\"span_id\":", f);
        put_span_id(f, &links[i].span_id);
        fprintf(f, ",\"trace_flags\":%u,\"is_remote\":%s,\"trace_state\":", (unsigned)links[i].trace_flags,
                links[i].is_remote ? "true" : "false");
        put_str(f, links[i].trace_state);
        fputs(",\"attributes\":", f);
        put_attrs(f, links[i].attrs, links[i].n_attrs);
        fputc('}', f);
    }

    const mst_event *events = mst_span_get_events(sp, &n);
    fputs("],\"events\":[", f);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        fputs("{\"name\":", f);
        put_str(f, events[i].name);
        fprintf(f, ",\"time_ns\":%" PRIu64 ",\"attributes\":", events[i].time_ns);
        put_attrs(f, events[i].attrs, events[i].n_attrs);
        fputc('}', f);
    }

    mst_span_dropped dropped;
    mst_span_get_dropped(sp, &dropped);
    fprintf(f, "],\"dropped\":{\"attributes\":%u,\"links\":%u,\"events\":%u}", dropped.attrs, dropped.links,
            dropped.events);

    const mst_attr *res = mst_span_get_resource(sp, &n);
    fputs(",\"resource\":", f);
    put_attrs(f, res, n);
    fputs("}\n", f);
}

/* Called on the tracer's exporter thread only: no locking needed. */
static mst_status jsonl_export_batch(mst_exporter *self, const mst_span *const *spans, size_t n) {
    jsonl_exporter *e = (jsonl_exporter *)self;
    for (size_t i = 0; i < n; i++) write_span(e->out, spans[i]);
    if (fflush(e->out) != 0) {
        mst_exporter_counters_batch_failed(&e->counters, n);
        return MST_ERR_IO;
    }
    mst_exporter_counters_batch_ok(&e->counters, n, 0);
    return MST_OK;
}

static void jsonl_get_stats(mst_exporter *self, mst_exporter_stats *out) {
    mst_exporter_counters_read(&((jsonl_exporter *)self)->counters, out);
}

static mst_status jsonl_flush(mst_exporter *self, uint32_t timeout_ms) {
    (void)timeout_ms;
    return fflush(((jsonl_exporter *)self)->out) == 0 ? MST_OK : MST_ERR_IO;
}

static void jsonl_destroy(mst_exporter *self) {
    jsonl_exporter *e = (jsonl_exporter *)self;
    if (e->close_out) fclose(e->out);
    free(e);
}

static const mst_exporter_ops jsonl_ops = {
    .name = "jsonl",
    .export_batch = jsonl_export_batch,
    .flush = jsonl_flush,
    .get_stats = jsonl_get_stats,
    .destroy = jsonl_destroy,
};

static mst_exporter *jsonl_exporter_create(const char *path) {
    jsonl_exporter *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->base.ops = &jsonl_ops;
    e->out = path ? fopen(path, "w") : stdout;
    e->close_out = path != NULL;
    if (!e->out) {
        perror(path);
        free(e);
        return NULL;
    }
    return &e->base;
}

/* ------------------------------------------------------------ the program */

int main(int argc, char **argv) {
    mst_tracer_options opts;
    mst_tracer_options_from_env(&opts);
    mst_tracer *tracer = NULL;
    mst_status st = mst_tracer_create(&opts, &tracer);
    if (st != MST_OK) {
        fprintf(stderr, "tracer: %s\n", mst_strerror(st));
        return 1;
    }
    mst_exporter *jsonl = jsonl_exporter_create(argc > 1 ? argv[1] : NULL);
    if (!jsonl || (st = mst_tracer_add_exporter(tracer, jsonl)) != MST_OK) {
        fprintf(stderr, "exporter: %s\n", jsonl ? mst_strerror(st) : "cannot open the output");
        mst_tracer_shutdown(tracer, 1000);
        return 1;
    }

    const mst_scope *scope = mst_tracer_scope(tracer, "example.engine", "1.2");
    mst_span *req = mst_span_start(tracer, scope, "llm_request", MST_SPAN_KIND_SERVER, NULL, 1000);
    mst_span_set_str(req, "request.id", "req-1");
    mst_span_set_int(req, "request.tokens", 42);
    mst_span_set_double(req, "request.temperature", 0.5);
    mst_span_set_bool(req, "request.stream", true);
    const char *ids[] = {"a", "b \"quoted\""};
    mst_span_set_str_list(req, "request.ids", ids, 2);
    mst_span_context req_ctx;
    mst_span_get_context(req, &req_ctx);

    mst_span *step = mst_span_start(tracer, scope, "engine.step", MST_SPAN_KIND_INTERNAL, &req_ctx, 2000);
    mst_attr_in link_attr = {.key = "link.reason", .type = MST_ATTR_STRING, .v.s = "batch"};
    mst_span_add_link(step, &req_ctx, &link_attr, 1);
    mst_attr_in ev_attr = {.key = "tokens", .type = MST_ATTR_INT, .v.i = 7};
    mst_span_add_event(step, "first_token", 2500, &ev_attr, 1);
    mst_span_set_status(step, MST_STATUS_ERROR, "out of memory");
    mst_span_end(step, 3000);
    mst_span_end(req, 4000);

    static const char tp[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    mst_span_context remote;
    if (mst_ctx_parse_traceparent(tp, sizeof tp - 1, &remote) == MST_OK &&
        mst_ctx_parse_tracestate("vendor=v1", 9, &remote) == MST_OK) {
        mst_span *in = mst_span_start(tracer, scope, "remote_child", MST_SPAN_KIND_CONSUMER, &remote, 5000);
        mst_span_end(in, 6000);
    }

    mst_tracer_stats ts;
    mst_tracer_flush(tracer, 5000);
    mst_tracer_get_stats(tracer, &ts);
    fprintf(stderr, "tracer: started=%" PRIu64 " exported=%" PRIu64 " failed=%" PRIu64 "\n", ts.spans_started,
            ts.spans_exported, ts.spans_failed);
    mst_exporter_stats es;
    mst_exporter_get_stats(jsonl, &es);
    fprintf(stderr, "jsonl exporter: exported=%" PRIu64 " failed=%" PRIu64 " batches_ok=%" PRIu64 "\n",
            es.spans_exported, es.spans_failed, es.batches_ok);
    st = mst_tracer_shutdown(tracer, 5000);
    return st == MST_OK && ts.spans_exported == 3 ? 0 : 1;
}
