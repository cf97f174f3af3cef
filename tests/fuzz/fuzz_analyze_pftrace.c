/*
 * fuzz_analyze_pftrace.c — libFuzzer target for `mstrace analyze`'s native
 * Perfetto input: the streamed .pftrace reader (src/analyze/read_pftrace.c)
 * fed any bytes, through the shared harness (fuzz_analyze.h: what runs and
 * the invariants). Its own bound: a span needs a begin and an end packet,
 * each at least 8 bytes, so the spans are no more than size / 8.
 *
 * Seeds (tests/fuzz/corpus/fuzz_analyze_pftrace): the first packets of a
 * real forwarder .pftrace of the analysis tests' generator, the same cut
 * inside a packet, the forwarder's .pftrace of the seed scenario with
 * links and overlapping request spans (lanes), and of eight engine steps
 * (tests/integration/pftrace_fixture.py's stream, one engine, batch 8):
 * request-id lists as interned arrays, request.ids as keyframes and
 * deltas (request_ids_keyframes_deltas), and the same without the packets
 * of two deltas, so the deltas after them do not follow their list
 * (request_ids_middle_lost).
 */
#include "fuzz_analyze.h"

static size_t max_spans(const uint8_t *data, size_t size) {
    (void)data;
    return size / 8;
}

static const fuzz_analyze_target target = {&mst_an_pftrace_format, max_spans};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fuzz_analyze_one(&target, data, size);
}
