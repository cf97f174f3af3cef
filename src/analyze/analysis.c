/*
 * analysis.c — builds the one analysis result (analysis.h).
 */
#include "analyze/analysis.h"

#include <stdlib.h>
#include <string.h>

mst_status mst_an_analyze(const mst_an_model *m, const mst_an_model *before, mst_an_analysis *a) {
    memset(a, 0, sizeof *a);
    a->model = m;
    mst_an_model_view(m, &a->view);
    mst_status st = mst_an_evaluate(&a->view, &a->result);
    if (st != MST_OK) return st;
    if (!before) return MST_OK;
    a->has_before = true;
    mst_an_model_view(before, &a->before_view);
    st = mst_an_evaluate(&a->before_view, &a->before_result);
    if (st == MST_OK) {
        a->compare = malloc(sizeof *a->compare);
        st = a->compare ? mst_an_compare(&a->before_view, &a->before_result, &a->view, &a->result, a->compare)
                        : MST_ERR_NOMEM;
    }
    if (st != MST_OK) mst_an_analysis_free(a);
    return st;
}

void mst_an_analysis_free(mst_an_analysis *a) {
    if (!a) return;
    mst_an_result_free(&a->result);
    if (a->has_before) mst_an_result_free(&a->before_result);
    free(a->compare);
    memset(a, 0, sizeof *a);
}
