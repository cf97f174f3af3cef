/*
 * mstrace.h — the public header of libmstrace.
 *
 * libmstrace records request-tracing spans with almost no cost on the calling
 * thread: a span is a fixed-shape record filled in place, handed at its end to
 * a bounded lock-free queue, and encoded/exported later by one exporter thread
 * per pipeline. Everything a C or C++ serving engine (or the vLLM plugin's
 * CPython extension) needs is declared here, including the read-out API for
 * exporters of its own; the OTLP exporter is in mstrace_otlp.h
 * (libmstrace_otlp). Internals live under src/ and are not installed.
 *
 * Conventions (libuv/sqlite style):
 *   - every public symbol is `mst_<noun>_<verb>`; macros and enum values `MST_`;
 *   - every fallible call returns `mst_status` (0 = MST_OK, negative = error)
 *     and `mst_strerror()` turns it into a message;
 *   - span setters accept a NULL span and do nothing: an unsampled or
 *     disabled span is NULL, so the unsampled path costs a branch.
 */
#ifndef MSTRACE_H
#define MSTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MST_EXPORT __attribute__((visibility("default")))
#else
#define MST_EXPORT
#endif

/* ------------------------------------------------------------------ errors */

typedef enum mst_status {
    MST_OK = 0,
    MST_ERR_INVALID_ARG = -1,   /* a NULL or out-of-range argument          */
    MST_ERR_NOMEM = -2,         /* an allocation failed                      */
    MST_ERR_QUEUE_FULL = -3,    /* the span queue was full: span dropped     */
    MST_ERR_PARSE = -4,         /* malformed input (traceparent, packet ...) */
    MST_ERR_IO = -5,            /* a read/write/socket call failed           */
    MST_ERR_CLOSED = -6,        /* the pipeline or peer is shut down         */
    MST_ERR_TOO_LARGE = -7,     /* input over a documented size limit        */
    MST_ERR_UNSUPPORTED = -8,   /* a valid but unsupported value             */
    MST_ERR_TIMEOUT = -9,       /* an operation ran out of time              */
    MST_ERR_PERMISSION = -10,   /* a peer or file failed an ownership check  */
    MST_ERR_PATH = -11,         /* an output path broke the path rules       */
    MST_ERR_UNAVAILABLE = -12,  /* the remote end is not reachable (retry)   */
    MST_ERR_REJECTED = -13,     /* the remote end refused the data (no retry)*/
    MST_ERR_INTERNAL = -14      /* a broken invariant: a bug in mstrace      */
} mst_status;

/* A static English message for a status; never NULL. */
MST_EXPORT const char *mst_strerror(mst_status status);

/* ------------------------------------------------------------- ids, clock */

typedef struct mst_trace_id { uint8_t bytes[16]; } mst_trace_id;
typedef struct mst_span_id { uint8_t bytes[8]; } mst_span_id;

/* Random ids from a per-thread generator (no syscall per id), never zero.
 * Reseeded automatically in a forked child. */
MST_EXPORT mst_trace_id mst_trace_id_random(void);
MST_EXPORT mst_span_id mst_span_id_random(void);
MST_EXPORT bool mst_trace_id_is_valid(const mst_trace_id *id); /* not all zero */
MST_EXPORT bool mst_span_id_is_valid(const mst_span_id *id);

/* Lowercase hex; `out` must hold 33 / 17 bytes (NUL-terminated). */
MST_EXPORT void mst_trace_id_to_hex(const mst_trace_id *id, char out[33]);
MST_EXPORT void mst_span_id_to_hex(const mst_span_id *id, char out[17]);
/* Strict lowercase hex of exactly 32 / 16 chars, not all zero. */
MST_EXPORT mst_status mst_trace_id_from_hex(const char *hex, size_t len, mst_trace_id *out);
MST_EXPORT mst_status mst_span_id_from_hex(const char *hex, size_t len, mst_span_id *out);

/* Wall clock (CLOCK_REALTIME) in nanoseconds since the Unix epoch. */
MST_EXPORT uint64_t mst_clock_now_ns(void);

/* ------------------------------------------------------- trace context */

#define MST_TRACE_FLAG_SAMPLED 0x01u
#define MST_TRACESTATE_MAX 512 /* W3C: at most 512 chars */

