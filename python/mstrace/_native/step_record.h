/*
 * step_record.h — the step record (docs/architecture.md "1a"): what the
 * scheduler decided in one `Scheduler.schedule` call, read in C from vLLM's
 * SchedulerOutput and the scheduler's Request objects and written on the
 * `vllm.scheduler.schedule` span (step.*, scheduler.max_*), and the finished
 * requests of an output call (output.finished_ids / finish_reasons).
 * Defined in step_record.c.
 *
 * Strings are borrowed from Python objects the record holds a reference to
 * until it is released (the collections read, each new request's id);
 * numbers are kept as decimal text in the record's own pool. A record is big
 * (~180 KB), so it is one static buffer (GIL-protected) with a heap one for
 * the rare call that overlaps it (another thread scheduling while a property
 * of this one runs Python code).
 */
#ifndef MST_NATIVE_STEP_RECORD_H
#define MST_NATIVE_STEP_RECORD_H

#include "native_types.h"

/* Decimal text of an int64: sign, 19 digits, NUL. */
#define MSTN_NUM_TEXT 21

/* Ids borrowed from Python strings; items over MSTN_MAX_IDS are left out. */
typedef struct mstn_id_list {
    const char *s[MSTN_MAX_IDS];
    size_t n;
} mstn_id_list;

typedef struct mstn_step {
    bool is_step;                          /* a schedule call (step.* written) */
    int64_t index;                         /* step.index                       */
    /* parallel to the batch's request.ids */
    const char *tokens[MSTN_MAX_IDS];      /* step.tokens (decimal text)       */
    size_t token_lens[MSTN_MAX_IDS];
    size_t n_tokens;
    char phase[MSTN_MAX_IDS + 1];          /* step.phase: p / P / d per id     */
    size_t n_phase;
    bool phase_ok;                         /* every phase read                 */
    PyObject *requests;                    /* scheduler.requests (new ref) or NULL */
    /* first scheduled, with their parallel lists */
    mstn_id_list new_ids;
    const char *prefix_hits[MSTN_MAX_IDS]; /* step.prefix_hit_tokens           */
    bool hits_ok;
    const char *queued[MSTN_MAX_IDS];      /* step.queued_ns ("0" = unknown)   */
    size_t n_queued_known;
    mstn_id_list resumed, preempted, finished;
    int64_t max_num_seqs, max_num_batched_tokens; /* -1 = not read             */
    /* references that keep the borrowed strings alive */
    PyObject *held[8];                     /* collections read                 */
    size_t n_held;
    PyObject *owned[MSTN_MAX_IDS];         /* ids read from NewRequestData     */
    size_t n_owned;
    /* output call */
    mstn_id_list out_finished;
    const char *reasons[MSTN_MAX_IDS];     /* output.finish_reasons            */
    /* decimal text of the numbers above */
    char pool[3 * MSTN_MAX_IDS * MSTN_NUM_TEXT];
    size_t pool_used;
} mstn_step;

/* A cleared record (the static one when free, else from the heap), or NULL
 * when out of memory (then nothing of it is recorded). */
mstn_step *mstn_step_acquire(void);
/* Drops the record's references and gives it back. NULL is fine. */
void mstn_step_release(mstn_step *st);

/* Start of a schedule call's record: its step.index (+1 per call of this
 * process); from the Scheduler `sched` (NULL when unknown) the requests dict
 * the phases are read from; from the SchedulerOutput `so` (or NULL) the new
 * (with prefix hits and queued times) and resumed ids — read before the
 * scheduled requests, as a restarting request is no longer decoding. */
void mstn_step_begin(mstn_step *st, PyObject *so, PyObject *sched);
/* One scheduled request (`key` → `tokens` of num_scheduled_tokens), in the
 * order and with the same filtering as the batch's request.ids. */
void mstn_step_scheduled(mstn_step *st, PyObject *key, PyObject *tokens);
/* The rest of the record from the SchedulerOutput `so`: preempted and
 * finished ids; and from `sched` (or NULL) the limits in force. Never fails:
 * what cannot be read is not recorded. */
void mstn_step_finish(mstn_step *st, PyObject *so, PyObject *sched);

/* Forgets which requests are decoding (tests: _reset_requests). */
void mstn_step_forget_all(void);

/* One output of an output call with finish_reason set: its request id (as
 * recorded in request.ids, borrowed) and its reason. */
void mstn_step_output_finished(mstn_step *st, const char *id, PyObject *reason);

/* Writes the record's attributes on `span`; n_ids is the batch's request.ids
 * count, the length the parallel lists must have. */
void mstn_step_apply(const mstn_step *st, mst_span *span, size_t n_ids);

#endif /* MST_NATIVE_STEP_RECORD_H */
