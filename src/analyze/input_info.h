/*
 * input_info.h — what a reader reports about one whole input (a file or a
 * query) besides its spans: size, truncation, loss counters, warnings. The
 * analysis shows it in "inputs" and "data_quality" (docs/analyze.md).
 */
#ifndef MST_ANALYZE_INPUT_INFO_H
#define MST_ANALYZE_INPUT_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a reader tells about one input besides its spans (the "inputs" and
 * "data_quality" sections of the analysis). Filled by the reader; the
 * caller frees it with mst_an_input_info_free. */
#define MST_AN_MAX_INPUT_WARNINGS 8
typedef struct mst_an_input_info {
    const char *kind;      /* "chrome-json", "jaeger", "pftrace" (static)      */
    char *name;            /* path or query (malloc'd)                        */
    uint64_t spans;        /* spans delivered to the sink                     */
    uint64_t bytes;        /* input bytes read                                */
    uint64_t skipped;      /* events that were not usable spans               */
    uint64_t flows;        /* flow events (links) seen                        */
    bool truncated;        /* input ended early (SIGKILL-cut file, cut page)  */
    /* Loss counters the input itself reports (-1 = not known). */
    int64_t spans_dropped;
    int64_t spans_failed;
    size_t n_warnings;
    char *warnings[MST_AN_MAX_INPUT_WARNINGS]; /* malloc'd sentences */
} mst_an_input_info;

/* Clears `info` for a new input: kind (static), name copied, counters 0,
 * loss counters -1. False when out of memory. */
bool mst_an_input_info_init(mst_an_input_info *info, const char *kind, const char *name);
/* Adds a printf-formatted warning (beyond the cap the last one says how many
 * more there were). */
void mst_an_input_warn(mst_an_input_info *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void mst_an_input_info_free(mst_an_input_info *info);

/* What every trace-file reader says about an input read only in part; each
 * marks it truncated and adds one warning. A file cut while being written,
 * ending `where` ("inside a packet"): */
void mst_an_input_cut(mst_an_input_info *info, const char *where);
/* Input that stops being well formed at byte `at`, for the reason `why`,
 * after some spans were read: */
void mst_an_input_broken(mst_an_input_info *info, const char *why, uint64_t at);

#endif /* MST_ANALYZE_INPUT_INFO_H */
