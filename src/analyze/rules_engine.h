/*
 * rules_engine.h — the rules about the engine's own time: scheduler and
 * output cost rising at like batch sizes, the model forward dominating,
 * executor overhead, host waiting (and which stage fills the engine's idle
 * gaps), and one engine slower than the others. Each is an mst_an_rule_fn
 * (result.h) of the table in rules.c; thresholds are named constants in rules_engine.c
 * and listed in docs/analyze.md "Rules".
 */
#ifndef MST_ANALYZE_RULES_ENGINE_H
#define MST_ANALYZE_RULES_ENGINE_H

#include "analyze/result.h"

bool mst_an_rule_scheduler_rising(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_model_dominant(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_executor_gap(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_output_rising(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_host_waiting(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_rank_imbalance(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);

#endif /* MST_ANALYZE_RULES_ENGINE_H */
