/*
 * log.h — the library's one logging facility. Lines go to stderr as
 * "<UTC time> mstrace <LEVEL> [pid]: message". The level is a process-wide
 * atomic so checking it on a hot path costs one load; formatting happens
 * only for lines that will be printed. Never used for per-span output.
 */
#ifndef MST_CORE_LOG_H
#define MST_CORE_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include "mstrace.h"
#include "core/visibility.h"

MST_SHARED_INTERNAL bool mst_log_enabled(mst_log_level level);
MST_SHARED_INTERNAL
void mst_log(mst_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define MST_DEBUG(...) do { if (mst_log_enabled(MST_LOG_DEBUG)) mst_log(MST_LOG_DEBUG, __VA_ARGS__); } while (0)
#define MST_INFO(...) mst_log(MST_LOG_INFO, __VA_ARGS__)
#define MST_WARN(...) mst_log(MST_LOG_WARNING, __VA_ARGS__)
#define MST_ERROR(...) mst_log(MST_LOG_ERROR, __VA_ARGS__)
#define MST_CRITICAL(...) mst_log(MST_LOG_CRITICAL, __VA_ARGS__)

/* Whether the count-th occurrence of a repeated event gets a log line: the
 * first five, then one in 1000 (the line should carry the count), so a
 * flood of the same failure cannot flood the log. */
static inline bool mst_log_this_count(uint64_t count) { return count <= 5 || count % 1000 == 0; }

#endif /* MST_CORE_LOG_H */
