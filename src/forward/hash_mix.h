/*
 * hash_mix.h — the 64x64->128 multiply-fold mixing step (wyhash's "mum")
 * shared by the forwarder's hash tables: the Chrome Trace writer's link
 * tables (link_tables.h) and the Perfetto protobuf writer's interning and
 * track ids (pftrace_writer.c). Inline: it runs for every key hashed.
 */
#ifndef MST_FORWARD_HASH_MIX_H
#define MST_FORWARD_HASH_MIX_H

#include <stdint.h>

/* 64x64->128 multiply folded to 64 bits (the wyhash mixing step). */
static inline uint64_t mst_mum(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

#endif /* MST_FORWARD_HASH_MIX_H */
