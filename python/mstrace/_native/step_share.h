/*
 * step_share.h — the batch of the last scheduling step, kept so that the
 * model spans of the same step reuse it instead of reading the
 * SchedulerOutput again (step_share.c).
 */
#ifndef MST_NATIVE_STEP_SHARE_H
#define MST_NATIVE_STEP_SHARE_H

#include "native_types.h"

/* What the schedule adapter read of one step, reference-counted: the
 * current step holds one reference, each model batch using it another. */
typedef struct mstn_step_share {
    uint32_t refs;
    PyObject *so;                        /* the SchedulerOutput (strong ref) */
    mst_batch_block *block;              /* the ids and request links (one
                                            block reference)                 */
    size_t n_ids, n_ids_dropped, n_unsampled;
    int64_t request_count, scheduled_tokens;
    bool link_synthetic[MSTN_MAX_LINKS]; /* of the block's links             */
    size_t n_links;
    int64_t step_index;                  /* -1: none                         */
    bool have_step_ctx;
    mstn_ctx step_ctx;                   /* the schedule span's context      */
} mstn_step_share;

/* A fresh share with one reference (the caller's), or NULL when out of
 * memory (then the model spans read the SchedulerOutput themselves). */
mstn_step_share *mstn_share_new(void);
/* Makes `sh` (with its reference, taken over) the current step: what a
 * model span given `sh->so` reuses. The previous step's reference is
 * dropped. */
void mstn_share_publish(mstn_step_share *sh);
/* The current step when `so` is its SchedulerOutput (a new reference for
 * the caller), else NULL. */
mstn_step_share *mstn_share_find(PyObject *so);
/* Drops one reference; the last one releases the block and the
 * SchedulerOutput. NULL is fine. */
void mstn_share_release(mstn_step_share *sh);
/* Forgets the current step (tests: _reset_requests). */
void mstn_share_forget(void);

#endif /* MST_NATIVE_STEP_SHARE_H */
