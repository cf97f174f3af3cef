/*
 * mstrace_otlp.h — the public header of libmstrace_otlp: the OTLP exporter
 * and its configuration.
 *
 * libmstrace_otlp is libmstrace's only part that speaks HTTP: it links
 * libcurl and zlib, libmstrace links neither. An engine that sends its spans
 * to the Perfetto forwarder (mst_forward_exporter_create) or to an exporter
 * of its own links libmstrace alone; one that exports OTLP links both
 * (-lmstrace_otlp -lmstrace) and includes this header after mstrace.h.
 * Conventions as in mstrace.h.
 */
#ifndef MSTRACE_OTLP_H
#define MSTRACE_OTLP_H

#include "mstrace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* OTLP exporter (docs/configuration.md, docs/reference/otlp.md):
 * http/protobuf, http/json or grpc, over libcurl, from its own sender thread
 * state; retries only 408/429/502/503/504 and connection errors within the
 * export timeout. */
typedef enum mst_otlp_protocol {
    MST_OTLP_GRPC = 0,          /* vLLM's default when the env var is unset */
    MST_OTLP_HTTP_PROTOBUF = 1,
    MST_OTLP_HTTP_JSON = 2
} mst_otlp_protocol;

/* TLS files for an https:// endpoint (PEM paths; "" = not set). Each
 * *_from names where its value came from (an environment variable or a
 * command-line flag), so a TLS failure can name what to fix. */
typedef struct mst_otlp_tls {
    char ca_file[1024];         /* CAs that sign the server; "" = system CAs */
    char cert_file[1024];       /* client certificate (mutual TLS)           */
    char key_file[1024];        /* its private key                           */
    char ca_from[96];
    char cert_from[96];
    char key_from[96];
} mst_otlp_tls;

typedef struct mst_otlp_config {
    char endpoint[1024];        /* full URL actually posted to               */
    mst_otlp_protocol protocol;
    char headers[4096];         /* "k=v,k2=v2" as in OTEL_EXPORTER_OTLP_HEADERS */
    uint32_t timeout_ms;        /* per export, default 10000                 */
    bool gzip;                  /* Content-Encoding: gzip                    */
    mst_otlp_tls tls;           /* OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE, ... */
    char endpoint_from[96];     /* the variable the endpoint came from, for
                                 * messages ("" = set by the program)       */
} mst_otlp_config;

/* Reads OTEL_EXPORTER_OTLP_[TRACES_]{ENDPOINT,PROTOCOL,HEADERS,TIMEOUT,
 * COMPRESSION,INSECURE,CERTIFICATE,CLIENT_CERTIFICATE,CLIENT_KEY} (the
 * TRACES_ variant wins when set): the TRACES endpoint is used as-is, the
 * generic one gets "/v1/traces" appended for HTTP. Returns
 * MST_ERR_UNAVAILABLE when no endpoint is set, MST_ERR_UNSUPPORTED/
 * MST_ERR_PARSE with a message in err for a bad value (a certificate file
 * that cannot be read, a client certificate without its key, ...). */
MST_EXPORT mst_status mst_otlp_config_from_env(mst_otlp_config *cfg, char *err, size_t err_size);
/* Creates the exporter; add it to a tracer with mst_tracer_add_exporter.
 * Its counters: mst_exporter_get_stats (a partial success is explained at
 * mst_exporter_stats in mstrace.h). */
MST_EXPORT mst_status mst_otlp_exporter_create(const mst_otlp_config *cfg, mst_exporter **out);

#ifdef __cplusplus
}
#endif
#endif /* MSTRACE_OTLP_H */
