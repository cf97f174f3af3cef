/*
 * ids.c — random trace/span ids and their hex forms.
 *
 * Owns: one xoshiro256** generator per thread, seeded from getrandom() the
 * first time the thread needs an id and again in a fork()ed child (a child
 * must never repeat its parent's ids). Fork detection costs one relaxed load
 * per id: a pthread_atfork child handler bumps a global generation that each
 * thread compares with the one it seeded under. No syscall per id.
 * The wall clock is clock.c.
 */
#include "mstrace.h"

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

/* This thread's generator, seeded (again in a fork()ed child). Taken once
 * per id: each reach of the thread-local state from this shared object is a
 * __tls_get_addr call, and the compiler would rather call it again than keep
 * the address in a register; the empty asm makes the address an opaque
 * value it must keep. */
static inline rng_state *rng_ready(void) {
    rng_state *r = &t_rng;
    __asm__("" : "+r"(r));
    if (__builtin_expect(!r->seeded || r->gen != atomic_load_explicit(&g_fork_gen, memory_order_relaxed), 0))
        rng_reseed(r);
    return r;
}

static inline uint64_t rng_next(rng_state *r) {
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
    rng_state *r = rng_ready();
    mst_trace_id id;
    uint64_t a, b;
    do {
        a = rng_next(r);
        b = rng_next(r);
    } while ((a | b) == 0);
    memcpy(id.bytes, &a, 8);
    memcpy(id.bytes + 8, &b, 8);
    return id;
}

mst_span_id mst_span_id_random(void) {
    rng_state *r = rng_ready();
    mst_span_id id;
    uint64_t a;
    do a = rng_next(r); while (a == 0);
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
