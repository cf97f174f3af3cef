/*
 * chrome_trace.h — the forwarder's Chrome Trace Event JSON writer
 * (docs/forwarder.md "Output format"). Turns decoded hook span packets into
 * "X" events plus "s"/"f" flow pairs for links (a link whose source span has
 * not arrived yet waits in a bounded table), and "M" process/thread name
 * events where known; from the shared timeline model (timeline.h) it adds
 * request tracks as async "b"/"e" events (cat "request", id = the request
 * id) and counters as "C" events. The file is always
 * valid JSON after every write: events are appended before a closing "]"
 * that is rewritten with each write. Writes run on the writer's own thread
 * (see chrome_trace.c); every function here is called from one thread.
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
    uint64_t spans_dropped;        /* dropped after write errors */
    uint64_t write_waits;          /* times add_span waited for the writer thread */
} mst_chrome_stats;

/* Tests only: writers opened after this call bound their tables at `n`
 * entries instead of MST_CHROME_MAX_TRACKED (0 restores it), so eviction
 * can be tested without 100000 spans. Process-wide. */
void mst_chrome_writer_set_max_tracked(uint32_t n);

/* Checks `path` against the output path rules (docs/forwarder.md; see output_path.h),
 * opens it with O_NOFOLLOW, truncates and writes "[]". `default_pid` is used
 * for spans without process.pid. */
mst_status mst_chrome_writer_open(const char *path, int64_t default_pid,
                                  mst_chrome_writer **out, char *err, size_t err_size);
/* Buffers the events for one span (and any flows it completes). When the
 * unwritten output has reached its cap (64 MiB; the disk is slower than the
 * traffic) it first waits for the writer thread. MST_ERR_QUEUE_FULL: the
 * writer cannot make progress (writes failing); the span was dropped and
 * counted in spans_dropped, nothing else changed. */
mst_status mst_chrome_writer_add_span(mst_chrome_writer *w, const mst_pf_span *span);
/* Hands the buffered events to the writer thread when it is idle and
 * returns at once (the write runs on the writer thread; the file is valid
 * JSON after it). Returns 1 when events are still buffered here (the writer
 * was busy: call again soon), else 0. */
int mst_chrome_writer_handoff(mst_chrome_writer *w);
/* Hands over the buffered events and waits until the writer has written
 * them and the closing "]"; the file is complete, valid JSON after. */
mst_status mst_chrome_writer_flush(mst_chrome_writer *w);
/* Advances the timeline's clock (monotonic ms) and writes the request
 * tracks that became complete (timeline.h). Returns 1 while requests are
 * still open (call again within a second or so), else 0. */
int mst_chrome_writer_tick(mst_chrome_writer *w, uint64_t now_ms);
/* As flush, after completing every request track still open (timeline.h). */
mst_status mst_chrome_writer_flush_final(mst_chrome_writer *w);
/* Samples the forwarder's own counters at ts_ns as C events on the
 * forwarder's process (named "mstrace forward"). */
void mst_chrome_writer_add_forwarder_counters(mst_chrome_writer *w, int64_t ts_ns,
                                              uint64_t received, uint64_t written,
                                              uint64_t dropped);
struct mst_tl_counter;
/* One counter sample as a C event (c->name a static string). */
void mst_chrome_writer_add_counter(mst_chrome_writer *w, const struct mst_tl_counter *c);
struct mst_outq_stats;
/* Copies the output queue's counters (written, write errors, drops, waits)
 * into *out; spans_dropped also counts `full_dropped`, the spans the writer
 * refused itself. Shared by both forward writers (pftrace_writer.c). */
void mst_chrome_stats_add_outq(mst_chrome_stats *out, const struct mst_outq_stats *os,
                               uint64_t full_dropped);
void mst_chrome_writer_get_stats(const mst_chrome_writer *w, mst_chrome_stats *out);
/* The output queue's counters as of now: what is in the file. Any thread
 * (the queue's counters are under its lock), while w is open. */
void mst_chrome_writer_get_disk_stats(const mst_chrome_writer *w, struct mst_outq_stats *out);
/* Flushes and closes; frees w. */
mst_status mst_chrome_writer_close(mst_chrome_writer *w);
/* The same, and *final (may be NULL) gets the counters after the close,
 * including the spans it had to drop because they could not be written. */
mst_status mst_chrome_writer_close_final(mst_chrome_writer *w, mst_chrome_stats *final);

#endif /* MST_FORWARD_CHROME_TRACE_H */
