/*
 * compare.c — before/after statistics per metric (compare.h).
 */
#include "analyze/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/rules.h"
#include "analyze/stats.h"

static void side_of(const double *x, size_t n, mst_an_side *s) {
    s->n = n;
    s->q = mst_an_quantiles_sorted(x, n);
}

static void one_metric(mst_an_comparison *c, const char *name, double *b, size_t nb, double *a,
                       size_t na) {
    mst_an_compare_metric *m = &c->metrics[c->n_metrics++];
    memset(m, 0, sizeof *m);
    snprintf(m->metric, sizeof m->metric, "%s", name);
    side_of(b, nb, &m->before);
    side_of(a, na, &m->after);
    mst_an_mwu u;
    mst_an_mann_whitney(b, nb, a, na, &u);
    m->p_value = u.p;
    double mb = m->before.q.p50, ma = m->after.q.p50;
    m->change_pct = (nb && na && mb > 0) ? 100.0 * (ma - mb) / mb : NAN;
    bool moved = !isnan(m->change_pct) ? fabs(m->change_pct) >= 100.0 * MST_AN_COMPARE_MIN_CHANGE
                                       : (nb && na && ma != mb);
    m->significant = nb >= 2 && na >= 2 && u.p < MST_AN_COMPARE_P && moved;
    if (!nb || !na)
        snprintf(m->sentence, sizeof m->sentence, "%s: not compared (no data on %s side).", name,
                 !nb ? "the before" : "the after");
    else if (m->significant)
        snprintf(m->sentence, sizeof m->sentence,
                 "%s is %s: median %.3f -> %.3f ms (%+.1f%%), p90 %.3f -> %.3f, p=%.2g "
                 "(n=%zu/%zu).",
                 name, ma > mb ? "slower" : "faster", mb, ma, m->change_pct, m->before.q.p90,
                 m->after.q.p90, u.p, nb, na);
    else
        snprintf(m->sentence, sizeof m->sentence,
                 "%s: no significant difference (median %.3f -> %.3f ms, %+.1f%%, p=%.2g).", name,
                 mb, ma, isnan(m->change_pct) ? 0.0 : m->change_pct, u.p);
    if (m->significant) c->n_significant++;
}

mst_status mst_an_compare(const mst_an_view *bv, const mst_an_view *av, mst_an_comparison *c) {
    memset(c, 0, sizeof *c);
    bool oom = false;
    for (int g = 0; g <= MST_AN_STEP_WALL; g++) {
        size_t nb, na;
        double *b = mst_an_step_sample(bv, g, &nb, &oom);
        double *a = mst_an_step_sample(av, g, &na, &oom);
        char name[32];
        snprintf(name, sizeof name, "step.%s_ms", g == MST_AN_STEP_WALL ? "wall" : mst_an_stage_names[g]);
        if (!oom) one_metric(c, name, b, nb, a, na);
        free(b);
        free(a);
    }
    for (int k = 0; k < MST_AN_REQ_METRICS; k++) {
        size_t nb, na;
        double *b = mst_an_request_sample(bv, k, &nb, &oom);
        double *a = mst_an_request_sample(av, k, &na, &oom);
        char name[32];
        snprintf(name, sizeof name, "request.%s", mst_an_request_metric_names[k]);
        if (!oom && c->n_metrics < MST_AN_COMPARE_METRICS) one_metric(c, name, b, nb, a, na);
        free(b);
        free(a);
    }
    if (oom) return MST_ERR_NOMEM;
    if (c->n_significant == 0) {
        snprintf(c->verdict, sizeof c->verdict,
                 "No significant difference: no metric's median moved by >= %.0f%% with p < %g.",
                 100 * MST_AN_COMPARE_MIN_CHANGE, MST_AN_COMPARE_P);
    } else {
        size_t len = (size_t)snprintf(c->verdict, sizeof c->verdict, "Significant changes:");
        for (size_t i = 0; i < c->n_metrics && len < sizeof c->verdict; i++) {
            const mst_an_compare_metric *m = &c->metrics[i];
            if (!m->significant) continue;
            len += (size_t)snprintf(c->verdict + len, sizeof c->verdict - len, " %s %+.1f%%;",
                                    m->metric, m->change_pct);
        }
    }
    return MST_OK;
}
