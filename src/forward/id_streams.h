/*
 * id_streams.h — the forwarder's side of request id lists as changes
 * (docs/forwarder.md "Request id lists as changes"): per connection, the
 * last request.ids list of each of its streams, so that a span that
 * carries only the change to its stream's previous list leaves the decoder
 * with the whole list, and every output (timeline, JSON and .pftrace
 * writers, flight recorder) sees exactly the span it would have seen had
 * the list been sent whole.
 *
 * Rules:
 *   - a keyframe (a V1 packet whose request.ids list carries ids_stream /
 *     ids_seq) becomes its stream's base, whatever came before;
 *   - a change applies only to the base with the sequence number just
 *     before its own. Anything else (a packet rejected or lost before it,
 *     a base not kept) leaves that span without request.ids, counted, and
 *     the stream without a base until its next keyframe: never a wrong list;
 *   - a malformed change (ids_change.h's parser and checks) rejects its
 *     packet with the reason, and the stream loses its base;
 *   - memory is bounded: MST_IDS_MAX_STREAMS streams per connection, each
 *     list within ids_change.h's limits, and all lists of all connections
 *     within the table's budget; a keyframe that does not fit is not kept
 *     (counted), so its stream's changes get no list until one does.
 * Event loop thread only.
 */
#ifndef MST_FORWARD_ID_STREAMS_H
#define MST_FORWARD_ID_STREAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "wire/perfetto_packet_types.h"

/* Default memory for the lists of every connection together. */
#define MST_ID_STREAMS_DEFAULT_BUDGET (64u << 20)

typedef struct mst_id_streams mst_id_streams;

typedef struct mst_id_streams_stats {
    uint64_t keyframes;    /* lists kept as a stream's base                      */
    uint64_t changes;      /* changes applied: spans given back their whole list */
    uint64_t no_base;      /* changes without their base: span kept without a list */
    uint64_t not_kept;     /* keyframes not kept (stream cap, list limits, budget) */
    uint64_t bad_changes;  /* malformed changes: packet rejected                 */
    uint64_t bytes;        /* memory the lists hold now                          */
} mst_id_streams_stats;

/* What mst_id_conn_apply did with one span. */
typedef enum mst_ids_outcome {
    MST_IDS_NONE = 0,      /* not in a stream                       */
    MST_IDS_KEYFRAME,      /* its list became the stream's base     */
    MST_IDS_NOT_KEPT,      /* keyframe passed on but not remembered */
    MST_IDS_CHANGE,        /* change applied: the span has its list */
    MST_IDS_NO_BASE        /* change without base: list removed     */
} mst_ids_outcome;

/* budget: bytes for all lists (0 = MST_ID_STREAMS_DEFAULT_BUDGET). NULL
 * when out of memory. */
mst_id_streams *mst_id_streams_new(size_t budget);
void mst_id_streams_free(mst_id_streams *t);
/* The connection closed: its lists are freed. */
void mst_id_streams_drop_conn(mst_id_streams *t, uint64_t conn_id);
void mst_id_streams_get_stats(const mst_id_streams *t, mst_id_streams_stats *out);

/* Applies the stream fields of a span decoded from connection conn_id
 * (see the rules above; a connection's state is made at its first
 * keyframe). A change's whole list replaces the attribute's value,
 * pointing into the stream's own memory: valid until the next packet of
 * that connection is applied, so the caller copies it before (span_batch.c
 * does); without its base the attribute is removed. A list kept as a
 * stream's base or rebuilt from one gets sp->ids_origin (what was kept,
 * what left and joined; its `left` in `arena`). `arena` holds the
 * parsed change. t may
 * be NULL (no state: a change gets no list). Returns MST_OK when the span
 * is to be kept, else the error with a one-line reason in err (the packet
 * is rejected). *outcome says what happened (for the caller's log lines). */
mst_status mst_id_streams_apply(mst_id_streams *t, uint64_t conn_id, mst_pf_span *sp, mst_arena *arena,
                                mst_ids_outcome *outcome, char *err, size_t err_size);

#endif /* MST_FORWARD_ID_STREAMS_H */
