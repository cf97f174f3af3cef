/*
 * compare.h — `mstrace analyze --compare BEFORE AFTER`: per stage (per busy
 * step) and per request metric, the two sides' medians, p90/p99, the change
 * of the median and a two-sided Mann–Whitney U test. A change counts as
 * significant only when p < MST_AN_COMPARE_P *and* the median moved by at
 * least MST_AN_COMPARE_MIN_CHANGE, so two runs of the same build (same
 * distribution, other random draws) come out "no significant difference"
 * while a real shift with thousands of samples does not hide in noise.
 */
#ifndef MST_ANALYZE_COMPARE_H
#define MST_ANALYZE_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "analyze/model.h"
#include "analyze/stats.h"

#define MST_AN_COMPARE_P 0.001
#define MST_AN_COMPARE_MIN_CHANGE 0.05

typedef struct mst_an_side {
    size_t n;
    mst_an_quantiles q;
} mst_an_side;

typedef struct mst_an_compare_metric {
    char metric[32];
    mst_an_side before, after;
    double change_pct;  /* of the median; NaN when the before median is 0 */
    double p_value;
    bool significant;
    char sentence[300];
} mst_an_compare_metric;

#define MST_AN_COMPARE_METRICS 10
typedef struct mst_an_comparison {
    mst_an_compare_metric metrics[MST_AN_COMPARE_METRICS];
    size_t n_metrics;
    size_t n_significant;
    char verdict[600];
} mst_an_comparison;

mst_status mst_an_compare(const mst_an_view *before, const mst_an_view *after,
                          mst_an_comparison *out);

#endif /* MST_ANALYZE_COMPARE_H */
