/*
 * record.h — the one input record of `mstrace analyze`: a finished span as
 * any reader delivers it (the forwarder's Chrome Trace JSON, the Jaeger
 * query API, later .pftrace), and the per-span callback every reader calls.
 * Why one record: the model (src/analyze/model.c) is fed the same way from
 * every source, so the same run read from Jaeger or from the file gives the
 * same analysis; a reader only maps its format onto these fields. What a
 * reader reports about a whole input is in input_info.h.
 *
 * Lifetime: every pointer in a record (name, role, attribute keys and
 * values, list items, links) is valid only during the callback; a sink that
 * keeps something copies it. Strings are UTF-8, not NUL-terminated, with
 * an exact length (JSON escapes already undone).
 */
#ifndef MST_ANALYZE_RECORD_H
#define MST_ANALYZE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mstrace.h"

/* A length-carrying string (not NUL-terminated). */
typedef struct mst_an_str {
    const char *ptr;
    size_t len;
} mst_an_str;

typedef enum mst_an_value_type {
    MST_AN_VAL_INT = 0,   /* .i  (JSON integers in int64 range)              */
    MST_AN_VAL_DOUBLE,    /* .d  (other JSON numbers)                         */
    MST_AN_VAL_BOOL,      /* .i  0 or 1                                       */
    MST_AN_VAL_STR,       /* .s  unescaped                                    */
    MST_AN_VAL_STR_LIST,  /* .items / .n_items (an array of strings only)     */
    MST_AN_VAL_OTHER      /* .s  raw JSON text (null, objects, mixed arrays)  */
} mst_an_value_type;

/* One attribute: request.id, request.ids, batch.request_count,
 * batch.scheduled_tokens, process.role, ... (any key a span carries). */
typedef struct mst_an_attr {
    mst_an_str key;
    mst_an_value_type type;
    int64_t i;
    double d;
    mst_an_str s;
    const mst_an_str *items;
    size_t n_items;
} mst_an_attr;

/* A span link: "this span worked on that (request) context". */
typedef struct mst_an_link {
    uint8_t trace_id[16];
    uint8_t span_id[8];
} mst_an_link;

/* One finished span. Ids that the source does not carry are all zero
 * (parent_span_id zero = a root). Times are nanoseconds since the Unix
 * epoch on the clock of the process that recorded the span. `pid` is the
 * process id as the source names it; processes of different inputs are
 * kept apart by `source` (two files from two nodes may reuse a pid). */
typedef struct mst_an_span {
    mst_an_str name;
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    int64_t start_ns;
    int64_t end_ns;
    int64_t pid;
    int64_t tid;
    mst_an_str role;       /* process.role, else the process name; may be empty */
    uint32_t source;       /* index of the input (file or query) it came from */
    int status;            /* 0 unset, 1 OK, 2 ERROR                           */
    const mst_an_attr *attrs;
    size_t n_attrs;
    const mst_an_link *links;
    size_t n_links;
} mst_an_span;

/* The sink every reader calls once per span, in the order read. A non-OK
 * return stops the reader, which returns that status. */
typedef mst_status (*mst_an_span_fn)(void *ctx, const mst_an_span *s);

/* Finds an attribute by key (NULL when absent). Linear: spans carry few. */
static inline const mst_an_attr *mst_an_span_attr(const mst_an_span *s, const char *key,
                                                  size_t key_len) {
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_an_attr *a = &s->attrs[i];
        if (a->key.len == key_len) {
            size_t k = 0;
            while (k < key_len && a->key.ptr[k] == key[k]) k++;
            if (k == key_len) return a;
        }
    }
    return NULL;
}

#endif /* MST_ANALYZE_RECORD_H */
