/*
 * batch_block.h — a batch's string list and request links, copied once and
 * shared read-only by every span given it (mstrace.h "batch blocks";
 * batch_block.c). A span holds at most one block reference, dropped when its
 * record is freed (tracer.c).
 */
#ifndef MST_CORE_BATCH_BLOCK_H
#define MST_CORE_BATCH_BLOCK_H

#include "mstrace.h"

#include <stdatomic.h>

struct mst_batch_block {
    _Atomic uint32_t refs;
    uint32_t n_items;
    uint32_t n_links;
    size_t cap;                /* bytes of `data` */
    mst_str *items;            /* into data, then their bytes (read-only once made) */
    const mst_link_ref *links; /* into data */
    _Alignas(16) unsigned char data[];
};

/* Takes one more reference (a span given the block). */
void mst_batch_block_hold(mst_batch_block *block);

#endif /* MST_CORE_BATCH_BLOCK_H */
