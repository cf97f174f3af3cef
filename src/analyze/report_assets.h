/*
 * report_assets.h — the HTML report's stylesheet and script
 * (src/analyze/report_assets/report.css, report.js), embedded in the binary
 * at build time: cmake/embed_text.cmake writes their bytes into a generated
 * report_assets.c in the build directory. Why embedded: the report is one
 * file written by one binary, with nothing to find or fetch at run time.
 */
#ifndef MST_ANALYZE_REPORT_ASSETS_H
#define MST_ANALYZE_REPORT_ASSETS_H

#include <stddef.h>

extern const unsigned char mst_report_css[]; /* NUL-terminated */
extern const size_t mst_report_css_len;      /* bytes, without the NUL */
extern const unsigned char mst_report_js[];
extern const size_t mst_report_js_len;

#endif /* MST_ANALYZE_REPORT_ASSETS_H */