typedef struct mst_span_context {
    mst_trace_id trace_id;
    mst_span_id span_id;
    uint8_t trace_flags;   /* W3C flags; bit 0 = sampled                   */
    bool is_remote;        /* came from a traceparent header               */
    uint16_t trace_state_len;
    char trace_state[MST_TRACESTATE_MAX + 1]; /* NUL-terminated, may be "" */
} mst_span_context;

/* True when both ids are valid. */
MST_EXPORT bool mst_ctx_is_valid(const mst_span_context *ctx);

/* Strict W3C traceparent: "00-<32 hex>-<16 hex>-<2 hex>", lowercase, ids not
 * all zero, version not "ff"; versions above 00 are accepted with extra
 * "-..." fields as the W3C forward-compatibility rule says. On success `out`
 * gets the ids and flags, is_remote = true, empty trace_state. */
MST_EXPORT mst_status mst_ctx_parse_traceparent(const char *header, size_t len,
                                                mst_span_context *out);
/* Validates a tracestate header (list-members key=value, at most 32, at most
 * 512 chars) and stores it in ctx->trace_state. An invalid one leaves
 * ctx->trace_state empty and returns MST_ERR_PARSE. */
MST_EXPORT mst_status mst_ctx_parse_tracestate(const char *header, size_t len,
                                               mst_span_context *ctx);
/* Writes "00-<trace>-<span>-<flags>" plus NUL: `out` must hold 56 bytes. */
#define MST_TRACEPARENT_LEN 55
MST_EXPORT mst_status mst_ctx_format_traceparent(const mst_span_context *ctx,
                                                 char *out, size_t out_size);

/* ------------------------------------------------------------ attributes */

typedef enum mst_attr_type {
    MST_ATTR_STRING = 1,
    MST_ATTR_INT = 2,
    MST_ATTR_DOUBLE = 3,
    MST_ATTR_BOOL = 4,
    MST_ATTR_STRING_LIST = 5
} mst_attr_type;

/* Limits of docs/reference/spans.md; values over them are truncated (strings) or dropped
 * and counted in the span's dropped_* counters. */
#define MST_MAX_ATTRIBUTES 32
/* 1024, as MST_MAX_LIST_ITEMS: a step span links every request it carried,
 * at vLLM's largest default max_num_seqs. */
#define MST_MAX_LINKS 1024
#define MST_MAX_EVENTS 128
/* 1024: a whole batch at vLLM's largest default max_num_seqs (1024 on
 * GPUs of 70 GiB and more; 256 elsewhere), so a step's per-request lists
 * are never cut. */
#define MST_MAX_LIST_ITEMS 1024
#define MST_MAX_KEY_LEN 128
#define MST_MAX_VALUE_LEN 1024
#define MST_MAX_STATUS_MESSAGE_LEN 1024

/* A borrowed attribute used to pass attributes in (links, events). */
typedef struct mst_attr_in {
    const char *key;
    mst_attr_type type;
    union {
        const char *s;          /* MST_ATTR_STRING, NUL-terminated          */
        int64_t i;
        double d;
        bool b;
        struct {
            const char *const *items; /* NUL-terminated strings             */
            size_t count;
        } list;                 /* MST_ATTR_STRING_LIST                     */
    } v;
} mst_attr_in;

/* ---------------------------------------------------------------- spans */

typedef enum mst_span_kind {
    MST_SPAN_KIND_UNSPECIFIED = 0,
    MST_SPAN_KIND_INTERNAL = 1,
    MST_SPAN_KIND_SERVER = 2,
    MST_SPAN_KIND_CLIENT = 3,
    MST_SPAN_KIND_PRODUCER = 4,
    MST_SPAN_KIND_CONSUMER = 5
} mst_span_kind;

typedef enum mst_status_code {
    MST_STATUS_UNSET = 0,
    MST_STATUS_OK = 1,
    MST_STATUS_ERROR = 2
} mst_status_code;

typedef struct mst_tracer mst_tracer;     /* a pipeline: queue + exporters  */
typedef struct mst_scope mst_scope;       /* an instrumentation scope       */
typedef struct mst_span mst_span;         /* one span being recorded        */
typedef struct mst_exporter mst_exporter; /* a sink the pipeline feeds      */

