/*
 * report_json.h — the analysis JSON (`--json`, schema "mstrace.analyze/2",
 * docs/analyze.md). It is the single source of every number the tool
 * shows: the HTML report is rendered from exactly this text.
 */
#ifndef MST_ANALYZE_REPORT_JSON_H
#define MST_ANALYZE_REPORT_JSON_H

#include <stddef.h>

#include "analyze/analysis.h"
#include "wire/buf.h"

typedef struct mst_an_json_options {
    size_t top;               /* slowest requests listed (default 10)       */
    size_t max_series;        /* steps.series cap (default 2000)            */
    size_t max_cdf;           /* points per CDF (default 200)               */
    const char *before_label; /* --compare: names of the two sides          */
    const char *after_label;
} mst_an_json_options;

/* Writes the analysis (appended to `out`); with a before side its
 * "compare" section is filled in. */
mst_status mst_an_report_json(const mst_an_analysis *an, const mst_an_json_options *opt, mst_buf *out);

#endif /* MST_ANALYZE_REPORT_JSON_H */
