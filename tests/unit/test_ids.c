/* test_ids.c — random ids (never zero, distinct, reseeded per thread), hex
 * round trips and strictness, and the wall clock. */
#include "testlib.h"
#include "mstrace.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "wire/hex8.h"

static void test_random_ids_nonzero_and_distinct(void) {
    enum { N = 2000 };
    static mst_span_id ids[N];
    for (int i = 0; i < N; i++) {
        ids[i] = mst_span_id_random();
        CHECK(mst_span_id_is_valid(&ids[i]));
    }
    int dup = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            if (memcmp(ids[i].bytes, ids[j].bytes, 8) == 0) dup++;
    CHECK_EQ_INT(dup, 0);
    mst_trace_id a = mst_trace_id_random(), b = mst_trace_id_random();
    CHECK(mst_trace_id_is_valid(&a));
    CHECK(memcmp(a.bytes, b.bytes, 16) != 0);
}

static void *thread_id(void *arg) {
    *(mst_trace_id *)arg = mst_trace_id_random();
    return NULL;
}

static void test_threads_get_different_streams(void) {
    mst_trace_id a, b;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, thread_id, &a);
    pthread_join(t1, NULL);
    pthread_create(&t2, NULL, thread_id, &b);
    pthread_join(t2, NULL);
    CHECK(memcmp(a.bytes, b.bytes, 16) != 0);
}

static void test_hex_round_trip(void) {
    mst_trace_id t = mst_trace_id_random(), t2;
    char hex[33];
    mst_trace_id_to_hex(&t, hex);
    CHECK_EQ_INT(strlen(hex), 32);
    CHECK_EQ_INT(mst_trace_id_from_hex(hex, 32, &t2), MST_OK);
    CHECK(memcmp(t.bytes, t2.bytes, 16) == 0);
    mst_span_id s, s2;
    CHECK_EQ_INT(mst_span_id_from_hex("00f067aa0ba902b7", 16, &s), MST_OK);
    char sh[17];
    mst_span_id_to_hex(&s, sh);
    CHECK_EQ_STR(sh, "00f067aa0ba902b7");
    s2 = s;
    CHECK(memcmp(s.bytes, s2.bytes, 8) == 0);
    CHECK_EQ_INT(s.bytes[0], 0x00);
    CHECK_EQ_INT(s.bytes[7], 0xb7);
}

static void test_hex_strict(void) {
    mst_span_id s = {{1, 2, 3, 4, 5, 6, 7, 8}};
    CHECK_EQ_INT(mst_span_id_from_hex("00F067AA0BA902B7", 16, &s), MST_ERR_PARSE); /* uppercase */
    CHECK_EQ_INT(mst_span_id_from_hex("0000000000000000", 16, &s), MST_ERR_PARSE); /* zero */
    CHECK_EQ_INT(mst_span_id_from_hex("00f067aa0ba902b", 15, &s), MST_ERR_PARSE);  /* short */
    CHECK_EQ_INT(mst_span_id_from_hex("00f067aa0ba902bg", 16, &s), MST_ERR_PARSE); /* non-hex */
    CHECK_EQ_INT(s.bytes[0], 1); /* untouched on error */
    CHECK_EQ_INT(mst_span_id_from_hex(NULL, 16, &s), MST_ERR_INVALID_ARG);
    mst_trace_id t;
    CHECK_EQ_INT(mst_trace_id_from_hex("00000000000000000000000000000000", 32, &t), MST_ERR_PARSE);
    CHECK(!mst_trace_id_is_valid(NULL));
}

static void test_clock_is_wall_time(void) {
    uint64_t a = mst_clock_now_ns();
    uint64_t b = mst_clock_now_ns();
    CHECK(a > 1600000000ull * 1000000000ull); /* after 2020 */
    CHECK(b >= a);
}

