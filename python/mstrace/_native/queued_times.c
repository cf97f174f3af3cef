/*
 * queued_times.c — the bounded store of when requests reached the scheduler
 * (see queued_times.h). A ring of MSTN_QUEUED_CAPACITY fixed-size entries in
 * arrival order, indexed by a chained hash (chains as entry indexes + 1, so
 * a zeroed bucket array is empty): put, take and overwriting the oldest are
 * O(1) and nothing is allocated after the ring (about 1 MB, on first use).
 *
 * Separate from the request table (reqtable.c) because it holds every
 * request the scheduler receives, traced or not, and only until its first
 * scheduling step; the request table holds trace contexts until a request
 * finishes.
 *
 * Protected by the GIL (see native_types.h).
 */
#include "queued_times.h"
#include "reqtable.h"

#include <stdlib.h>
#include <string.h>

#define QT_BUCKETS 16384u /* power of two, > capacity */

typedef struct qt_entry {
    uint32_t chain;     /* next entry of the bucket + 1; 0 = end */
    bool live;
    uint16_t len;
    uint64_t hash;
    uint64_t ns;
    char key[MSTN_QUEUED_KEY_MAX];
} qt_entry;

static qt_entry *g_ring;
static uint32_t g_bucket[QT_BUCKETS];
static uint32_t g_next; /* the ring slot written next (the oldest when full) */
static mstn_queued_stats g_stats;

static uint32_t *bucket_of(uint64_t h) { return &g_bucket[h & (QT_BUCKETS - 1)]; }

static qt_entry *find(const char *id, size_t len, uint64_t h) {
    for (uint32_t i = *bucket_of(h); i; i = g_ring[i - 1].chain) {
        qt_entry *e = &g_ring[i - 1];
        if (e->hash == h && e->len == len && memcmp(e->key, id, len) == 0)
            return e;
    }
    return NULL;
}

static void unlink_entry(qt_entry *e) {
    uint32_t self = (uint32_t)(e - g_ring) + 1;
    uint32_t *pp = bucket_of(e->hash);
    while (*pp != self)
        pp = &g_ring[*pp - 1].chain;
    *pp = e->chain;
    e->chain = 0;
    e->live = false;
}

void mstn_queued_put(const char *id, size_t len, uint64_t ns) {
    if (len > MSTN_QUEUED_KEY_MAX) {
        g_stats.skipped++;
        return;
    }
    if (!g_ring && !(g_ring = calloc(MSTN_QUEUED_CAPACITY, sizeof *g_ring))) {
        g_stats.skipped++;
        return;
    }
    g_stats.recorded++;
    uint64_t h = mstn_id_hash(id, len);
    qt_entry *e = find(id, len, h);
    if (e) { /* EngineCore.add_request, then Scheduler.add_request: the later wins */
        e->ns = ns;
        return;
    }
    e = &g_ring[g_next];
    g_next = (g_next + 1) % MSTN_QUEUED_CAPACITY;
    if (e->live) {
        unlink_entry(e);
        g_stats.overwritten++;
    }
    memcpy(e->key, id, len);
    e->len = (uint16_t)len;
    e->hash = h;
    e->ns = ns;
    e->live = true;
    e->chain = *bucket_of(h);
    *bucket_of(h) = (uint32_t)(e - g_ring) + 1;
}

bool mstn_queued_take(const char *id, size_t len, uint64_t *ns) {
    if (!g_ring || len > MSTN_QUEUED_KEY_MAX)
        return false;
    qt_entry *e = find(id, len, mstn_id_hash(id, len));
    if (!e)
        return false;
    *ns = e->ns;
    unlink_entry(e);
    g_stats.taken++;
    return true;
}

void mstn_queued_clear(void) {
    memset(g_bucket, 0, sizeof g_bucket);
    if (g_ring)
        memset(g_ring, 0, MSTN_QUEUED_CAPACITY * sizeof *g_ring);
    g_next = 0;
    memset(&g_stats, 0, sizeof g_stats);
}

void mstn_queued_stats_get(mstn_queued_stats *out) { *out = g_stats; }
