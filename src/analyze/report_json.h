/*
 * report_json.h — the analysis JSON (`--json`, schema "mstrace.analyze/1",
 * docs/analyze.md). It is the single source of every number the tool
 * shows: the HTML report is rendered from exactly this text.
 */
#ifndef MST_ANALYZE_REPORT_JSON_H
#define MST_ANALYZE_REPORT_JSON_H

#include <stddef.h>

#include "analyze/model.h"
#include "wire/buf.h"

typedef struct mst_an_json_options {
    size_t top;               /* slowest requests listed (default 10)       */
    size_t max_series;        /* steps.series cap (default 2000)            */
    size_t max_cdf;           /* points per CDF (default 200)               */
    const char *before_label; /* --compare: names of the two sides          */
    const char *after_label;
} mst_an_json_options;

/* Writes the whole analysis of `m` (finished) into `out` (appended). With
 * `before` (finished, may be NULL) the "compare" section compares it with
 * `m`. */
mst_status mst_an_report_json(const mst_an_model *m, const mst_an_model *before,
                              const mst_an_json_options *opt, mst_buf *out);

#endif /* MST_ANALYZE_REPORT_JSON_H */
