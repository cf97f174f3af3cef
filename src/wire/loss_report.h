/*
 * loss_report.h — the "loss report" packet a traced process sends its
 * Perfetto forwarder on the span stream (docs/forwarder.md "Loss reports"):
 * how many spans it lost since its last report, so the loss shows in the
 * forwarder's output and not only in the process. One frame payload of
 * exactly MST_LOSS_REPORT_BYTES:
 *   the 13-byte magic "MSPF_LOSS_V1\n", then two unsigned 64-bit big-endian
 *   counts: spans the sending exporter failed to deliver, spans the
 *   process's tracer dropped (its queue was full).
 * Counts are deltas since the previous report on any connection, so a
 * forwarder adds them up. The encoder runs in traced processes
 * (forward_client.c), the strict decoder in the forwarder on untrusted
 * input.
 */
#ifndef MST_WIRE_LOSS_REPORT_H
#define MST_WIRE_LOSS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MST_LOSS_REPORT_MAGIC "MSPF_LOSS_V1\n"
#define MST_LOSS_REPORT_MAGIC_LEN 13
#define MST_LOSS_REPORT_BYTES (MST_LOSS_REPORT_MAGIC_LEN + 16)

typedef struct mst_loss_report {
    uint64_t spans_failed;  /* the exporter could not deliver them */
    uint64_t spans_dropped; /* the tracer's queue was full */
} mst_loss_report;

/* Writes the payload (MST_LOSS_REPORT_BYTES) to out. */
void mst_loss_report_encode(const mst_loss_report *r, uint8_t out[MST_LOSS_REPORT_BYTES]);

/* True when the payload starts with the loss report magic (whatever its
 * length): it is a loss report, well formed or not, never a span. */
bool mst_loss_report_is(const uint8_t *data, size_t len);

/* Decodes a payload; false when it is not exactly one well-formed report. */
bool mst_loss_report_decode(const uint8_t *data, size_t len, mst_loss_report *out);

#endif /* MST_WIRE_LOSS_REPORT_H */
