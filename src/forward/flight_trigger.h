/*
 * flight_trigger.h — the flight recorder's trigger rules (docs/forwarder.md
 * "Flight recorder"): the strict parsers of `--trigger EXPR`, sizes and
 * durations (outside input: fuzzed by tests/fuzz/fuzz_flight_trigger.c),
 * and the decision whether a completed request fires a trigger.
 *
 * Expression grammar (no other spaces than around '>'):
 *   error                        a request or step span with status ERROR
 *   METRIC>DURATION              e.g. e2e>2s, ttft>500ms, tpot>50ms, queue>1s
 *   METRIC>pQ[@WINDOW]           above the running Q-th percentile of the
 *                                requests that ended in the last WINDOW
 *                                (default 5m, whole minutes 1m..60m), e.g.
 *                                e2e>p99 ("keep the slowest 1 %"), ttft>p99.9@10m
 *   METRIC = e2e | ttft | tpot | queue
 *   DURATION = NUMBER UNIT, UNIT = ns | us | ms | s | m | h (NUMBER may have
 *   a fraction: 1.5s)
 * A percentile trigger stays quiet until MST_FLIGHT_PCT_MIN_SAMPLES requests
 * ended in its window (the first requests of a run are not outliers of
 * anything).
 *
 * Threads: one (the formatting thread).
 */
#ifndef MST_FORWARD_FLIGHT_TRIGGER_H
#define MST_FORWARD_FLIGHT_TRIGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mstrace.h"

#define MST_FLIGHT_MAX_TRIGGERS 16
#define MST_FLIGHT_PCT_MIN_SAMPLES 100
#define MST_FLIGHT_PCT_MAX_MINUTES 60

typedef enum mst_flight_metric {
    MST_FLIGHT_E2E = 0,
    MST_FLIGHT_TTFT,
    MST_FLIGHT_TPOT,
    MST_FLIGHT_QUEUE,
    MST_FLIGHT_METRICS
} mst_flight_metric;

typedef enum mst_flight_trigger_kind {
    MST_FLIGHT_ON_ERROR = 0,
    MST_FLIGHT_ABOVE,       /* metric > threshold_ns */
    MST_FLIGHT_ABOVE_PCT    /* metric > running percentile */
} mst_flight_trigger_kind;

typedef struct mst_flight_trigger {
    mst_flight_trigger_kind kind;
    mst_flight_metric metric;
    int64_t threshold_ns;   /* ABOVE */
    double percentile;      /* ABOVE_PCT: 0 < q < 100 */
    uint32_t window_min;    /* ABOVE_PCT: minutes */
    char text[48];          /* the expression as given (for log lines) */
} mst_flight_trigger;

/* What a completed request measured (ns; -1 = not known). */
typedef struct mst_flight_metrics {
    int64_t v[MST_FLIGHT_METRICS];
} mst_flight_metrics;

/* Parses one --trigger expression. MST_ERR_PARSE with a one-line reason. */
mst_status mst_flight_parse_trigger(const char *text, mst_flight_trigger *out, char *err,
                                    size_t err_size);
/* A duration with its unit (as in the grammar) in ns, > 0.
 * MST_ERR_PARSE with a one-line reason. */
mst_status mst_flight_parse_duration(const char *text, size_t len, int64_t *ns, char *err,
                                     size_t err_size);
/* A size: NUMBER with B, KiB, MiB, GiB, TiB (or K, M, G, T: the same
 * binary units; KB, MB, GB, TB: decimal), > 0. */
mst_status mst_flight_parse_size(const char *text, size_t len, uint64_t *bytes, char *err,
                                 size_t err_size);
/* --flight-recorder: SIZE, DURATION, or both separated by a comma. The
 * absent one is 0. */
mst_status mst_flight_parse_capacity(const char *text, uint64_t *bytes, int64_t *duration_ns,
                                     char *err, size_t err_size);

/* The name of a metric ("e2e", ...). */
const char *mst_flight_metric_name(mst_flight_metric m);

/* The running state of a set of triggers: per metric a histogram per
 * minute for the percentile triggers. */
typedef struct mst_flight_rules mst_flight_rules;

mst_flight_rules *mst_flight_rules_new(const mst_flight_trigger *triggers, size_t n);
void mst_flight_rules_free(mst_flight_rules *r);
/* True when the rules contain the `error` trigger. */
bool mst_flight_rules_on_error(const mst_flight_rules *r);
/* A request completed at forwarder time now_ms (monotonic) with metrics m
 * and `had_error` (a span naming it had status ERROR). Returns the index of
 * the first trigger that fires (its reason, e.g. "e2e=2.31s>2s", in
 * reason), or -1. Then records m for the percentile triggers. */
int mst_flight_rules_check(mst_flight_rules *r, const mst_flight_metrics *m, bool had_error,
                           uint64_t now_ms, char *reason, size_t reason_size);
/* The current estimate of the q-th percentile of metric `m` over the last
 * `window_min` minutes (ns), or -1 with fewer than the minimum samples. */
int64_t mst_flight_rules_percentile(const mst_flight_rules *r, mst_flight_metric m, double q,
                                    uint32_t window_min, uint64_t now_ms);

#endif /* MST_FORWARD_FLIGHT_TRIGGER_H */
