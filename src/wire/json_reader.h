/*
 * json_reader.h — a small, strict, pull-style JSON reader (RFC 8259) for
 * untrusted input: the Perfetto packet decoder (perfetto_packet_decode.c) is
 * its first user. Why not a DOM or an external library: the forwarder must
 * decode >= 500k packets/s on one core and never read out of bounds, and a
 * pull reader lets the decoder validate and extract in one pass without
 * building a tree.
 *
 * What "strict" means here:
 *   - syntax exactly as RFC 8259 (no comments, no trailing commas, no NaN,
 *     no leading zeros, no leading '+', whitespace = space/tab/CR/LF only);
 *   - strings are valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF), no
 *     raw control characters, escapes only the RFC set; \uXXXX surrogates
 *     must form a pair (a lone surrogate is an error);
 *   - containers nest at most `max_depth` deep (the outermost counts 1);
 *   - the whole input must be one value plus optional whitespace.
 * Every read is bounds-checked against `end`; the input need not be
 * NUL-terminated.
 *
 * Error model: a function that fails returns false (or -1) and records a
 * static message and byte offset in the reader; the reader is then "failed"
 * and every later call fails too, so callers may check once.
 */
#ifndef MST_WIRE_JSON_READER_H
#define MST_WIRE_JSON_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "mstrace.h" /* mst_str */

/* The raw JSON text of one value, already validated (UTF-8, syntax, depth),
 * so it can be copied into an output (the forwarder's Chrome Trace JSON) as
 * it is. */
typedef struct mst_json_slice {
    const char *ptr;
    size_t len;
} mst_json_slice;

typedef enum mst_json_type {
    MST_JSON_INVALID = 0, /* end of input or a byte that starts no value */
    MST_JSON_NULL,
    MST_JSON_FALSE,
    MST_JSON_TRUE,
    MST_JSON_NUMBER,
    MST_JSON_STRING,
    MST_JSON_ARRAY,
    MST_JSON_OBJECT
} mst_json_type;

typedef struct mst_json_reader {
    const uint8_t *start;
    const uint8_t *p;     /* cursor */
    const uint8_t *end;
    unsigned depth;       /* containers currently open */
    unsigned max_depth;
    /* The open containers as a bit stack (1 = object); depth <= 64. */
    uint64_t kinds;
    /* Per open container: has it produced a member yet (for ',' rules). */
    uint64_t nonempty;
    const char *err;      /* static message; NULL while no error */
    size_t err_off;       /* byte offset of the error in the input */
    bool nomem;           /* the error was an arena allocation failure */
} mst_json_reader;

/* max_depth is clamped to 1..64. */
void mst_json_reader_init(mst_json_reader *r, const void *data, size_t len, unsigned max_depth);

/* Type of the next value (skips whitespace; consumes nothing else).
 * MST_JSON_INVALID sets an error. */
mst_json_type mst_json_peek(mst_json_reader *r);

/* Containers. *_begin consumes '{' / '['. *_next returns 1 when a member
 * follows (for objects: positioned on the key, read it with
 * mst_json_read_key*), 0 after consuming the closing bracket, -1 on error. */
bool mst_json_object_begin(mst_json_reader *r);
int mst_json_object_next(mst_json_reader *r);
bool mst_json_array_begin(mst_json_reader *r);
int mst_json_array_next(mst_json_reader *r);

/* An object key plus the ':' after it, unescaped into the arena
 * (NUL-terminated; may contain NUL bytes from \u0000, len is exact). */
bool mst_json_read_key(mst_json_reader *r, mst_arena *arena, mst_str *out);
/* Same into a caller buffer of `cap` bytes (no NUL added). A key that does
 * not fit is still validated and consumed; *fits tells which. */
bool mst_json_read_key_into(mst_json_reader *r, char *dst, size_t cap, size_t *len, bool *fits);

/* Zero-copy forms for hot paths: the key (plus ':') / string value as a
 * length-carrying slice. Without escapes it points into the input (NOT
 * NUL-terminated; the input must outlive it); with escapes it is unescaped
 * into the arena (then NUL-terminated, and may hold NUL bytes from
 * \u0000). Validation is the same as for the copying forms. */
bool mst_json_read_key_slice(mst_json_reader *r, mst_arena *arena, mst_str *out);
bool mst_json_read_str_slice(mst_json_reader *r, mst_arena *arena, mst_str *out);

/* A string value, unescaped into the arena (NUL-terminated). */
bool mst_json_read_str(mst_json_reader *r, mst_arena *arena, mst_str *out);
/* A string value into a caller buffer; see mst_json_read_key_into. */
bool mst_json_read_str_into(mst_json_reader *r, char *dst, size_t cap, size_t *len, bool *fits);

/* An integral number: JSON integer syntax only ("-"? digits; no fraction or
 * exponent) that fits int64. Anything else fails without consuming input
 * beyond the value's syntax check. */
bool mst_json_read_i64(mst_json_reader *r, int64_t *out);

/* Validates any value (depth-limited) and returns its raw text. */
bool mst_json_read_raw(mst_json_reader *r, mst_json_slice *out);

/* Succeeds when only whitespace remains and no container is open. */
bool mst_json_finish(mst_json_reader *r);

/* Parses an already validated raw value as an int64 (JSON integer syntax
 * only, overflow checked). False for any other value. */
bool mst_json_slice_to_i64(const mst_json_slice *v, int64_t *out);

/* Validates that `data` is exactly one JSON value (for tests and fuzzing). */
bool mst_json_validate(const void *data, size_t len, unsigned max_depth, const char **err,
                       size_t *err_off);

#endif /* MST_WIRE_JSON_READER_H */
