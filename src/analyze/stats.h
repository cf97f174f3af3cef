/*
 * stats.h — the statistics of `mstrace analyze`: quantiles of a sample,
 * a fixed-memory log histogram (per-span-name statistics of any number of
 * spans), the least-squares line, and the Mann–Whitney U test used by
 * --compare. Pure functions over arrays: no I/O, no global state.
 */
#ifndef MST_ANALYZE_STATS_H
#define MST_ANALYZE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sorts v ascending (in place). */
void mst_an_sort_doubles(double *v, size_t n);
/* Quantile q (0..1) of a sorted sample, linear interpolation between
 * closest ranks (numpy's default "linear"); NaN for n == 0. */
double mst_an_quantile_sorted(const double *v, size_t n, double q);
double mst_an_mean(const double *v, size_t n);

/* The quantiles the analysis shows for every distribution (docs/analyze.md). */
typedef struct mst_an_quantiles {
    double p50, p90, p99;
} mst_an_quantiles;
/* p50/p90/p99 of a sorted sample (each NaN for n == 0). */
mst_an_quantiles mst_an_quantiles_sorted(const double *v, size_t n);

/* Histogram of positive durations in ns with ~1% relative bucket width
 * (bucket k covers [1.02^k, 1.02^(k+1)) ns), so any number of values costs
 * the same memory and a quantile is off by at most ~1%. */
#define MST_AN_HIST_BUCKETS 1600
typedef struct mst_an_hist {
    uint32_t counts[MST_AN_HIST_BUCKETS];
    uint64_t n;
} mst_an_hist;
void mst_an_hist_add(mst_an_hist *h, int64_t ns);
/* Quantile q in ns (a bucket's geometric middle; 0 when empty). */
double mst_an_hist_quantile(const mst_an_hist *h, double q);
/* p50/p90/p99 of the histogram, each divided by `unit` (1e6: in ms). */
mst_an_quantiles mst_an_hist_quantiles(const mst_an_hist *h, double unit);

/* Least-squares line y = slope * x + intercept and its r^2 (0 when x or y
 * is constant). False for fewer than 3 points. */
typedef struct mst_an_fit {
    double slope, intercept, r2;
    size_t n;
} mst_an_fit;
bool mst_an_fit_line(const double *x, const double *y, size_t n, mst_an_fit *out);

/* Two-sided Mann–Whitney U test of samples a and b (unsorted; not
 * modified): U of a, and the p-value from the normal approximation with
 * tie correction and continuity correction. p = 1 when either is empty or
 * every value ties. */
typedef struct mst_an_mwu {
    double u;
    double z;
    double p;
} mst_an_mwu;
bool mst_an_mann_whitney(const double *a, size_t na, const double *b, size_t nb, mst_an_mwu *out);

#endif /* MST_ANALYZE_STATS_H */
