/* testlib.c — runner behind testlib.h; `test_x NAME` runs one test only. */
#include "testlib.h"

#include <stdlib.h>

int mst_test_failed_flag;

int mst_test_stress_rounds(int dflt) {
    const char *e = getenv("MST_TEST_STRESS_ROUNDS");
    int n = e ? atoi(e) : dflt;
    return n > 0 && n < dflt ? n : dflt;
}

int mst_test_run_all(const mst_test_case *tests, size_t n, int argc, char **argv) {
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0) continue;
        mst_test_failed_flag = 0;
        tests[i].fn();
        if (mst_test_failed_flag) {
            failed++;
            fprintf(stderr, "FAIL %s\n", tests[i].name);
        } else {
            passed++;
            fprintf(stderr, "ok   %s\n", tests[i].name);
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

char *mst_test_read_file(const char *path, size_t *len) {
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) {
        fclose(f);
        return NULL;
    }
    size_t got = fread(s, 1, (size_t)n, f);
    fclose(f);
    s[got] = '\0';
    if (len) *len = got;
    return s;
}
