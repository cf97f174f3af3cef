/*
 * err_text.h — mst_err_set / mst_err_fail: how a function that returns an
 * mst_status also hands its caller a message, in the caller's
 * (err, err_size) buffer (NULL or size 0: no message wanted). Inline, so libmstrace,
 * libmstrace_otlp and the mstrace binary share it without exporting a
 * symbol (see visibility.h).
 */
#ifndef MST_CORE_ERR_TEXT_H
#define MST_CORE_ERR_TEXT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "mstrace.h"

static inline void mst_err_set(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void mst_err_set(char *err, size_t err_size, const char *fmt, ...) {
    if (!err || err_size == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

/* The message, then st: `return mst_err_fail(err, err_size, MST_ERR_PARSE, ...);`. */
static inline mst_status mst_err_fail(char *err, size_t err_size, mst_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline mst_status mst_err_fail(char *err, size_t err_size, mst_status st, const char *fmt, ...) {
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return st;
}

#endif /* MST_CORE_ERR_TEXT_H */
