/*
 * test_out_queue.c — the Chrome writer's threaded output (forward/out_queue.h):
 * elements handed to the writer thread end up in the file in order, each
 * exactly once, the file is valid JSON after every flush, and failed writes
 * (made with RLIMIT_FSIZE, SIGXFSZ ignored) are counted, retried at the same
 * offset once the file can grow again, and dropped (file cut back to its
 * last valid state) beyond the retain bound. While writes keep failing the
 * file is valid at every moment (a failed partial write is undone at once),
 * for the JSON layout and for a layout without a tail. Room for part of the
 * backlog takes that part, in whole elements (to within a page), and a
 * stalled writer retries on its own timer, without new data or a flush.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forward/out_queue.h"
#include "testlib.h"
#include "wire/json_reader.h"

static char g_path[64];

/* A fresh "[]" file; returns its fd. */
static int open_array_file(void) {
    snprintf(g_path, sizeof g_path, "/tmp/mst_outq_test_XXXXXX");
    int fd = mkstemp(g_path);
    if (fd < 0) abort();
    if (pwrite(fd, "[]", 2, 0) != 2) abort();
    return fd;
}

static char *read_all(size_t *len) {
    *len = 0;
    FILE *f = fopen(g_path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)(n < 0 ? 0 : n) + 1);
    size_t got = s && n >= 0 ? fread(s, 1, (size_t)n, f) : 0;
    fclose(f);
    if (s) s[got] = '\0';
    *len = got;
    return s;
}

/* k when the file is a valid JSON array of the integers 0..k-1 in
 * order, else -1. */
static long file_count_0_to(void) {
    size_t len;
    char *s = read_all(&len);
    bool ok = s && mst_json_validate(s, len, 4, NULL, NULL) && s[0] == '[' && s[len - 1] == ']';
    long want = 0;
    for (char *p = s + 1; ok && *p && *p != ']'; want++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v != want) ok = false;
        while (*end == ' ') end++;
        p = *end == ',' ? end + 1 : end;
    }
    free(s);
    return ok ? want : -1;
}

/* Valid JSON array whose elements are the integers 0..n-1 in order. */
static bool file_holds_0_to(long n) {
    long k = file_count_0_to();
    if (k != n) fprintf(stderr, "  file does not hold 0..%ld (holds %ld)\n", n - 1, k);
    return k == n;
}

/* Appends ",<i>" padded with spaces to `width` bytes. */
static void add_element(mst_outq *q, long i, int width) {
    mst_buf *b = mst_outq_buf(q);
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, ",%ld", i);
    mst_buf_append(b, tmp, (size_t)n);
    for (int k = n; k < width; k++) mst_buf_append_byte(b, ' ');
    mst_outq_added(q, 1, 0);
}

/* add_element for `count` more elements numbered from *n on. */
static void add_elements(mst_outq *q, long *n, int count, int width) {
    for (int k = 0; k < count; k++) add_element(q, (*n)++, width);
}

/* A queue writing the JSON layout into a fresh "[]" file (*fd). */
static mst_outq *start_array_queue(int *fd) {
    *fd = open_array_file();
    mst_outq *q = NULL;
    CHECK_EQ_INT(mst_outq_start(*fd, 1, 2, &q), MST_OK);
    if (!q) abort();
    return q;
}

static void remove_file(int fd) {
    close(fd);
    unlink(g_path);
}

static void set_fsize_limit(rlim_t lim) {
    struct rlimit rl;
    getrlimit(RLIMIT_FSIZE, &rl);
    rl.rlim_cur = lim;
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) perror("setrlimit");
}

/* Makes a write past a file size limit fail with EFBIG instead of killing
 * the process; returns the limit to restore with setrlimit. */
static struct rlimit fsize_limit_saved(void) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit saved;
    getrlimit(RLIMIT_FSIZE, &saved);
    return saved;
}

/* 100 elements written, then a file limit with room for ~50 more, and 200
 * more: the flush fails midway and the writer stalls. */
