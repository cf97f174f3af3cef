/*
 * fuzz_traceparent.c — libFuzzer target for the W3C context parsers.
 * The input is tried as a traceparent and as a tracestate. Whatever parses
 * must round-trip: traceparent parse -> format -> parse gives the same ids
 * and flags; a stored tracestate parses again to the same string.
 */
#include "mstrace.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    mst_span_context a, b;
    if (mst_ctx_parse_traceparent(s, size, &a) == MST_OK) {
        char out[MST_TRACEPARENT_LEN + 1];
        if (mst_ctx_format_traceparent(&a, out, sizeof out) != MST_OK) abort();
        if (strlen(out) != MST_TRACEPARENT_LEN) abort();
        if (mst_ctx_parse_traceparent(out, strlen(out), &b) != MST_OK) abort();
        if (memcmp(a.trace_id.bytes, b.trace_id.bytes, 16) || memcmp(a.span_id.bytes, b.span_id.bytes, 8) ||
            a.trace_flags != b.trace_flags || !mst_ctx_is_valid(&b))
            abort();
    }
    if (mst_ctx_parse_tracestate(s, size, &a) == MST_OK) {
        if (a.trace_state_len > MST_TRACESTATE_MAX || strlen(a.trace_state) != a.trace_state_len) abort();
        if (mst_ctx_parse_tracestate(a.trace_state, a.trace_state_len, &b) != MST_OK) abort();
        if (b.trace_state_len != a.trace_state_len || memcmp(a.trace_state, b.trace_state, a.trace_state_len))
            abort();
    } else if (a.trace_state_len != 0 || a.trace_state[0]) {
        abort(); /* an invalid tracestate must leave it empty */
    }
    return 0;
}