/* The head samplers of the OTel SDK (OTEL_TRACES_SAMPLER). A parent-based
 * sampler follows the sampled flag of a valid parent (local or remote) and
 * uses its root sampler only for spans without one; the others ignore the
 * parent. The trace-id ratio rule is the Go SDK's (and the Python SDK's up
 * to rounding at the bound): the last 8 bytes of the trace id read as a
 * big-endian integer, shifted right by one, sampled when below
 * ratio * 2^63 — deterministic per trace id, and every trace sampled at a
 * ratio is sampled at a higher one. (opentelemetry-cpp reads the first 8
 * bytes instead; the OTel spec leaves the algorithm open.) */
typedef enum mst_sampler_kind {
    MST_SAMPLER_PARENTBASED_ALWAYS_ON = 0,    /* the default                */
    MST_SAMPLER_PARENTBASED_ALWAYS_OFF = 1,
    MST_SAMPLER_PARENTBASED_TRACEIDRATIO = 2,
    MST_SAMPLER_ALWAYS_ON = 3,
    MST_SAMPLER_ALWAYS_OFF = 4,
    MST_SAMPLER_TRACEIDRATIO = 5
} mst_sampler_kind;

/* Configuration of a pipeline. Zero fields take the OTEL_BSP_* defaults,
 * parentbased_always_on and an enabled SDK. */
typedef struct mst_tracer_options {
    uint32_t max_queue_size;        /* OTEL_BSP_MAX_QUEUE_SIZE, 2048        */
    uint32_t max_export_batch_size; /* OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512  */
    uint32_t schedule_delay_ms;     /* OTEL_BSP_SCHEDULE_DELAY, 5000        */
    uint32_t export_timeout_ms;     /* OTEL_BSP_EXPORT_TIMEOUT, 30000       */
    bool export_errors_only;        /* MS_PROFILER_SAMPLE_ERROR=1           */
    mst_sampler_kind sampler;       /* OTEL_TRACES_SAMPLER                  */
    double sampler_ratio;           /* OTEL_TRACES_SAMPLER_ARG: probability
                                     * 0..1, read only by the *TRACEIDRATIO
                                     * kinds (the env reader puts 1.0 when
                                     * unset); outside 0..1: warning, 1.0   */
    bool sdk_disabled;              /* OTEL_SDK_DISABLED=true: no span is
                                     * ever started (counted as unsampled)  */
} mst_tracer_options;

/* Fills `opts` from the OTEL_BSP_*, OTEL_TRACES_SAMPLER[_ARG],
 * OTEL_SDK_DISABLED and MS_PROFILER_SAMPLE_ERROR environment variables
 * (invalid values: one warning each + default). */
MST_EXPORT void mst_tracer_options_from_env(mst_tracer_options *opts);

/* Creates a pipeline; its exporter thread starts on the first span. */
MST_EXPORT mst_status mst_tracer_create(const mst_tracer_options *opts, mst_tracer **out);
/* Adds an exporter; the tracer owns it from then on (also on error). */
MST_EXPORT mst_status mst_tracer_add_exporter(mst_tracer *tracer, mst_exporter *exporter);
/* Exports everything queued so far; waits at most timeout_ms. */
MST_EXPORT mst_status mst_tracer_flush(mst_tracer *tracer, uint32_t timeout_ms);
/* Flushes, stops the exporter thread, shuts exporters down, frees all.
 * When the flush does not finish within `timeout_ms` (0: the export
 * timeout), the export in flight is cancelled (exporters with a `cancel`
 * op: OTLP returns within about a second, the Perfetto forwarder client
 * within 20 ms) and what is still queued counts as failed; returns
 * MST_ERR_TIMEOUT then. */
MST_EXPORT mst_status mst_tracer_shutdown(mst_tracer *tracer, uint32_t timeout_ms);

/* Names the process the tracer runs in by its role ("api_server",
 * "engine_core_dp0", "worker_1" ...; NULL or "" = none): the tracer's
 * resource is rebuilt with the role's resource attributes and, with
 * MSTRACE_SERVICE_PER_ROLE=1, a service name per role (docs/configuration.md,
 * "Services per process role").
 * Only before the tracer exports (its first span in this process, also in a
 * fork()ed child, where the role is kept until set again): after that
 * MST_ERR_UNSUPPORTED, the resource staying as it was (the same role again
 * is MST_OK). Not thread-safe against a first span on another thread. */
