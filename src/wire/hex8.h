/*
 * hex8.h — eight ASCII hex digits at a time (SWAR on a 64-bit word): the
 * check-and-lowercase the packet decoder applies to every id, and the
 * value of 8 or 16 digits the forwarder's writers turn ids into (flow ids,
 * Chrome flow keys). Why: ids are 4 of a packet's strings and are turned
 * into numbers several times per span; byte loops over them were a visible
 * share of the forwarder's per-span instructions.
 */
#ifndef MST_WIRE_HEX8_H
#define MST_WIRE_HEX8_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* True when every byte of w is a hex digit (any case); *low gets them
 * lowercased. Bytes are 7-bit after the first test, so adding a per-byte
 * constant sets a byte's top bit exactly when the byte is above a bound (no
 * carry crosses bytes). Setting bit 0x20 lowercases 'A'-'F' and leaves
 * digits alone; bytes below 0x20 (which would otherwise pass as digits) are
 * refused. */
static inline bool mst_hex8_lower(uint64_t w, uint64_t *low) {
    const uint64_t k = 0x0101010101010101ull, hi = 0x8080808080808080ull;
    uint64_t l = w | (0x20 * k);
    *low = l;
    if (w & hi) return false;
    uint64_t ge20 = (w + (0x80 - 0x20) * k) & hi; /* byte >= 0x20 */
    uint64_t ge0 = (l + (0x80 - '0') * k) & hi;
    uint64_t gt9 = (l + (0x7f - '9') * k) & hi;
    uint64_t gea = (l + (0x80 - 'a') * k) & hi;
    uint64_t gtf = (l + (0x7f - 'f') * k) & hi;
    uint64_t ok = ((ge0 & ~gt9) | (gea & ~gtf)) & ge20;
    return ok == hi;
}

#ifdef __SSE2__
/* Which of the 16 bytes of v are hex digits (any case): the 16-bit mask of
 * those that are (0xFFFF: all), and in *letter 0xFF for each letter. Digits
 * are tested on the byte, letters on `lower` (v with bit 0x20 set, which
 * lowercases 'A'-'F' and leaves digits alone); bytes >= 0x80 are negative
 * as int8 and fail both ranges. Shared by mst_hex16_value and the packet
 * decoder's id check (perfetto_packet_fast.c). */
static inline unsigned mst_hex16_sse2_mask(__m128i v, __m128i lower, __m128i *letter) {
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                  _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
    *letter = _mm_and_si128(_mm_cmpgt_epi8(lower, _mm_set1_epi8('a' - 1)),
                            _mm_cmplt_epi8(lower, _mm_set1_epi8('f' + 1)));
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(digit, *letter));
}
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MST_HEX8_SWAR 1
/* The value of the 8 hex digits at p (first digit most significant), or
 * false when one of them is not a hex digit (the caller then takes its byte
 * loop). A digit's value is its low nibble, plus 9 for letters (bit 6). */
static inline bool mst_hex8_value(const char *p, uint32_t *out) {
    uint64_t w, low;
    memcpy(&w, p, 8);
    if (!mst_hex8_lower(w, &low)) return false;
    w = __builtin_bswap64(w); /* first digit in the top byte */
    w = (w & 0x0F0F0F0F0F0F0F0Full) + 9 * ((w >> 6) & 0x0101010101010101ull);
    w = (w | (w >> 4)) & 0x00FF00FF00FF00FFull;
    w = (w | (w >> 8)) & 0x0000FFFF0000FFFFull;
    *out = (uint32_t)(w | (w >> 16));
    return true;
}

/* The value of the 16 hex digits at p, or false (as mst_hex8_value). With
 * SSE2 on x86-64 all 16 at once (~20 instructions against ~100 for two
 * words; a span's flow ids need 6-9 such conversions). */
static inline bool mst_hex16_value(const char *p, uint64_t *out) {
#if defined(__SSE2__) && defined(__x86_64__)
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i letter;
    if (mst_hex16_sse2_mask(v, _mm_or_si128(v, _mm_set1_epi8(0x20)), &letter) != 0xFFFFu)
        return false;
    /* digit values: low nibble, plus 9 for letters */
    __m128i nib = _mm_add_epi8(_mm_and_si128(v, _mm_set1_epi8(0x0F)),
                               _mm_and_si128(letter, _mm_set1_epi8(9)));
    /* each 16-bit lane holds digits (hi, lo): make the byte hi << 4 | lo */
    __m128i pair = _mm_and_si128(_mm_or_si128(_mm_slli_epi16(nib, 4), _mm_srli_epi16(nib, 8)),
                                 _mm_set1_epi16(0x00FF));
    uint64_t be = (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(pair, pair));
    *out = __builtin_bswap64(be); /* first digit most significant */
    return true;
#else
    uint32_t hi, lo;
    if (!mst_hex8_value(p, &hi) || !mst_hex8_value(p + 8, &lo)) return false;
    *out = ((uint64_t)hi << 32) | lo;
    return true;
#endif
}
#endif

#endif /* MST_WIRE_HEX8_H */
