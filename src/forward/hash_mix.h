/*
 * hash_mix.h — the 64x64->128 multiply-fold mixing step (wyhash's "mum")
 * shared by the forwarder's hash tables: the Chrome Trace writer's link
 * tables (link_tables.h) and the Perfetto protobuf writer's interning and
 * track ids (pftrace_writer.c), the timeline's request table (timeline.c);
 * and their key compare. Inline: they run for every key hashed.
 */
#ifndef MST_FORWARD_HASH_MIX_H
#define MST_FORWARD_HASH_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* 64x64->128 multiply folded to 64 bits (the wyhash mixing step). */
static inline uint64_t mst_mum(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Every byte of s[0..n) folded 8 at a time into h (start with a seed that
 * includes n). */
static inline uint64_t mst_mum_bytes(uint64_t h, const char *s, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = mst_mum(h ^ w, 0xe7037ed1a0b428dbull);
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i);
        h = mst_mum(h ^ w, 0x8ebc6af09c88c6e3ull);
    }
    return h;
}

/* a[0..n) == b[0..n), 16 bytes at a time (SSE2; else 8) with an
 * overlapping last block: the tables' key compares (request ids are 20-60
 * bytes: cheaper inline than a call to memcmp). */
static inline bool mst_same_bytes(const char *a, const char *b, size_t n) {
#ifdef __SSE2__
    if (n >= 16) {
        unsigned eq = 0xffff;
        for (size_t i = 0; i + 16 < n; i += 16)
            eq &= (unsigned)_mm_movemask_epi8(
                _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(a + i)),
                               _mm_loadu_si128((const __m128i *)(const void *)(b + i))));
        eq &= (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(a + n - 16)),
                           _mm_loadu_si128((const __m128i *)(const void *)(b + n - 16))));
        return eq == 0xffff;
    }
#endif
    if (n < 8) {
        for (size_t i = 0; i < n; i++)
            if (a[i] != b[i]) return false;
        return true;
    }
    uint64_t x, y, d = 0;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        d |= x ^ y;
    }
    memcpy(&x, a + n - 8, 8);
    memcpy(&y, b + n - 8, 8);
    return !(d | (x ^ y));
}

#endif /* MST_FORWARD_HASH_MIX_H */
