/*
 * fuzz_otlp_decode.c — libFuzzer target for the strict OTLP decoder
 * (otlp_decode.h), which parses payloads from other processes (the MindIE
 * relay). Validates, then walks every view with every iterator so all read
 * paths run; checks the invariants the relay relies on: a walk after a
 * successful validation succeeds and visits exactly the counted spans, and
 * a re-encode-free decode never reports spans for invalid input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/otlp_decode.h"

typedef struct walk {
    uint64_t spans;
    uint64_t sink;
} walk;

static void touch(walk *w, mst_otlp_bytes b) {
    if (b.len) w->sink += b.ptr[0] + b.ptr[b.len - 1]; /* reads the ends */
}

static void walk_attrs(walk *w, mst_otlp_iter *it, int depth);

static void walk_value(walk *w, const mst_otlp_value *v, int depth) {
    touch(w, v->raw);
    if (v->type == MST_OTLP_VALUE_ARRAY && depth < 64) {
        mst_otlp_iter it;
        mst_otlp_array_values(v, &it);
        mst_otlp_value item;
        while (mst_otlp_next_value(&it, &item)) walk_value(w, &item, depth + 1);
    } else if (v->type == MST_OTLP_VALUE_KVLIST && depth < 64) {
        mst_otlp_iter it;
        mst_otlp_iter_init(&it, v->raw, 1);
        walk_attrs(w, &it, depth + 1);
    }
}

static void walk_attrs(walk *w, mst_otlp_iter *it, int depth) {
    mst_otlp_kv kv;
    while (mst_otlp_next_kv(it, &kv)) {
        touch(w, kv.key);
        walk_value(w, &kv.value, depth);
    }
}

static mst_status on_resource(void *ctx, const mst_otlp_resource_view *r) {
    mst_otlp_iter it;
    mst_otlp_resource_attrs(r, &it);
    walk_attrs(ctx, &it, 0);
    return MST_OK;
}

static mst_status on_scope(void *ctx, const mst_otlp_resource_view *r, const mst_otlp_scope_view *s) {
    (void)r;
    touch(ctx, s->name);
    touch(ctx, s->version);
    return MST_OK;
}

static mst_status on_span(void *ctx, const mst_otlp_span_view *s) {
    walk *w = ctx;
    w->spans++;
    touch(w, s->name);
    touch(w, s->trace_state);
    touch(w, s->status_message);
    mst_otlp_iter it;
    mst_otlp_span_attrs(s, &it);
    walk_attrs(w, &it, 0);
    mst_otlp_span_events(s, &it);
    mst_otlp_event_view ev;
    while (mst_otlp_next_event(&it, &ev)) {
        mst_otlp_iter ai;
        mst_otlp_event_attrs(&ev, &ai);
        walk_attrs(w, &ai, 0);
    }
    mst_otlp_span_links(s, &it);
    mst_otlp_link_view lv;
    while (mst_otlp_next_link(&it, &lv)) {
        mst_otlp_iter ai;
        mst_otlp_link_attrs(&lv, &ai);
        walk_attrs(w, &ai, 0);
    }
    return MST_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private copy: ASan then flags any read one byte past the input. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    mst_otlp_counts counts;
    mst_status st = mst_otlp_validate(copy, size, &counts);
    if (st == MST_OK) {
        walk w = {0, 0};
        mst_otlp_visitor v = {&w, on_resource, on_scope, on_span};
        mst_otlp_counts again;
        if (mst_otlp_decode(copy, size, &v, &again) != MST_OK) abort();
        if (w.spans != counts.spans || again.spans != counts.spans) abort();
    } else if (counts.spans != 0) {
        abort();
    }
    free(copy);
    return 0;
}
