/*
 * input_file.h — the file side shared by the trace-file readers
 * (read_chrome.c, read_pftrace.c): opening a trace file with the same
 * checks and messages, and reading the next piece of it.
 */
#ifndef MST_ANALYZE_INPUT_FILE_H
#define MST_ANALYZE_INPUT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mstrace.h"

/* Opens `path` for a sequential read: *fd and *size (bytes, 0 when not a
 * regular file, e.g. a pipe). MST_ERR_IO with "cannot open PATH: why" or
 * "PATH is a directory, not a trace file" in err. */
mst_status mst_an_open_input(const char *path, int *fd, uint64_t *size, char *err, size_t err_size);

/* Appends what the next read(2) of fd gives (retrying on EINTR) to
 * buf[*len..cap): *len and *bytes grow by it; *eof is set when it gave
 * nothing. False on a read error, "cannot read NAME: why" in err. */
bool mst_an_fill_input(int fd, uint8_t *buf, size_t *len, size_t cap, bool *eof, uint64_t *bytes,
                       const char *name, char *err, size_t err_size);

#endif /* MST_ANALYZE_INPUT_FILE_H */