/* A read that finds the calibration due for renewal (after an idle gap,
 * its rate drifted) takes the renewed one: the next read never lies before
 * it (it did: a worker's first span after model loading started 0.9 ms
 * before its parent). The skew makes the old extrapolation run ahead by 1 %
 * of the time since the last calibration, far more than two reads apart. */
static void test_clock_read_after_idle_never_steps_back(void) {
    for (int round = 0; round < 50; round++) {
        if (!mst_clock_test_stale_skewed()) {
            fprintf(stderr, "  (TSC clock not in use here: skipped)\n");
            return;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        uint64_t a = mst_clock_now_ns();
        uint64_t b = mst_clock_now_ns();
        CHECK(b >= a);
        CHECK(a >= real); /* from the fresh pair, taken after `real` */
    }
}

/* fork() while another thread is inside the TSC re-synchronisation: the
 * child must repair the calibration (the sequence lock would be odd for
 * ever and every clock read would spin). Runs in a helper process because
 * the cut leaves that process's own clock unusable. */
static void test_clock_works_in_child_forked_mid_resync(void) {
    pid_t helper = fork();
    CHECK(helper >= 0);
    if (helper == 0) {
        alarm(10);
        if (!mst_clock_test_cut_resync()) _exit(77); /* clock_gettime clock: nothing to test */
        pid_t child = fork();
        if (child == 0) {
            alarm(5); /* a hang is the failure being tested */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t ref = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
            uint64_t a = mst_clock_now_ns();
            uint64_t b = mst_clock_now_ns();
            bool ok = b >= a && a + 1000000000ull > ref && a < ref + 1000000000ull;
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child) _exit(2);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
    }
    int status = 0;
    CHECK(waitpid(helper, &status, 0) == helper);
    CHECK(WIFEXITED(status));
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 77) fprintf(stderr, "  (TSC clock not in use here: skipped)\n");
    else CHECK_EQ_INT(code, 0);
}

/* mst_hex16_value (16 digits at once: SSE2 or two SWAR words) against a
 * byte loop: every byte value at every one of the 16 positions, in digits
 * of both cases; true exactly when all 16 are hex digits, then the value. */
static void test_hex16_value_every_byte(void) {
#ifdef MST_HEX8_SWAR
    static const char base[] = "0123456789abcDEF";
    int accepted = 0;
    for (int pos = 0; pos < 16; pos++)
        for (int c = 0; c < 256; c++) {
            char in[17];
            memcpy(in, base, 17);
            in[pos] = (char)c;
            uint64_t want = 0;
            bool hex = true;
            for (int i = 0; i < 16; i++) {
                unsigned char d = (unsigned char)in[i];
                unsigned v = d >= '0' && d <= '9'   ? d - '0' + 0u
                             : d >= 'a' && d <= 'f' ? d - 'a' + 10u
                             : d >= 'A' && d <= 'F' ? d - 'A' + 10u
                                                    : 16u;
                if (v == 16u) hex = false;
                want = want << 4 | (v & 15u);
            }
            uint64_t got = 0;
            bool ok = mst_hex16_value(in, &got);
            CHECK(ok == hex);
            if (ok) CHECK(got == want);
            accepted += ok;
        }
    CHECK_EQ_INT(accepted, 16 * 22); /* 0-9, a-f, A-F at each position */
#endif
}

static const mst_test_case tests[] = {
    {"random_ids_nonzero_and_distinct", test_random_ids_nonzero_and_distinct},
    {"threads_get_different_streams", test_threads_get_different_streams},
    {"hex_round_trip", test_hex_round_trip},
    {"hex_strict", test_hex_strict},
    {"hex16_value_every_byte", test_hex16_value_every_byte},
    {"clock_is_wall_time", test_clock_is_wall_time},
    {"clock_works_in_child_forked_mid_resync", test_clock_works_in_child_forked_mid_resync},
    {"clock_read_after_idle_never_steps_back", test_clock_read_after_idle_never_steps_back},
};
MST_TEST_MAIN(tests)
