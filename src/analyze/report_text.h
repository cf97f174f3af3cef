/*
 * report_text.h — the text summary of `mstrace analyze` on stdout: data,
 * verdict, data-quality warnings, fired rules, the latency table (queue,
 * TTFT, TPOT, ITL, prefill, decode, e2e: p50/p90/p99), the stage split, the
 * engines, profile targets and the comparison. It renders the one analysis
 * (analysis.h). Every piece of outside text (request ids, input names,
 * anything read from a trace) goes through term_text.h, the one place that
 * makes it safe for a terminal.
 */
#ifndef MST_ANALYZE_REPORT_TEXT_H
#define MST_ANALYZE_REPORT_TEXT_H

#include <stdio.h>

#include "analyze/analysis.h"

void mst_an_report_text(FILE *f, const mst_an_analysis *an, const char *before_label,
                        const char *after_label);

#endif /* MST_ANALYZE_REPORT_TEXT_H */
