/*
 * link_tables.h — the Chrome Trace writer's two bounded link tables
 * (chrome_trace.c). mst_track_table maps a 24-byte key (trace_id(16) +
 * span_id(8), see mst_link_key) to a span's position (pid, tid, start); the
 * writer uses one for span positions and one as its "already named" set for
 * M events. mst_pend_table holds the links still waiting for their source
 * span: a table of distinct source keys ("groups"), each owning a list of
 * waiting destinations in a pool with its own global FIFO. Both are bounded
 * (the oldest entry is evicted and reported to the caller); the design is
 * described in link_tables.c. Lookups are inline here: they run for every
 * span and every link on the forwarder's per-span path. Single-threaded.
 */
#ifndef MST_FORWARD_LINK_TABLES_H
#define MST_FORWARD_LINK_TABLES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "forward/hash_mix.h"


typedef struct mst_track_entry {
    uint8_t key[24];   /* trace_id(16) + span_id(8), or a names key */
    uint32_t older;    /* FIFO neighbours, index + 1; `older` doubles as free list */
    uint32_t newer;
    int64_t pid, tid, ts_ns;
    uint32_t first, last; /* pending groups: their destinations, index + 1 */
} mst_track_entry;             /* 64 bytes: one cache line in the aligned pool */

/* Open addressing over a power-of-two slot array (load <= 0.5), linear
 * probing, backward-shift deletion (no tombstones, so probe sequences never
 * lengthen with churn). A slot holds (32-bit hash << 32) | (index + 1), 0 =
 * empty: the stored hash gives the slot's home for the backward shift and
 * filters almost every non-matching slot without touching its entry, so a
 * lookup of an absent key (the common case for the pending-link groups and
 * for a new span's position) costs one cache line. */
typedef struct mst_track_table {
    mst_track_entry *e;     /* pool, 64-byte aligned; untouched pages stay unbacked */
    uint64_t *slots;
    uint64_t seed;
    uint32_t mask;
    uint32_t cap;
    uint32_t count;
    uint32_t used;      /* pool slots ever handed out */
    uint32_t free_head; /* index + 1, chained through `older` */
    uint32_t oldest, newest;
} mst_track_table;

/* A link waiting for its source span: the linking span's position. */
typedef struct mst_pend_dest {
    uint32_t group;         /* index + 1 into the groups table */
    uint32_t g_prev, g_next; /* within the group's list, index + 1 */
    uint32_t older, newer;  /* global FIFO, index + 1; `older` doubles as free list */
    int64_t pid, tid, ts_ns;
    uint8_t span[8];
} mst_pend_dest;

typedef struct mst_pend_table {
    mst_track_table groups;     /* distinct source keys; first/last = list */
    mst_pend_dest *d;
    uint32_t cap, count, used, free_head, oldest, newest;
} mst_pend_table;

static inline uint64_t mst_track_load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Seeded hash of the 24 key bytes; 32 bits are kept in the slot. */
static inline uint32_t mst_track_key_hash(const mst_track_table *t, const uint8_t key[24]) {
    uint64_t h = mst_mum(mst_track_load64(key) ^ t->seed, mst_track_load64(key + 8) ^ 0xe7037ed1a0b428dbull);
    h = mst_mum(h ^ mst_track_load64(key + 16), 0x8ebc6af09c88c6e3ull ^ t->seed);
    return (uint32_t)(h ^ (h >> 32));
}

static inline uint32_t mst_track_table_find(const mst_track_table *t, const uint8_t key[24]) {
    uint32_t h = mst_track_key_hash(t, key);
    for (uint32_t pos = h & t->mask;; pos = (pos + 1) & t->mask) {
        uint64_t sl = t->slots[pos];
        if (!sl) return 0;
        uint32_t i = (uint32_t)sl;
        if ((uint32_t)(sl >> 32) == h && memcmp(t->e[i - 1].key, key, 24) == 0) return i;
    }
}

/* The prefetch helpers below are always inlined. Why: gcc counts a
 * prefetch as no side effect, so an out-of-line helper whose only effect
 * is one is found "const" and its calls are deleted before inlining (gcc
 * 12 at -O2/-O3 dropped every one of them). */
