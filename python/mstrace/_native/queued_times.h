/*
 * queued_times.h — when each request reached the scheduler (queued_times.c):
 * request id -> Unix ns of its Scheduler.add_request, kept until the step that
 * first schedules it takes it (`step.queued_ns`). Bounded: 8,192 requests
 * waiting to be scheduled, the oldest overwritten; ids longer than 96 bytes
 * are not kept.
 */
#ifndef MST_NATIVE_QUEUED_TIMES_H
#define MST_NATIVE_QUEUED_TIMES_H

#include "native_types.h"

#define MSTN_QUEUED_CAPACITY 8192u
#define MSTN_QUEUED_KEY_MAX 96u

typedef struct mstn_queued_stats {
    uint64_t recorded;      /* puts                                          */
    uint64_t taken;         /* found by the step that first scheduled them   */
    uint64_t overwritten;   /* the oldest, never scheduled, made room        */
    uint64_t skipped;       /* id too long, or no memory                     */
} mstn_queued_stats;

/* Records (or refreshes) `ns` for `id`. */
void mstn_queued_put(const char *id, size_t len, uint64_t ns);
/* The time recorded for `id` into *ns, and forgets it; false when none. */
bool mstn_queued_take(const char *id, size_t len, uint64_t *ns);
void mstn_queued_clear(void);
void mstn_queued_stats_get(mstn_queued_stats *out);

#endif /* MST_NATIVE_QUEUED_TIMES_H */
