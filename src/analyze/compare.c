/*
 * compare.c — before/after statistics per metric (compare.h). The
 * bootstrap is deterministic (a fixed-seed generator), so one pair of
 * inputs always gives the same answer.
 */
#include "analyze/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/stats.h"

#define BOOT_ROUNDS 200
#define BOOT_MAX_N 1000 /* larger samples are thinned evenly (they are sorted) */
/* Values on each side a quantile test needs: the bootstrap's error of a
 * quantile is only trustworthy with enough values beyond it. */
#define P90_MIN_N 100
#define P99_MIN_N 1000

static void side_of(const double *x, size_t n, mst_an_side *s) {
    s->n = n;
    s->q = mst_an_quantiles_sorted(x, n);
}

static uint64_t next_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Bootstrap standard errors of the p90 and p99 of sorted x[0..n). */
static bool boot_se(const double *x, size_t n, uint64_t *rng, double *se90, double *se99) {
    *se90 = *se99 = NAN;
    if (n < 2) return true;
    size_t m = n < BOOT_MAX_N ? n : BOOT_MAX_N;
    size_t *idx = malloc(m * sizeof *idx);
    if (!idx) return false;
    double s90 = 0, ss90 = 0, s99 = 0, ss99 = 0;
    for (int b = 0; b < BOOT_ROUNDS; b++) {
        /* Indices into the (evenly thinned) sorted sample; sorted indices
         * give the resample's order statistics. */
        for (size_t i = 0; i < m; i++) idx[i] = (size_t)(next_rand(rng) % m);
        qsort(idx, m, sizeof *idx, cmp_size);
        double q[2];
        const double p[2] = {0.9, 0.99};
        for (int k = 0; k < 2; k++) {
            double pos = p[k] * (double)(m - 1);
            size_t lo = (size_t)pos;
            size_t hi = lo + 1 < m ? lo + 1 : lo;
            double xl = x[idx[lo] * (n - 1) / (m > 1 ? m - 1 : 1)], xh = x[idx[hi] * (n - 1) / (m > 1 ? m - 1 : 1)];
            q[k] = xl + (xh - xl) * (pos - (double)lo);
        }
        s90 += q[0];
        ss90 += q[0] * q[0];
        s99 += q[1];
        ss99 += q[1] * q[1];
    }
    free(idx);
    double B = BOOT_ROUNDS;
    *se90 = sqrt(fmax(0, ss90 / B - (s90 / B) * (s90 / B)));
    *se99 = sqrt(fmax(0, ss99 / B - (s99 / B) * (s99 / B)));
    return true;
}

/* Two-sided p of a normal z. */
static double p_of_z(double z) { return erfc(fabs(z) / sqrt(2.0)); }

static double pct(double b, double a) { return b > 0 ? 100.0 * (a - b) / b : NAN; }

static bool moved(double change, double b, double a) {
    return !isnan(change) ? fabs(change) >= 100.0 * MST_AN_COMPARE_MIN_CHANGE : a != b;
}

static bool one_metric(mst_an_comparison *c, const char *name, const double *b, size_t nb, const double *a,
                       size_t na) {
    if (c->n_metrics >= MST_AN_COMPARE_METRICS) return true;
    mst_an_compare_metric *m = &c->metrics[c->n_metrics++];
    memset(m, 0, sizeof *m);
    snprintf(m->metric, sizeof m->metric, "%s", name);
    side_of(b, nb, &m->before);
    side_of(a, na, &m->after);
    mst_an_mwu u;
    mst_an_mann_whitney(b, nb, a, na, &u);
    m->p_value = u.p;
    m->cliffs_delta = nb && na ? 1.0 - 2.0 * u.u / ((double)nb * (double)na) : NAN;
    m->change_pct = nb && na ? pct(m->before.q.p50, m->after.q.p50) : NAN;
    m->p90_change_pct = nb && na ? pct(m->before.q.p90, m->after.q.p90) : NAN;
    m->p99_change_pct = nb && na ? pct(m->before.q.p99, m->after.q.p99) : NAN;
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    double b90, b99, a90, a99;
    if (!boot_se(b, nb, &rng, &b90, &b99) || !boot_se(a, na, &rng, &a90, &a99)) return false;
    double se90 = sqrt(b90 * b90 + a90 * a90), se99 = sqrt(b99 * b99 + a99 * a99);
    double d90 = m->after.q.p90 - m->before.q.p90, d99 = m->after.q.p99 - m->before.q.p99;
    m->p90_p_value = se90 > 0 ? p_of_z(d90 / se90) : (d90 != 0 ? 0 : 1);
    m->p99_p_value = se99 > 0 ? p_of_z(d99 / se99) : (d99 != 0 ? 0 : 1);
    bool enough = nb >= 2 && na >= 2;
    bool p90_enough = nb >= P90_MIN_N && na >= P90_MIN_N, p99_enough = nb >= P99_MIN_N && na >= P99_MIN_N;
    m->test = "mann-whitney";
    if (enough && u.p < MST_AN_COMPARE_P && moved(m->change_pct, m->before.q.p50, m->after.q.p50))
        m->significant = true;
    else if (p90_enough && m->p90_p_value < MST_AN_COMPARE_P && moved(m->p90_change_pct, m->before.q.p90, m->after.q.p90)) {
        m->significant = true;
        m->test = "bootstrap-p90";
    } else if (p99_enough && m->p99_p_value < MST_AN_COMPARE_P &&
               moved(m->p99_change_pct, m->before.q.p99, m->after.q.p99)) {
        m->significant = true;
        m->test = "bootstrap-p99";
    }
    if (!nb || !na)
        snprintf(m->sentence, sizeof m->sentence, "%s: not compared (no data on %s side).", name,
                 !nb ? "the before" : "the after");
    else if (m->significant)
        snprintf(m->sentence, sizeof m->sentence,
                 "%s is %s (%s, p < %g): median %.3f -> %.3f ms (%+.1f%%, p=%.2g), p90 %.3f -> %.3f "
                 "(%+.1f%%, p=%.2g), p99 %.3f -> %.3f (%+.1f%%, p=%.2g); Cliff's delta %+.2f (n=%zu/%zu).",
                 name, (strcmp(m->test, "mann-whitney") == 0 ? m->after.q.p50 > m->before.q.p50
                        : strcmp(m->test, "bootstrap-p90") == 0 ? d90 > 0 : d99 > 0) ? "slower" : "faster",
                 m->test, MST_AN_COMPARE_P, m->before.q.p50, m->after.q.p50, m->change_pct, u.p,
                 m->before.q.p90, m->after.q.p90, m->p90_change_pct, m->p90_p_value, m->before.q.p99,
                 m->after.q.p99, m->p99_change_pct, m->p99_p_value, m->cliffs_delta, nb, na);
    else
        snprintf(m->sentence, sizeof m->sentence,
                 "%s: no significant difference (median %.3f -> %.3f ms, %+.1f%%, p=%.2g; p90 %+.1f%% "
                 "p=%.2g; p99 %+.1f%% p=%.2g; alpha %g).",
                 name, m->before.q.p50, m->after.q.p50, isnan(m->change_pct) ? 0.0 : m->change_pct, u.p,
                 isnan(m->p90_change_pct) ? 0.0 : m->p90_change_pct, m->p90_p_value,
                 isnan(m->p99_change_pct) ? 0.0 : m->p99_change_pct, m->p99_p_value, MST_AN_COMPARE_P);
    if (m->significant) c->n_significant++;
    return true;
}

