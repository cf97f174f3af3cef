/*
 * input_file.h — the input side shared by the trace-file readers
 * (read_chrome.c, read_pftrace.c): one entry point that opens a trace file
 * (or takes a buffer), streams it through the reader of its format and
 * reports progress, and the input buffer the readers parse from, with the
 * same checks and messages for a missing file, a directory or a failed
 * read. Each reader provides only its parsing, as an mst_an_format.
 */
#ifndef MST_ANALYZE_INPUT_FILE_H
#define MST_ANALYZE_INPUT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/input_info.h"
#include "analyze/record.h"
#include "mstrace.h"

/* Bytes a file is read in; a reader grows the buffer only for a larger
 * event or packet. */
#define MST_AN_INPUT_CHUNK (4u << 20)

/* Called every few MiB with the bytes read so far and the file size (0
 * when unknown), for a progress line. */
typedef void (*mst_an_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* An input being read: buf[pos..len) is what is read and not yet parsed.
 * A reader moves pos; the functions below refill. */
typedef struct mst_an_input {
    int fd;                  /* -1: buffer mode (the whole input is in buf) */
    uint8_t *buf;            /* owned by mst_an_read_file in file mode */
    size_t cap, len, pos;
    uint64_t base;           /* file offset of buf[0] */
    uint64_t total;          /* file size (0 unknown) */
    uint64_t next_progress;  /* info->bytes at which progress is called */
    bool eof;                /* nothing more after buf[len) */
    mst_an_progress_fn progress;
    void *progress_ctx;
    mst_an_input_info *info; /* name (for messages) and bytes read */
} mst_an_input;

/* A trace-file format: the kind recorded in mst_an_input_info and the
 * reader's parse, which reads `in` to its end, calling `fn` per span and
 * filling in->info; on error one sentence in err. */
typedef struct mst_an_format {
    const char *kind; /* "chrome-json", "pftrace" */
    mst_status (*parse)(mst_an_input *in, uint32_t source, mst_an_span_fn fn, void *ctx, char *err,
                        size_t err_size);
} mst_an_format;

/* Opens the trace file `path` for reading: only a regular file is read
 * (a fifo with no writer would block forever, a device or a socket is no
 * trace), and the open itself never blocks. Returns the fd (*size, may be
 * NULL, gets its size) or -1 with "cannot open PATH: why", "PATH is a
 * directory, not a trace file" or "PATH is a fifo (named pipe), not a
 * trace file: only regular files are read" in err. */
int mst_an_input_open(const char *path, uint64_t *size, char *err, size_t err_size);

/* Reads the file at `path` (input index `source`) with `format`: `info` is
 * initialised here and filled (the caller frees it, also on error);
 * `progress` (may be NULL) is called about every 16 MiB read. Opening
 * errors (mst_an_input_open) are MST_ERR_IO. */
mst_status mst_an_read_file(const mst_an_format *format, const char *path, uint32_t source,
                            mst_an_span_fn fn, void *ctx, mst_an_progress_fn progress,
                            void *progress_ctx, mst_an_input_info *info, char *err, size_t err_size);

/* The same over a buffer (tests and the fuzz targets); `name` labels it. */
mst_status mst_an_read_buffer(const mst_an_format *format, const void *data, size_t len,
                              const char *name, uint32_t source, mst_an_span_fn fn, void *ctx,
                              mst_an_input_info *info, char *err, size_t err_size);

/* The error of a parse stopped by the span sink or the reader with `st`:
 * "out of memory reading NAME" for MST_ERR_NOMEM, else (unless err already
 * says why) "NAME: analysis stopped (status N)". Returns st. */
mst_status mst_an_input_stopped(const mst_an_input *in, mst_status st, char *err, size_t err_size);

/* Reads once more for a reader that needs `need` bytes from pos (more
 * than it has): moves buf[pos..len) to the front, grows buf (doubling)
 * until it holds `need` bytes, and appends what the next read(2) gives
 * (retrying on EINTR), setting eof when it gave nothing; progress is
 * called when another 16 MiB have been read. In buffer mode it only sets
 * eof. False on a read error ("cannot read NAME: why") or out of memory
 * ("out of memory reading NAME"), in err. */
bool mst_an_input_more(mst_an_input *in, size_t need, char *err, size_t err_size);

#endif /* MST_ANALYZE_INPUT_FILE_H */
