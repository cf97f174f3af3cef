/*
 * link_tables.c — the bounded link tables of the Chrome Trace writer
 * (link_tables.h): span positions, the "already named" set and the links
 * waiting for their source span.
 *
 * Each mst_track_table is an open-addressing hash index (seeded hash,
 * linear probing, backward-shift deletion) over a fixed pool with an
 * intrusive FIFO list, so find/insert/remove are O(1) on average and the
 * oldest entry is evicted (and reported) when the table is full. Pending
 * links are two-level, because many spans may link to one source that never
 * arrives (every schedule span links to a long-lived request): a hash table
 * of distinct source keys ("groups"), each owning a doubly linked list of
 * waiting destinations (pid, tid, start, span_id) kept in a pool with its
 * own global FIFO; so a long list under one key never lengthens a hash
 * chain and evicting the oldest destination is O(1). The pools are
 * calloc'd or lazily backed, so untouched pages cost no memory.
 */
#include "forward/link_tables.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

bool mst_track_table_init(mst_track_table *t, uint32_t cap) {
    memset(t, 0, sizeof *t);
    uint32_t nb = 16;
    while (nb < cap * 2u && nb < (1u << 30)) nb <<= 1;
    /* Entries are fully written when handed out, so the pool needs no
     * zeroing (and big allocations come from mmap: lazily backed). */
    t->e = aligned_alloc(64, ((size_t)cap * sizeof *t->e + 63) & ~(size_t)63);
    t->slots = calloc(nb, sizeof *t->slots);
    if (!t->e || !t->slots) {
        free(t->e);
        free(t->slots);
        memset(t, 0, sizeof *t);
        return false;
    }
    t->mask = nb - 1;
    t->cap = cap;
    /* Per-table random seed: ids come from other processes, so a fixed hash
     * would let a client craft colliding keys and long probe runs. */
    uint64_t seed = (uint64_t)(uintptr_t)t->e ^ ((uint64_t)getpid() << 32);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t->seed = seed ^ (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull;
    return true;
}

void mst_track_table_free(mst_track_table *t) {
    free(t->e);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* Empties slot `hole` and shifts later members of its probe run back so
 * every entry stays reachable from its home slot (Knuth's algorithm R). */
static void slots_delete(mst_track_table *t, uint32_t hole) {
    uint32_t j = hole;
    for (;;) {
        j = (j + 1) & t->mask;
        uint64_t sl = t->slots[j];
        if (!sl) break;
        uint32_t home = (uint32_t)(sl >> 32) & t->mask;
        /* The entry at j may fill the hole unless its home lies cyclically
         * in (hole, j]. */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays) continue;
        t->slots[hole] = sl;
        hole = j;
    }
    t->slots[hole] = 0;
}

/* Removes entry `i` (index + 1) from the slots and the FIFO list. */
void mst_track_table_remove(mst_track_table *t, uint32_t i) {
    mst_track_entry *x = &t->e[i - 1];
    uint32_t pos = mst_track_key_hash(t, x->key) & t->mask;
    while ((uint32_t)t->slots[pos] != i) pos = (pos + 1) & t->mask;
    slots_delete(t, pos);
    if (x->older) {
        t->e[x->older - 1].newer = x->newer;
    } else {
        t->oldest = x->newer;
        if (x->newer) __builtin_prefetch(&t->e[x->newer - 1]); /* the next victim */
    }
    if (x->newer) t->e[x->newer - 1].older = x->older; else t->newest = x->older;
    x->older = t->free_head;
    t->free_head = i;
    t->count--;
}

/* Adds a new entry for key (the caller checked it is absent); evicts the
 * oldest first when full. Returns index + 1. */
uint32_t mst_track_table_insert(mst_track_table *t, const uint8_t key[24], bool *evicted) {
    *evicted = false;
    if (t->count == t->cap) {
        mst_track_table_remove(t, t->oldest);
        *evicted = true;
    }
    uint32_t i;
    if (t->free_head) {
        i = t->free_head;
        t->free_head = t->e[i - 1].older;
    } else {
        i = ++t->used;
    }
    mst_track_entry *x = &t->e[i - 1];
    memcpy(x->key, key, 24);
    uint32_t h = mst_track_key_hash(t, key);
    uint32_t pos = h & t->mask;
    while (t->slots[pos]) pos = (pos + 1) & t->mask;
    t->slots[pos] = ((uint64_t)h << 32) | i;
    x->older = t->newest;
    x->newer = 0;
    x->first = x->last = 0;
    if (t->newest) t->e[t->newest - 1].newer = i; else t->oldest = i;
    t->newest = i;
    t->count++;
    return i;
}

bool mst_pend_table_init(mst_pend_table *p, uint32_t cap) {
    memset(p, 0, sizeof *p);
    p->d = calloc(cap, sizeof *p->d);
    if (!p->d || !mst_track_table_init(&p->groups, cap)) {
        free(p->d);
        p->d = NULL;
        return false;
    }
    p->cap = cap;
    return true;
}

void mst_pend_table_free(mst_pend_table *p) {
    mst_track_table_free(&p->groups);
    free(p->d);
    memset(p, 0, sizeof *p);
}

/* Unlinks destination i (index + 1) from its group (dropping an emptied
 * group) and from the FIFO, and frees it. */
void mst_pend_table_remove(mst_pend_table *p, uint32_t i) {
    mst_pend_dest *x = &p->d[i - 1];
    mst_track_entry *g = &p->groups.e[x->group - 1];
    if (x->g_prev) p->d[x->g_prev - 1].g_next = x->g_next; else g->first = x->g_next;
    if (x->g_next) p->d[x->g_next - 1].g_prev = x->g_prev; else g->last = x->g_prev;
    if (!g->first) mst_track_table_remove(&p->groups, x->group);
    if (x->older) {
        p->d[x->older - 1].newer = x->newer;
    } else {
        p->oldest = x->newer;
        if (x->newer) __builtin_prefetch(&p->d[x->newer - 1]); /* the next victim */
    }
    if (x->newer) p->d[x->newer - 1].older = x->older; else p->newest = x->older;
    x->older = p->free_head;
    p->free_head = i;
    p->count--;
}

/* Queues a destination under source `key`; evicts the oldest first when
 * full (*evicted). Returns the new destination. */
mst_pend_dest *mst_pend_table_add(mst_pend_table *p, const uint8_t key[24], bool *evicted) {
    *evicted = false;
    if (p->count == p->cap) {
        mst_pend_table_remove(p, p->oldest);
        *evicted = true;
    }
    uint32_t g = mst_track_table_find(&p->groups, key);
    if (!g) {
        bool unused; /* groups <= destinations < cap: never evicts */
        g = mst_track_table_insert(&p->groups, key, &unused);
        p->groups.e[g - 1].first = p->groups.e[g - 1].last = 0;
    }
    uint32_t i;
    if (p->free_head) {
        i = p->free_head;
        p->free_head = p->d[i - 1].older;
    } else {
        i = ++p->used;
    }
    mst_pend_dest *x = &p->d[i - 1];
    mst_track_entry *ge = &p->groups.e[g - 1];
    x->group = g;
    x->g_next = 0;
    x->g_prev = ge->last;
    if (ge->last) p->d[ge->last - 1].g_next = i; else ge->first = i;
    ge->last = i;
    x->newer = 0;
    x->older = p->newest;
    if (p->newest) p->d[p->newest - 1].newer = i; else p->oldest = i;
    p->newest = i;
    p->count++;
    return x;
}

/* Hex digit values (any case; every other byte 0, as before). */
static const uint8_t hexval_tbl[256] = {
    ['0'] = 0, ['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 5, ['6'] = 6, ['7'] = 7,
    ['8'] = 8, ['9'] = 9, ['a'] = 10, ['b'] = 11, ['c'] = 12, ['d'] = 13, ['e'] = 14,
    ['f'] = 15, ['A'] = 10, ['B'] = 11, ['C'] = 12, ['D'] = 13, ['E'] = 14, ['F'] = 15};

/* Up to 2n hex digits (stopping at a NUL; missing digits count as 0). */
static void hex_to_bytes(const char *hex, uint8_t *out, size_t n) {
    const uint8_t *h = (const uint8_t *)hex;
    size_t i = 0;
    for (; i < n && h[0] && h[1]; i++, h += 2)
        out[i] = (uint8_t)((hexval_tbl[h[0]] << 4) | hexval_tbl[h[1]]);
    if (i < n && h[0]) out[i++] = (uint8_t)(hexval_tbl[h[0]] << 4);
    for (; i < n; i++) out[i] = 0;
}

void mst_link_key(const char *trace_hex, const char *span_hex, uint8_t key[24]) {
    hex_to_bytes(trace_hex, key, 16);
    hex_to_bytes(span_hex, key + 16, 8);
}