static void stall_after_100(mst_outq *q, long *n) {
    add_elements(q, n, 100, 10);
    CHECK_EQ_INT(mst_outq_flush(q), MST_OK);
    set_fsize_limit(1500);
    add_elements(q, n, 200, 10);
    CHECK_EQ_INT(mst_outq_flush(q), MST_ERR_IO);
}

static void test_many_chunks_in_order(void) {
    int fd;
    mst_outq *q = start_array_queue(&fd);
    long n = 0;
    /* ~12 MB: several full chunks, early hand-offs and end-of-batch ones. */
    for (int batch = 0; batch < 60; batch++) {
        add_elements(q, &n, 2000, 100);
        (void)mst_outq_handoff(q);
    }
    CHECK_EQ_INT(mst_outq_flush(q), MST_OK);
    CHECK(file_holds_0_to(n));
    mst_outq_stats st;
    CHECK_EQ_INT(mst_outq_stop(q, &st), MST_OK);
    CHECK_EQ_INT(st.spans_written, n);
    CHECK_EQ_INT(st.write_errors, 0);
    struct stat sb;
    CHECK(fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == st.bytes_written);
    remove_file(fd);
}

static void test_valid_after_every_flush(void) {
    int fd;
    mst_outq *q = start_array_queue(&fd);
    CHECK_EQ_INT(mst_outq_flush(q), MST_OK); /* nothing buffered */
    CHECK(file_holds_0_to(0));
    long n = 0;
    for (int round = 0; round < 20; round++) {
        add_elements(q, &n, round * 50, 1 + round);
        CHECK_EQ_INT(mst_outq_flush(q), MST_OK);
        CHECK(file_holds_0_to(n));
        CHECK_EQ_INT(mst_outq_unwritten(q), 0);
    }
    CHECK_EQ_INT(mst_outq_stop(q, NULL), MST_OK);
    CHECK(file_holds_0_to(n));
    remove_file(fd);
}

static void test_write_errors_retried_then_written(void) {
    struct rlimit saved = fsize_limit_saved();
    int fd;
    mst_outq *q = start_array_queue(&fd);
    long n = 0;
    stall_after_100(q, &n);
    mst_outq_stats st;
    mst_outq_get_stats(q, &st);
    CHECK(st.write_errors >= 1);
    CHECK_EQ_INT(st.spans_written, 100);
    /* More events while stalled: they join the retry (still failing). */
    add_elements(q, &n, 50, 10);
    CHECK_EQ_INT(mst_outq_handoff(q), 0);
    CHECK_EQ_INT(mst_outq_flush(q), MST_ERR_IO);
    setrlimit(RLIMIT_FSIZE, &saved);
    CHECK_EQ_INT(mst_outq_flush(q), MST_OK); /* retried at the same offset */
    CHECK(file_holds_0_to(n));
    CHECK_EQ_INT(mst_outq_stop(q, &st), MST_OK);
    CHECK_EQ_INT(st.spans_written, n);
    CHECK_EQ_INT(st.spans_dropped, 0);
    remove_file(fd);
}

static void test_failing_writes_dropped_beyond_retain_bound(void) {
    struct rlimit saved = fsize_limit_saved();
    int fd;
    mst_outq *q = start_array_queue(&fd);
    long n = 0;
    add_elements(q, &n, 10, 10);
    CHECK_EQ_INT(mst_outq_flush(q), MST_OK);
    set_fsize_limit(4096);
    /* More than the retain bound of failing output: dropped, counted, and
     * the file cut back to its valid 10 elements. */
    long before = n;
    while ((uint64_t)(n - before) * 1000 < MST_OUTQ_MAX_RETAIN_BYTES + (4u << 20)) {
        add_element(q, n++, 1000);
        (void)mst_outq_handoff(q);
    }
    (void)mst_outq_flush(q);
    mst_outq_stats st;
    mst_outq_get_stats(q, &st);
    CHECK(st.spans_dropped > 0);
    CHECK(st.write_errors >= 2);
    CHECK(mst_outq_unwritten(q) <= MST_OUTQ_MAX_RETAIN_BYTES);
    /* The bound holds for a producer that waits for room, too. */
    CHECK(mst_outq_wait_room(q, MST_OUTQ_MAX_RETAIN_BYTES + (8u << 20)));
    setrlimit(RLIMIT_FSIZE, &saved);
    mst_status fst = mst_outq_flush(q);
    CHECK_EQ_INT(fst, MST_OK);
    CHECK_EQ_INT(mst_outq_stop(q, &st), MST_OK);
    CHECK_EQ_INT(st.spans_written + st.spans_dropped, n);
    size_t len;
    char *s = read_all(&len);
    CHECK(s && mst_json_validate(s, len, 4, NULL, NULL));
    free(s);
    remove_file(fd);
}

