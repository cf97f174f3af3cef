/*
 * fork_claim.h — which process exports a span that was open across fork()
 * (fork_claim.c): a table in memory shared by every process forked from
 * here, where the first process to end such a span claims its id.
 */
#ifndef MST_CORE_FORK_CLAIM_H
#define MST_CORE_FORK_CLAIM_H

#include <stdbool.h>
#include <stdint.h>

typedef enum mst_fork_claim_result {
    MST_FORK_CLAIM_WON,     /* first to end it: export it                   */
    MST_FORK_CLAIM_LOST,    /* another process ended it first: drop it       */
    MST_FORK_CLAIM_NO_ROOM, /* table unmapped, its bucket full or contended:
                             * export it (another copy may be exported too)  */
} mst_fork_claim_result;

/* Maps the shared table (and the fork records) if not mapped yet; called
 * before a fork() with the fork registry lock held (so never twice at once).
 * On failure the table stays unmapped and every claim answers
 * MST_FORK_CLAIM_NO_ROOM. */
void mst_fork_claim_map(void);

/* Claims span id `key` (nonzero) for this process. `one_fork`: no more than
 * one fork() began in this process's history between the span's start and
 * now (counting one under way). When this process loses and both it and the
 * winner saw one fork, no third copy can exist and the entry is removed, so
 * the slot is free again. `fork_ref`: when exactly one fork completed since
 * the start, mst_fork_record_last() (that fork and this process's side of
 * it), else 0; a claim with one can be dropped once the other side of that
 * fork is gone for good. Lock-free, bounded work; no syscall unless the
 * span's bucket is full. */
mst_fork_claim_result mst_fork_claim(uint64_t key, bool one_fork, uint64_t fork_ref);

#endif /* MST_CORE_FORK_CLAIM_H */
