/*
 * ids.c — random trace/span ids, their hex forms, and the wall clock.
 *
 * Owns: one xoshiro256** generator per thread, seeded from getrandom() the
 * first time the thread needs an id and again in a fork()ed child (a child
 * must never repeat its parent's ids). Fork detection costs one relaxed load
 * per id: a pthread_atfork child handler bumps a global generation that each
 * thread compares with the one it seeded under. No syscall per id.
 * The wall clock: CLOCK_REALTIME, or on x86-64 the TSC calibrated against
 * it (see the clock section below for why and how).
 */
#include "mstrace.h"
#include "core/clock_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct rng_state {
    uint64_t s[4];
    unsigned gen;   /* g_fork_gen when seeded */
    bool seeded;
} rng_state;

static _Atomic unsigned g_fork_gen;
static __thread rng_state t_rng;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) {
    atomic_fetch_add_explicit(&g_fork_gen, 1, memory_order_relaxed);
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Seeds from getrandom; if the kernel pool is unavailable, falls back to
 * time, pid, tid and an address, which is still distinct per process. The
 * seed always goes through splitmix64 so the state is never all zero. */
static __attribute__((noinline)) void rng_reseed(rng_state *r) {
    pthread_once(&g_atfork_once, register_atfork);
    uint64_t seed[4] = {0, 0, 0, 0};
    ssize_t got = getrandom(seed, sizeof seed, GRND_NONBLOCK);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t mix = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    if (got != (ssize_t)sizeof seed) {
        mix ^= ((uint64_t)getpid() << 32) ^ (uint64_t)syscall(SYS_gettid) ^ (uint64_t)(uintptr_t)r;
    }
    for (int i = 0; i < 4; i++) {
        uint64_t x = seed[i] ^ mix ^ (uint64_t)i;
        r->s[i] = splitmix64(&x);
        mix = r->s[i];
    }
    r->gen = atomic_load_explicit(&g_fork_gen, memory_order_relaxed);
    r->seeded = true;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(void) {
    rng_state *r = &t_rng;
    if (__builtin_expect(!r->seeded || r->gen != atomic_load_explicit(&g_fork_gen, memory_order_relaxed), 0))
        rng_reseed(r);
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

mst_trace_id mst_trace_id_random(void) {
    mst_trace_id id;
    uint64_t a, b;
    do {
        a = rng_next();
        b = rng_next();
    } while ((a | b) == 0);
    memcpy(id.bytes, &a, 8);
    memcpy(id.bytes + 8, &b, 8);
    return id;
}

mst_span_id mst_span_id_random(void) {
    mst_span_id id;
    uint64_t a;
    do a = rng_next(); while (a == 0);
    memcpy(id.bytes, &a, 8);
    return id;
}

static bool all_zero(const uint8_t *p, size_t n) {
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) acc |= p[i];
    return acc == 0;
}

bool mst_trace_id_is_valid(const mst_trace_id *id) { return id && !all_zero(id->bytes, 16); }
bool mst_span_id_is_valid(const mst_span_id *id) { return id && !all_zero(id->bytes, 8); }

static void to_hex(const uint8_t *p, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

void mst_trace_id_to_hex(const mst_trace_id *id, char out[33]) { to_hex(id->bytes, 16, out); }
void mst_span_id_to_hex(const mst_span_id *id, char out[17]) { to_hex(id->bytes, 8, out); }

/* Lowercase hex digit value, or -1 (uppercase is invalid per W3C). */
static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static mst_status from_hex(const char *hex, size_t len, uint8_t *out, size_t n) {
    if (!hex || !out) return MST_ERR_INVALID_ARG;
    if (len != 2 * n) return MST_ERR_PARSE;
    uint8_t tmp[16];
    for (size_t i = 0; i < n; i++) {
        int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return MST_ERR_PARSE;
        tmp[i] = (uint8_t)(hi << 4 | lo);
    }
    if (all_zero(tmp, n)) return MST_ERR_PARSE;
    memcpy(out, tmp, n);
    return MST_OK;
}

mst_status mst_trace_id_from_hex(const char *hex, size_t len, mst_trace_id *out) {
    return from_hex(hex, len, out ? out->bytes : NULL, 16);
}

mst_status mst_span_id_from_hex(const char *hex, size_t len, mst_span_id *out) {
    return from_hex(hex, len, out ? out->bytes : NULL, 8);
}

/* ---------------------------------------------------------------- clock
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
 * stale re-synchronises only if it wins a try-lock. */

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

static __attribute__((noinline)) void tsc_resync(void) {
    if (atomic_exchange_explicit(&g_cal.busy, 1, memory_order_acquire)) return;
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
            tsc_resync();
            if (tsc < tsc0) return realtime_ns();
        }
        return ns0 + (uint64_t)(((unsigned __int128)d * mult) >> 32);
    }
}
#else
uint64_t mst_clock_now_ns(void) { return realtime_ns(); }
bool mst_clock_test_cut_resync(void) { return false; }
#endif
