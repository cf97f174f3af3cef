/*
 * str.h — mst_str, the length-carrying string every part of the library
 * passes around (span fields, attribute keys and values, decoded JSON keys).
 * Its own header so that readers and decoders that only need the type do
 * not pull in the span record.
 */
#ifndef MST_CORE_STR_H
#define MST_CORE_STR_H

#include <stdint.h>

typedef struct mst_str {
    const char *ptr; /* NUL-terminated when owned by a span's arena (or static);
                      * a zero-copy slice of a decoder's input is not: use len */
    uint32_t len;
} mst_str;

#endif /* MST_CORE_STR_H */
