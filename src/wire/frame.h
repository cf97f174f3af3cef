/*
 * frame.h — the framing both daemons share with their clients: the default
 * abstract socket names and the largest frame payload. A frame is a 4-byte
 * length prefix plus a payload (an upstream Perfetto packet, or an OTLP
 * ExportTraceServiceRequest on the relay's socket). See docs/forwarder.md.
 */
#ifndef MST_WIRE_FRAME_H
#define MST_WIRE_FRAME_H

/* Default abstract socket names (without the leading NUL). */
#define MST_PERFETTO_SOCKET_NAME "MSP_PERFETTO_SOCKET"
#define MST_OTLP_SOCKET_NAME "OTLP_SOCKET"
/* Largest frame payload either daemon accepts (4-byte length prefix). */
#define MST_FRAME_MAX_BYTES (4u * 1024u * 1024u)

#endif /* MST_WIRE_FRAME_H */