#define MST_PREFETCH_FN static inline __attribute__((always_inline)) void

/* Starts loading the cache lines a later find/insert of `key` will touch
 * (its home slot and, when the table is full, the entry that insert would
 * evict), so those misses overlap the event formatting done meanwhile. */
MST_PREFETCH_FN mst_track_table_prefetch(const mst_track_table *t, const uint8_t key[24]) {
    __builtin_prefetch(&t->slots[mst_track_key_hash(t, key) & t->mask]);
    if (t->count == t->cap) __builtin_prefetch(&t->e[t->oldest - 1]);
}

/* For a full table, the lines the next eviction (insert) touches besides
 * the victim's entry: the victim's slot and its FIFO neighbour. The victim's
 * entry was prefetched when the previous victim left (it became the
 * oldest then), so its key is at hand here. Why: a forwarder's tables are
 * full in steady state, and these misses came after the formatting they
 * could otherwise overlap. */
MST_PREFETCH_FN mst_track_table_prefetch_victim(const mst_track_table *t) {
    if (t->count != t->cap || !t->oldest) return;
    const mst_track_entry *x = &t->e[t->oldest - 1];
    __builtin_prefetch(&t->slots[mst_track_key_hash(t, x->key) & t->mask]);
    if (x->newer) __builtin_prefetch(&t->e[x->newer - 1]);
}

/* Allocates a table of `cap` entries (seeded per table). False when out of
 * memory (t is left empty). */
bool mst_track_table_init(mst_track_table *t, uint32_t cap);
void mst_track_table_free(mst_track_table *t);
/* Removes entry `i` (index + 1) from the slots and the FIFO list. */
void mst_track_table_remove(mst_track_table *t, uint32_t i);
/* Adds a new entry for key (the caller checked it is absent); evicts the
 * oldest first when full (*evicted). Returns index + 1. */
uint32_t mst_track_table_insert(mst_track_table *t, const uint8_t key[24], bool *evicted);

/* For a full pending table, in two steps as their addresses become known:
 * the lines the next eviction (add) touches, the oldest destination's
 * group entry and its FIFO neighbours; then (`group_slot`, once those have
 * arrived) the group's slot and its FIFO neighbours, which a group left
 * empty is removed from. As mst_track_table_prefetch_victim. */
MST_PREFETCH_FN mst_pend_table_prefetch_victim(const mst_pend_table *p, bool group_slot) {
    if (p->count != p->cap || !p->oldest) return;
    const mst_pend_dest *x = &p->d[p->oldest - 1];
    const mst_track_entry *g = &p->groups.e[x->group - 1];
    if (!group_slot) {
        __builtin_prefetch(g);
        if (x->newer) __builtin_prefetch(&p->d[x->newer - 1]);
        if (x->g_next) __builtin_prefetch(&p->d[x->g_next - 1]);
        return;
    }
    if (x->g_prev || x->g_next) return; /* the group stays */
    __builtin_prefetch(&p->groups.slots[mst_track_key_hash(&p->groups, g->key) & p->groups.mask]);
    if (g->older) __builtin_prefetch(&p->groups.e[g->older - 1]);
    if (g->newer) __builtin_prefetch(&p->groups.e[g->newer - 1]);
}

/* Allocates room for `cap` waiting destinations. False when out of memory. */
bool mst_pend_table_init(mst_pend_table *p, uint32_t cap);
void mst_pend_table_free(mst_pend_table *p);
/* Unlinks destination i (index + 1) from its group (dropping an emptied
 * group) and from the FIFO, and frees it. */
void mst_pend_table_remove(mst_pend_table *p, uint32_t i);
/* Queues a destination under source `key`; evicts the oldest first when
 * full (*evicted). Returns the new destination. */
mst_pend_dest *mst_pend_table_add(mst_pend_table *p, const uint8_t key[24], bool *evicted);

/* The table key of a span: its trace id (32 hex digits) and span id (16),
 * as bytes; missing digits count as 0. */
void mst_link_key(const char *trace_hex, const char *span_hex, uint8_t key[24]);

#endif /* MST_FORWARD_LINK_TABLES_H */
