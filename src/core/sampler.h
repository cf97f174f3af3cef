/*
 * sampler.h — the head-sampling decision of a tracer (docs/configuration.md:
 * OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, OTEL_SDK_DISABLED).
 *
 * Why a "plan": the options name one of six OTel samplers (plus the kill
 * switch); at tracer creation they are folded into three facts — does a
 * valid parent decide, what happens to the other spans (all / none / by
 * trace-id ratio), and the ratio's integer bound. span.c applies the plan
 * inline, before it allocates a record or reads the clock, so a dropped
 * span costs a few compares and one counter increment.
 */
#ifndef MST_CORE_SAMPLER_H
#define MST_CORE_SAMPLER_H

#include "mstrace.h"

enum { MST_ROOT_ALL = 0, MST_ROOT_NONE = 1, MST_ROOT_RATIO = 2 };

typedef struct mst_sampler {
    uint8_t root;        /* MST_ROOT_*: spans that no parent decides        */
    bool parent_based;   /* a valid parent decides by its sampled flag      */
    uint64_t bound;      /* MST_ROOT_RATIO: sampled when key(id) < bound    */
} mst_sampler;

/* Reads OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG and OTEL_SDK_DISABLED
 * into opts->sampler / sampler_ratio / sdk_disabled (bad values: one
 * warning each, default). */
void mst_sampler_options_from_env(mst_tracer_options *opts);

/* Checks the sampler fields of `opts` (an unknown kind or a ratio outside
 * 0..1 is warned about and replaced by the default) and builds the plan. */
void mst_sampler_init(mst_sampler *s, mst_tracer_options *opts);

/* The trace-id ratio key: the last 8 bytes of the id as a big-endian
 * integer, shifted right by one (so ratio * 2^63 bounds it exactly); the
 * Go SDK's rule, and the Python SDK's (vLLM's) up to rounding at the bound,
 * so a trace is kept or dropped alike by them and by us at the same ratio. */
static inline uint64_t mst_sampler_key(const mst_trace_id *id) {
    uint64_t x = 0;
    for (int i = 8; i < 16; i++) x = x << 8 | id->bytes[i];
    return x >> 1;
}

/* The decision for a span: `has_parent` means `parent_flags` belong to a
 * valid parent; `trace_id` is the span's trace id (read only by the ratio
 * rule). */
static inline bool mst_sampler_decide(const mst_sampler *s, bool has_parent, uint8_t parent_flags,
                                      const mst_trace_id *trace_id) {
    if (has_parent && s->parent_based) return (parent_flags & MST_TRACE_FLAG_SAMPLED) != 0;
    if (s->root == MST_ROOT_ALL) return true;
    if (s->root == MST_ROOT_NONE) return false;
    return mst_sampler_key(trace_id) < s->bound;
}

#endif /* MST_CORE_SAMPLER_H */
