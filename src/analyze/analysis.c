/*
 * analysis.c — builds the one analysis result (analysis.h).
 */
#include "analyze/analysis.h"

#include <stdlib.h>
#include <string.h>

/* The request of each id a trigger names (a dump holds few triggers and
 * few named ids, so a scan of the requests is enough). */
static void join_triggers(const mst_an_view *v, mst_an_flight *f) {
    for (size_t t = 0; t < v->n_triggers; t++) {
        const mst_an_trigger *tr = &v->triggers[t];
        for (uint32_t k = 0; k < tr->n_ids_kept; k++) {
            f->request[t][k] = UINT32_MAX;
            size_t n = tr->id_len[k];
            for (size_t q = 0; q < v->n_requests; q++)
                if (v->requests[q].id_len == n && memcmp(v->strings + v->requests[q].id_off, tr->ids[k], n) == 0) {
                    f->request[t][k] = (uint32_t)q;
                    break;
                }
        }
    }
}

mst_status mst_an_analyze(const mst_an_model *m, const mst_an_model *before, mst_an_analysis *a) {
    memset(a, 0, sizeof *a);
    a->model = m;
    mst_an_model_view(m, &a->view);
    join_triggers(&a->view, &a->flight);
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
