/*
 * input_file.c — opening and reading a trace file for the file readers
 * (input_file.h), so both say the same thing about a missing file, a
 * directory or a failed read.
 */
#include "analyze/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err_text.h"

mst_status mst_an_open_input(const char *path, int *fd, uint64_t *size, char *err, size_t err_size) {
    *fd = -1;
    *size = 0;
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) {
        mst_err_set(err, err_size, "cannot open %s: %s", path, strerror(errno));
        return MST_ERR_IO;
    }
    struct stat st;
    bool known = fstat(f, &st) == 0;
    if (known && S_ISDIR(st.st_mode)) {
        mst_err_set(err, err_size, "%s is a directory, not a trace file", path);
        close(f);
        return MST_ERR_IO;
    }
    *size = known && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    posix_fadvise(f, 0, 0, POSIX_FADV_SEQUENTIAL);
    *fd = f;
    return MST_OK;
}

bool mst_an_fill_input(int fd, uint8_t *buf, size_t *len, size_t cap, bool *eof, uint64_t *bytes,
                       const char *name, char *err, size_t err_size) {
    for (;;) {
        ssize_t k = read(fd, buf + *len, cap - *len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            mst_err_set(err, err_size, "cannot read %s: %s", name, strerror(errno));
            return false;
        }
        if (k == 0) *eof = true;
        *len += (size_t)k;
        *bytes += (uint64_t)k;
        return true;
    }
}
