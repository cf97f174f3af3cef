/*
 * rules.h — the analysis of `mstrace analyze`: mst_an_evaluate fills one
 * mst_an_result (result.h) — the stage split (parts of each step's wall
 * that sum to it, plus the API server's concurrent output work), the
 * per-request metrics with vLLM's definitions, per-engine summaries, the
 * timeline, the findings of every rule of the rule table (rules_engine.h,
 * rules_serving.h), the verdict, the data-quality warnings and the profile
 * targets. Computed once; the text, JSON, CSV and HTML outputs only render
 * it (docs/analyze.md "Rules").
 */
#ifndef MST_ANALYZE_RULES_H
#define MST_ANALYZE_RULES_H

#include <stddef.h>

#include "analyze/model.h"
#include "analyze/result.h"

/* The rule table: every rule, in the order findings are reported. */
const mst_an_rule *mst_an_rules(size_t *n);

/* The analysis of a finished model; free with mst_an_result_free. */
mst_status mst_an_evaluate(const mst_an_view *v, mst_an_result *out);

#endif /* MST_ANALYZE_RULES_H */
