/*
 * fork_record.c — owns the records of the fork()s of a traced process
 * family, kept in memory shared by every process forked from here
 * (MAP_SHARED, mapped before the first fork that has a tracer): for each
 * fork, the pid of its parent and of its child and whether either forked
 * again afterwards. The fork claim table uses them to drop a claim whose
 * other copies are gone: a span open across a fork whose child exited (or
 * exec'd and exited) without ending it would otherwise hold its slot for
 * ever. See fork_claim.c for why that is safe.
 *
 * A record is found by the fork's sequence number (a shared counter) modulo
 * the table size; a later fork may take the slot over, so every read is
 * checked against the sequence number before and after (the writer zeroes
 * it first, then writes the fields, then the new number). A record that was
 * overwritten, or whose child sees pids differently from its parent (a new
 * pid namespace), answers "not known", which keeps the claim.
 */
#include "core/fork_record.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"

#define FORK_RECORDS 4096u
#define FORKED_AGAIN_PARENT 1u
#define FORKED_AGAIN_CHILD 2u
#define PID_UNUSABLE (-1)

typedef struct fork_record {
    _Atomic uint64_t seq;          /* the fork this describes; 0 while written */
    _Atomic int32_t parent_pid;
    _Atomic int32_t child_pid;     /* 0 until the child wrote it; PID_UNUSABLE */
    _Atomic uint32_t forked_again; /* FORKED_AGAIN_* */
} fork_record;

typedef struct fork_records {
    _Atomic uint64_t next_seq;
    fork_record records[FORK_RECORDS];
} fork_records;

static fork_records *g_records; /* shared with every forked process */
/* Written only by the fork handlers (under the fork registry lock), read by
 * span ends on any thread: tracer.c reads them between two reads of its
 * fork epoch, which is odd while they change. */
static _Atomic uint64_t g_last_seq;      /* the last fork this process took part in */
static atomic_bool g_last_was_child;     /* ... as its child */
static uint64_t g_pending_seq;           /* the fork under way (handlers only) */

void mst_fork_record_map(void) {
    if (g_records) return;
    void *m = mmap(NULL, sizeof *g_records, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        MST_WARN("cannot map the fork records; claims of spans open across fork() are kept until "
                 "the table needs their room");
        return;
    }
    g_records = m;
}

static fork_record *record_of(uint64_t seq) { return &g_records->records[seq % FORK_RECORDS]; }

void mst_fork_record_before_fork(void) {
    g_pending_seq = 0;
    if (!g_records) return;
    uint64_t last_seq = atomic_load(&g_last_seq);
    if (last_seq) {
        fork_record *last = record_of(last_seq);
        /* Set before this fork copies the process, so a reader that sees the
         * flag clear after this process is gone knows it never forked. */
        if (atomic_load(&last->seq) == last_seq)
            atomic_fetch_or(&last->forked_again,
                            atomic_load(&g_last_was_child) ? FORKED_AGAIN_CHILD : FORKED_AGAIN_PARENT);
    }
    uint64_t seq = atomic_fetch_add(&g_records->next_seq, 1) + 1;
    fork_record *r = record_of(seq);
    atomic_store(&r->seq, 0);
    atomic_store(&r->parent_pid, (int32_t)getpid());
    atomic_store(&r->child_pid, 0);
    atomic_store(&r->forked_again, 0);
    atomic_store(&r->seq, seq);
    g_pending_seq = seq;
}

void mst_fork_record_after_fork(bool in_child) {
    uint64_t seq = g_pending_seq;
    g_pending_seq = 0;
    atomic_store(&g_last_seq, seq);
    atomic_store(&g_last_was_child, in_child);
    if (!in_child || !seq) return;
    fork_record *r = record_of(seq);
    if (atomic_load(&r->seq) != seq) return;
    /* Our parent's pid as we see it must be the one it wrote, or the two
     * sides do not share pid numbers: then neither may judge the other. */
    bool same_view = getppid() == (pid_t)atomic_load(&r->parent_pid);
    atomic_store(&r->child_pid, same_view ? (int32_t)getpid() : PID_UNUSABLE);
}

uint64_t mst_fork_record_last(void) {
    uint64_t seq = atomic_load(&g_last_seq);
    return g_records && seq ? seq << 1 | (atomic_load(&g_last_was_child) ? 1u : 0u) : 0;
}

/* kill(pid, 0) == ESRCH: no such process (exited and reaped). A zombie, or a
 * process of another user (EPERM), still counts as there. */
static bool pid_gone(int32_t pid) {
    return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

bool mst_fork_record_other_side_gone(uint64_t ref) {
    if (!g_records || !ref) return false;
    uint64_t seq = ref >> 1;
    bool winner_was_child = ref & 1u;
    fork_record *r = record_of(seq);
    if (atomic_load(&r->seq) != seq) return false;
    int32_t other = winner_was_child ? atomic_load(&r->parent_pid) : atomic_load(&r->child_pid);
    if (atomic_load(&r->child_pid) == PID_UNUSABLE || !pid_gone(other)) return false;
    /* Read after the other side is known gone: it can set the flag no more. */
    uint32_t again = atomic_load(&r->forked_again);
    bool forked = again & (winner_was_child ? FORKED_AGAIN_PARENT : FORKED_AGAIN_CHILD);
    return !forked && atomic_load(&r->seq) == seq;
}
