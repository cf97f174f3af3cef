/*
 * hash_mix.h — the 64x64->128 multiply-fold mixing step (wyhash's "mum")
 * shared by the forwarder's hash tables: the Chrome Trace writer's link
 * tables (link_tables.h) and the Perfetto protobuf writer's interning and
 * track ids (pftrace_writer.c), the timeline's request table (timeline.c).
 * Inline: it runs for every key hashed.
 */
#ifndef MST_FORWARD_HASH_MIX_H
#define MST_FORWARD_HASH_MIX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

#endif /* MST_FORWARD_HASH_MIX_H */
