/*
 * log.h — the extension's log lines, through Python's `logging` (so the
 * plugin's handler and level apply). Defined in log.c.
 */
#ifndef MST_NATIVE_LOG_H
#define MST_NATIVE_LOG_H

#include "native_types.h"

/* Logs one line through logging.getLogger("mstrace") (level: "info",
 * "warning", "debug"). Keeps any pending exception intact. */
void mstn_log(const char *level, const char *fmt, ...);

#endif /* MST_NATIVE_LOG_H */
