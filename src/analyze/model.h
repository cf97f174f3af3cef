/*
 * model.h — the step/request model of `mstrace analyze`. Spans go in one at
 * a time (mst_an_model_add_span, an mst_an_span_fn); the model keeps only
 * compact records of the spans it understands (engine steps, executor and
 * worker spans, output batches, request spans), per-name histograms of all
 * spans, and interned request ids — so memory grows with steps and
 * requests, not with file bytes. mst_an_model_finish then builds:
 *
 *   steps    one per `vllm.scheduler.schedule` span of an engine process:
 *            window [this schedule start, next schedule start) on that
 *            process, split into schedule (schedule + update_from_output),
 *            model (the workers' forward: worker.execute_model, else
 *            model_runner.execute, else the executor spans), ipc (the
 *            executor's model.execute..sample_tokens window minus the
 *            forward), output (API-server output.process spans starting in
 *            the window) and waiting (window time in no hook span while this
 *            and the next step both had requests: the host bubble);
 *   requests from `vllm.request` / `llm_request` spans (request.id,
 *            request.external_id, gen_ai.request.id) and the request.ids of
 *            step and output spans: arrival, queue, TTFT, TPOT, e2e, steps,
 *            sharing.
 * docs/analyze.md explains every definition.
 */
#ifndef MST_ANALYZE_MODEL_H
#define MST_ANALYZE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/input_info.h"
#include "analyze/record.h"
#include "analyze/stats.h"

enum { MST_AN_SCHEDULE = 0, MST_AN_MODEL, MST_AN_IPC, MST_AN_OUTPUT, MST_AN_WAITING, MST_AN_STAGES };
extern const char *const mst_an_stage_names[MST_AN_STAGES];

typedef enum mst_an_step_kind { MST_AN_DECODE = 0, MST_AN_PREFILL, MST_AN_MIXED } mst_an_step_kind;

typedef struct mst_an_proc {
    uint32_t source;
    int64_t pid;
    char *role;          /* malloc'd, "" when unknown */
    uint64_t spans;
} mst_an_proc;

typedef struct mst_an_step {
    uint32_t proc;           /* engine process (index into procs) */
    uint32_t model_proc;     /* the worker whose forward was longest (or proc) */
    uint32_t output_proc;    /* the process of its output spans (or proc) */
    int64_t start_ns, end_ns;/* window start; end of the last span of the step */
    int64_t model_start_ns, model_end_ns;
    int64_t output_start_ns, output_end_ns; /* its output spans; INT64_MIN when none */
    double stage_ms[MST_AN_STAGES];
    double wall_ms;          /* window length used for shares */
    int32_t batch_size;      /* batch.request_count (else the ids' count) */
    int32_t scheduled_tokens;/* batch.scheduled_tokens, -1 when absent */
    uint8_t kind;            /* mst_an_step_kind */
    bool busy;               /* batch_size > 0 */
    bool paired;             /* the next step on this engine was busy too */
    uint32_t ids_off, ids_n; /* request indices in model->ids */
} mst_an_step;

typedef struct mst_an_request {
    uint32_t id_off, id_len; /* in model->strings */
    bool has_span;
    uint32_t span_proc;
    int64_t arrival_ns, finish_ns;   /* request span; INT64_MIN unknown */
    int64_t first_step_ns, first_step_done_ns, last_step_done_ns;
    int64_t first_out_ns, last_out_ns;
    uint32_t n_steps, n_outputs, max_shared;
    uint64_t shared_sum;
    double stage_ms[MST_AN_STAGES];  /* over its steps */
    /* derived by finish; NaN when unknown */
    double queue_ms, ttft_ms, tpot_ms, e2e_ms;
} mst_an_request;

typedef struct mst_an_name_stat {
    char *name;
    uint64_t count;
    double total_ms, max_ms;
    mst_an_hist *hist;
} mst_an_name_stat;

typedef struct mst_an_model mst_an_model;

mst_an_model *mst_an_model_new(void);
void mst_an_model_free(mst_an_model *m);
/* The reader callback (ctx = the model). */
mst_status mst_an_model_add_span(void *model, const mst_an_span *s);
/* Records an input's report (the model takes ownership of *info and
 * clears it). Call in input order after reading it. */
mst_status mst_an_model_add_input(mst_an_model *m, mst_an_input_info *info);
/* Builds steps and requests; call once after the last span. */
mst_status mst_an_model_finish(mst_an_model *m);

/* Read access for the rules and writers (valid after finish). */
typedef struct mst_an_view {
    const mst_an_input_info *inputs;
    size_t n_inputs;
    const mst_an_proc *procs;
    size_t n_procs;
    const mst_an_name_stat *names;
    size_t n_names;
    const mst_an_step *steps;    /* grouped by engine, in time order */
    size_t n_steps;
    const mst_an_request *requests;
    size_t n_requests;
    const uint32_t *ids;
    const char *strings;
    uint64_t spans;
    uint64_t traces;             /* distinct trace ids (counted up to a cap) */
    uint64_t short_traces;       /* of them with 1-2 spans */
    uint64_t negative_gaps;      /* overlapping steps on one engine, queue < 0 */
    uint64_t bad_times;          /* spans left out: times beyond +-2^62 ns */
    uint64_t requests_with_span; /* requests seen as request spans */
    uint64_t unjoined;           /* request spans whose id no step carries */
    uint64_t steps_without_ids;  /* busy steps with no request.ids */
    size_t n_engines;
    bool have_worker_spans;      /* model time is the workers' forward */
} mst_an_view;
void mst_an_model_view(const mst_an_model *m, mst_an_view *out);

#endif /* MST_ANALYZE_MODEL_H */
