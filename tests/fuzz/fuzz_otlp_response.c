/*
 * fuzz_otlp_response.c — libFuzzer target for the OTLP reply parsers
 * (wire/otlp_response.h), which read whatever a collector (or anything
 * listening on the configured endpoint) answers. The input is fed whole to
 * every parser. Checked beyond "no crash, no out-of-bounds read" (ASan):
 * every parser returns a known status, the kept message is NUL-terminated
 * inside its buffer, nothing is reported without a partial_success, a
 * grpc-status is -1 or non-negative, a RetryInfo delay is -1 or within a
 * day, and a parse is deterministic (the same input gives the same result).
 */
#include <stdlib.h>
#include <string.h>

#include "wire/otlp_response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_partial(mst_status st, const mst_otlp_partial *p) {
    if (st != MST_OK && st != MST_ERR_PARSE && st != MST_ERR_UNSUPPORTED && st != MST_ERR_NOMEM) abort();
    if (strnlen(p->message, sizeof p->message) == sizeof p->message) abort();
    if (!p->present && (p->rejected_spans != 0 || p->message[0])) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mst_otlp_partial a, b;
    mst_status st;

    st = mst_otlp_response_parse_proto(data, size, &a);
    check_partial(st, &a);
    if (mst_otlp_response_parse_proto(data, size, &b) != st || memcmp(&a, &b, sizeof a) != 0) abort();

    st = mst_otlp_response_parse_grpc(data, size, &a);
    check_partial(st, &a);

    st = mst_otlp_response_parse_json(data, size, &a);
    check_partial(st, &a);
    if (mst_otlp_response_parse_json(data, size, &b) != st || memcmp(&a, &b, sizeof a) != 0) abort();

    const char *s = (const char *)data;
    int gs = mst_otlp_grpc_status_parse(s, size);
    if (gs < -1) abort();

    char msg[256];
    mst_otlp_grpc_message_decode(s, size, msg, sizeof msg);
    if (strnlen(msg, sizeof msg) == sizeof msg) abort();

    long ms = mst_otlp_grpc_retry_delay_ms(s, size);
    if (ms < -1 || ms > (long)MST_OTLP_RETRY_DELAY_MAX_S * 1000 + 999) abort();
    return 0;
}
