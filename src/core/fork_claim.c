/*
 * fork_claim.c — owns the table that decides which process exports a span
 * open across fork() (docs/architecture.md "fork()"): the first process to
 * end it claims its span id; every later one finds the claim and drops its
 * copy. The table is MAP_SHARED, mapped before the first fork that has a
 * tracer, so every process forked from here sees the same one.
 *
 * Layout: 1024 buckets of 256 bytes, a span id picks its bucket by hash.
 * A bucket is one header word (which of its 15 ways hold a committed claim,
 * which of those claims were made by a process that saw exactly one fork,
 * and a version bumped by every change), 15 span ids and, per way, the fork
 * reference of its claim (written with the id, before the commit). A claim is put in
 * a free way with a CAS on that way, then committed with a CAS on the header
 * that expects the version its scan was made under; a process that loses
 * that race undoes its way and scans again. A scan is trusted only when the
 * header did not change while it ran (a committed way changes only after a
 * header change). So the header's CAS orders every claim of the bucket, and
 * two processes ending the same span at once cannot both win. Every loop is
 * bounded (FORK_CLAIM_ATTEMPTS); past that, or with the bucket full, the
 * span is exported (maybe twice, the behaviour without the table), with one
 * warning per process.
 *
 * Slots are reused: a claim is removed by the process that finds it (loses)
 * when both it and the winner saw one fork between the span's start and
 * their end of it. Then exactly two copies ever existed: a copy exists in
 * every process forked by a holder while the span was open, and each
 * holder's fork count (tracer.c's fork epoch, raised before each fork and
 * after it in parent and child, so a fork under way counts) covers the forks
 * of its ancestors since the start plus its own. A count of one means "the
 * original that forked once" or "a child of the original that did not
 * fork", and only one of each can exist. When more forks happened the claim
 * stays (a third copy might still end the span).
 *
 * A claim whose other copy is never ended (the child exits, or execs, with
 * the span open: the common case of a fork inside a traced call) is dropped
 * when its bucket is full and another claim needs the room, if the other
 * side of its fork is gone for good (fork_record.c: that process exited and
 * was reaped, and never forked again). Each claim made after one completed
 * fork carries a reference to that fork and to the winner's side of it; a
 * claim without one stays.
 */
#include "core/fork_claim.h"

#include <stdatomic.h>
#include <sys/mman.h>

#include "core/fork_record.h"
#include "core/log.h"

#define FORK_CLAIM_BUCKET_BITS 10u
#define FORK_CLAIM_BUCKETS (1u << FORK_CLAIM_BUCKET_BITS)
#define FORK_CLAIM_WAYS 15u
#define FORK_CLAIM_ATTEMPTS 64u

/* Header: bits 0..14 committed ways, 16..30 "claimed after one fork",
 * 32..63 version. */
#define WAYS_MASK ((1ull << FORK_CLAIM_WAYS) - 1u)
#define ONE_FORK_SHIFT 16u
#define VERSION_ONE (1ull << 32)

typedef struct fork_claim_bucket {
    _Atomic uint64_t header;
    _Atomic uint64_t ids[FORK_CLAIM_WAYS];
    _Atomic uint64_t forks[FORK_CLAIM_WAYS]; /* mst_fork_record_last() of the winner, or 0 */
    uint64_t pad;
} fork_claim_bucket;

static fork_claim_bucket *g_buckets; /* shared with every forked process */
static atomic_bool g_no_room_logged;

void mst_fork_claim_map(void) {
    mst_fork_record_map();
    if (g_buckets) return;
    void *m = mmap(NULL, FORK_CLAIM_BUCKETS * sizeof(fork_claim_bucket), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        MST_WARN("cannot map the fork claim table; a span open across fork() may be exported by "
                 "each process that ends it");
        return;
    }
    g_buckets = m;
}

static uint64_t next_header(uint64_t h, uint64_t ways, uint64_t one_fork) {
    return ((h & ~0xFFFFFFFFull) + VERSION_ONE) | ways | (one_fork << ONE_FORK_SHIFT);
}

