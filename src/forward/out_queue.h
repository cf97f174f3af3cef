/*
 * out_queue.h — the Chrome Trace writer's output path: an ordered queue of
 * multi-MB chunks of JSON array elements, written by a thread of its own
 * into a file that always ends in the array's closing "]".
 *
 * Why a thread: the kernel's copy of the output into the page cache was a
 * large share of the forwarder's single-threaded time; on a thread of its
 * own it overlaps the decoding/formatting of the next events on another
 * core; its large writes go past the page cache altogether (direct_write.h),
 * so that copy and the writeback no longer take a core. Why chunks that are
 * reused: a fresh multi-MB buffer costs a page fault per 4 KiB on first
 * touch, so a few chunks are kept and recycled.
 *
 * File protocol: the file is a valid document up to `end_off`, followed by
 * a fixed `tail` (JSON: the array's closing "]"; a format without a closing
 * part uses an empty tail). Each write is one pwritev of
 * "<queued elements><tail>" at end_off, so the file is valid after every
 * write and a SIGKILL mid-write leaves "[...complete,{partial" (valid up to
 * the last whole element). The first `first_skip` bytes of the very first
 * element are skipped (JSON: its leading ',').
 *
 * Failure rules (the same for every format): a failed write (disk full, I/O
 * error) keeps what reached the file in whole elements — as much of the
 * backlog as the disk takes, cut at an element boundary (to within a page)
 * — and the file ends in the tail again at once, so while writes keep
 * failing the file stays valid; the rest is retried at the new end offset
 * together with the next chunk handed over, at the next flush, or by the
 * writer itself every few hundred ms (space coming back is used without new
 * traffic); beyond MST_OUTQ_MAX_RETAIN_BYTES of failing data it is dropped.
 * Counters count elements (spans), never attempts: write_errors counts
 * failed writes (one that wrote only part of the backlog included),
 * spans_dropped the spans given up on, spans_written the spans in the file.
 *
 * Threads: every function is called from one producer thread; the writer
 * thread is internal. Memory: the caller bounds it with
 * mst_outq_unwritten() / mst_outq_wait_room() (the Chrome writer waits for
 * the writer thread at its cap).
 */
#ifndef MST_FORWARD_OUT_QUEUE_H
#define MST_FORWARD_OUT_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "mstrace.h"
#include "wire/buf.h"

/* Failing writes keep at most this much before it is dropped. */
#define MST_OUTQ_MAX_RETAIN_BYTES (32u << 20)

typedef struct mst_outq mst_outq;

typedef struct mst_outq_stats {
    uint64_t bytes_written;  /* file bytes, counting the closing ']' once */
    uint64_t spans_written;
    uint64_t flows_written;
    uint64_t write_errors;   /* failed writes (and failed restores of the tail) */
    uint64_t spans_dropped;  /* dropped after failing writes */
    uint64_t waits;          /* mst_outq_wait_room calls (the producer waited) */
} mst_outq_stats;

/* What frames the elements in the file. */
typedef struct mst_outq_layout {
    const char *tail;        /* written after the elements ("]" for JSON; "" none) */
    size_t tail_len;
    size_t first_skip;       /* bytes skipped at the very first element (JSON: 1) */
} mst_outq_layout;

/* The Chrome Trace JSON array: tail "]", the first element's ',' skipped. */
extern const mst_outq_layout MST_OUTQ_JSON_ARRAY;

/* Starts the writer thread for `fd`, whose valid content ends at end_off
 * (the tail follows it; no element written yet); bytes_written starts at
 * `bytes_so_far`. The fd stays the caller's; `layout` must outlive q. */
mst_status mst_outq_start_layout(int fd, const mst_outq_layout *layout, uint64_t end_off,
                                 uint64_t bytes_so_far, mst_outq **out);

/* mst_outq_start_layout with MST_OUTQ_JSON_ARRAY (the file is "[]"). */
mst_status mst_outq_start(int fd, uint64_t end_off, uint64_t bytes_so_far, mst_outq **out);

/* The chunk being filled: append elements (each starting with ','), then
 * call mst_outq_added. NULL when out of memory. Valid until the next call
 * of any other mst_outq function. */
mst_buf *mst_outq_buf(mst_outq *q);

/* Counts the span/flows just appended; hands the chunk over when it is
 * full, or big enough and the writer idle. */
void mst_outq_added(mst_outq *q, uint64_t spans, uint64_t flows);

/* Bytes not yet in the file: the chunk being filled + everything handed
 * over and not yet written (retained failed writes included). */
uint64_t mst_outq_unwritten(const mst_outq *q);

/* Waits until fewer than `cap` bytes are unwritten (the writer makes
 * progress; a write stalled on errors is retried with the buffered data).
 * False when that cannot happen (writes keep failing below the retain
 * bound, or out of memory): the caller then drops what it wanted to add. */
bool mst_outq_wait_room(mst_outq *q, uint64_t cap);

/* Hands the chunk being filled to the writer if it is idle (or stalled on
 * a failed write: then this is the retry). Returns 1 when events stay
 * buffered because the writer is busy writing (call again soon), else 0. */
int mst_outq_handoff(mst_outq *q);

/* Hands everything over (retrying a failed write) and waits for the
 * writer: MST_OK when every element is in the file, else MST_ERR_IO /
 * MST_ERR_NOMEM (the elements are kept for the next attempt). */
mst_status mst_outq_flush(mst_outq *q);

void mst_outq_get_stats(mst_outq *q, mst_outq_stats *out);

/* Flushes (writing as much as fits), stops the thread and frees q; what
 * still cannot be written is dropped (counted in *final) and the file cut back to its last valid
 * state. Returns the flush's status. `final` (may be NULL) gets the last
 * counters. The fd is not closed. */
mst_status mst_outq_stop(mst_outq *q, mst_outq_stats *final);

#endif /* MST_FORWARD_OUT_QUEUE_H */
