/*
 * chrome_trace.h — the forwarder's Chrome Trace Event JSON writer (SPEC §5).
 * Turns decoded hook span packets into "X" events plus "s"/"f" flow pairs
 * for links (a link whose source span has not arrived yet waits in a bounded
 * table), and "M" process/thread name events where known. The file is always
 * valid JSON after mst_chrome_writer_flush(): events are appended before a
 * closing "]" that is rewritten on each flush.
 */
#ifndef MST_FORWARD_CHROME_TRACE_H
#define MST_FORWARD_CHROME_TRACE_H

#include "wire/perfetto_packet.h"

/* Bound of the span-position and pending-link tables (oldest out). */
#define MST_CHROME_MAX_TRACKED 100000

typedef struct mst_chrome_writer mst_chrome_writer;

typedef struct mst_chrome_stats {
    uint64_t spans_written;
    uint64_t flows_written;
    uint64_t flows_pending;        /* links waiting for their source span */
    uint64_t positions_evicted;
    uint64_t pending_evicted;
    uint64_t bytes_written;
    uint64_t write_errors;
} mst_chrome_stats;

/* Checks `path` against the output path rules (SPEC §5; see output_path.h),
 * opens it with O_NOFOLLOW, truncates and writes "[]". `default_pid` is used
 * for spans without process.pid. */
mst_status mst_chrome_writer_open(const char *path, int64_t default_pid,
                                  mst_chrome_writer **out, char *err, size_t err_size);
/* Buffers the events for one span (and any flows it completes). */
mst_status mst_chrome_writer_add_span(mst_chrome_writer *w, const mst_pf_span *span);
/* Writes buffered events and the closing "]"; the file is valid JSON after. */
mst_status mst_chrome_writer_flush(mst_chrome_writer *w);
void mst_chrome_writer_get_stats(const mst_chrome_writer *w, mst_chrome_stats *out);
/* Flushes and closes; frees w. */
mst_status mst_chrome_writer_close(mst_chrome_writer *w);

#endif /* MST_FORWARD_CHROME_TRACE_H */
