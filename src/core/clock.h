/*
 * clock.h — internals of the clocks (clock.c; the wall clock itself,
 * mst_clock_now_ns, is public in mstrace.h).
 *
 * mst_clock_monotonic_ms: the one monotonic millisecond clock for
 * deadlines, timers and back-offs (tracer, forwarder client, forward
 * daemon); inline, so each library has it without an exported symbol.
 *
 * mst_clock_test_cut_resync: a test-only hook. It exists because the state
 * it creates (a re-synchronisation cut in the middle by fork(): sequence
 * lock odd, writer try-lock held) cannot be reached deterministically from
 * outside; tests/unit/test_ids.c uses it to prove a forked child's clock
 * still works. mst_clock_test_stale_skewed: the same kind of hook for the
 * state an idle gap leaves (a calibration due for renewal whose rate has
 * drifted), which would otherwise take seconds of idling to reach. Never
 * called by the library.
 */
#ifndef MST_CORE_CLOCK_H
#define MST_CORE_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t mst_clock_monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Leaves the calibration as a writer thread interrupted mid-resync would
 * (this process's clock readers then spin until the caller fork()s and the
 * child repairs it; the parent must not read the clock again). False when
 * the TSC clock is not in use (nothing was changed). */
bool mst_clock_test_cut_resync(void);

/* Makes the calibration due for renewal and its rate 1 % fast, as a long
 * idle gap after a short calibration can leave it. False when the TSC
 * clock is not in use (nothing was changed). */
bool mst_clock_test_stale_skewed(void);

#endif /* MST_CORE_CLOCK_H */
