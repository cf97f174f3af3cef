/*
 * rules_serving.h — the rules about requests: capacity (KV cache full or
 * max_num_seqs reached, requests waiting), preemption, prefill
 * interference with decodes, the long tail, broken joining, and the clock
 * (data-quality) check. Each is an mst_an_rule_fn of the table in rules.c;
 * thresholds are named constants in rules_serving.c and listed in
 * docs/analyze.md "Rules".
 */
#ifndef MST_ANALYZE_RULES_SERVING_H
#define MST_ANALYZE_RULES_SERVING_H

#include "analyze/result.h"

bool mst_an_rule_capacity(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_preemption(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_prefill_interference(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_long_tail(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_broken_joining(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);
bool mst_an_rule_clock(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f);

#endif /* MST_ANALYZE_RULES_SERVING_H */