/* A write that fails midway (the file limit is hit after ~50 elements) is
 * undone at once: while the writer is stalled, the file holds exactly the
 * elements written before, as valid JSON. */
static void test_file_valid_while_writes_fail(void) {
    struct rlimit saved = fsize_limit_saved();
    int fd;
    mst_outq *q = start_array_queue(&fd);
    long n = 0;
    stall_after_100(q, &n);
    CHECK(file_holds_0_to(100)); /* stalled: still valid, the partial write undone */
    add_elements(q, &n, 20, 10);
    CHECK_EQ_INT(mst_outq_flush(q), MST_ERR_IO);
    CHECK(file_holds_0_to(100));
    setrlimit(RLIMIT_FSIZE, &saved);
    mst_outq_stats st;
    CHECK_EQ_INT(mst_outq_stop(q, &st), MST_OK);
    CHECK(file_holds_0_to(n));
    CHECK_EQ_INT(st.spans_written, n);
    CHECK_EQ_INT(st.spans_dropped, 0);
    remove_file(fd);
}

/* `count` records of the text `rec`, one span each (no separators). */
static void add_records(mst_outq *q, int count, const char *rec) {
    for (int k = 0; k < count; k++) {
        mst_buf_append(mst_outq_buf(q), rec, strlen(rec));
        mst_outq_added(q, 1, 0);
    }
}

/* The same rules for a format without a closing part (e.g. a stream of
 * records): a failed write leaves exactly the records written before; given
 * up at the stop, the spans are counted as dropped, the file unchanged. */
static void test_layout_without_tail(void) {
    struct rlimit saved = fsize_limit_saved();
    snprintf(g_path, sizeof g_path, "/tmp/mst_outq_test_XXXXXX");
    int fd = mkstemp(g_path);
    CHECK(fd >= 0);
    static const mst_outq_layout records = {.tail = "", .tail_len = 0, .first_skip = 0};
    mst_outq *q;
    CHECK_EQ_INT(mst_outq_start_layout(fd, &records, 0, 0, &q), MST_OK);
    add_records(q, 10, "0123456789");
    CHECK_EQ_INT(mst_outq_flush(q), MST_OK);
    set_fsize_limit(150);
    add_records(q, 10, "abcdefghij");
    CHECK_EQ_INT(mst_outq_flush(q), MST_ERR_IO);
    struct stat sb;
    CHECK(fstat(fd, &sb) == 0 && sb.st_size == 100);
    mst_outq_stats st;
    CHECK_EQ_INT(mst_outq_stop(q, &st), MST_ERR_IO);
    setrlimit(RLIMIT_FSIZE, &saved);
    CHECK_EQ_INT(st.spans_written, 10);
    CHECK_EQ_INT(st.spans_dropped, 10);
    CHECK(fstat(fd, &sb) == 0 && sb.st_size == 100);
    remove_file(fd);
}

/* Waits for the writer thread (no call into the queue that would retry)
 * until `n` spans are written; bounded by polls, not asserting a time. */
static bool wait_written(mst_outq *q, uint64_t n) {
    struct timespec ms10 = {0, 10 * 1000 * 1000};
    mst_outq_stats st;
    for (int i = 0; i < 6000; i++) { /* the writer retries every 200 ms */
        mst_outq_get_stats(q, &st);
        if (st.spans_written >= n) return true;
        nanosleep(&ms10, NULL);
    }
    fprintf(stderr, "  only %llu of %llu spans written\n", (unsigned long long)st.spans_written,
            (unsigned long long)n);
    return false;
}

