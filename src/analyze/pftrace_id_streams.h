/*
 * pftrace_id_streams.h — what the `.pftrace` reader keeps to rebuild a
 * span's `request.ids` written as a delta (docs/architecture.md 1a "In the
 * .pftrace"; the writer's side is forward/pftrace_id_lists.h): per stream
 * (the spans of one name on one thread of one packet sequence) the last
 * list and its place since its keyframe.
 *
 * A delta is applied only to the list it follows: one whose place is not
 * the stream's last + 1 (a packet lost, a file read from the middle, a
 * stream never seen) gives no list, until the stream's next keyframe.
 * Bounded: at most MST_AN_ID_STREAMS streams per sequence (a delta of a
 * stream beyond them gives no list). Cleared with the sequence's
 * incremental state.
 */
#ifndef MST_ANALYZE_PFTRACE_ID_STREAMS_H
#define MST_ANALYZE_PFTRACE_ID_STREAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/record.h"

#define MST_AN_ID_STREAMS 1024u

typedef struct mst_an_id_stream mst_an_id_stream;

typedef struct mst_an_id_streams {
    mst_an_id_stream *v;
    size_t n, cap;
    mst_an_str *scratch;     /* a delta's list being built */
    size_t scratch_cap;
} mst_an_id_streams;

/* Zeroed is empty. */
void mst_an_id_streams_clear(mst_an_id_streams *s);
void mst_an_id_streams_free(mst_an_id_streams *s);
/* A keyframe: items[0..n) become stream (pid, tid, name)'s list at place 0.
 * False only when out of memory. */
bool mst_an_id_streams_keyframe(mst_an_id_streams *s, int64_t pid, int64_t tid, mst_an_str name,
                                const mst_an_str *items, size_t n);
/* The stream's last list could not be read: its deltas give no list until
 * its next keyframe. */
void mst_an_id_streams_forget(mst_an_id_streams *s, int64_t pid, int64_t tid, mst_an_str name);
/* A delta at place `pos`: the stream's list without `left`, then `joined`,
 * becomes its list, returned in *out / *n_out (valid until the stream's
 * next list). Returns 1, 0 when the delta does not follow the stream's last
 * list (no list; the stream waits for a keyframe), -1 out of memory. */
int mst_an_id_streams_delta(mst_an_id_streams *s, int64_t pid, int64_t tid, mst_an_str name,
                            int64_t pos, const mst_an_str *left, size_t n_left,
                            const mst_an_str *joined, size_t n_joined, const mst_an_str **out,
                            size_t *n_out);

#endif /* MST_ANALYZE_PFTRACE_ID_STREAMS_H */
