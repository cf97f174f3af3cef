/*
 * model.h — the step/request model of `mstrace analyze`. Spans go in one at
 * a time (mst_an_model_add_span, an mst_an_span_fn); the model keeps only
 * compact records of the spans it understands (engine steps, executor and
 * worker spans, output batches, request spans), per-name histograms of all
 * spans, and interned request ids — so memory grows with steps and
 * requests, not with file bytes. mst_an_model_finish then builds:
 *
 *   steps    one per `vllm.scheduler.schedule` span of an engine process,
 *            with its step record (step.index, tokens and phases per
 *            request, new/resumed/preempted ids, queue state and limits):
 *            window [this schedule start, next schedule start) on that
 *            process; its wall split into parts that sum to it — schedule
 *            (schedule + update_from_output), model (the workers' forward:
 *            worker.execute_model, else model_runner.execute, else the
 *            executor spans), ipc (the executor's window minus the
 *            forward), waiting (the rest: the host gap) — and output (the
 *            API server's output.process spans, concurrent, never added);
 *   requests from `vllm.request` / `llm_request` spans (request.id,
 *            gen_ai.request.id) and the request.ids of step and output
 *            spans, with vLLM's metrics (request_life.h);
 *   triggers the `mstrace.flight_recorder.trigger` spans of a flight-
 *            recorder dump (model_types.h), in no stage.
 * docs/analyze.md explains every definition.
 */
#ifndef MST_ANALYZE_MODEL_H
#define MST_ANALYZE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/input_info.h"
#include "analyze/model_types.h"
#include "analyze/record.h"
#include "analyze/stats.h"

extern const char *const mst_an_stage_names[MST_AN_STAGES];

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
    uint64_t missing_steps;      /* gaps in an engine's step.index: steps whose spans never arrived */
    size_t steps_with_record;    /* schedule spans carrying step.phase */
    size_t steps_with_queue_info;/* schedule spans carrying scheduler.waiting */
    uint64_t bad_times;          /* spans left out: times beyond +-2^62 ns */
    uint64_t requests_with_span; /* requests seen as request spans */
    uint64_t unjoined;           /* request spans whose id no step carries */
    uint64_t steps_without_ids;  /* busy steps with no request.ids */
    size_t n_engines;
    bool have_worker_spans;      /* model time is the workers' forward */
    const mst_an_trigger *triggers; /* flight-recorder trigger spans, in input order */
    size_t n_triggers;
    uint64_t triggers_dropped;   /* trigger spans beyond MST_AN_TRIGGERS_KEPT */
} mst_an_view;
void mst_an_model_view(const mst_an_model *m, mst_an_view *out);

#endif /* MST_ANALYZE_MODEL_H */
