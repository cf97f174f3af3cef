/*
 * adapters.h — what the request-aware adapters read from vLLM's business
 * objects (adapters.c): a call's batch (request ids, sizes, links, scheduler
 * queues), registration of a request's context from a call's arguments, and
 * dropping finished requests.
 */
#ifndef MST_NATIVE_ADAPTERS_H
#define MST_NATIVE_ADAPTERS_H

#include "native_types.h"
#include "step_record.h"
#include "step_share.h"

typedef enum mstn_adapter {
    MSTN_AD_CALL = 0,
    MSTN_AD_REQUEST,
    MSTN_AD_REQUEST_CONTEXT,
    MSTN_AD_SCHEDULE,
    MSTN_AD_MODEL,
    MSTN_AD_OUTPUT
} mstn_adapter;

/* What an adapter learned about one call, applied to the span at its end
 * (and mirrored into the test capture). Request id pointers borrow from
 * `owned`, which holds a reference to each id string, or from `shared`. */
typedef struct mstn_batch {
    PyObject *owned[MSTN_MAX_IDS];
    const char *ids[MSTN_MAX_IDS];
    size_t id_lens[MSTN_MAX_IDS];
    size_t n_ids;
    size_t n_ids_dropped;
    size_t n_unsampled;                    /* known, unsampled: left out   */
    /* links to the requests' contexts, in the form of a link block (item =
     * index into ids); link_synthetic[k]: that context is auto-generated */
    mst_link_ref links[MSTN_MAX_LINKS];
    bool link_synthetic[MSTN_MAX_LINKS];
    size_t n_links;
    /* the links in force: `links` above, or the step share's */
    const mst_link_ref *link_at;
    const bool *synthetic_at;
    mstn_step_share *shared;               /* model: the step's batch, reused */
    /* the ids and links copied once for every span of a step (mstrace.h
     * batch blocks): schedule: its own reference (handed to the share);
     * model: the share's; NULL: the spans copy b->ids / link_at themselves */
    mst_batch_block *block;
    int64_t step_index;                    /* model: the step's, or -1     */
    bool have_step_link;                   /* model: link to the step span */
    mstn_ctx step_link;
    int64_t request_count;                 /* -1 = not set                 */
    int64_t scheduled_tokens;              /* -1 = not set                 */
    int64_t waiting, running;              /* scheduler queues; -1 = not set */
    double kv_usage;                       /* 0..1; < 0 = not set          */
    mstn_step *step;                       /* schedule: the step record; output:
                                              finished requests; else NULL  */
} mstn_batch;

void mstn_batch_init(mstn_batch *b);
/* Drops the id references and the step record, if any. */
void mstn_batch_release(mstn_batch *b);
/* Extractors: 0 on success (nothing found is success), -1 with a Python
 * exception when the hook's own logic failed. */
/* After Scheduler.schedule: the batch and the step record (b->step, taken
 * here) from its SchedulerOutput `so` and the Scheduler `sched` (NULL when
 * unknown). The record's own reads never fail (step_record.h). */
int mstn_batch_from_schedule(mstn_batch *b, PyObject *so, PyObject *sched);
/* Before the schedule span of a step: copies the batch's ids and links into
 * b->block, which that span and the step's model spans all read (left NULL
 * when out of memory: then the span copies them and nothing is shared). */
void mstn_batch_make_block(mstn_batch *b);
/* After the schedule span: hands b->block to the step share, with the
 * span's context (NULL when no span was recorded), for the model spans
 * given the same SchedulerOutput `so`. */
void mstn_batch_share_step(mstn_batch *b, PyObject *so, const mstn_ctx *step_ctx);
/* The k-th link's context in the compact form. */
void mstn_batch_link_ctx(const mstn_batch *b, size_t k, mstn_ctx *out);
/* After Scheduler.schedule: the scheduler's queue lengths (len(waiting),
 * len(running)) and KV-cache usage (kv_cache_manager.usage, 0..1). Each is
 * optional: what cannot be read is simply not recorded (never -1). */
void mstn_batch_from_scheduler(mstn_batch *b, PyObject *scheduler);
int mstn_batch_from_model_args(mstn_batch *b, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
int mstn_batch_from_output_args(mstn_batch *b, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames, PyObject **outputs_list);
/* After an output call: drop the contexts of outputs with finish_reason set. */
int mstn_finish_outputs(PyObject *outputs_list);
/* request / request_context adapters: register from the call's arguments. */
int mstn_register_from_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                            bool skip_self, bool kw_allowed, const mst_scope *span_scope);

#endif /* MST_NATIVE_ADAPTERS_H */