MST_EXPORT mst_status mst_tracer_set_process_role(mst_tracer *tracer, const char *role);
/* The service.name the tracer's spans are exported under (valid until the
 * next mst_tracer_set_process_role or shutdown). */
MST_EXPORT const char *mst_tracer_service_name(const mst_tracer *tracer);

/* Interns an instrumentation scope ("ms_service_profiler.hook.Schedule");
 * the pointer lives as long as the tracer. Thread-safe; cache the result. */
MST_EXPORT const mst_scope *mst_tracer_scope(mst_tracer *tracer, const char *name,
                                             const char *version);

/* Counters, exact: every started span ends as exactly one of exported,
 * dropped_queue_full, failed, filtered (MS_PROFILER_SAMPLE_ERROR) or still
 * queued/in flight; and on a live tracer, spans_started + spans_unsampled
 * counts every mst_span_start* call with valid arguments (bar an
 * out-of-memory). Per exporter counters live in mst_exporter_stats. */
typedef struct mst_tracer_stats {
    uint64_t spans_started;      /* mst_span_start returned a span          */
    uint64_t spans_ended;        /* mst_span_end was called                 */
    uint64_t spans_queued;       /* accepted into the queue                 */
    uint64_t spans_dropped;      /* queue full at mst_span_end              */
    uint64_t spans_filtered;     /* not ERROR while export_errors_only,
                                  * discarded, or open across a fork() and
                                  * ended first by the other process       */
    uint64_t spans_exported;     /* delivered by at least one exporter (or
                                  * there is none); per sink: exporter stats */
    uint64_t spans_failed;       /* no exporter delivered them              */
    uint64_t batches_exported;
    uint32_t queue_depth;        /* spans in the queue right now            */
    uint64_t spans_unsampled;    /* starts refused by the sampler or by
                                  * OTEL_SDK_DISABLED (no span existed)     */
} mst_tracer_stats;
MST_EXPORT void mst_tracer_get_stats(mst_tracer *tracer, mst_tracer_stats *out);

/* Starts a span. `parent` may be NULL (a root span with a new trace id) or a
 * valid context (same trace id, parent_span_id = parent->span_id, flags
 * inherited plus the sampled bit). `start_ns` 0 means now. Returns NULL,
 * and records nothing, when the tracer is NULL or shut down, or the
 * tracer's sampler drops the span (with the default parentbased_always_on:
 * when `parent` is valid and not sampled); the sampling decision is taken
 * before any allocation or clock read. A returned span is always sampled
 * (trace_flags has MST_TRACE_FLAG_SAMPLED). */
MST_EXPORT mst_span *mst_span_start(mst_tracer *tracer, const mst_scope *scope,
                                    const char *name, mst_span_kind kind,
                                    const mst_span_context *parent, uint64_t start_ns);
/* Like mst_span_start but with the trace id and span id chosen by the
 * caller (used by the OTLP relay and by tests). */
MST_EXPORT mst_span *mst_span_start_with_ids(mst_tracer *tracer, const mst_scope *scope,
                                             const char *name, mst_span_kind kind,
                                             const mst_span_context *parent,
                                             const mst_trace_id *trace_id,
                                             const mst_span_id *span_id, uint64_t start_ns);

MST_EXPORT void mst_span_set_str(mst_span *span, const char *key, const char *value);
MST_EXPORT void mst_span_set_strn(mst_span *span, const char *key, const char *value, size_t len);
MST_EXPORT void mst_span_set_int(mst_span *span, const char *key, int64_t value);
MST_EXPORT void mst_span_set_double(mst_span *span, const char *key, double value);
MST_EXPORT void mst_span_set_bool(mst_span *span, const char *key, bool value);
MST_EXPORT void mst_span_set_str_list(mst_span *span, const char *key,
                                      const char *const *items, size_t count);
/* The same with each item's length given (lens[i] bytes of items[i], no
 * NUL needed): a batch's ids, whose lengths the caller already has, are
 * copied without measuring them again. */
