/*
 * fuzz_jaeger_answer.c — libFuzzer target for the Jaeger query API answer
 * parser (src/analyze/read_jaeger.c), which reads JSON from a remote
 * server. Every delivered span is walked (name, attributes, string-list
 * items, links) so out-of-bounds reads show; invariants: a span ends at or
 * after it starts, every error has a message, the span count the reader
 * reports is the number delivered, and parsing the same answer again on the
 * same reader succeeds and delivers no more spans than the first time.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/read_jaeger.h"

typedef struct sink {
    uint64_t spans;
    uint64_t bytes;
} sink;

static void touch(sink *k, mst_an_str s) {
    if (s.len) k->bytes += (unsigned char)s.ptr[0] + (unsigned char)s.ptr[s.len - 1];
}

static mst_status on_span(void *ctx, const mst_an_span *s) {
    sink *k = ctx;
    if (s->end_ns < s->start_ns) abort();
    k->spans++;
    touch(k, s->name);
    touch(k, s->role);
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_an_attr *a = &s->attrs[i];
        touch(k, a->key);
        if (a->type == MST_AN_VAL_STR || a->type == MST_AN_VAL_OTHER) touch(k, a->s);
        if (a->type == MST_AN_VAL_STR_LIST)
            for (size_t j = 0; j < a->n_items; j++) touch(k, a->items[j]);
    }
    for (size_t i = 0; i < s->n_links; i++) k->bytes += s->links[i].span_id[7];
    return MST_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sink first = {0};
    mst_an_input_info info;
    if (!mst_an_input_info_init(&info, "jaeger", "fuzz")) return 0;
    mst_an_jaeger_pages *p = mst_an_jaeger_pages_new(0, on_span, &first, &info);
    if (!p) {
        mst_an_input_info_free(&info);
        return 0;
    }
    char err[256] = "";
    size_t traces = 0;
    mst_status st = mst_an_jaeger_pages_parse(p, (const char *)data, size, &traces, err, sizeof err);
    if (st == MST_OK) {
        /* The same answer again on the same reader (an overlapping window):
         * it parses again, and its traces are not delivered twice. */
        uint64_t once = first.spans;
        size_t again = 0;
        if (mst_an_jaeger_pages_parse(p, (const char *)data, size, &again, err, sizeof err) != MST_OK) abort();
        if (again != traces || first.spans - once > once) abort();
        if (info.spans != first.spans) abort();
    } else if (strlen(err) == 0) {
        abort(); /* every error says why */
    }
    mst_an_jaeger_pages_free(p);
    mst_an_input_info_free(&info);
    return 0;
}
