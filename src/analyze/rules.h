/*
 * rules.h — the verdict of `mstrace analyze`: the stage split and the
 * stage that bounds throughput, every bottleneck rule with its numbers and
 * a sentence (docs/analyze.md "Rules"), and the profile targets (time
 * windows and pids of the worst steps and requests). Also the per-step and
 * per-request metric samples that the JSON writer and --compare share.
 */
#ifndef MST_ANALYZE_RULES_H
#define MST_ANALYZE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/model.h"
#include "analyze/stats.h"

/* Per-step samples (over busy steps): the stages, then the step's wall. */
#define MST_AN_STEP_WALL MST_AN_STAGES
/* Per-request samples. */
enum { MST_AN_REQ_QUEUE = 0, MST_AN_REQ_TTFT, MST_AN_REQ_TPOT, MST_AN_REQ_E2E, MST_AN_REQ_METRICS };
extern const char *const mst_an_request_metric_names[MST_AN_REQ_METRICS];

/* Sorted, malloc'd sample of one step metric (0..MST_AN_STEP_WALL) over
 * busy steps, or one request metric over requests where it is known.
 * NULL with *n = 0 when empty (or out of memory: *oom set). */
double *mst_an_step_sample(const mst_an_view *v, int metric, size_t *n, bool *oom);
double *mst_an_request_sample(const mst_an_view *v, int metric, size_t *n, bool *oom);
double mst_an_request_metric(const mst_an_request *r, int metric);

typedef struct mst_an_stage_summary {
    double total_ms, share, mean_ms;
    mst_an_quantiles q_ms;
    size_t count;
} mst_an_stage_summary;

#define MST_AN_MAX_NUMBERS 16
typedef struct mst_an_finding {
    const char *rule;
    bool fired;
    const char *severity; /* "info", "warning", "critical" */
    char sentence[600];
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

#define MST_AN_MAX_FINDINGS 8
#define MST_AN_MAX_TARGETS 8
typedef struct mst_an_result {
    mst_an_stage_summary stages[MST_AN_STAGES];
    size_t busy_steps;
    double busy_wall_ms;
    int bottleneck;           /* stage index, -1 when there are no steps */
    double bottleneck_share;
    char verdict[600];
    mst_an_finding findings[MST_AN_MAX_FINDINGS];
    size_t n_findings;
    mst_an_target targets[MST_AN_MAX_TARGETS];
    size_t n_targets;
    mst_an_fit fit;           /* model_ms against fit_x over busy steps */
    const char *fit_x;        /* "scheduled_tokens" or "batch_size" */
    bool lossy;
    size_t joined_requests;
} mst_an_result;

mst_status mst_an_evaluate(const mst_an_view *v, mst_an_result *out);

#endif /* MST_ANALYZE_RULES_H */
