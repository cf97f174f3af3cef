/*
 * ids_sender.h — the traced process's side of request id lists as changes
 * (docs/forwarder.md "Request id lists as changes"): per connection to the
 * forwarder, the last `request.ids` list it sent on each *stream* (the
 * spans of one name on one thread: an engine's schedule steps, its model
 * steps), and for each new list the decision how it goes out:
 *   - whole, outside any stream (no room for another stream);
 *   - whole as a keyframe (ids_stream + ids_seq): a stream's first list,
 *     every MST_IDS_KEYFRAME_EVERY-th, after a reset (a reconnect or a
 *     send that failed), or when the change would be more than half the
 *     list (a resumed request put back in the middle, a new batch);
 *   - as a change (ids_change.h) to the stream's previous list.
 * The forwarder client (export/forward_client.c) and the forwarder bench
 * (bench/bench_forward.c) both decide through this, so the bench sends
 * what a traced process sends. One thread at a time.
 */
#ifndef MST_WIRE_IDS_SENDER_H
#define MST_WIRE_IDS_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mstrace.h"

/* Streams one connection keeps (the forwarder keeps as many). */
#define MST_IDS_MAX_STREAMS 64u
/* Shorter lists always go whole, outside any stream: at 8 ids a change
 * saved ~360 of ~1,300 bytes but cost the forwarder ~1,500 instructions a
 * span to rebuild (bench/RESULTS.md), and the client a copy of the list. */
#define MST_IDS_MIN_ITEMS 16u
/* Every this-many lists of a stream, one goes whole, so a forwarder that
 * lost a stream's base (it rejected a packet) has the list back soon. */
#define MST_IDS_KEYFRAME_EVERY 64u

/* How one list goes out (mst_ids_sender_next). */
typedef struct mst_ids_send {
    bool in_stream;        /* false: whole, without ids_stream / ids_seq */
    bool change;           /* true: left + joined instead of the list   */
    uint32_t stream;       /* ids_stream                                 */
    uint64_t seq;          /* ids_seq: 1, 2, ... per stream              */
    const uint32_t *left;  /* positions in the previous list that left   */
    uint32_t n_left;
    uint32_t joined_from;  /* items[joined_from ..] joined at the end     */
} mst_ids_send;

typedef struct mst_ids_sender mst_ids_sender;

/* NULL when out of memory. */
mst_ids_sender *mst_ids_sender_new(void);
void mst_ids_sender_free(mst_ids_sender *s);
/* Forgets every stream's list: the next list of each goes as a keyframe.
 * After a reconnect, or when a packet of this connection may not have
 * reached the forwarder whole. Sequence numbers continue. */
void mst_ids_sender_reset(mst_ids_sender *s);
/* Decides how the list `items` (n ids) of a span `name` on thread `tid`
 * goes out, and remembers it as the stream's previous list. out->left
 * points into the sender and stays valid until the next call. */
void mst_ids_sender_next(mst_ids_sender *s, const char *name, size_t name_len, int64_t tid,
                         const mst_str *items, uint32_t n, mst_ids_send *out);

#endif /* MST_WIRE_IDS_SENDER_H */
