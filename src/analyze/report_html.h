/*
 * report_html.h — the self-contained HTML report of `mstrace analyze`
 * (`-o report.html`): one file that opens offline, drawn in the browser by
 * an embedded hand-written script (src/analyze/report_assets/report.js)
 * from the analysis JSON embedded in the page. Why from the JSON: the page
 * shows exactly the numbers `--json` writes (docs/analyze.md, "The HTML
 * report").
 */
#ifndef MST_ANALYZE_REPORT_HTML_H
#define MST_ANALYZE_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "mstrace.h"

/* Writes the whole page to `out`. `analysis_json` (len bytes) is the
 * analysis as `--json` writes it; it must be one valid JSON value (checked:
 * MST_ERR_PARSE otherwise, nothing written). It is embedded escaped so that
 * no string in it can end the script element or break the page ("<", ">",
 * "&", U+2028 and U+2029 become \u escapes). MST_ERR_IO when writing fails.
 * On error, `err` (err_size bytes, may be NULL) gets one sentence. */
mst_status mst_report_html_write(FILE *out, const char *analysis_json, size_t len, char *err,
                                 size_t err_size);

#endif /* MST_ANALYZE_REPORT_HTML_H */
