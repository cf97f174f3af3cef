/*
 * otlp_config.h — the OTLP settings parsers of otlp_config.c that other
 * files share: the header-list parser (the transport builds its request
 * headers with it) and the URL check (the exporter's config and the OTLP
 * relay's). mst_otlp_config_from_env itself is public (mstrace_otlp.h).
 */
#ifndef MST_OTLP_CONFIG_H
#define MST_OTLP_CONFIG_H

#include <stddef.h>

#include "mstrace_otlp.h"

/* Parses "k=v,k2=v2" (OTEL_EXPORTER_OTLP_HEADERS: entries trimmed, values
 * percent-decoded, keys HTTP tokens) and calls cb for each entry; stops at
 * the first cb returning non-zero (MST_ERR_NOMEM). Used by the
 * transport to build its header list. */
typedef int (*mst_otlp_header_cb)(void *ctx, const char *key, const char *value);
mst_status mst_otlp_headers_parse(const char *spec, mst_otlp_header_cb cb, void *ctx,
                                  char *err, size_t err_size);

/* The URL checks the exporter's config and the OTLP relay share: an http://
 * or https:// scheme (any case) and no blank or control character. On
 * failure writes `<var>="<url>": <why>` into err and returns MST_ERR_PARSE. */
mst_status mst_otlp_url_check_basic(const char *url, const char *var, char *err, size_t err_size);

#endif /* MST_OTLP_CONFIG_H */