static bool step_metric(mst_an_comparison *c, const char *name, const mst_an_view *bv, uint32_t bp,
                        const mst_an_view *av, uint32_t ap, int g) {
    bool oom = false;
    size_t nb, na;
    double *b = mst_an_step_sample(bv, g, bp, &nb, &oom);
    double *a = mst_an_step_sample(av, g, ap, &na, &oom);
    bool ok = !oom && one_metric(c, name, b, nb, a, na);
    free(b);
    free(a);
    return ok;
}

mst_status mst_an_compare(const mst_an_view *bv, const mst_an_result *rb, const mst_an_view *av,
                          const mst_an_result *ra, mst_an_comparison *c) {
    memset(c, 0, sizeof *c);
    char name[48];
    for (int g = 0; g <= MST_AN_STEP_WALL; g++) {
        snprintf(name, sizeof name, "step.%s_ms", g == MST_AN_STEP_WALL ? "wall" : mst_an_stage_names[g]);
        if (!step_metric(c, name, bv, UINT32_MAX, av, UINT32_MAX, g)) return MST_ERR_NOMEM;
    }
    for (int k = 0; k <= MST_AN_REQ_ITL; k++) {
        snprintf(name, sizeof name, "request.%s", mst_an_request_metric_names[k]);
        if (!one_metric(c, name, rb->samples[k], rb->requests[k].n, ra->samples[k], ra->requests[k].n))
            return MST_ERR_NOMEM;
    }
    /* Per engine, in order, when both sides have the same several engines. */
    if (rb->n_engines > 1 && rb->n_engines == ra->n_engines)
        for (size_t e = 0; e < rb->n_engines && c->n_metrics + 2 <= MST_AN_COMPARE_METRICS; e++) {
            snprintf(name, sizeof name, "engine%zu.step.wall_ms", e);
            if (!step_metric(c, name, bv, rb->engines[e].proc, av, ra->engines[e].proc, MST_AN_STEP_WALL))
                return MST_ERR_NOMEM;
            snprintf(name, sizeof name, "engine%zu.step.model_ms", e);
            if (!step_metric(c, name, bv, rb->engines[e].proc, av, ra->engines[e].proc, MST_AN_MODEL))
                return MST_ERR_NOMEM;
        }
    if (c->n_significant == 0) {
        snprintf(c->verdict, sizeof c->verdict,
                 "No significant difference: no metric's median, p90 or p99 moved by >= %.0f%% with p < %g.",
                 100 * MST_AN_COMPARE_MIN_CHANGE, MST_AN_COMPARE_P);
    } else {
        size_t len = (size_t)snprintf(c->verdict, sizeof c->verdict, "Significant changes (p < %g):",
                                      MST_AN_COMPARE_P);
        for (size_t i = 0; i < c->n_metrics && len < sizeof c->verdict; i++) {
            const mst_an_compare_metric *m = &c->metrics[i];
            if (!m->significant) continue;
            double ch = strcmp(m->test, "bootstrap-p90") == 0   ? m->p90_change_pct
                        : strcmp(m->test, "bootstrap-p99") == 0 ? m->p99_change_pct
                                                                : m->change_pct;
            len += (size_t)snprintf(c->verdict + len, sizeof c->verdict - len, " %s %s %+.1f%%;", m->metric,
                                    strcmp(m->test, "mann-whitney") == 0 ? "median"
                                    : strcmp(m->test, "bootstrap-p90") == 0 ? "p90" : "p99",
                                    ch);
        }
    }
    return MST_OK;
}
