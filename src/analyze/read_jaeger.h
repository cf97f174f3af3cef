/*
 * read_jaeger.h — reads spans from Jaeger's HTTP query API (`/api/traces`,
 * the JSON the Jaeger UI uses) for `mstrace analyze --jaeger URL --service
 * NAME`: the same mst_an_span records the Chrome Trace reader delivers, so
 * a Jaeger-only deployment gets the same analysis as one with the
 * forwarder's files (docs/analyze.md, "Reading from Jaeger").
 *
 * Paging: the API has no cursor, only a time window and a trace limit, and
 * it answers with whole traces. The reader asks for [start, end]; when a
 * page comes back full (as many real traces as the limit) it splits the
 * window in two and asks for each half (earlier first), down to
 * a floor (min_window_us, 1 ms by default), so every trace whose spans fall in the
 * window is seen whatever the limit. A trace that two windows both return
 * is delivered once (trace ids are remembered: memory grows with the
 * number of traces, never with span bytes). The whole read is bounded by
 * a deadline and a number of requests (mst_an_jaeger_query); hitting one
 * stops it with MST_ERR_TIMEOUT / MST_ERR_TOO_LARGE and a message saying
 * what was read and how far the windows got.
 *
 * Services: each service named (NAME) is read with the role services
 * mstrace's processes export under (core/resource.h: NAME.engine_core,
 * NAME.worker), so the name a run was started with reads all of it; a
 * name that already ends with a role suffix is read alone.
 *
 * Mapping of one Jaeger span: operationName -> name; startTime/duration
 * (microseconds) -> start_ns/end_ns; the CHILD_OF reference in the same
 * trace -> parent_span_id, every other reference -> a link; tags ->
 * attributes (a string tag holding a JSON array of strings, which is how
 * OTLP string-array attributes such as request.ids reach Jaeger, becomes a
 * string list again); otel.status_code / error -> status; pid from the
 * process.pid tag (span, else process), tid from thread.id, role from
 * process.role (span, else process) else the service name. Hook spans and
 * vLLM's own `llm_request` spans are read alike.
 */
#ifndef MST_ANALYZE_READ_JAEGER_H
#define MST_ANALYZE_READ_JAEGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/input_file.h" /* mst_an_progress_fn */
#include "analyze/input_info.h"
#include "analyze/record.h"

/* What to ask Jaeger. */
typedef struct mst_an_jaeger_query {
    const char *base_url;  /* http://HOST:16686 (a trailing '/' is fine)         */
    const char *service;   /* one service, or several separated by ','            */
    int64_t start_us;      /* window, microseconds since the Unix epoch           */
    int64_t end_us;
    unsigned limit;        /* traces per request; 0 = 500                         */
    long timeout_ms;       /* per HTTP request; 0 = 60000                         */
    /* https:// only (NULL: not set): the CA file that signed Jaeger's
     * certificate (else the system CAs), and for mutual TLS the client
     * certificate and its key, all PEM (--jaeger-ca/-cert/-key). */
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    /* Called after each answer with the bytes read so far (total 0: not
     * known), for a progress line; may be NULL. */
    mst_an_progress_fn progress;
    void *progress_ctx;
    /* Called after each answer too (with progress_ctx), with how far the
     * paging got, for a progress line that says it; may be NULL. */
    void (*progress_pages)(void *ctx, uint64_t requests, uint64_t spans, uint64_t traces,
                           int64_t window_us);
    /* Bounds of the whole read, whatever the server answers (a server whose
     * pages are always full would otherwise be split forever): */
    long deadline_ms;       /* all requests together; 0 = 600000 (10 min)      */
    unsigned max_requests;  /* HTTP requests in all; 0 = 100000                */
    /* Windows are not split below this (a full page of a shorter window is
     * read as it is, with a warning that traces may be missing); 0 =
     * MST_AN_JAEGER_MIN_WINDOW_US. */
    int64_t min_window_us;
} mst_an_jaeger_query;

#define MST_AN_JAEGER_MIN_WINDOW_US 1000

/* Queries Jaeger and calls `fn` per span (input index `source`). `info` is
 * initialised here ("jaeger", name = URL and service) and filled; the
 * caller frees it, also on error. Errors (one sentence in err):
 * MST_ERR_UNAVAILABLE Jaeger cannot be reached; MST_ERR_REJECTED it
 * answered with an HTTP error or an "errors" list and no data;
 * MST_ERR_PARSE the answer is not Jaeger query JSON; MST_ERR_TOO_LARGE one
 * answer is over 1 GiB; MST_ERR_TIMEOUT the deadline passed; MST_ERR_TOO_LARGE
 * also for the request limit; MST_ERR_INVALID_ARG a bad query or TLS file, or
 * a TLS failure no retry fixes (the message names the --jaeger-* flag). A non-OK status
 * from `fn` stops the reader and is returned. */
mst_status mst_an_read_jaeger(const mst_an_jaeger_query *q, uint32_t source, mst_an_span_fn fn,
                              void *ctx, mst_an_input_info *info, char *err, size_t err_size);

/* Command-line time values for the query window. A duration ("90s",
 * "30m", "1h", "2d", "5ms", "1us"; a plain number is seconds) into
 * microseconds; a time
 * (RFC 3339 "2026-11-30T18:00:00Z", fractions and +HH:MM offsets allowed,
 * or a plain number of Unix seconds) into microseconds since the epoch.
 * False for anything else. */
bool mst_an_jaeger_parse_duration(const char *s, int64_t *us);
bool mst_an_jaeger_parse_time(const char *s, int64_t *us);

/* The page parser on its own (the fuzz target, tests): one reader keeps the
 * trace ids seen across pages. */
typedef struct mst_an_jaeger_pages mst_an_jaeger_pages;

/* NULL when out of memory. `info` (may be NULL) gets span counts and
 * warnings. */
mst_an_jaeger_pages *mst_an_jaeger_pages_new(uint32_t source, mst_an_span_fn fn, void *ctx,
                                             mst_an_input_info *info);
/* Parses one /api/traces answer, delivering the spans of every trace not
 * seen before. *traces gets the number of real traces in the answer (seen
 * or not: a valid trace id and at least one span object; `{}` and empty
 * span lists do not count), which tells the pager whether the page was
 * full. */
mst_status mst_an_jaeger_pages_parse(mst_an_jaeger_pages *p, const char *body, size_t len,
                                     size_t *traces, char *err, size_t err_size);
void mst_an_jaeger_pages_free(mst_an_jaeger_pages *p);

#endif /* MST_ANALYZE_READ_JAEGER_H */
