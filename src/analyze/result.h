/*
 * result.h — what one analysis of `mstrace analyze` holds (mst_an_result:
 * stage split, per-request metrics, engines, timeline, findings, verdict,
 * warnings, profile targets) and the helpers every part of it uses: metric
 * samples, writing a finding, the prose name of a stage. Filled by
 * mst_an_evaluate (rules.h); the rules (rules_engine.h, rules_serving.h)
 * are functions of type mst_an_rule_fn over it.
 */
#ifndef MST_ANALYZE_RESULT_H
#define MST_ANALYZE_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/model.h"
#include "analyze/stats.h"

/* Per-step samples (over busy steps): the stages, then the step's wall. */
#define MST_AN_STEP_WALL MST_AN_STAGES
/* Per-request metrics, vLLM's definitions (docs/analyze.md "Requests"). */
enum {
    MST_AN_REQ_QUEUE = 0, MST_AN_REQ_TTFT, MST_AN_REQ_TPOT, MST_AN_REQ_E2E, MST_AN_REQ_PREFILL,
    MST_AN_REQ_DECODE, MST_AN_REQ_INFERENCE, MST_AN_REQ_HANDOFF, MST_AN_REQ_METRICS
};
/* Not a request metric: every inter-token gap (vLLM's ITL). */
#define MST_AN_REQ_ITL MST_AN_REQ_METRICS
extern const char *const mst_an_request_metric_names[MST_AN_REQ_METRICS + 1];
/* The verdict when a rule's finding, not a stage, is it (capacity). */
#define MST_AN_VERDICT_RULE MST_AN_STAGES

/* Sorted, malloc'd sample of one step metric (0..MST_AN_STEP_WALL) over
 * busy steps (of engine process `proc`, or all when UINT32_MAX), or one
 * request metric (0..MST_AN_REQ_ITL) over the requests where it is known.
 * NULL with *n = 0 when empty (or out of memory: *oom set). */
double *mst_an_step_sample(const mst_an_view *v, int metric, uint32_t proc, size_t *n, bool *oom);
double *mst_an_request_sample(const mst_an_view *v, int metric, size_t *n, bool *oom);
double mst_an_request_metric(const mst_an_request *r, int metric);

typedef struct mst_an_stage_summary {
    double total_ms, share, mean_ms;
    mst_an_quantiles q_ms;
    size_t count;
} mst_an_stage_summary;

typedef struct mst_an_metric_summary {
    size_t n;
    double mean, max;
    mst_an_quantiles q;
} mst_an_metric_summary;

#define MST_AN_MAX_NUMBERS 24
typedef struct mst_an_finding {
    const char *rule;
    bool fired;
    const char *severity; /* "info", "warning", "critical" */
    char sentence[900];
    size_t n_numbers;
    const char *keys[MST_AN_MAX_NUMBERS];
    double values[MST_AN_MAX_NUMBERS];
} mst_an_finding;

typedef struct mst_an_target {
    char what[160];
    int64_t pid;
    int64_t start_ns, end_ns;
    char why[300];
} mst_an_target;

/* One engine process: its busy steps and stage medians. */
typedef struct mst_an_engine_summary {
    uint32_t proc;
    size_t busy_steps;
    double wall_p50_ms, wall_p90_ms, busy_wall_ms;
    double stage_p50_ms[MST_AN_STAGES];
} mst_an_engine_summary;

/* The run cut into equal time bins (at most MST_AN_TIMELINE_BINS): what the
 * scheduler did and held, for the charts of the scheduler's state. Counts
 * are -1 when no step of the bin carried them. */
#define MST_AN_TIMELINE_BINS 200
typedef struct mst_an_timeline_bin {
    int64_t start_ns;
    size_t steps;
    int64_t prefill_tokens, decode_tokens;
    int32_t waiting_max, running_max;
    double kv_usage_max;   /* NaN when unknown */
    uint64_t preemptions;
} mst_an_timeline_bin;

#define MST_AN_MAX_TARGETS 8
typedef struct mst_an_result {
    mst_an_stage_summary stages[MST_AN_STAGES]; /* output: share = its concurrent busy time */
    double parts_share;       /* schedule + model + ipc + waiting shares: <= 1 by construction */
    double gap_output_share;  /* of the engine's host gaps, the part the output loop was busy */
    size_t busy_steps;
    double busy_wall_ms;
    int bottleneck;           /* stage index, MST_AN_VERDICT_RULE, -1 without steps */
    const char *bottleneck_name; /* the stage's name or the rule's verdict name; NULL without steps */
    double bottleneck_share;
    char verdict[900];
    mst_an_finding *findings; /* one per rule of the table, in its order */
    size_t n_findings;
    mst_an_target targets[MST_AN_MAX_TARGETS];
    size_t n_targets;
    mst_an_fit fit;           /* model_ms against fit_x over busy steps */
    const char *fit_x;        /* "scheduled_tokens" or "batch_size" */
    bool lossy;
    size_t joined_requests, included_requests;
    mst_an_metric_summary requests[MST_AN_REQ_METRICS + 1]; /* + ITL */
    double *samples[MST_AN_REQ_METRICS + 1]; /* sorted, for CDFs and compare */
    mst_an_engine_summary *engines;
    size_t n_engines;
    mst_an_timeline_bin *timeline;
    size_t n_timeline;
    int64_t timeline_bin_ns;
    char **warnings;          /* data-quality warnings, every output shows them */
    size_t n_warnings;
    int64_t t0, t1;           /* first and last busy step start */
} mst_an_result;

/* A rule: reads the view and the parts of the result computed before the
 * rules (stages, requests, engines, fit), fills its finding (rule name,
 * severity and `fired` preset to the table's name, "info", false); false
 * only when out of memory. The table of rules is in rules.c. */
typedef bool (*mst_an_rule_fn)(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
typedef struct mst_an_rule {
    const char *name;
    mst_an_rule_fn run;
    bool needs_steps;  /* "not evaluated" without busy steps */
    const char *verdict; /* when it fires, it is the verdict, named so ("capacity"); else NULL */
} mst_an_rule;

/* Frees what an evaluated result holds (and clears it). */
void mst_an_result_free(mst_an_result *r);

/* For the rules (rules_engine.c, rules_serving.c): a number into a finding. */
void mst_an_finding_num(mst_an_finding *f, const char *key, double v);
/* Writes the finding's sentence (printf-style); a fired finding whose
 * severity is still "info" becomes a "warning". */
void mst_an_finding_say(mst_an_finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prose name of a stage ("the model forward (workers)", ...). */
const char *mst_an_stage_prose(int stage);

#endif /* MST_ANALYZE_RESULT_H */
