/*
 * bench_step_links.c — what it costs to tie a step span to each request it
 * carried, two ways, at 8 / 64 / 256 requests per span:
 *   links: `request.ids` plus one link per request (mst_span_add_link_block:
 *          one copy on the calling thread, links built on the exporter
 *          thread, where OTLP encodes them as Span.links);
 *   list:  `request.ids` plus two parallel string-list attributes,
 *          `request.trace_ids` / `request.span_ids` (hex, formatted on the
 *          calling thread), which OTLP encodes as array attributes.
 * For each: calling-thread ns per span (start, attributes, end of the
 * record; no export), then on the exporter's side ns per span to expand
 * the links and to encode OTLP protobuf and OTLP/JSON, and the encoded
 * bytes per span. Median of 7 rounds of 2,000 spans, calling-thread CPU time.
 *
 * Usage: bench_step_links [sizes=8,64,256]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/span_links.h"
#include "core/tracer.h"
#include "wire/buf.h"
#include "wire/otlp.h"

enum { SPANS = 2000, ROUNDS = 7, MAX_N = 1024 };

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* this thread's CPU: robust on a loaded box */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char g_ids[MAX_N][48];
static const char *g_id_ptrs[MAX_N];
static mst_link_ref g_refs[MAX_N];

static void fixture(void) {
    for (unsigned i = 0; i < MAX_N; i++) {
        snprintf(g_ids[i], sizeof g_ids[i], "cmpl-%016x%08x-0-%08x", i * 2654435761u, i, i * 40503u);
        g_id_ptrs[i] = g_ids[i];
        mst_link_ref *r = &g_refs[i];
        memset(r, 0, sizeof *r);
        for (int k = 0; k < 16; k++) r->trace_id.bytes[k] = (uint8_t)(i * 7 + k * 13 + 1);
        for (int k = 0; k < 8; k++) r->span_id.bytes[k] = (uint8_t)(i * 5 + k * 11 + 1);
        r->trace_flags = MST_TRACE_FLAG_SAMPLED;
        r->is_remote = true;
        r->item = (uint16_t)i;
    }
}

typedef struct figures {
    double hot, expand, proto, json;
    size_t proto_bytes, json_bytes;
} figures;

/* The calling thread's part: the step span with its batch. */
static mst_span *build(mst_tracer *t, const mst_scope *sc, unsigned n, bool links) {
    static char hex[2][MAX_N][33];
    static const char *hp[2][MAX_N];
    mst_span *s = mst_span_start(t, sc, "vllm.scheduler.schedule", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_int(s, "batch.request_count", n);
    mst_span_set_str_list(s, "request.ids", g_id_ptrs, n);
    if (links) {
        mst_span_add_link_block(s, g_refs, n, "request.id", "request.ids");
    } else {
        for (unsigned i = 0; i < n; i++) {
            mst_trace_id_to_hex(&g_refs[i].trace_id, hex[0][i]);
            mst_span_id_to_hex(&g_refs[i].span_id, hex[1][i]);
            hp[0][i] = hex[0][i];
            hp[1][i] = hex[1][i];
        }
        mst_span_set_str_list(s, "request.trace_ids", hp[0], n);
        mst_span_set_str_list(s, "request.span_ids", hp[1], n);
    }
    s->end_ns = mst_clock_now_ns();
    return s;
}

static figures measure(mst_tracer *t, unsigned n, bool links) {
    const mst_scope *sc = mst_tracer_scope(t, "ms_service_profiler.hook.Schedule", NULL);
    const mst_resource *res = mst_tracer_resource(t);
    double r_hot[ROUNDS], r_exp[ROUNDS], r_pb[ROUNDS], r_js[ROUNDS];
    static mst_span *spans[SPANS];
    mst_buf b;
    mst_buf_init(&b, 0);
    figures f = {0};
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < SPANS; i++) spans[i] = build(t, sc, n, links);
        uint64_t t1 = now_ns();
        for (int i = 0; i < SPANS; i++) mst_span_expand_links(spans[i]);
        uint64_t t2 = now_ns();
        size_t pb = 0, js = 0;
        for (int i = 0; i < SPANS; i++) {
            mst_buf_reset(&b);
            mst_otlp_encode_proto(res, (const mst_span *const *)&spans[i], 1, &b);
            pb += b.len;
        }
        uint64_t t3 = now_ns();
        for (int i = 0; i < SPANS; i++) {
            mst_buf_reset(&b);
            mst_otlp_encode_json(res, (const mst_span *const *)&spans[i], 1, &b);
            js += b.len;
        }
        uint64_t t4 = now_ns();
        for (int i = 0; i < SPANS; i++) mst_span_discard(spans[i]);
        r_hot[r] = (double)(t1 - t0) / SPANS;
        r_exp[r] = (double)(t2 - t1) / SPANS;
        r_pb[r] = (double)(t3 - t2) / SPANS;
        r_js[r] = (double)(t4 - t3) / SPANS;
        f.proto_bytes = pb / SPANS;
        f.json_bytes = js / SPANS;
    }
    mst_buf_free(&b);
    qsort(r_hot, ROUNDS, sizeof(double), cmp_double);
    qsort(r_exp, ROUNDS, sizeof(double), cmp_double);
    qsort(r_pb, ROUNDS, sizeof(double), cmp_double);
    qsort(r_js, ROUNDS, sizeof(double), cmp_double);
    f.hot = r_hot[ROUNDS / 2];
    f.expand = r_exp[ROUNDS / 2];
    f.proto = r_pb[ROUNDS / 2];
    f.json = r_js[ROUNDS / 2];
    return f;
}

int main(int argc, char **argv) {
    const char *sizes = argc > 1 ? argv[1] : "8,64,256";
    mst_tracer_options o = {.max_queue_size = SPANS * 2, .max_export_batch_size = 512, .schedule_delay_ms = 100000};
    mst_tracer *t = NULL;
    if (mst_tracer_create(&o, &t) != MST_OK) return 1;
    fixture();
    printf("| requests per span | form | calling thread ns/span | expand ns/span | OTLP proto ns/span | proto bytes/span "
           "| OTLP/JSON ns/span | JSON bytes/span |\n|---|---|---|---|---|---|---|---|\n");
    for (const char *p = sizes; *p;) {
        unsigned n = (unsigned)strtoul(p, (char **)&p, 10);
        if (*p == ',') p++;
        if (n == 0 || n > MAX_N) continue;
        for (int v = 0; v < 2; v++) {
            figures f = measure(t, n, v == 0);
            printf("| %u | %s | %.0f | %.0f | %.0f | %zu | %.0f | %zu |\n", n, v == 0 ? "links" : "list", f.hot,
                   f.expand, f.proto, f.proto_bytes, f.json, f.json_bytes);
        }
    }
    mst_tracer_shutdown(t, 1000);
    return 0;
}