MST_EXPORT void mst_span_set_str_list_n(mst_span *span, const char *key, const char *const *items,
                                        const size_t *lens, size_t count);
MST_EXPORT void mst_span_set_attr(mst_span *span, const mst_attr_in *attr);
/* Setters for a key that is a string literal: the key is stored in the span
 * by pointer, neither measured nor copied (the value is copied as above).
 * Why: keys are most of what a span with many small attributes copies. The
 * key must stay valid and unchanged until every span it was set on is
 * exported (a literal of a program or of a library that is never unloaded);
 * MST_LIT accepts only a literal and gives its length:
 *     mst_span_set_int_lit(span, MST_LIT("batch.request_count"), 4);
 * An empty key is ignored; one over MST_MAX_KEY_LEN bytes is cut on a UTF-8
 * boundary, as the copying setters cut it. */
#define MST_LIT(s) ("" s ""), (sizeof(s) - 1)
MST_EXPORT void mst_span_set_int_lit(mst_span *span, const char *key, size_t key_len, int64_t value);
MST_EXPORT void mst_span_set_double_lit(mst_span *span, const char *key, size_t key_len, double value);
MST_EXPORT void mst_span_set_strn_lit(mst_span *span, const char *key, size_t key_len, const char *value,
                                      size_t len);
/* lens: the items' lengths (as mst_span_set_str_list_n), or NULL (measured) */
MST_EXPORT void mst_span_set_str_list_lit(mst_span *span, const char *key, size_t key_len,
                                          const char *const *items, const size_t *lens, size_t count);
/* Adds a link (at most MST_MAX_LINKS; more are counted as dropped). */
MST_EXPORT void mst_span_add_link(mst_span *span, const mst_span_context *linked,
                                  const mst_attr_in *attrs, size_t n_attrs);
/* One link of a link block: the linked span's ids and W3C flags, and the
 * item of the span's string list that names it. */
typedef struct mst_link_ref {
    mst_trace_id trace_id;
    mst_span_id span_id;
    uint8_t trace_flags;
    bool is_remote;
    uint16_t item;         /* index into the list attribute `list_key`     */
} mst_link_ref;
/* Adds n links in one copy (a batch span linking each of its requests), for
 * the price of a memcpy on the calling thread: the exporter thread turns
 * them into ordinary links (readers, mst_span_get_links included, see only
 * those), each with one string attribute `key` = item `refs[i].item` of the
 * string-list attribute `list_key` set on the span before this call (no
 * attribute when there is none or the item is out of range). Invalid ids
 * are skipped; together with mst_span_add_link at most MST_MAX_LINKS, more
 * are counted as dropped. One block per span (a second call adds nothing
 * and counts its links as dropped). */
MST_EXPORT void mst_span_add_link_block(mst_span *span, const mst_link_ref *refs, size_t n,
                                        const char *key, const char *list_key);

/* Batch blocks: a string list and a link block copied once and shared,
 * read-only, by every span given it (a batch whose request ids and request
 * links several spans carry: the step's and its model calls'). The span
 * takes its own reference and drops it when it has been exported, so the
 * caller may release its reference at any time after handing the block on;
 * a span reads the same as with the copying calls it stands for. Items
 * (at most MST_MAX_LIST_ITEMS, each cut to MST_MAX_VALUE_LEN) and links (at
 * most MST_MAX_LINKS) over the limits are left out. Thread-safe: any thread
 * may release a reference. */
typedef struct mst_batch_block mst_batch_block;
/* Copies items (lens as in mst_span_set_str_list_n, or NULL: measured) and
 * links into a new block holding one reference, the caller's; NULL when out
 * of memory. */
MST_EXPORT mst_batch_block *mst_batch_block_new(const char *const *items, const size_t *lens,
                                                size_t count, const mst_link_ref *links,
                                                size_t n_links);
/* Drops one reference; the last frees (or pools) the block. NULL is fine. */
MST_EXPORT void mst_batch_block_release(mst_batch_block *block);
/* The block's links, as copied (NULL block: none); its items:
 * mst_batch_block_items (read-out, below). */
MST_EXPORT const mst_link_ref *mst_batch_block_links(const mst_batch_block *block, size_t *n);
/* As mst_span_set_str_list_lit with the block's items, without copying
 * them. */
