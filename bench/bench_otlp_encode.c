/*
 * bench_otlp_encode.c — OTLP encode throughput (spans/s) of libmstrace's
 * protobuf and JSON encoders for typical hook spans: 8 attributes (4
 * strings, 2 ints, a double, a bool), 2 links with one attribute each, no
 * events, batches of 512, one scope. Prints the median of several timed
 * runs. bench/otel_python_encode.py encodes the same spans with
 * opentelemetry-python for comparison (bench/run_otlp_encode.sh).
 *
 * Usage: bench_otlp_encode [runs=7] [seconds_per_run=0.5] [proto|json|both]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/otlp.h"

enum { BATCH = 512 };

static mst_str S(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct fixture {
    mst_resource res;
    mst_scope scope;
    mst_span *spans[BATCH];
    mst_link links[BATCH][2];
    mst_attr link_attrs[2];
    char req_ids[BATCH][32];
} fixture;

static void build(fixture *f) {
    memset(f, 0, sizeof *f);
    f->res.attrs[0] = (mst_attr){.key = S("service.name"), .type = MST_ATTR_STRING, .v.s = S("mindie-service")};
    f->res.attrs[1] = (mst_attr){.key = S("process.pid"), .type = MST_ATTR_INT, .v.i = 12345};
    f->res.attrs[2] = (mst_attr){.key = S("telemetry.sdk.name"), .type = MST_ATTR_STRING, .v.s = S("mstrace")};
    f->res.n_attrs = 3;
    f->scope = (mst_scope){S("ms_service_profiler.hook.Schedule"), S("0.1.0"), NULL};
    f->link_attrs[0] = (mst_attr){.key = S("link.type"), .type = MST_ATTR_STRING, .v.s = S("batch")};
    f->link_attrs[1] = (mst_attr){.key = S("link.type"), .type = MST_ATTR_STRING, .v.s = S("request")};
    srand(42);
    for (int i = 0; i < BATCH; i++) {
        mst_span *s = calloc(1, sizeof *s);
        if (!s) abort();
        for (int k = 0; k < 16; k++) s->trace_id.bytes[k] = (uint8_t)rand();
        for (int k = 0; k < 8; k++) s->span_id.bytes[k] = (uint8_t)rand();
        for (int k = 0; k < 8; k++) s->parent_span_id.bytes[k] = (uint8_t)rand();
        s->has_parent = true;
        s->trace_flags = 1;
        s->scope = &f->scope;
        s->name = S("Schedule");
        s->kind = MST_SPAN_KIND_INTERNAL;
        s->start_ns = 1767225600000000000ull + (uint64_t)i * 1000;
        s->end_ns = s->start_ns + 123456;
        s->trace_state = S("");
        s->status_message = S("");
        snprintf(f->req_ids[i], sizeof f->req_ids[i], "chatcmpl-%08d", i);
        mst_attr a[8] = {
            {.key = S("request.id"), .type = MST_ATTR_STRING, .v.s = S(f->req_ids[i])},
            {.key = S("model.name"), .type = MST_ATTR_STRING, .v.s = S("qwen2.5-7b-instruct")},
            {.key = S("domain"), .type = MST_ATTR_STRING, .v.s = S("BatchSchedule")},
            {.key = S("rid.state"), .type = MST_ATTR_STRING, .v.s = S("running")},
            {.key = S("batch.size"), .type = MST_ATTR_INT, .v.i = 32 + i % 7},
            {.key = S("iter"), .type = MST_ATTR_INT, .v.i = 100000 + i},
            {.key = S("kv.usage"), .type = MST_ATTR_DOUBLE, .v.d = 0.4375},
            {.key = S("prefill"), .type = MST_ATTR_BOOL, .v.b = i % 2 == 0},
        };
        memcpy(s->attrs, a, sizeof a);
        s->n_attrs = 8;
        for (int l = 0; l < 2; l++) {
            mst_link *lk = &f->links[i][l];
            for (int k = 0; k < 16; k++) lk->trace_id.bytes[k] = (uint8_t)rand();
            for (int k = 0; k < 8; k++) lk->span_id.bytes[k] = (uint8_t)rand();
            lk->trace_flags = 1;
            lk->trace_state = S("");
            lk->attrs = &f->link_attrs[l];
            lk->n_attrs = 1;
        }
        s->links = f->links[i];
        s->n_links = s->link_cap = 2;
        f->spans[i] = s;
    }
}

typedef mst_status (*encode_fn)(const mst_resource *, const mst_span *const *, size_t, mst_buf *);

/* Median spans/s over `runs` runs of about `secs` each; *bytes = batch size. */
static double measure(const fixture *f, encode_fn fn, int runs, double secs, size_t *bytes) {
    mst_buf b;
    mst_buf_init(&b, 0);
    double rates[64];
    if (runs > 64) runs = 64;
    for (int r = 0; r < runs; r++) {
        long batches = 0;
        double t0 = now_s(), t;
        do {
            for (int k = 0; k < 16; k++) {
                mst_buf_reset(&b); /* reuse the buffer, as the exporter does */
                if (fn(&f->res, (const mst_span *const *)f->spans, BATCH, &b) != MST_OK) {
                    fprintf(stderr, "encode failed\n");
                    exit(1);
                }
            }
            batches += 16;
            t = now_s();
        } while (t - t0 < secs);
        rates[r] = (double)batches * BATCH / (t - t0);
    }
    *bytes = b.len;
    mst_buf_free(&b);
    qsort(rates, (size_t)runs, sizeof rates[0], cmp_double);
    return rates[runs / 2];
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    double secs = argc > 2 ? atof(argv[2]) : 0.5;
    if (runs < 1) runs = 1;
    fixture *f = malloc(sizeof *f);
    if (!f) return 1;
    build(f);
    const char *which = argc > 3 ? argv[3] : "both";
    size_t pb_bytes = 0, js_bytes = 0;
    double pb = 0, js = 0;
    if (strcmp(which, "json") != 0) pb = measure(f, mst_otlp_encode_proto, runs, secs, &pb_bytes);
    if (strcmp(which, "proto") != 0) js = measure(f, mst_otlp_encode_json, runs, secs, &js_bytes);
    printf("otlp_encode proto: median %.0f spans/s (%d runs, batch %d, 8 attrs, 2 links; %zu bytes/batch)\n",
           pb, runs, BATCH, pb_bytes);
    printf("otlp_encode json:  median %.0f spans/s (%d runs, batch %d, 8 attrs, 2 links; %zu bytes/batch)\n",
           js, runs, BATCH, js_bytes);
    printf("RESULT proto_spans_per_s=%.0f json_spans_per_s=%.0f\n", pb, js);
    for (int i = 0; i < BATCH; i++) free(f->spans[i]);
    free(f);
    return 0;
}
