/*
 * clock.c — mst_clock_now_ns, the wall clock every span timestamp comes from.
 *
 * clock_gettime(CLOCK_REALTIME) is the reference. On x86-64, when the
 * kernel itself uses the TSC as its clocksource (so the TSC is invariant
 * and synchronised across CPUs), the wall clock is extrapolated from the
 * TSC instead: a calibration pair (tsc0, ns0) and a 32.32 ns-per-tick rate,
 * re-synchronised with CLOCK_REALTIME after 1 ms, 10 ms, 100 ms, then every
 * second (this follows NTP slewing and clock steps within a second). Why:
 * on virtual machines the vDSO call costs ~90 ns while a plain rdtsc costs
 * far less, and a span reads the clock twice. A reader never blocks: the
 * calibration is published with a sequence lock, and a thread that finds it
 * stale re-synchronises only if it wins a try-lock.
 */
#include "core/clock.h"
#include "mstrace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <x86intrin.h>

typedef struct tsc_cal {
    _Atomic uint64_t seq;       /* odd while being written */
    _Atomic uint64_t tsc0, ns0; /* the last synchronisation pair */
    _Atomic uint64_t mult;      /* ns per tick, 32.32 fixed point */
    _Atomic uint64_t resync_after; /* ticks after tsc0 before the next resync */
    _Atomic uint64_t interval_ns;  /* current resync interval */
    _Atomic int busy;           /* try-lock of the writer */
} tsc_cal;

static tsc_cal g_cal;
static int g_use_tsc;           /* 1 yes, 0 no; decided once */
static _Atomic int g_clock_state; /* 0 undecided, 1 TSC, 2 clock_gettime */
static pthread_once_t g_clock_once = PTHREAD_ONCE_INIT;

/* A (realtime, tsc) pair whose tsc brackets the clock read tightly: the
 * best of a few tries limits the jitter of the calibration. */
static void sync_pair(uint64_t *ns, uint64_t *tsc) {
    uint64_t best = UINT64_MAX;
    *ns = 0;
    *tsc = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t a = __rdtsc();
        uint64_t r = realtime_ns();
        uint64_t b = __rdtsc();
        if (b - a < best) {
            best = b - a;
            *ns = r;
            *tsc = a + (b - a) / 2;
        }
    }
}

static bool kernel_uses_tsc(void) {
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (!f) return false;
    char buf[32] = {0};
    bool ok = fgets(buf, sizeof buf, f) && strncmp(buf, "tsc\n", 4) == 0;
    fclose(f);
    return ok;
}

static void clock_fork_child(void);

static void clock_init(void) {
    if (!kernel_uses_tsc()) return;
    uint64_t ns0, tsc0, ns1, tsc1;
    sync_pair(&ns0, &tsc0);
    struct timespec d = {0, 200000}; /* 0.2 ms first estimate */
    nanosleep(&d, NULL);
    sync_pair(&ns1, &tsc1);
    if (tsc1 <= tsc0 || ns1 <= ns0) return;
    uint64_t mult = (uint64_t)(((unsigned __int128)(ns1 - ns0) << 32) / (tsc1 - tsc0));
    if (mult == 0) return;
    atomic_store(&g_cal.tsc0, tsc1);
    atomic_store(&g_cal.ns0, ns1);
    atomic_store(&g_cal.mult, mult);
    atomic_store(&g_cal.interval_ns, 1000000ull);
    atomic_store(&g_cal.resync_after, (uint64_t)(((unsigned __int128)1000000ull << 32) / mult));
    pthread_atfork(NULL, NULL, clock_fork_child);
    g_use_tsc = 1;
}

/* Publishes a fresh calibration; false when another thread holds the
 * try-lock (it is publishing one). */
static __attribute__((noinline)) bool tsc_resync(void) {
    if (atomic_exchange_explicit(&g_cal.busy, 1, memory_order_acquire)) return false;
    uint64_t ns, tsc;
    sync_pair(&ns, &tsc);
    uint64_t tsc0 = atomic_load(&g_cal.tsc0), ns0 = atomic_load(&g_cal.ns0);
    uint64_t mult = atomic_load(&g_cal.mult);
    if (tsc > tsc0 && ns > ns0) {
        uint64_t m = (uint64_t)(((unsigned __int128)(ns - ns0) << 32) / (tsc - tsc0));
        /* A clock step (settimeofday) would give a wild rate: keep the old one. */
        if (m > mult / 2 && m < mult * 2) mult = m;
    }
    uint64_t interval = atomic_load(&g_cal.interval_ns);
    if (interval < 1000000000ull) interval *= 10;
    atomic_fetch_add_explicit(&g_cal.seq, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&g_cal.tsc0, tsc, memory_order_relaxed);
    atomic_store_explicit(&g_cal.ns0, ns, memory_order_relaxed);
    atomic_store_explicit(&g_cal.mult, mult, memory_order_relaxed);
    atomic_store_explicit(&g_cal.interval_ns, interval, memory_order_relaxed);
    atomic_store_explicit(&g_cal.resync_after, (uint64_t)(((unsigned __int128)interval << 32) / mult),
                          memory_order_relaxed);
    atomic_fetch_add_explicit(&g_cal.seq, 1, memory_order_release);
    atomic_store_explicit(&g_cal.busy, 0, memory_order_release);
    return true;
}