MST_EXPORT void mst_span_set_str_list_block_lit(mst_span *span, const char *key, size_t key_len,
                                                mst_batch_block *block);
/* As mst_span_add_link_block with the block's links, without copying
 * them. */
MST_EXPORT void mst_span_add_link_block_shared(mst_span *span, mst_batch_block *block,
                                               const char *key, const char *list_key);
/* Adds an event; time_ns 0 means now. */
MST_EXPORT void mst_span_add_event(mst_span *span, const char *name, uint64_t time_ns,
                                   const mst_attr_in *attrs, size_t n_attrs);
/* Status; message (ERROR only) is truncated to MST_MAX_STATUS_MESSAGE_LEN. */
MST_EXPORT void mst_span_set_status(mst_span *span, mst_status_code code, const char *message);
MST_EXPORT void mst_span_set_name(mst_span *span, const char *name);
/* The span's own context (to parent children or register a request). */
MST_EXPORT bool mst_span_get_context(const mst_span *span, mst_span_context *out);
/* Ends the span (end_ns 0 = now) and hands it to the queue; never blocks.
 * The span must not be touched afterwards. */
MST_EXPORT void mst_span_end(mst_span *span, uint64_t end_ns);
/* Frees a span without exporting it (counts as ended + filtered). */
MST_EXPORT void mst_span_discard(mst_span *span);

/* -------------------------------------------------------------- exporters */

/* Per-exporter counters, exact: every span handed to export_batch lands in
 * exactly one of spans_exported, spans_rejected, spans_failed. For the OTLP
 * exporter a partial success (collector answered OK but listed
 * partial_success.rejected_spans) splits its batch into exported and
 * rejected, counts as batches_ok, is never retried, and export_batch returns
 * MST_ERR_REJECTED for it; the tracer's counters are per whole batch, so
 * there such a batch is in mst_tracer_stats.spans_failed, never exported. */
typedef struct mst_exporter_stats {
    uint64_t spans_exported;  /* accepted by the sink (OTLP: the batch minus
                               * partial_success.rejected_spans)           */
    uint64_t spans_failed;    /* whole batch not delivered: encoding error,
                               * non-retryable status, retries or timeout
                               * used up, cancelled; excludes rejected     */
    uint64_t spans_rejected;  /* delivered but refused one by one in a
                               * partial success (not in spans_failed)     */
    uint64_t batches_ok;      /* batches the sink answered with success,
                               * partial successes included                */
    uint64_t batches_failed;  /* batches counted in spans_failed           */
    uint64_t retries;         /* re-sent requests (not first attempts)     */
    uint64_t spans_skipped;   /* not sent because an optional sink was
                               * never there (see
                               * mst_forward_exporter_set_optional); not a
                               * failure, not in spans_failed              */
} mst_exporter_stats;

/* An exporter is a vtable + state; the pipeline calls it from its exporter
 * thread only, so an exporter needs no locking of its own. */
typedef struct mst_exporter_ops {
    const char *name;
    /* Deliver n finished spans (read-only). Returns MST_OK or an error. */
    mst_status (*export_batch)(mst_exporter *self, const mst_span *const *spans, size_t n);
    /* Optional: push out anything buffered. */
    mst_status (*flush)(mst_exporter *self, uint32_t timeout_ms);
    /* Optional: called in a fork()ed child before the child's first span;
     * drop inherited connections/threads here (do not close the parent's). */
    void (*after_fork_child)(mst_exporter *self);
    /* Optional: counters of this exporter. */
    void (*get_stats)(mst_exporter *self, mst_exporter_stats *out);
    /* Release everything (called once, at tracer shutdown). */
    void (*destroy)(mst_exporter *self);
    /* Optional: called from the thread running mst_tracer_shutdown when its
     * timeout expired with an export still in progress on the exporter
     * thread: make that export_batch return soon (an error) and every later
     * one fail at once. Must be safe to call concurrently with export_batch.
     * Without it, shutdown waits for the export in flight to finish. */
    void (*cancel)(mst_exporter *self);
} mst_exporter_ops;

struct mst_exporter {
    const mst_exporter_ops *ops;
};

