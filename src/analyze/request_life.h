/*
 * request_life.h — a request's life from the engine's step records
 * (docs/architecture.md "1a"): when the engine received it, when it was
 * first scheduled, the engine times of its tokens (every inter-token gap),
 * its preemptions and the tokens they made it recompute; then the per-
 * request metrics with vLLM's definitions (queue, prefill, decode,
 * inference, TTFT, TPOT, e2e, and the API-server -> engine hand-off on its
 * own). Traces without step records fall back to what older traces
 * carried: every step naming a request produced one of its tokens, and the
 * queue is measured from arrival. docs/analyze.md "Requests" has each
 * definition and the vLLM metric it matches.
 */
#ifndef MST_ANALYZE_REQUEST_LIFE_H
#define MST_ANALYZE_REQUEST_LIFE_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/model_types.h"
#include "mstrace.h"

typedef struct mst_an_life_in {
    const mst_an_step *steps;  /* grouped by engine, in time order */
    size_t n_steps;
    const uint32_t *ids;
    const int32_t *id_tokens;
    const uint8_t *id_phase;
    const int64_t *queued;
    bool have_records;         /* some step carried step.phase */
} mst_an_life_in;

typedef struct mst_an_life_counts {
    uint64_t preemptions, negative_queue, queue_over_ttft, clock_skew, negative_itl;
} mst_an_life_counts;

/* Walks the steps, filling each request's life fields, then derives its
 * metrics. Every inter-token gap goes to *itls (malloc'd, *n_itls). */
mst_status mst_an_life_build(const mst_an_life_in *in, mst_an_request *rq, size_t n_requests,
                             mst_an_itl **itls, size_t *n_itls, mst_an_life_counts *counts);

#endif /* MST_ANALYZE_REQUEST_LIFE_H */
