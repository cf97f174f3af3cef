/*
 * format_stage.h — the Perfetto forwarder's formatting thread: the event
 * loop decodes packets into span batches (span_batch.h) and hands each full
 * batch over; this thread turns the spans into output (the sink's consume
 * callback: timeline + writer) while the loop reads and decodes the next.
 *
 * Why a thread of its own: decoding and formatting each cost about as much
 * per span, and on one thread they capped the forwarder at what one core
 * can do for both (docs/forwarder.md "Performance").
 *
 * Bounds: MST_FORMAT_STAGE_BATCHES batches exist. When the formatting
 * thread falls behind and every batch is waiting for it, the event loop
 * waits for one to come back — it stops reading for that moment, and the
 * clients' own bounded queues absorb (and count) the rest — so memory does
 * not grow with the backlog.
 *
 * Order: batches are formatted in the order they were handed over, one at
 * a time, so the output is what formatting on the loop's thread gave.
 *
 * Threads: mst_format_stage_batch/_publish/_stop from the event loop only;
 * the callbacks run on the stage's thread only.
 */
#ifndef MST_FORWARD_FORMAT_STAGE_H
#define MST_FORWARD_FORMAT_STAGE_H

#include <stdint.h>

#include "forward/span_batch.h"

#define MST_FORMAT_STAGE_BATCHES 4

typedef struct mst_format_stage mst_format_stage;

typedef struct mst_format_stage_ops {
    void *self;
    /* Formats every span of the batch (stage thread). */
    void (*consume)(void *self, const mst_span_batch *batch);
    /* After each batch, and whenever the time it asked for has passed
     * (stage thread; now_ms is monotonic). Returns in how many ms it must
     * be called again, or -1 when only the next batch needs it. */
    int (*after)(void *self, uint64_t now_ms);
} mst_format_stage_ops;

/* Allocates the batches and starts the thread. MST_ERR_NOMEM / MST_ERR_IO
 * (thread creation failed; nothing is left running). */
mst_status mst_format_stage_start(const mst_format_stage_ops *ops, mst_format_stage **out);

/* The batch to decode into: the one being filled, else a free one — when
 * every batch is handed over and not yet formatted, this waits for one. */
mst_span_batch *mst_format_stage_batch(mst_format_stage *st);

/* Hands the batch being filled (if it holds a span) to the thread. */
void mst_format_stage_publish(mst_format_stage *st);

/* Hands over the batch being filled, waits until every batch is formatted
 * (each followed by its `after`), stops the thread and frees everything.
 * NULL is fine. */
void mst_format_stage_stop(mst_format_stage *st);

#endif /* MST_FORWARD_FORMAT_STAGE_H */
