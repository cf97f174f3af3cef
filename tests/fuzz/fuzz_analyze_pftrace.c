/*
 * fuzz_analyze_pftrace.c — libFuzzer target for `mstrace analyze`'s native
 * Perfetto input: the streamed .pftrace reader (src/analyze/read_pftrace.c)
 * fed any bytes, every span it delivers going through the step/request
 * model, the rules and the JSON writer.
 *
 * Invariants checked (abort on violation):
 *   - a failed read leaves a one-line error message;
 *   - each span delivered has end >= start, a name, and every attribute
 *     list item readable; the spans are no more than size / 8 (a span
 *     needs a begin and an end packet, each at least 8 bytes);
 *   - the analysis JSON written for whatever was read is one valid JSON
 *     value (strict reader).
 * Seeds (tests/fuzz/corpus/fuzz_analyze_pftrace): the first packets of a
 * real forwarder .pftrace of the analysis tests' generator, the same cut
 * inside a packet, and the forwarder's .pftrace of the seed scenario with
 * links and overlapping request spans (lanes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/model.h"
#include "analyze/read_pftrace.h"
#include "analyze/report_json.h"
#include "wire/buf.h"
#include "wire/json_reader.h"

typedef struct ctx {
    mst_an_model *m;
    size_t spans;
    volatile size_t sink; /* keeps the reads of every byte */
} ctx;

static mst_status check_span(void *p, const mst_an_span *s) {
    ctx *c = p;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ctx c = {mst_an_model_new(), 0, 0};
    if (!c.m) return 0;
    (void)mst_an_pftrace_sniff(data, size);
    mst_an_input_info info;
    char err[512] = "";
    mst_status st =
        mst_an_read_pftrace_buffer(data, size, "fuzz", 0, check_span, &c, &info, err, sizeof err);
    if (st != MST_OK && (err[0] == 0 || strchr(err, '\n'))) abort();
    if (c.spans * 8 > size) abort();
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
