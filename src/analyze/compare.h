/*
 * compare.h — `mstrace analyze --compare BEFORE AFTER`: per stage (per busy
 * step, and per engine where both sides have several), per request metric
 * and for the inter-token gaps, the two sides' n, p50, p90 and p99, and
 * three tests: Mann–Whitney U on the whole distribution, and a bootstrap
 * test of the p90 and of the p99 shift (tail shifts that leave the median
 * alone). A metric changed significantly when one test gives p < alpha
 * (MST_AN_COMPARE_P, the value every output states) *and* the quantile it
 * tests moved by at least MST_AN_COMPARE_MIN_CHANGE, so two runs of the
 * same build come out "no significant difference" while a real shift with
 * thousands of samples does not hide in noise. Effect size: Cliff's delta.
 */
#ifndef MST_ANALYZE_COMPARE_H
#define MST_ANALYZE_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "analyze/model.h"
#include "analyze/rules.h"
#include "analyze/stats.h"

#define MST_AN_COMPARE_P 0.001
#define MST_AN_COMPARE_MIN_CHANGE 0.05

typedef struct mst_an_side {
    size_t n;
    mst_an_quantiles q;
} mst_an_side;

typedef struct mst_an_compare_metric {
    char metric[48];
    mst_an_side before, after;
    double change_pct;      /* of the median; NaN when the before median is 0 */
    double p90_change_pct, p99_change_pct;
    double p_value;         /* Mann-Whitney U */
    double p90_p_value, p99_p_value; /* bootstrap test of the quantile's shift */
    double cliffs_delta;    /* P(after > before) - P(after < before) */
    const char *test;       /* the test that decided: "mann-whitney", "bootstrap-p90", ... */
    bool significant;
    char sentence[400];
} mst_an_compare_metric;

#define MST_AN_COMPARE_METRICS 64
typedef struct mst_an_comparison {
    mst_an_compare_metric metrics[MST_AN_COMPARE_METRICS];
    size_t n_metrics;
    size_t n_significant;
    char verdict[900];
} mst_an_comparison;

/* Compares two analysed sides (their views and results). */
mst_status mst_an_compare(const mst_an_view *before, const mst_an_result *rb, const mst_an_view *after,
                          const mst_an_result *ra, mst_an_comparison *out);

#endif /* MST_ANALYZE_COMPARE_H */
