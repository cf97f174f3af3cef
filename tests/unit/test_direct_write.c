/*
 * test_direct_write.c — writes past the page cache (forward/direct_write.h):
 * a sequence of writes the way the output queue makes them (each at the
 * previous one's end minus its closing byte, from several iov pieces, large
 * ones, small ones, a cut-back in between) leaves the file byte for byte as
 * a model of plain pwritev calls says, with the large ones written through
 * O_DIRECT where the file system takes it; a write past a file size limit
 * lands exactly what the plain write lands and reports the same error.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward/direct_write.h"
#include "testlib.h"

static char g_path[64];

static int open_temp(void) {
    snprintf(g_path, sizeof g_path, "/tmp/mst_direct_test_XXXXXX");
    int fd = mkstemp(g_path);
    if (fd < 0) abort();
    return fd;
}

/* The file's whole content equals model[0..len). */
static bool file_is(int fd, const uint8_t *model, size_t len) {
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != len) {
        fprintf(stderr, "  file size %lld, expected %zu\n", (long long)sb.st_size, len);
        return false;
    }
    uint8_t *got = malloc(len + 1);
    size_t n = 0;
    while (n < len) {
        ssize_t k = pread(fd, got + n, len - n, (off_t)n);
        if (k <= 0) break;
        n += (size_t)k;
    }
    bool same = n == len && memcmp(got, model, len) == 0;
    if (!same) {
        size_t i = 0;
        while (i < n && got[i] == model[i]) i++;
        fprintf(stderr, "  file differs from the model at byte %zu of %zu\n", i, len);
    }
    free(got);
    return same;
}

/* Fills p with bytes that differ from write to write (a mismatch shows). */
static void fill(uint8_t *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)('a' + (x >> 16) % 26);
    }
}

/* One write of `len` data bytes and the closing ']' at *off, in three iov
 * pieces, as the output queue writes; the model follows plain pwritev. */
static int write_step(mst_direct_writer *w, uint8_t *model, size_t *model_len, uint64_t *off,
                      size_t len, unsigned seed) {
    uint8_t *data = malloc(len);
    fill(data, len, seed);
    size_t a = len / 3, b = len / 2;
    struct iovec iov[4] = {{data, a}, {data + a, b - a}, {data + b, len - b}, {"]", 1}};
    uint64_t landed = 0;
    int e = mst_direct_pwritev(w, iov, 4, *off, &landed);
    if (!e) {
        memcpy(model + *off, data, len);
        model[*off + len] = ']';
        if (*off + len + 1 > *model_len) *model_len = *off + len + 1;
        *off += len;
    }
    free(data);
    return e;
}

static void test_writes_land_exactly(void) {
    int fd = open_temp();
    CHECK(pwrite(fd, "[]", 2, 0) == 2);
    mst_direct_writer w;
    mst_direct_writer_init(&w, fd);
    size_t cap = 64u << 20, model_len = 2;
    uint8_t *model = malloc(cap);
    memcpy(model, "[]", 2);
    uint64_t off = 1;
    /* Large writes (direct, several staging buffers each), small ones
     * (buffered) in between, odd lengths so no write starts on a block. */
    static const size_t sizes[] = {300001, 5000003, 777, 2097152, 131071, 65537, 1234567,
                                   4095, 4097, 3000000, 1, 999999};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        CHECK_EQ_INT(write_step(&w, model, &model_len, &off, sizes[i], (unsigned)i), 0);
    CHECK(file_is(fd, model, model_len));
    /* A cut-back by someone else (the queue after a failed write): the
     * next direct write reads the block start back instead of trusting
     * what it kept. */
    off -= 500;
    CHECK(ftruncate(fd, (off_t)off) == 0);
    CHECK(pwrite(fd, "]", 1, (off_t)off) == 1);
    mst_direct_writer_forget(&w);
    model[off] = ']';
    model_len = off + 1;
    CHECK_EQ_INT(write_step(&w, model, &model_len, &off, 1500000, 99), 0);
    CHECK_EQ_INT(write_step(&w, model, &model_len, &off, 800000, 100), 0);
    CHECK(file_is(fd, model, model_len));
    /* Where the file system takes O_DIRECT, the large writes went that way. */
    int probe = open(g_path, O_RDWR | O_DIRECT);
    if (probe >= 0) {
        close(probe);
        CHECK(w.dio_fd >= 0);
        CHECK(w.direct_bytes >= 10000000);
    } else {
        fprintf(stderr, "  (no O_DIRECT on this file system: all writes were buffered)\n");
    }
    mst_direct_writer_close(&w);
    free(model);
    close(fd);
    unlink(g_path);
}

/* Past RLIMIT_FSIZE the direct path gives way to the plain write, whose
 * short write and EFBIG are what the caller sees. */
static void test_size_limit_as_plain_write(void) {
    struct rlimit saved;
    getrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, SIG_IGN);
    int fd = open_temp();
    CHECK(pwrite(fd, "[]", 2, 0) == 2);
    mst_direct_writer w;
    mst_direct_writer_init(&w, fd);
    size_t model_len = 2;
    uint8_t *model = malloc(8u << 20);
    memcpy(model, "[]", 2);
    uint64_t off = 1;
    CHECK_EQ_INT(write_step(&w, model, &model_len, &off, 1000000, 1), 0);
    struct rlimit lim = {1500000, saved.rlim_max};
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    uint8_t *data = malloc(2000000);
    fill(data, 2000000, 7);
    struct iovec iov[2] = {{data, 2000000}, {"]", 1}};
    uint64_t landed = 0;
    int e = mst_direct_pwritev(&w, iov, 2, off, &landed);
    setrlimit(RLIMIT_FSIZE, &saved);
    CHECK_EQ_INT(e, EFBIG);
    CHECK_EQ_INT(landed, 1500000 - off);
    memcpy(model + off, data, (size_t)landed);
    CHECK(file_is(fd, model, 1500000));
    free(data);
    free(model);
    mst_direct_writer_close(&w);
    close(fd);
    unlink(g_path);
}

static const mst_test_case TESTS[] = {
    {"writes_land_exactly", test_writes_land_exactly},
    {"size_limit_as_plain_write", test_size_limit_as_plain_write},
};
MST_TEST_MAIN(TESTS)