static mst_fork_claim_result no_room(void) {
    if (!atomic_exchange(&g_no_room_logged, true))
        MST_WARN("fork claim table: no room for a span open across fork() (too many such spans open at "
                 "once); it, and others like it, may be exported by each process that ends it");
    return MST_FORK_CLAIM_NO_ROOM;
}

/* The committed way of the bucket holding `key` under header h, or -1. */
static int find_committed(fork_claim_bucket *b, uint64_t h, uint64_t key) {
    for (unsigned w = 0; w < FORK_CLAIM_WAYS; w++)
        if ((h >> w & 1u) && atomic_load(&b->ids[w]) == key) return (int)w;
    return -1;
}

/* Takes a way that is free under header h (CAS 0 -> key); -1 when none is
 * (all committed, or the free ones hold other processes' claims in
 * progress). */
static int take_free_way(fork_claim_bucket *b, uint64_t h, uint64_t key) {
    for (unsigned w = 0; w < FORK_CLAIM_WAYS; w++) {
        if (h >> w & 1u) continue;
        uint64_t zero = 0;
        if (atomic_compare_exchange_strong(&b->ids[w], &zero, key)) return (int)w;
    }
    return -1;
}

/* The bucket was full under header h: drops one committed claim whose
 * other copies are gone for good (see the top of the file). False when none
 * can be dropped; true when one was, or when the bucket changed meanwhile
 * (either way: scan again). */
static bool evict_one(fork_claim_bucket *b, uint64_t h) {
    uint64_t ways = h & WAYS_MASK, flags = h >> ONE_FORK_SHIFT & WAYS_MASK;
    for (unsigned w = 0; w < FORK_CLAIM_WAYS; w++) {
        uint64_t ref = atomic_load(&b->forks[w]);
        if (atomic_load(&b->header) != h) return true; /* ref may not be this claim's */
        if (!ref || !mst_fork_record_other_side_gone(ref)) continue;
        uint64_t bit = 1ull << w;
        if (atomic_compare_exchange_strong(&b->header, &h, next_header(h, ways & ~bit, flags & ~bit))) {
            atomic_store(&b->forks[w], 0);
            atomic_store(&b->ids[w], 0);
        }
        return true;
    }
    return false;
}

mst_fork_claim_result mst_fork_claim(uint64_t key, bool one_fork, uint64_t fork_ref) {
    if (!g_buckets || key == 0) return MST_FORK_CLAIM_NO_ROOM;
    fork_claim_bucket *b = &g_buckets[(key * 0x9E3779B97F4A7C15ull) >> (64u - FORK_CLAIM_BUCKET_BITS)];
    for (unsigned attempt = 0; attempt < FORK_CLAIM_ATTEMPTS; attempt++) {
        uint64_t h = atomic_load(&b->header);
        int found = find_committed(b, h, key);
        if (atomic_load(&b->header) != h) continue; /* changed under the scan */
        uint64_t ways = h & WAYS_MASK, flags = h >> ONE_FORK_SHIFT & WAYS_MASK;
        if (found >= 0) {
            uint64_t bit = 1ull << found;
            if (!one_fork || !(flags & bit)) return MST_FORK_CLAIM_LOST;
            /* Both copies are done: free the way (only this loser does). */
            if (atomic_compare_exchange_strong(&b->header, &h, next_header(h, ways & ~bit, flags & ~bit))) {
                atomic_store(&b->forks[found], 0);
                atomic_store(&b->ids[found], 0);
                return MST_FORK_CLAIM_LOST;
            }
            continue; /* the header moved: the claim is still there, try again */
        }
        if (ways == WAYS_MASK) {
            if (evict_one(b, h)) continue;
            return no_room();
        }
        int w = take_free_way(b, h, key);
        if (w < 0) continue; /* free ways busy with claims in progress */
        atomic_store(&b->forks[w], fork_ref); /* the way is ours until the commit or undo */
        uint64_t bit = 1ull << w;
        if (atomic_compare_exchange_strong(&b->header, &h,
                                           next_header(h, ways | bit, flags | (one_fork ? bit : 0))))
            return MST_FORK_CLAIM_WON;
        atomic_store(&b->forks[w], 0); /* lost the commit: undo and scan again */
        atomic_store(&b->ids[w], 0);
    }
    return no_room();
}
