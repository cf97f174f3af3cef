/*
 * fork_record.h — what each fork() of a traced process family was
 * (fork_record.c): the pids of its two sides and whether either side forked
 * again, in memory shared by every process forked from here. The fork claim
 * table (fork_claim.c) asks it whether a claim can still be needed.
 */
#ifndef MST_CORE_FORK_RECORD_H
#define MST_CORE_FORK_RECORD_H

#include <stdbool.h>
#include <stdint.h>

/* Maps the shared records if not mapped yet (before a fork, with the fork
 * registry lock held). On failure nothing is recorded: every question below
 * is answered "not known". */
void mst_fork_record_map(void);
/* fork_prepare: records the fork about to happen (this process's pid as its
 * parent side) and marks the last fork this process took part in as "forked
 * again" on this process's side. */
void mst_fork_record_before_fork(void);
/* fork_parent / fork_child: the fork just done is now this process's last;
 * the child also writes its pid (or marks the record unusable when its view
 * of pids differs from its parent's, as in a new pid namespace). */
void mst_fork_record_after_fork(bool in_child);
/* A reference to this process's side of the last fork it took part in, or 0
 * when none is recorded. Atomic reads, no syscall; the caller makes sure no
 * fork ran meanwhile (tracer.c: its fork epoch, odd while one is under way,
 * read before and after). */
uint64_t mst_fork_record_last(void);
/* True only when no process on the other side of `ref`'s fork can ever run
 * again: its process has exited and been reaped (kill(pid, 0) says ESRCH),
 * and it had not forked again. False when unknown. Makes a syscall; for
 * slow paths only. */
bool mst_fork_record_other_side_gone(uint64_t ref);

#endif /* MST_CORE_FORK_RECORD_H */
