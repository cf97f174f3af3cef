/*
 * inspect_exporter.h — for the C tests: a tracer whose one exporter hands
 * every exported span to an inspect function, so a test checks what the
 * exporter thread sees (inspect_exporter.c). One at a time per test process.
 */
#ifndef MST_TEST_INSPECT_EXPORTER_H
#define MST_TEST_INSPECT_EXPORTER_H

#include "mstrace.h"

/* A tracer (queue of 64, batches of 16, no timed export) with the inspecting
 * exporter; no inspect function until mst_test_inspect_set. */
mst_tracer *mst_test_inspect_setup(void);
/* What each exported span is handed to from now on (NULL: nothing). */
void mst_test_inspect_set(void (*inspect)(const mst_span *s));
/* Flushes and shuts the tracer down; the number of spans exported. */
int mst_test_inspect_finish(void);

#endif /* MST_TEST_INSPECT_EXPORTER_H */
