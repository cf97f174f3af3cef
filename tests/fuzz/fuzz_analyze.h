/*
 * fuzz_analyze.h — the libFuzzer harness both `mstrace analyze` trace-file
 * targets share (fuzz_analyze_chrome.c, fuzz_analyze_pftrace.c): any bytes
 * go through the format sniff and one reader, as `mstrace analyze` reads a
 * file, and every span delivered goes through the step/request model, the
 * rules and the JSON writer. A target states only what differs: its format
 * and how many spans its input can hold at most.
 *
 * Invariants checked (abort on violation):
 *   - a failed read leaves a one-line error message;
 *   - each span delivered has end >= start, a name, and every attribute key
 *     and list item readable; the spans are no more than the target's bound;
 *   - the analysis JSON written for whatever was read is one valid JSON
 *     value (strict reader).
 */
#ifndef MST_FUZZ_ANALYZE_H
#define MST_FUZZ_ANALYZE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/input_file.h"
#include "analyze/model.h"
#include "analyze/read_pftrace.h"
#include "analyze/report_json.h"
#include "analyze/report_text.h"
#include "wire/buf.h"
#include "wire/json_reader.h"

typedef struct fuzz_analyze_target {
    const mst_an_format *format;
    /* The most spans the `size` bytes at `data` can hold in this format. */
    size_t (*max_spans)(const uint8_t *data, size_t size);
} fuzz_analyze_target;

typedef struct fuzz_analyze_ctx {
    mst_an_model *m;
    size_t spans;
    volatile size_t sink; /* keeps the reads of every byte */
} fuzz_analyze_ctx;

static mst_status fuzz_analyze_check_span(void *p, const mst_an_span *s) {
    fuzz_analyze_ctx *c = p;
    if (s->end_ns < s->start_ns || !s->name.ptr) abort();
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_an_attr *a = &s->attrs[i];
        for (size_t k = 0; k < a->key.len; k++) c->sink += (unsigned char)a->key.ptr[k];
        if (a->type == MST_AN_VAL_STR_LIST)
            for (size_t k = 0; k < a->n_items; k++)
                if (a->items[k].len) c->sink += (unsigned char)a->items[k].ptr[a->items[k].len - 1];
    }
    c->spans++;
    return mst_an_model_add_span(c->m, s);
}

/* Writes the analysis of what was read and checks it is valid JSON. */
static void fuzz_analyze_report(mst_an_model *m, mst_an_input_info *info) {
    mst_an_model_add_input(m, info);
    if (mst_an_model_finish(m) != MST_OK) return;
    mst_buf out;
    mst_buf_init(&out, 0);
    mst_an_json_options o = {3, 50, 20, NULL, NULL};
    mst_an_analysis an;
    if (mst_an_analyze(m, m, &an) != MST_OK) {
        mst_buf_free(&out);
        return;
    }
    /* Shares of the engine's time never exceed 100 %, whatever the input. */
    if (an.result.parts_share > 1.0 + 1e-6 || an.result.stages[MST_AN_OUTPUT].share > 1.0 + 1e-6) abort();
    if (mst_an_report_json(&an, &o, &out) == MST_OK) {
        const char *e;
        size_t off;
        if (!mst_json_validate(out.data, out.len, 64, &e, &off)) abort();
    }
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        mst_an_report_text(devnull, &an, "a", "b");
        fclose(devnull);
    }
    mst_an_analysis_free(&an);
    mst_buf_free(&out);
}

static int fuzz_analyze_one(const fuzz_analyze_target *t, const uint8_t *data, size_t size) {
    fuzz_analyze_ctx c = {mst_an_model_new(), 0, 0};
    if (!c.m) return 0;
    (void)mst_an_pftrace_sniff(data, size); /* as analyze picks a reader */
    mst_an_input_info info;
    char err[512] = "";
    mst_status st = mst_an_read_buffer(t->format, data, size, "fuzz", 0, fuzz_analyze_check_span, &c,
                                       &info, err, sizeof err);
    if (st != MST_OK && (err[0] == 0 || strchr(err, '\n'))) abort();
    if (c.spans > t->max_spans(data, size)) abort();
    if (st == MST_OK) fuzz_analyze_report(c.m, &info);
    mst_an_input_info_free(&info);
    mst_an_model_free(c.m);
    return 0;
}

#endif /* MST_FUZZ_ANALYZE_H */
