/* status.c — messages for every mst_status code (see mstrace.h). */
#include "mstrace.h"

const char *mst_strerror(mst_status status) {
    switch (status) {
    case MST_OK: return "ok";
    case MST_ERR_INVALID_ARG: return "invalid argument";
    case MST_ERR_NOMEM: return "out of memory";
    case MST_ERR_QUEUE_FULL: return "span queue full, span dropped";
    case MST_ERR_PARSE: return "malformed input";
    case MST_ERR_IO: return "I/O error";
    case MST_ERR_CLOSED: return "closed or shut down";
    case MST_ERR_TOO_LARGE: return "input exceeds a size limit";
    case MST_ERR_UNSUPPORTED: return "unsupported value";
    case MST_ERR_TIMEOUT: return "timed out";
    case MST_ERR_PERMISSION: return "permission denied (owner or peer check failed)";
    case MST_ERR_PATH: return "output path rejected by the path rules";
    case MST_ERR_UNAVAILABLE: return "remote end unavailable";
    case MST_ERR_REJECTED: return "remote end rejected the data";
    case MST_ERR_INTERNAL: return "internal error (a bug in mstrace)";
    }
    return "unknown mstrace status";
}

const char *mst_version(void) { return MSTRACE_VERSION_STRING; }
