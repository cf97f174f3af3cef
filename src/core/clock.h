/*
 * clock.h — internals of the wall clock (clock.c; the clock itself,
 * mst_clock_now_ns, is public in mstrace.h). Only a test-only hook lives
 * here. It exists because the state it creates (a re-synchronisation cut in the
 * middle by fork(): sequence lock odd, writer try-lock held) cannot be
 * reached deterministically from outside; tests/unit/test_ids.c uses it to
 * prove a forked child's clock still works. Never called by the library.
 */
#ifndef MST_CORE_CLOCK_H
#define MST_CORE_CLOCK_H

#include <stdbool.h>

/* Leaves the calibration as a writer thread interrupted mid-resync would
 * (this process's clock readers then spin until the caller fork()s and the
 * child repairs it; the parent must not read the clock again). False when
 * the TSC clock is not in use (nothing was changed). */
bool mst_clock_test_cut_resync(void);

#endif /* MST_CORE_CLOCK_H */
