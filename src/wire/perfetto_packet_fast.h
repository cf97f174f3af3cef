/*
 * perfetto_packet_fast.h — the fast path of the Perfetto packet decoder
 * (perfetto_packet_fast.c): one pass over the JSON of a packet in the
 * shape encoders write (plain keys, plain or UTF-8 values, the documented
 * field types), with no pull-reader calls per member. It never reports an
 * error: on anything it does not handle, including every invalid packet,
 * it declines and mst_perfetto_packet_decode runs the general decoder,
 * which then owns the error code and message. Its contract: when it
 * accepts, the general decoder accepts the same bytes and produces the
 * same span (tests/unit/test_packet_fast.c and the differential mode of
 * tests/fuzz/fuzz_packet_decode.c check this).
 */
#ifndef MST_WIRE_PERFETTO_PACKET_FAST_H
#define MST_WIRE_PERFETTO_PACKET_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "wire/perfetto_packet_types.h"

/* Decodes the JSON text [json, json + len) of a packet into `out`, which
 * the caller has set to the decoder's defaults (mst_pf_span_defaults).
 * The 16 bytes before `json` must be readable (the packet's magic): the
 * scanners load whole 16-byte blocks ending at the input's end and 8-byte
 * words ending at a key's end. Returns false when it declines;
 * `out` and the arena may then hold partial results, which the caller
 * resets before decoding again. */
bool mst_pf_decode_fast(const uint8_t *json, size_t len, mst_arena *arena, mst_pf_span *out);

#endif /* MST_WIRE_PERFETTO_PACKET_FAST_H */
