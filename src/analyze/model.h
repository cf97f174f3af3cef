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

/* The step record of a schedule span (docs/architecture.md "1a"): what the
 * scheduler decided, when the span carries it. Offsets index the view's
 * `ids` (parallel to ids: `id_tokens`, `id_phase`); step.queued_ns of the
 * new ids is at `queued_off` in `new_queued_ns`. Unknown counts are -1,
 * kv_usage NaN. */
typedef struct mst_an_step_record {
    int64_t index;                 /* step.index, -1 when absent */
    int32_t waiting, running;      /* scheduler.waiting / scheduler.running */
    int32_t max_num_seqs, max_num_batched_tokens;
    double kv_usage;               /* kv_cache.usage 0..1 */
    int32_t prefill_tokens, decode_tokens; /* from step.tokens x step.phase */
    uint32_t new_off, new_n;       /* step.new_ids */
    uint32_t queued_off, queued_n; /* step.queued_ns, parallel to the new ids */
    uint32_t resumed_off, resumed_n, preempted_off, preempted_n;
    bool has_phase;                /* step.phase (and step.tokens) given */
} mst_an_step_record;

typedef struct mst_an_step {
    uint32_t proc;           /* engine process (index into procs) */
    uint32_t model_proc;     /* the worker whose forward was longest (or proc) */
    uint32_t output_proc;    /* the process of its output spans (or proc) */
    int64_t start_ns, end_ns;/* window start; end of the last span of the step */
    int64_t model_start_ns, model_end_ns;
    int64_t output_start_ns, output_end_ns; /* its output spans; INT64_MIN when none */
    int64_t token_ns;        /* when its tokens were output: end of update_from_output (else end_ns) */
    int64_t engine_end_ns;   /* end of the engine's own spans of the step (its host gap starts here) */
    /* schedule, model, ipc and waiting split wall_ms exactly (they sum to
     * it); output is the API server's work, concurrent with the engine. */
    double stage_ms[MST_AN_STAGES];
    double wall_ms;          /* window length used for shares */
    double output_overlap_ms;/* time of the window in which the API server's output loop was busy */
    double gap_output_ms;    /* of the host gap (engine_end..next start), time the output loop was busy */
    uint32_t ordinal;        /* position on its engine, from 0 */
    mst_an_step_record rec;
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
    uint32_t engine_proc;    /* the engine of its first step (UINT32_MAX: none) */
    int64_t arrival_ns, finish_ns;   /* request span; INT64_MIN unknown */
    int64_t first_step_ns, first_step_done_ns, last_step_done_ns;
    int64_t first_out_ns, last_out_ns;
    uint32_t n_steps, n_outputs, max_shared;
    uint64_t shared_sum;
    double stage_ms[MST_AN_STAGES];  /* over its steps */
    /* the request's life from step records (INT64_MIN unknown) */
    int64_t queued_ns;       /* step.queued_ns: the engine received it */
    int64_t scheduled_ns;    /* first scheduled (preemptions ignored, as vLLM) */
    int64_t first_token_ns, last_token_ns; /* engine output times */
    int64_t preempted_at_ns; /* while preempted: when */
    int64_t first_out_start_ns, last_out_start_ns; /* API-server output processing starts */
    uint32_t n_tokens;       /* token-producing steps */
    uint32_t preemptions;
    uint64_t recomputed_tokens, computed_since_resume;
    double preempted_ms;     /* preempted -> resumed, summed */
    /* derived by finish; NaN when unknown (docs/analyze.md "Requests") */
    double queue_ms, ttft_ms, tpot_ms, e2e_ms;
    double prefill_ms, decode_ms, inference_ms, handoff_ms;
    bool queue_from_arrival; /* no step.queued_ns: queue is arrival -> first scheduled */
    bool excluded;           /* outside --window / --skip-warmup: in no statistic */
} mst_an_request;

/* One inter-token gap of a request (vLLM's ITL): the time between two
 * consecutive token-producing steps for it, on the engine's clock. */
typedef struct mst_an_itl {
    float ms;
    uint32_t step;           /* the step that produced the later token */
    uint32_t request;
} mst_an_itl;

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
/* Keeps only engine steps and requests inside [start_ns, end_ns) (a step
 * by its start, a request by its arrival, else its first step); spans
 * outside still count in span_names. Relative to the first span seen when
 * `relative` (offsets from the start of the trace). Call before finish. */
void mst_an_model_set_window(mst_an_model *m, int64_t start_ns, int64_t end_ns, bool relative);
/* Drops the warm-up: each engine's steps before the end of its first busy
 * step, and requests that arrived before it. Call before finish. */
void mst_an_model_skip_warmup(mst_an_model *m);
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
    const int32_t *id_tokens;    /* parallel to ids: step.tokens (-1 unknown) */
    const uint8_t *id_phase;     /* parallel to ids: 'p', 'P', 'd', 0 unknown */
    const int64_t *new_queued_ns;/* step.queued_ns values (see mst_an_step_record) */
    const mst_an_itl *itls;      /* every inter-token gap, by step */
    size_t n_itls;
    const char *strings;
    uint64_t spans;
    uint64_t traces;             /* distinct trace ids (counted up to a cap) */
    uint64_t short_traces;       /* of them with 1-2 spans */
    uint64_t negative_gaps;      /* overlapping steps on one engine, queue < 0 */
    uint64_t queue_over_ttft;    /* requests queued longer than their TTFT (clocks disagree) */
    uint64_t clock_skew;         /* requests whose engine times contradict the API server's */
    uint64_t negative_itl;       /* inter-token gaps < 0 */
    uint64_t outside_window;     /* steps and requests left out by --window / --skip-warmup */
    uint64_t preemptions;        /* step.preempted_ids entries */
    size_t steps_with_record;    /* schedule spans carrying step.phase */
    size_t steps_with_queue_info;/* schedule spans carrying scheduler.waiting */
    uint64_t bad_times;          /* spans left out: times beyond +-2^62 ns */
    uint64_t requests_with_span; /* requests seen as request spans */
    uint64_t unjoined;           /* request spans whose id no step carries */
    uint64_t steps_without_ids;  /* busy steps with no request.ids */
    size_t n_engines;
    bool have_worker_spans;      /* model time is the workers' forward */
} mst_an_view;
void mst_an_model_view(const mst_an_model *m, mst_an_view *out);

#endif /* MST_ANALYZE_MODEL_H */
