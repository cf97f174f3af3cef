/*
 * test_analyze_stats.c — the statistics of `mstrace analyze`
 * (src/analyze/stats.c): quantiles against numpy's "linear" definition,
 * the log histogram's error bound, the least-squares line, and the
 * Mann–Whitney U test against known values (R: wilcox.test(x, y,
 * exact = FALSE, correct = TRUE)), including ties and symmetry.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/stats.h"
#include "testlib.h"

static bool near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void quantiles(void) {
    double v[] = {3, 1, 4, 1, 5, 9, 2, 6};
    mst_an_sort_doubles(v, 8);
    CHECK(v[0] == 1 && v[7] == 9);
    /* numpy.quantile([3,1,4,1,5,9,2,6], q) ("linear"): 0.5 -> 3.5, 0.9 -> 6.9,
     * 0.25 -> 1.75, 0.99 -> 8.79 */
    CHECK(near(mst_an_quantile_sorted(v, 8, 0.5), 3.5, 1e-12));
    CHECK(near(mst_an_quantile_sorted(v, 8, 0.9), 6.9, 1e-12));
    CHECK(near(mst_an_quantile_sorted(v, 8, 0.25), 1.75, 1e-12));
    CHECK(near(mst_an_quantile_sorted(v, 8, 0.99), 8.79, 1e-12));
    CHECK(mst_an_quantile_sorted(v, 8, 0) == 1 && mst_an_quantile_sorted(v, 8, 1) == 9);
    CHECK(isnan(mst_an_quantile_sorted(v, 0, 0.5)));
    double one = 42;
    CHECK(mst_an_quantile_sorted(&one, 1, 0.99) == 42);
    CHECK(near(mst_an_mean(v, 8), 31.0 / 8, 1e-12));
}

static void histogram(void) {
    mst_an_hist *h = calloc(1, sizeof *h);
    CHECK(h != NULL);
    /* 1..10000 microseconds: every quantile within the ~2% bucket width. */
    for (int i = 1; i <= 10000; i++) mst_an_hist_add(h, (int64_t)i * 1000);
    CHECK(h->n == 10000);
    double qs[] = {0.5, 0.9, 0.99};
    for (int k = 0; k < 3; k++) {
        double want = qs[k] * 10000 * 1000;
        double got = mst_an_hist_quantile(h, qs[k]);
        CHECK(fabs(got - want) / want < 0.02);
    }
    mst_an_hist_add(h, 0);
    mst_an_hist_add(h, -5);
    mst_an_hist_add(h, INT64_MAX); /* clamps into the last bucket */
    CHECK(h->n == 10003);
    memset(h, 0, sizeof *h);
    CHECK(mst_an_hist_quantile(h, 0.5) == 0);
    free(h);
}

static void least_squares(void) {
    double x[] = {1, 2, 3, 4, 5}, y[] = {2.1, 3.9, 6.2, 7.8, 10.1};
    mst_an_fit f;
    CHECK(mst_an_fit_line(x, y, 5, &f));
    /* by hand: sxy 19.9, sxx 10, syy 39.708: slope 1.99, intercept 0.05, r2 0.997305 */
    CHECK(near(f.slope, 1.99, 1e-9));
    CHECK(near(f.intercept, 0.05, 1e-9));
    CHECK(near(f.r2, 0.997305, 1e-5));
    double flat[] = {3, 3, 3, 3};
    double yy[] = {1, 2, 3, 4};
    CHECK(mst_an_fit_line(flat, yy, 4, &f));
    CHECK(f.slope == 0 && f.r2 == 0 && near(f.intercept, 2.5, 1e-12));
    CHECK(!mst_an_fit_line(x, y, 2, &f));
}

static void mann_whitney(void) {
    double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10};
    mst_an_mwu u;
    CHECK(mst_an_mann_whitney(a, 5, b, 5, &u));
    /* wilcox.test(1:5, 6:10, exact=FALSE): W = 0, p-value = 0.01219 */
    CHECK(u.u == 0);
    CHECK(near(u.p, 0.012185780355, 1e-9));
    CHECK(u.z < 0);
    mst_an_mwu v;
    CHECK(mst_an_mann_whitney(b, 5, a, 5, &v));
    CHECK(v.u == 25 && near(v.p, u.p, 1e-12) && v.z > 0);
    /* With ties: wilcox.test(c(1,2,2,3,7), c(2,3,4,5,5,6), exact=FALSE):
     * W = 8.5, p-value = 0.2667 */
    double c[] = {1, 2, 2, 3, 7}, d[] = {2, 3, 4, 5, 5, 6};
    CHECK(mst_an_mann_whitney(c, 5, d, 6, &u));
    CHECK(u.u == 8.5);
    CHECK(near(u.p, 0.266699368901, 1e-9));
    /* Identical samples: no evidence at all. */
    CHECK(mst_an_mann_whitney(a, 5, a, 5, &u));
    CHECK(u.p == 1.0);
    double same[] = {2, 2, 2};
    CHECK(mst_an_mann_whitney(same, 3, same, 3, &u));
    CHECK(u.p == 1.0);
    CHECK(mst_an_mann_whitney(a, 0, b, 5, &u));
    CHECK(u.p == 1.0);
    /* Two large samples from one distribution (a fixed LCG): not
     * significant at the compare threshold; shifted by 10%: significant. */
    enum { N = 4000 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = malloc(N * sizeof *z);
    CHECK(x && y && z);
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 1.0 + (double)(s >> 11) / 9007199254740992.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        y[i] = 1.0 + (double)(s >> 11) / 9007199254740992.0;
        z[i] = y[i] * 1.1;
    }
    CHECK(mst_an_mann_whitney(x, N, y, N, &u));
    CHECK(u.p > 0.001);
    CHECK(mst_an_mann_whitney(x, N, z, N, &u));
    CHECK(u.p < 1e-6);
    free(x);
    free(y);
    free(z);
}

static const mst_test_case tests[] = {
    {"quantiles", quantiles},
    {"histogram", histogram},
    {"least_squares", least_squares},
    {"mann_whitney", mann_whitney},
};
MST_TEST_MAIN(tests)
