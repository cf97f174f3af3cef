/*
 * forward_client.h — internal knobs of the Perfetto forwarder client
 * (forward_client.c; the public constructor mst_forward_exporter_create is in
 * include/mstrace.h). Only tests and the library itself use these: the
 * defaults are the upstream behaviour.
 */
#ifndef MST_EXPORT_FORWARD_CLIENT_H
#define MST_EXPORT_FORWARD_CLIENT_H

#include "mstrace.h"

/* Minimum time between two connect attempts while the forwarder is absent
 * (upstream: 5 s). */
#define MST_FORWARD_RETRY_INTERVAL_MS 5000u
/* Longest time one send may wait on a full socket *without progress*
 * before the rest of the batch is counted as failed. The wait is on the
 * exporter thread (producers never wait; the bounded queue absorbs spans),
 * so it can be generous: a forwarder on a busy host can stall for tens of
 * ms while the kernel writes its file, and 100 ms lost whole batches in the
 * real-vLLM runs (docs/e2e.md). A whole batch never waits longer than
 * MST_FORWARD_BATCH_LIMIT_FACTOR budgets even when it trickles. */
#define MST_FORWARD_SEND_BUDGET_MS 1000u
#define MST_FORWARD_BATCH_LIMIT_FACTOR 5u
/* Frames are gathered into chunks of about this size before a send(). */
#define MST_FORWARD_CHUNK_BYTES (256u * 1024u)

/* Changes the reconnect interval of a forward exporter (tests use ~50 ms).
 * `exp` must come from mst_forward_exporter_create. */
void mst_forward_exporter_set_retry_interval_ms(mst_exporter *exp, uint32_t ms);
/* Changes the per-batch send budget (tests). */
void mst_forward_exporter_set_send_budget_ms(mst_exporter *exp, uint32_t ms);
/* True while a connection to the forwarder is open (tests). */
bool mst_forward_exporter_is_connected(const mst_exporter *exp);

#endif /* MST_EXPORT_FORWARD_CLIENT_H */
