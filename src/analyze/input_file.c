/*
 * input_file.c — opening and reading a trace file for the file readers
 * (input_file.h): the one entry point over a file or a buffer, and the
 * refill steps of the input buffer, so both readers say the same thing
 * about a missing file, a directory or a failed read, and report progress
 * alike.
 */
#include "analyze/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err_text.h"

#define PROGRESS_EVERY (16u << 20)

/* What a file that is not a regular file is, for the message. */
static const char *file_kind(mode_t m) {
    if (S_ISFIFO(m)) return "a fifo (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int mst_an_input_open(const char *path, uint64_t *size, char *err, size_t err_size) {
    /* O_NONBLOCK: opening a fifo with no writer (or a device) must not
     * block; O_NOCTTY: a terminal named as input never becomes ours. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0) {
        mst_err_set(err, err_size, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        mst_err_set(err, err_size, "cannot open %s: %s", path, strerror(errno));
        close(f);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        mst_err_set(err, err_size, "%s is a directory, not a trace file", path);
        close(f);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        mst_err_set(err, err_size, "%s is %s, not a trace file: only regular files are read", path,
                    file_kind(st.st_mode));
        close(f);
        return -1;
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    if (size) *size = (uint64_t)st.st_size;
    return f;
}

/* Opens `path` for a sequential read: *fd and *size (bytes). */
static mst_status open_input(const char *path, int *fd, uint64_t *size, char *err, size_t err_size) {
    *fd = mst_an_input_open(path, size, err, err_size);
    if (*fd < 0) return MST_ERR_IO;
    posix_fadvise(*fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return MST_OK;
}

mst_status mst_an_read_file(const mst_an_format *format, const char *path, uint32_t source,
                            mst_an_span_fn fn, void *ctx, mst_an_progress_fn progress,
                            void *progress_ctx, mst_an_input_info *info, char *err, size_t err_size) {
    if (err && err_size) err[0] = 0;
    if (!mst_an_input_info_init(info, format->kind, path)) return MST_ERR_NOMEM;
    mst_an_input in = {.fd = -1, .info = info};
    uint64_t size;
    mst_status st = open_input(path, &in.fd, &size, err, err_size);
    if (st != MST_OK) return st;
    if (!(in.buf = malloc(MST_AN_INPUT_CHUNK))) {
        close(in.fd);
        return MST_ERR_NOMEM;
    }
    in.cap = MST_AN_INPUT_CHUNK;
    in.total = size;
    in.progress = progress;
    in.progress_ctx = progress_ctx;
    in.next_progress = PROGRESS_EVERY;
    st = format->parse(&in, source, fn, ctx, err, err_size);
    free(in.buf);
    close(in.fd);
    return st;
}

mst_status mst_an_read_buffer(const mst_an_format *format, const void *data, size_t len,
                              const char *name, uint32_t source, mst_an_span_fn fn, void *ctx,
                              mst_an_input_info *info, char *err, size_t err_size) {
    if (err && err_size) err[0] = 0;
    if (!mst_an_input_info_init(info, format->kind, name)) return MST_ERR_NOMEM;
    mst_an_input in = {.fd = -1, .info = info};
    in.buf = (uint8_t *)(uintptr_t)data;
    in.len = in.cap = len;
    in.eof = true;
    info->bytes = len;
    return format->parse(&in, source, fn, ctx, err, err_size);
}

mst_status mst_an_input_stopped(const mst_an_input *in, mst_status st, char *err, size_t err_size) {
    if (st == MST_ERR_NOMEM) snprintf(err, err_size, "out of memory reading %s", in->info->name);
    else if (!err[0]) snprintf(err, err_size, "%s: analysis stopped (status %d)", in->info->name, (int)st);
    return st;
}

/* Drops the parsed bytes buf[0..pos) (base grows by them). */
static void compact(mst_an_input *in) {
    if (in->pos == 0) return;
    memmove(in->buf, in->buf + in->pos, in->len - in->pos);
    in->len -= in->pos;
    in->base += in->pos;
    in->pos = 0;
}

/* Grows buf (doubling) until it holds `need` bytes. */
static bool reserve(mst_an_input *in, size_t need, char *err, size_t err_size) {
    if (need <= in->cap) return true;
    size_t nc = in->cap;
    while (nc < need) nc *= 2;
    uint8_t *nb = realloc(in->buf, nc);
    if (!nb) {
        snprintf(err, err_size, "out of memory reading %s", in->info->name);
        return false;
    }
    in->buf = nb;
    in->cap = nc;
    return true;
}

/* Appends what the next read(2) gives; eof when nothing; progress. */
static bool fill(mst_an_input *in, char *err, size_t err_size) {
    ssize_t k;
    do k = read(in->fd, in->buf + in->len, in->cap - in->len);
    while (k < 0 && errno == EINTR);
    if (k < 0) {
        mst_err_set(err, err_size, "cannot read %s: %s", in->info->name, strerror(errno));
        return false;
    }
    if (k == 0) in->eof = true;
    in->len += (size_t)k;
    in->info->bytes += (uint64_t)k;
    if (in->progress && in->info->bytes >= in->next_progress) {
        in->next_progress = in->info->bytes + PROGRESS_EVERY;
        in->progress(in->progress_ctx, in->info->bytes, in->total);
    }
    return true;
}

bool mst_an_input_more(mst_an_input *in, size_t need, char *err, size_t err_size) {
    if (in->fd < 0 || in->eof) {
        in->eof = true;
        return true;
    }
    compact(in);
    return reserve(in, need, err, err_size) && fill(in, err, err_size);
}