/* A file limit with room for half of a 100 kB backlog: the failing write
 * still takes about half (whole elements, the file valid), the rest waits;
 * once the limit is gone the writer's own timer writes it, with no new
 * data and no flush. */
static void test_backlog_written_in_pieces_then_on_timer(void) {
    struct rlimit saved = fsize_limit_saved();
    int fd;
    mst_outq *q = start_array_queue(&fd);
    long n = 0;
    add_elements(q, &n, 10, 100);
    CHECK_EQ_INT(mst_outq_flush(q), MST_OK);
    set_fsize_limit(1002 + 50000);
    add_elements(q, &n, 1000, 100);
    CHECK_EQ_INT(mst_outq_flush(q), MST_ERR_IO);
    /* Cut back to an element boundary at most a page (+ an element) short;
     * the writer's own retry may add a piece meanwhile, so the file is
     * read between two looks at the counter. */
    mst_outq_stats st, st2;
    mst_outq_get_stats(q, &st);
    long in_file = file_count_0_to();
    mst_outq_get_stats(q, &st2);
    CHECK(st.spans_written >= 10 + (50000 - 4096 - 100) / 100);
    CHECK(st2.spans_written < (uint64_t)n);
    CHECK(in_file >= (long)st.spans_written && in_file <= (long)st2.spans_written);
    setrlimit(RLIMIT_FSIZE, &saved);
    CHECK(wait_written(q, (uint64_t)n));
    CHECK(file_holds_0_to(n));
    CHECK_EQ_INT(mst_outq_stop(q, &st), MST_OK);
    CHECK_EQ_INT(st.spans_written, n);
    CHECK_EQ_INT(st.spans_dropped, 0);
    CHECK(st.write_errors >= 1);
    remove_file(fd);
}

/* Stopping with a backlog of which only part fits: that part is written,
 * the rest dropped, and written + dropped is every span. */
static void test_stop_writes_what_fits(void) {
    struct rlimit saved = fsize_limit_saved();
    snprintf(g_path, sizeof g_path, "/tmp/mst_outq_test_XXXXXX");
    int fd = mkstemp(g_path);
    CHECK(fd >= 0);
    static const mst_outq_layout records = {.tail = "", .tail_len = 0, .first_skip = 0};
    mst_outq *q;
    CHECK_EQ_INT(mst_outq_start_layout(fd, &records, 0, 0, &q), MST_OK);
    char rec[101];
    memset(rec, 'r', 100);
    rec[100] = '\0';
    set_fsize_limit(30000);
    add_records(q, 800, rec); /* 80 kB, 30 kB of room */
    mst_outq_stats st;
    CHECK_EQ_INT(mst_outq_stop(q, &st), MST_ERR_IO);
    setrlimit(RLIMIT_FSIZE, &saved);
    CHECK(st.spans_written >= (30000 - 4096 - 100) / 100);
    CHECK(st.spans_written <= 300);
    CHECK_EQ_INT(st.spans_written + st.spans_dropped, 800);
    struct stat sb;
    CHECK(fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == st.spans_written * 100);
    remove_file(fd);
}

static const mst_test_case TESTS[] = {
    {"backlog_written_in_pieces_then_on_timer", test_backlog_written_in_pieces_then_on_timer},
    {"stop_writes_what_fits", test_stop_writes_what_fits},
    {"file_valid_while_writes_fail", test_file_valid_while_writes_fail},
    {"layout_without_tail", test_layout_without_tail},
    {"many_chunks_in_order", test_many_chunks_in_order},
    {"valid_after_every_flush", test_valid_after_every_flush},
    {"write_errors_retried_then_written", test_write_errors_retried_then_written},
    {"failing_writes_dropped_beyond_retain_bound", test_failing_writes_dropped_beyond_retain_bound},
};
MST_TEST_MAIN(TESTS)