/* Counters for an exporter of your own, kept exactly as mst_exporter_stats
 * says (the built-in exporters use them too): the exporter thread adds,
 * get_stats may read from any thread. Zero-initialise (or reset) before
 * use; touch the fields only through these calls (relaxed atomics, so a
 * reader never sees a torn value). */
typedef struct mst_exporter_counters {
    uint64_t spans_exported, spans_failed, spans_rejected;
    uint64_t batches_ok, batches_failed, retries, spans_skipped;
} mst_exporter_counters;

/* Adds n to one field, e.g. mst_counter_add(&c->spans_exported, n). */
static inline void mst_counter_add(uint64_t *field, uint64_t n) {
#if defined(__GNUC__)
    if (n) __atomic_fetch_add(field, n, __ATOMIC_RELAXED);
#else
#error "mst_counter_add needs GCC or Clang atomics"
#endif
}
/* One whole batch not delivered: spans_failed += spans, batches_failed += 1. */
MST_EXPORT void mst_exporter_counters_batch_failed(mst_exporter_counters *c, uint64_t spans);
/* One batch the sink answered: exported/rejected spans, batches_ok += 1. */
MST_EXPORT void mst_exporter_counters_batch_ok(mst_exporter_counters *c, uint64_t exported,
                                               uint64_t rejected);
/* A snapshot for get_stats (each field read atomically). */
MST_EXPORT void mst_exporter_counters_read(const mst_exporter_counters *c, mst_exporter_stats *out);
/* All fields back to zero (a fork()ed child starts its own counts). */
MST_EXPORT void mst_exporter_counters_reset(mst_exporter_counters *c);

/* A sink that counts and discards (for benchmarks and tests). */
MST_EXPORT mst_exporter *mst_null_exporter_create(void);

/* The Perfetto forwarder client: sends every span as one upstream packet
 * (docs/forwarder.md "Packets") to the abstract socket `socket_name` (NULL = the default
 * "MSP_PERFETTO_SOCKET") over a persistent connection; reconnects at most
 * every 5 s while the forwarder is absent; never blocks span producers. */
MST_EXPORT mst_status mst_forward_exporter_create(const char *socket_name, mst_exporter **out);

/* Makes a forward exporter optional (the vLLM plugin's default, where nobody
 * asked for a Perfetto file): until a forwarder has accepted a connection in
 * this process, its absence is one INFO line and the spans it could not take
 * count as spans_skipped, not failed. Once one was reached, losing it is a
 * warning and spans_failed as for a required one (the default). */
MST_EXPORT void mst_forward_exporter_set_optional(mst_exporter *exp, bool optional);

/* Reads the counters of one exporter (zeros if it keeps none). */
MST_EXPORT void mst_exporter_get_stats(mst_exporter *exporter, mst_exporter_stats *out);

/* --------------------------------------------------------------- read-out */

/* Read access to a finished span, for exporters written outside the library
 * (docs/c-api.md, "Writing an exporter"; examples/custom_exporter.c).
 *
 * Nothing is copied: every pointer returned points into the span record, its
 * scope or its tracer, and stays valid while the span does — for the whole
 * export_batch call that received it (and, for scopes and the resource, as
 * long as the tracer). Every string is NUL-terminated and carries its exact
 * length (an attribute value may hold a NUL byte from its source, so prefer
 * len). All functions accept a NULL span and return empty values. The
 * element types below are stable: fields are only ever added at the end. */

/* A borrowed string with its exact length. Every one the read-out calls
 * return is NUL-terminated, `len` bytes before the NUL. */
typedef struct mst_str {
    const char *ptr;
    uint32_t len;
} mst_str;

/* An attribute as stored in a span, a link, an event or the resource. */
typedef struct mst_attr {
    mst_str key;
    mst_attr_type type;
    union {
        mst_str s;               /* MST_ATTR_STRING                         */
        int64_t i;               /* MST_ATTR_INT                            */
        double d;                /* MST_ATTR_DOUBLE                         */
        bool b;                  /* MST_ATTR_BOOL                           */
        struct {
            mst_str *items;
            uint32_t count;
        } list;                  /* MST_ATTR_STRING_LIST                    */
    } v;
} mst_attr;

