/*
 * analysis.h — the one analysis result every output renders: the model's
 * view, the evaluated result (rules.h) and, with --compare, the before
 * side and the comparison (compare.h). Built once by mst_an_analyze; the
 * text summary (report_text.h), the JSON (report_json.h, which the HTML
 * page embeds) and the CSVs (report_csv.h) only print it, so no number is
 * computed twice or differently per output.
 *
 * A flight-recorder dump's triggers (the view's `triggers`) are joined
 * here to the requests they name, so every output points at the same
 * request rows.
 */
#ifndef MST_ANALYZE_ANALYSIS_H
#define MST_ANALYZE_ANALYSIS_H

#include "analyze/compare.h"
#include "analyze/model.h"
#include "analyze/rules.h"

/* Per trigger, per kept id: the index of that request in view.requests,
 * UINT32_MAX when the dump has no such request. */
typedef struct mst_an_flight {
    uint32_t request[MST_AN_TRIGGERS_KEPT][MST_AN_TRIGGER_IDS_KEPT];
} mst_an_flight;

typedef struct mst_an_analysis {
    const mst_an_model *model;
    mst_an_view view;
    mst_an_flight flight;   /* meaningful for view.n_triggers triggers */
    mst_an_result result;
    bool has_before;
    mst_an_view before_view;
    mst_an_result before_result;
    mst_an_comparison *compare; /* NULL without a before side */
} mst_an_analysis;

/* Analyses `m` (finished), compared with `before` when not NULL. */
mst_status mst_an_analyze(const mst_an_model *m, const mst_an_model *before, mst_an_analysis *out);
void mst_an_analysis_free(mst_an_analysis *a);

#endif /* MST_ANALYZE_ANALYSIS_H */
