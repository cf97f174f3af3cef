/*
 * stats.c — quantiles, log histogram, least squares, Mann–Whitney U
 * (stats.h).
 */
#include "analyze/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void mst_an_sort_doubles(double *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, cmp_double);
}

double mst_an_quantile_sorted(const double *v, size_t n, double q) {
    if (n == 0) return NAN;
    if (q <= 0) return v[0];
    if (q >= 1) return v[n - 1];
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    double frac = pos - (double)lo;
    if (lo + 1 >= n) return v[n - 1];
    return v[lo] + (v[lo + 1] - v[lo]) * frac;
}

double mst_an_mean(const double *v, size_t n) {
    if (n == 0) return NAN;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return s / (double)n;
}

#define LOG_BASE 0.0198026272961797 /* ln(1.02) */

mst_an_quantiles mst_an_quantiles_sorted(const double *v, size_t n) {
    return (mst_an_quantiles){mst_an_quantile_sorted(v, n, 0.5), mst_an_quantile_sorted(v, n, 0.9),
                              mst_an_quantile_sorted(v, n, 0.99)};
}

void mst_an_hist_add(mst_an_hist *h, int64_t ns) {
    size_t k = 0;
    if (ns > 1) {
        double b = log((double)ns) / LOG_BASE;
        k = b >= MST_AN_HIST_BUCKETS - 1 ? MST_AN_HIST_BUCKETS - 1 : (size_t)b;
    }
    h->counts[k]++;
    h->n++;
}

double mst_an_hist_quantile(const mst_an_hist *h, double q) {
    if (h->n == 0) return 0;
    uint64_t rank = (uint64_t)ceil(q * (double)h->n);
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (size_t k = 0; k < MST_AN_HIST_BUCKETS; k++) {
        seen += h->counts[k];
        if (seen >= rank) return k == 0 ? 1.0 : exp(((double)k + 0.5) * LOG_BASE);
    }
    return exp((double)MST_AN_HIST_BUCKETS * LOG_BASE);
}

mst_an_quantiles mst_an_hist_quantiles(const mst_an_hist *h, double unit) {
    return (mst_an_quantiles){mst_an_hist_quantile(h, 0.5) / unit, mst_an_hist_quantile(h, 0.9) / unit,
                              mst_an_hist_quantile(h, 0.99) / unit};
}

bool mst_an_fit_line(const double *x, const double *y, size_t n, mst_an_fit *out) {
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n < 3) return false;
    double mx = mst_an_mean(x, n), my = mst_an_mean(y, n);
    double sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - mx, dy = y[i] - my;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    if (sxx <= 0) {
        out->intercept = my;
        return true;
    }
    out->slope = sxy / sxx;
    out->intercept = my - out->slope * mx;
    out->r2 = syy > 0 ? (sxy * sxy) / (sxx * syy) : 0;
    return true;
}

typedef struct tagged {
    double v;
    int from_a;
} tagged;

static int cmp_tagged(const void *a, const void *b) {
    double x = ((const tagged *)a)->v, y = ((const tagged *)b)->v;
    return (x > y) - (x < y);
}

bool mst_an_mann_whitney(const double *a, size_t na, const double *b, size_t nb, mst_an_mwu *out) {
    out->u = 0;
    out->z = 0;
    out->p = 1;
    if (na == 0 || nb == 0) return true;
    size_t n = na + nb;
    tagged *t = malloc(n * sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < na; i++) t[i] = (tagged){a[i], 1};
    for (size_t i = 0; i < nb; i++) t[na + i] = (tagged){b[i], 0};
    qsort(t, n, sizeof *t, cmp_tagged);
    /* Rank sum of a with mid-ranks for ties; tie term sum(t^3 - t). */
    double ra = 0, ties = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && t[j + 1].v == t[i].v) j++;
        double rank = ((double)i + (double)j) / 2.0 + 1.0;
        for (size_t k = i; k <= j; k++)
            if (t[k].from_a) ra += rank;
        double c = (double)(j - i + 1);
        ties += c * c * c - c;
        i = j + 1;
    }
    free(t);
    double dna = (double)na, dnb = (double)nb, dn = (double)n;
    double u = ra - dna * (dna + 1) / 2.0;
    double mu = dna * dnb / 2.0;
    double var = dna * dnb / 12.0 * ((dn + 1) - ties / (dn * (dn - 1)));
    out->u = u;
    if (var <= 0) return true;
    double d = fabs(u - mu) - 0.5;
    if (d < 0) d = 0;
    double z = d / sqrt(var);
    out->z = u >= mu ? z : -z;
    out->p = erfc(z / sqrt(2.0));
    if (out->p > 1) out->p = 1;
    return true;
}
