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
 * (upstream: 5 s). A connection that was up and broke is retried at once,
 * once (forward_client.c close_fd). */
#define MST_FORWARD_RETRY_INTERVAL_MS 5000u
/* Longest time one send may wait on a full socket *without progress*
 * before the rest of the batch is counted as failed. The wait is on the
 * exporter thread (producers never wait; the bounded queue absorbs spans,
 * and drops and counts them when full), so it is generous: a forwarder
 * catching up on a burst of large engine-step spans on a busy 2-core host
 * stopped reading for over 1 s, and a 1 s budget then failed the rest of a
 * batch (70 engine steps) in the real-vLLM runs, where waiting would have
 * lost nothing. A failed batch is a certain loss; a wait only risks one.
 * A whole batch never waits longer than MST_FORWARD_BATCH_LIMIT_FACTOR
 * budgets even when it trickles; a tracer shutdown cancels a wait. */
#define MST_FORWARD_SEND_BUDGET_MS 5000u
#define MST_FORWARD_BATCH_LIMIT_FACTOR 6u
/* The connection's send buffer (SO_SNDBUF; the kernel caps it at
 * net.core.wmem_max). The default (about 208 KiB) let a busy forwarder
 * take at most ~150 KiB per wake-up, so a burst of large engine-step spans
 * waited on scheduling round trips while the tracer's queue overflowed.
 * Kernel memory, per connection. */
#define MST_FORWARD_SNDBUF_BYTES (4u << 20)
/* Frames are gathered into chunks of about this size before a send(). */
#define MST_FORWARD_CHUNK_BYTES (256u * 1024u)

/* Changes the reconnect interval of a forward exporter (tests use ~50 ms).
 * `exp` must come from mst_forward_exporter_create. */
void mst_forward_exporter_set_retry_interval_ms(mst_exporter *exp, uint32_t ms);
/* Changes the per-batch send budget (tests). */
void mst_forward_exporter_set_send_budget_ms(mst_exporter *exp, uint32_t ms);
/* Waits at most timeout_ms for the forwarder's capability line on the open
 * connection (read as it arrives, not slept for); true once the forwarder
 * said it takes request.ids changes (tests). */
bool mst_forward_exporter_wait_changes(mst_exporter *exp, uint32_t timeout_ms);
/* Closes the connection as if it had broken: the next batch reconnects at
 * once and every stream's next list goes whole (tests). */
void mst_forward_exporter_drop_connection(mst_exporter *exp);
/* True while a connection to the forwarder is open (tests). */
bool mst_forward_exporter_is_connected(const mst_exporter *exp);

#endif /* MST_EXPORT_FORWARD_CLIENT_H */
