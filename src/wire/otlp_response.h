/*
 * otlp_response.h — what an OTLP collector answers to a trace export, read
 * from the bytes it sent (docs/reference/otlp.md, "OTLP/HTTP", "OTLP/gRPC"
 * and "Retries"). The transport (otlp/otlp_transport.c) owns libcurl, retries
 * and timing; it hands the reply's body and headers to these parsers.
 *
 *   - ExportTraceServiceResponse{partial_success=1{rejected_spans=1,
 *     error_message=2}} as binary protobuf (http/protobuf body), inside one
 *     gRPC length-prefixed message (grpc body), or in the OTLP/JSON mapping
 *     {"partialSuccess":{"rejectedSpans":"N"|N,"errorMessage":"..."}}
 *     (http/json body; the proto field names are accepted too);
 *   - the grpc-status and grpc-message (percent-encoded) headers/trailers;
 *   - grpc-status-details-bin: base64 of google.rpc.Status{details=3 Any},
 *     whose google.rpc.RetryInfo{retry_delay=1 Duration} makes
 *     RESOURCE_EXHAUSTED retryable and gives the delay.
 *
 * Input is untrusted (any server can answer): every parser is bounds-checked
 * on the strict readers of this layer (pb_reader.h, json_reader.h), never
 * reads past `len`, needs no NUL terminator, and is fuzzed
 * (tests/fuzz/fuzz_otlp_response.c). A malformed reply is MST_ERR_PARSE with
 * `out` holding what was read before the fault; the transport then treats
 * the export as its HTTP/gRPC status says (a malformed body never turns a
 * success into a failure).
 */
#ifndef MST_WIRE_OTLP_RESPONSE_H
#define MST_WIRE_OTLP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/visibility.h"
#include "mstrace.h"

#define MST_OTLP_PARTIAL_MESSAGE_MAX 512   /* bytes kept of error_message, NUL included */
#define MST_OTLP_RETRY_DELAY_MAX_S 86400   /* a server-given delay is capped at a day   */

/* The partial_success of an accepted export. */
typedef struct mst_otlp_partial {
    bool present;            /* the reply carried a partial_success field      */
    int64_t rejected_spans;  /* as sent (may be 0 or, from a broken peer, < 0) */
    char message[MST_OTLP_PARTIAL_MESSAGE_MAX]; /* error_message, "" when none;
                              * cut at a UTF-8 boundary and at a NUL byte      */
} mst_otlp_partial;

/* Each fills `out` (zeroed first). An empty body is MST_OK with nothing
 * present (a plain success). */
MST_SHARED_INTERNAL
mst_status mst_otlp_response_parse_proto(const uint8_t *body, size_t len, mst_otlp_partial *out);
/* gRPC: one length-prefixed message (flag byte 0 = uncompressed, 4-byte
 * big-endian length) holding the protobuf response. A compressed message is
 * MST_ERR_UNSUPPORTED (nothing read); a short or overlong frame is
 * MST_ERR_PARSE. */
MST_SHARED_INTERNAL
mst_status mst_otlp_response_parse_grpc(const uint8_t *body, size_t len, mst_otlp_partial *out);
MST_SHARED_INTERNAL
mst_status mst_otlp_response_parse_json(const uint8_t *body, size_t len, mst_otlp_partial *out);

/* The grpc-status value (decimal, optional blanks around it): 0..INT32_MAX,
 * or -1 when it is not a number. */
MST_SHARED_INTERNAL int mst_otlp_grpc_status_parse(const char *value, size_t len);

/* grpc-message: percent-decodes `value` into `out` (cap bytes, NUL
 * included; cut at a UTF-8 boundary when it does not fit). */
MST_SHARED_INTERNAL
void mst_otlp_grpc_message_decode(const char *value, size_t len, char *out, size_t cap);

/* grpc-status-details-bin: the RetryInfo delay in ms (seconds clamped to
 * 0..MST_OTLP_RETRY_DELAY_MAX_S, nanos outside 0..999999999 ignored; the
 * first RetryInfo detail wins), or -1 when there is none or the value does
 * not decode. Base64 with or without padding, standard or URL alphabet; at
 * most 2 KiB of decoded bytes are read. */
MST_SHARED_INTERNAL long mst_otlp_grpc_retry_delay_ms(const char *value, size_t len);

#endif /* MST_WIRE_OTLP_RESPONSE_H */
