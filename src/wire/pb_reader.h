/*
 * pb_reader.h — a bounds-checked protobuf wire-format reader, owned by the
 * OTLP decoder (and usable by anything that parses protobuf from a peer).
 * Why strict: it reads bytes from other processes (the MindIE relay) and
 * fuzz input, so it never reads past `end`, and rejects group wire types,
 * the reserved wire types 6/7, field number 0 or > 2^29-1, varints that are
 * truncated or longer than 10 bytes, and lengths that run past the end.
 */
#ifndef MST_WIRE_PB_READER_H
#define MST_WIRE_PB_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mstrace.h"

typedef struct mst_pb_reader {
    const uint8_t *p;
    const uint8_t *end;
} mst_pb_reader;

/* One field as read from the wire. For MST_PB_WT_LEN `data`/`len` point at
 * the payload (inside the reader's input); otherwise `u` holds the value
 * (a varint, or the little-endian fixed32/fixed64 bits). */
typedef struct mst_pb_field {
    uint32_t number;
    unsigned wire_type;
    uint64_t u;
    const uint8_t *data;
    size_t len;
} mst_pb_field;

static inline void mst_pb_reader_init(mst_pb_reader *r, const void *data, size_t len) {
    r->p = (const uint8_t *)data;
    r->end = len ? r->p + len : r->p; /* NULL + 0 is UB */
}

static inline bool mst_pb_reader_done(const mst_pb_reader *r) { return r->p >= r->end; }

/* Reads one varint. MST_ERR_PARSE when truncated or over 10 bytes (or the
 * 10th byte carries more than the top bit of a uint64). */
mst_status mst_pb_read_varint(mst_pb_reader *r, uint64_t *out);

/* Reads the next field. Returns MST_OK with *f filled, MST_ERR_CLOSED at the
 * clean end of input, MST_ERR_PARSE on malformed input (the reader is then
 * left where the error was found). */
mst_status mst_pb_next(mst_pb_reader *r, mst_pb_field *f);

#endif /* MST_WIRE_PB_READER_H */