/* A link to another span. */
typedef struct mst_link {
    mst_trace_id trace_id;
    mst_span_id span_id;
    uint8_t trace_flags;
    bool is_remote;
    mst_str trace_state;         /* "" when none                            */
    mst_attr *attrs;
    uint32_t n_attrs;
    uint32_t dropped_attrs;      /* over MST_MAX_ATTRIBUTES                 */
} mst_link;

/* A timed event inside a span. */
typedef struct mst_event {
    mst_str name;
    uint64_t time_ns;            /* Unix epoch nanoseconds                  */
    mst_attr *attrs;
    uint32_t n_attrs;
    uint32_t dropped_attrs;
} mst_event;

/* What a span had to leave out (over the limits above). */
typedef struct mst_span_dropped {
    uint32_t attrs, links, events;
} mst_span_dropped;

MST_EXPORT const char *mst_span_name(const mst_span *span);
MST_EXPORT const char *mst_span_scope_name(const mst_span *span);
MST_EXPORT uint64_t mst_span_start_ns(const mst_span *span);
MST_EXPORT uint64_t mst_span_end_ns(const mst_span *span);

/* Identity. The parent id is NULL for a root span. The pointers are never
 * NULL otherwise (a NULL span gives all-zero ids). */
MST_EXPORT const mst_trace_id *mst_span_get_trace_id(const mst_span *span);
MST_EXPORT const mst_span_id *mst_span_get_span_id(const mst_span *span);
MST_EXPORT const mst_span_id *mst_span_get_parent_id(const mst_span *span);
MST_EXPORT bool mst_span_get_parent_is_remote(const mst_span *span);
MST_EXPORT uint8_t mst_span_get_trace_flags(const mst_span *span);
MST_EXPORT mst_str mst_span_get_trace_state(const mst_span *span);   /* "" when none */
MST_EXPORT mst_span_kind mst_span_get_kind(const mst_span *span);
/* The status code; `message` (may be NULL) gets the ERROR description or "". */
MST_EXPORT mst_status_code mst_span_get_status(const mst_span *span, mst_str *message);

/* The instrumentation scope: one pointer per interned scope, so an exporter
 * may cache per scope pointer for the tracer's life. */
MST_EXPORT const mst_scope *mst_span_get_scope(const mst_span *span);
MST_EXPORT mst_str mst_scope_get_name(const mst_scope *scope);
MST_EXPORT mst_str mst_scope_get_version(const mst_scope *scope);     /* "" when none */

/* Arrays of the span's attributes, links and events, in the order they were
 * set; *n gets the count (0 with a non-NULL pointer or NULL when empty). */
MST_EXPORT const mst_attr *mst_span_get_attrs(const mst_span *span, size_t *n);
MST_EXPORT const mst_link *mst_span_get_links(const mst_span *span, size_t *n);
/* A batch block's items, as copied (NULL block: none). */
MST_EXPORT const mst_str *mst_batch_block_items(const mst_batch_block *block, size_t *n);
MST_EXPORT const mst_event *mst_span_get_events(const mst_span *span, size_t *n);
MST_EXPORT void mst_span_get_dropped(const mst_span *span, mst_span_dropped *out);

/* The resource of the tracer that recorded the span (service.name,
 * process.pid, telemetry.sdk.*, OTEL_RESOURCE_ATTRIBUTES ...): the same
 * array for every span of that tracer (rebuilt in a forked child). */
MST_EXPORT const mst_attr *mst_span_get_resource(const mst_span *span, size_t *n);

/* -------------------------------------------------------------- logging */

typedef enum mst_log_level {
    MST_LOG_DEBUG = 10,
    MST_LOG_INFO = 20,
    MST_LOG_WARNING = 30,
    MST_LOG_ERROR = 40,
    MST_LOG_CRITICAL = 50
} mst_log_level;

/* Messages below `level` are not printed (default INFO, to stderr). */
MST_EXPORT void mst_log_set_level(mst_log_level level);
/* "debug", "info", "warning", "error", "critical", "fatal" (= critical). */
MST_EXPORT mst_status mst_log_level_parse(const char *name, mst_log_level *out);

MST_EXPORT const char *mst_version(void);

#ifdef __cplusplus
}
#endif
#endif /* MSTRACE_H */
