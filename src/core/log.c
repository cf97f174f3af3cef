/*
 * log.c — stderr logging with a process-wide level (see log.h). One
 * formatted line is written with a single write(2) so lines from several
 * threads or processes never interleave mid-line.
 */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_log_level = MST_LOG_INFO;

void mst_log_set_level(mst_log_level level) { atomic_store(&g_log_level, (int)level); }

bool mst_log_enabled(mst_log_level level) {
    return (int)level >= atomic_load_explicit(&g_log_level, memory_order_relaxed);
}

mst_status mst_log_level_parse(const char *name, mst_log_level *out) {
    static const struct { const char *name; mst_log_level level; } table[] = {
        {"debug", MST_LOG_DEBUG},       {"info", MST_LOG_INFO},
        {"warning", MST_LOG_WARNING},   {"error", MST_LOG_ERROR},
        {"critical", MST_LOG_CRITICAL}, {"fatal", MST_LOG_CRITICAL},
    };
    if (!name || !out) return MST_ERR_INVALID_ARG;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcasecmp(name, table[i].name) == 0) {
            *out = table[i].level;
            return MST_OK;
        }
    }
    return MST_ERR_PARSE;
}

static const char *level_name(mst_log_level level) {
    switch (level) {
    case MST_LOG_DEBUG: return "DEBUG";
    case MST_LOG_INFO: return "INFO";
    case MST_LOG_WARNING: return "WARNING";
    case MST_LOG_ERROR: return "ERROR";
    default: return "CRITICAL";
    }
}

void mst_log(mst_log_level level, const char *fmt, ...) {
    if (!mst_log_enabled(level)) return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ mstrace %s [%d]: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_name(level), (int)getpid());
    if (n < 0) return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
