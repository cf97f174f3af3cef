/*
 * report_csv.h — `--csv DIR`: request.csv (one row per request) and
 * step.csv (one row per engine step, the upstream tool's batch.csv), with
 * the columns documented in docs/analyze.md "CSV".
 */
#ifndef MST_ANALYZE_REPORT_CSV_H
#define MST_ANALYZE_REPORT_CSV_H

#include <stddef.h>

#include "analyze/model.h"

/* Writes DIR/request.csv and DIR/step.csv (DIR is created if missing). */
mst_status mst_an_report_csv(const mst_an_model *m, const char *dir, char *err, size_t err_size);

#endif /* MST_ANALYZE_REPORT_CSV_H */
