/*
 * fuzz_analyze_chrome.c — libFuzzer target for `mstrace analyze`'s input
 * path over Chrome Trace JSON: the streamed reader (src/analyze/read_chrome.c)
 * fed any bytes, through the shared harness (fuzz_analyze.h: what runs and
 * the invariants). Its own bound: a span is an X event, a JSON object, so
 * the spans are no more than the input's '{' count.
 */
#include "fuzz_analyze.h"
#include "analyze/read_chrome.h"

static size_t max_spans(const uint8_t *data, size_t size) {
    size_t braces = 0;
    for (size_t i = 0; i < size; i++) braces += data[i] == '{';
    return braces;
}

static const fuzz_analyze_target target = {&mst_an_chrome_format, max_spans};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fuzz_analyze_one(&target, data, size);
}
