/*
 * pid_roles.h — the role of each process of one trace file, from its
 * process name ("engine_core (vllm)" -> "engine_core"): the Chrome JSON
 * reader's process_name events and the .pftrace reader's process track
 * descriptors both fill one. A hash keyed by pid, so a trace with any
 * number of processes costs the same per span; it grows with the distinct
 * pids it is given (the first name of a pid wins).
 */
#ifndef MST_ANALYZE_PID_ROLES_H
#define MST_ANALYZE_PID_ROLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/record.h"

typedef struct mst_an_pid_role {
    int64_t pid;
    char *role; /* malloc'd, NUL-terminated; NULL = an empty slot */
    size_t len;
} mst_an_pid_role;

typedef struct mst_an_pid_roles {
    mst_an_pid_role *slots;
    size_t cap, count;   /* cap: 0 or a power of two */
} mst_an_pid_roles;

/* Records the role part of process `pid`'s name (up to " (") unless the
 * pid has one already; false only when out of memory. */
bool mst_an_pid_roles_set(mst_an_pid_roles *t, int64_t pid, const char *name, size_t len);
/* The role of `pid` (not NUL-counted length in ->len), NULL when unknown. */
const mst_an_pid_role *mst_an_pid_roles_get(const mst_an_pid_roles *t, int64_t pid);
void mst_an_pid_roles_free(mst_an_pid_roles *t);

#endif /* MST_ANALYZE_PID_ROLES_H */
