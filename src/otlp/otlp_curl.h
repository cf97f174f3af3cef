/*
 * otlp_curl.h — what every libcurl client of mstrace shares (the OTLP
 * transport, so the exporter and the relay, and `mstrace analyze --jaeger`):
 * libcurl's process-wide init done once, the TLS files (a private CA, a
 * client certificate and key for mutual TLS) checked and set on a handle,
 * and a TLS failure turned into one line that names the setting to fix.
 *
 * Why one place: the three clients take their TLS files from different
 * places (OTEL_EXPORTER_OTLP_* variables, --jaeger-* flags) but must apply
 * and explain them alike; mst_otlp_tls carries where each value came from.
 */
#ifndef MST_OTLP_CURL_H
#define MST_OTLP_CURL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "mstrace_otlp.h"

/* curl_global_init once per process, from any thread. MST_OK, else
 * MST_ERR_INTERNAL with libcurl's reason in err. */
mst_status mst_otlp_curl_init(char *err, size_t err_size);

/* Checks the files `tls` names: each one set must be a readable file, and a
 * client key needs a client certificate (a certificate without a key is
 * fine: its PEM file may hold the key too). On failure writes
 * `<from>="<path>": <why>` into err and returns MST_ERR_PARSE. */
mst_status mst_otlp_tls_check(const mst_otlp_tls *tls, char *err, size_t err_size);

/* Sets the CA, client certificate and key of `tls` on `c` (fields left
 * empty keep libcurl's defaults: the system CAs, no client certificate). */
CURLcode mst_otlp_curl_set_tls(CURL *c, const mst_otlp_tls *tls);

/* When the failed transfer to `url` (rc, libcurl's message `why`) is a TLS
 * set-up problem that retrying cannot fix — the server's certificate not
 * trusted, a client certificate missing, refused or unusable, a server that
 * does not speak TLS — writes one line saying what is wrong and which
 * setting to fix into out and returns true; false (out untouched) for
 * anything else. A connection lost right after the handshake is checked
 * with one probe handshake (see the .c) of at most probe_ms (capped at 5 s;
 * 0: the cap), so a caller's deadline bounds it. */
bool mst_otlp_curl_tls_problem(CURLcode rc, const char *why, const char *url, const mst_otlp_tls *tls,
                               long probe_ms, char *out, size_t out_size);

#endif /* MST_OTLP_CURL_H */
