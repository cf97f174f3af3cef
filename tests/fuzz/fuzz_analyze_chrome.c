/*
 * fuzz_analyze_chrome.c — libFuzzer target for `mstrace analyze`'s input
 * path: the streamed Chrome Trace JSON reader (src/analyze/read_chrome.c)
 * fed any bytes, every span it delivers going through the step/request
 * model, the rules and the JSON writer.
 *
 * Invariants checked (abort on violation):
 *   - a failed read leaves a one-line error message;
 *   - the spans delivered are no more than the input's '{' count, and each
 *     has end >= start;
 *   - the analysis JSON written for whatever was read is one valid JSON
 *     value (strict reader).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/model.h"
#include "analyze/read_chrome.h"
#include "analyze/report_json.h"
#include "wire/buf.h"
#include "wire/json_reader.h"

typedef struct ctx {
    mst_an_model *m;
    size_t spans;
} ctx;

static mst_status check_span(void *p, const mst_an_span *s) {
    ctx *c = p;
    if (s->end_ns < s->start_ns) abort();
    c->spans++;
    return mst_an_model_add_span(c->m, s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ctx c = {mst_an_model_new(), 0};
    if (!c.m) return 0;
    mst_an_input_info info;
    char err[512] = "";
    mst_status st = mst_an_read_chrome_buffer(data, size, "fuzz", 0, check_span, &c, &info, err, sizeof err);
    if (st != MST_OK && (err[0] == 0 || strchr(err, '\n'))) abort();
    size_t braces = 0;
    for (size_t i = 0; i < size; i++) braces += data[i] == '{';
    if (c.spans > braces) abort();
    if (st == MST_OK) {
        mst_an_model_add_input(c.m, &info);
        if (mst_an_model_finish(c.m) == MST_OK) {
            mst_buf out;
            mst_buf_init(&out, 0);
            mst_an_json_options o = {3, 50, 20, NULL, NULL};
            if (mst_an_report_json(c.m, c.m, &o, &out) == MST_OK) {
                const char *e;
                size_t off;
                if (!mst_json_validate(out.data, out.len, 64, &e, &off)) abort();
            }
            mst_buf_free(&out);
        }
    }
    mst_an_input_info_free(&info);
    mst_an_model_free(c.m);
    return 0;
}
