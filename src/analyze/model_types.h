/*
 * model_types.h — the records the step/request model builds (model.h) and
 * the request-life walk fills (request_life.h): processes, engine steps
 * with their step record, requests, inter-token gaps. Types only, so both
 * files can share them without including each other.
 */
#ifndef MST_ANALYZE_MODEL_TYPES_H
#define MST_ANALYZE_MODEL_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { MST_AN_SCHEDULE = 0, MST_AN_MODEL, MST_AN_IPC, MST_AN_OUTPUT, MST_AN_WAITING, MST_AN_STAGES };
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

/* The `mstrace.flight_recorder.trigger` span a flight-recorder dump of
 * `mstrace forward` carries: why the dump was written. Kept as read (at
 * most MST_AN_TRIGGERS_KEPT spans, the rest counted); it is no step and no
 * request span, so no stage counts it. */
enum { MST_AN_TRIGGERS_KEPT = 16, MST_AN_TRIGGER_IDS_KEPT = 8 };
typedef struct mst_an_trigger {
    char *reason;            /* flight.trigger, malloc'd ("" when absent) */
    char *ids[MST_AN_TRIGGER_IDS_KEPT]; /* flight.request_ids, malloc'd */
    uint32_t id_len[MST_AN_TRIGGER_IDS_KEPT]; /* exact lengths (an id may hold a NUL) */
    uint32_t n_ids_kept;
    uint64_t n_ids;          /* the ids the span named, kept or not */
    int64_t start_ns, end_ns;/* the dump's window */
    int64_t pid;             /* the forwarder */
    bool on_demand;          /* flight.on_demand: the whole ring */
} mst_an_trigger;

#endif /* MST_ANALYZE_MODEL_TYPES_H */
