/*
 * span_batch.h — a batch of decoded hook span packets that owns every byte
 * its spans point to, so the spans can be formatted on another thread
 * (format_stage.h) while the event loop reads and decodes the next batch.
 *
 * Each packet is copied into the batch's own blocks and decoded there, so
 * the decoded span's value slices and plain keys point into the batch; the
 * few things the decoder puts in its scratch arena (the attribute, resource
 * and link arrays, unescaped strings) are copied next to it. The scratch
 * arena is emptied after every packet, as before batching, so a packet
 * costs no malloc. Blocks are kept across batches (up to a few), so a
 * steady stream costs no malloc either.
 *
 * A batch is full at MST_SPAN_BATCH_MAX_SPANS spans or about
 * MST_SPAN_BATCH_FULL_BYTES bytes; a single packet bigger than that (up to
 * the frame limit) still fits an empty batch in a block of its own.
 * One thread at a time uses a batch.
 */
#ifndef MST_FORWARD_SPAN_BATCH_H
#define MST_FORWARD_SPAN_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forward/id_streams.h"
#include "wire/perfetto_packet.h"

#define MST_SPAN_BATCH_MAX_SPANS 1024
#define MST_SPAN_BATCH_FULL_BYTES (1024u * 1024u)

typedef struct mst_span_batch mst_span_batch;

/* An empty batch, or NULL when out of memory. */
mst_span_batch *mst_span_batch_new(void);
/* Frees the batch and its blocks. NULL is fine. */
void mst_span_batch_free(mst_span_batch *b);

/* Copies the payload into the batch, decodes it (mst_perfetto_packet_decode),
 * applies its request id stream fields with the state of its connection
 * conn_id in `ids` (id_streams.h; NULL: none, a change then gets no list)
 * and keeps the span. On a decode error returns its status with a one-line reason in
 * err, and the batch is as before; MST_ERR_NOMEM when a block could not
 * be allocated (the packet is not kept). *outcome (may be NULL) says what
 * the stream state did. */
mst_status mst_span_batch_add(mst_span_batch *b, mst_id_streams *ids, uint64_t conn_id, const uint8_t *payload,
                              size_t len, mst_ids_outcome *outcome, char *err, size_t err_size);
/* True once the batch should be handed on (no further add is refused, but
 * the limits above are kept by handing it on when this says so). */
bool mst_span_batch_full(const mst_span_batch *b);
size_t mst_span_batch_count(const mst_span_batch *b);
/* The i-th decoded span (i < count); valid until the batch is reset. */
const mst_pf_span *mst_span_batch_span(const mst_span_batch *b, size_t i);
/* Empties the batch for reuse; keeps a few standard blocks, frees the rest. */
void mst_span_batch_reset(mst_span_batch *b);

#endif /* MST_FORWARD_SPAN_BATCH_H */
