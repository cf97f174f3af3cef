/*
 * testlib.h — a tiny unit-test runner for the C tests: each test is a
 * function listed in the file's TESTS table; CHECK failures print file:line
 * and mark the test failed; the runner prints "N passed, N failed".
 */
#ifndef MST_TESTLIB_H
#define MST_TESTLIB_H

#include <stdio.h>
#include <string.h>

extern int mst_test_failed_flag;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    mst_test_failed_flag = 1; } } while (0)
#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { \
    fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, _a, _b); \
    mst_test_failed_flag = 1; } } while (0)
#define CHECK_EQ_STR(a, b) do { const char *_a = (a), *_b = (b); if (!_a || !_b || strcmp(_a, _b) != 0) { \
    fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b, \
            _a ? _a : "(null)", _b ? _b : "(null)"); mst_test_failed_flag = 1; } } while (0)

typedef struct mst_test_case { const char *name; void (*fn)(void); } mst_test_case;

int mst_test_run_all(const mst_test_case *tests, size_t n, int argc, char **argv);

/* A whole file, NUL-terminated (malloc'ed; free it), *len its bytes (len
 * may be NULL); NULL when it cannot be read. */
char *mst_test_read_file(const char *path, size_t *len);

/* Work size of a stress loop: `dflt` rounds, or fewer when the environment
 * sets MST_TEST_STRESS_ROUNDS (valgrind runs, which serialise threads, set
 * it low). Stress tests are bounded by work, never by time. */
int mst_test_stress_rounds(int dflt);

#define MST_TEST_MAIN(table) \
    int main(int argc, char **argv) { return mst_test_run_all(table, sizeof(table) / sizeof(table[0]), argc, argv); }

#endif