/* fork() can copy the calibration while another thread is inside
 * tsc_resync(): `busy` is then held forever (no resync ever again in the
 * child) and `seq` may be odd, which would make every reader in the child
 * spin for ever. The child is single-threaded here: release the try-lock
 * and, if a write was cut, take a fresh pair and publish it (seq even). */
static void clock_fork_child(void) {
    uint64_t seq = atomic_load_explicit(&g_cal.seq, memory_order_relaxed);
    if (seq & 1) {
        uint64_t ns, tsc;
        sync_pair(&ns, &tsc);
        uint64_t mult = atomic_load_explicit(&g_cal.mult, memory_order_relaxed);
        uint64_t interval = atomic_load_explicit(&g_cal.interval_ns, memory_order_relaxed);
        atomic_store_explicit(&g_cal.tsc0, tsc, memory_order_relaxed);
        atomic_store_explicit(&g_cal.ns0, ns, memory_order_relaxed);
        atomic_store_explicit(&g_cal.resync_after, (uint64_t)(((unsigned __int128)interval << 32) / mult),
                              memory_order_relaxed);
        atomic_store_explicit(&g_cal.seq, seq + 1, memory_order_release);
    }
    atomic_store_explicit(&g_cal.busy, 0, memory_order_release);
}

bool mst_clock_test_cut_resync(void) {
    if (atomic_load(&g_clock_state) == 0) (void)mst_clock_now_ns();
    if (atomic_load(&g_clock_state) != 1) return false;
    atomic_store(&g_cal.busy, 1);
    atomic_fetch_add(&g_cal.seq, 1);
    return true;
}

bool mst_clock_test_stale_skewed(void) {
    if (atomic_load(&g_clock_state) == 0) (void)mst_clock_now_ns();
    if (atomic_load(&g_clock_state) != 1) return false;
    atomic_fetch_add(&g_cal.seq, 1);
    atomic_store(&g_cal.mult, atomic_load(&g_cal.mult) / 100 * 101);
    atomic_store(&g_cal.resync_after, 0);
    atomic_fetch_add(&g_cal.seq, 1);
    return true;
}

static __attribute__((noinline)) void clock_first_use(void) {
    pthread_once(&g_clock_once, clock_init);
    atomic_store_explicit(&g_clock_state, g_use_tsc ? 1 : 2, memory_order_release);
}

uint64_t mst_clock_now_ns(void) {
    int state = atomic_load_explicit(&g_clock_state, memory_order_acquire);
    if (__builtin_expect(state == 0, 0)) {
        clock_first_use();
        state = atomic_load_explicit(&g_clock_state, memory_order_acquire);
    }
    if (state != 1) return realtime_ns();
    bool resynced = false;
    for (;;) {
        uint64_t seq = atomic_load_explicit(&g_cal.seq, memory_order_acquire);
        if (seq & 1) continue;
        uint64_t tsc0 = atomic_load_explicit(&g_cal.tsc0, memory_order_relaxed);
        uint64_t ns0 = atomic_load_explicit(&g_cal.ns0, memory_order_relaxed);
        uint64_t mult = atomic_load_explicit(&g_cal.mult, memory_order_relaxed);
        uint64_t after = atomic_load_explicit(&g_cal.resync_after, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&g_cal.seq, memory_order_relaxed) != seq) continue;
        uint64_t tsc = __rdtsc();
        uint64_t d = tsc - tsc0;
        if (__builtin_expect(tsc < tsc0 || d > after, 0)) {
            /* A stale calibration extrapolated over a long idle gap can be
             * microseconds off, and the next read (fresh calibration) would
             * then step back: a child span starting before its parent. So
             * this read takes the fresh one too: read again after publishing
             * it, or take the system clock while another thread publishes. */
            if (!resynced && tsc_resync()) {
                resynced = true; /* once: CPUs whose counters disagree could repeat it */
                continue;
            }
            return realtime_ns();
        }
        return ns0 + (uint64_t)(((unsigned __int128)d * mult) >> 32);
    }
}
#else
uint64_t mst_clock_now_ns(void) { return realtime_ns(); }
bool mst_clock_test_cut_resync(void) { return false; }
bool mst_clock_test_stale_skewed(void) { return false; }
#endif
