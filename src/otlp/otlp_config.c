/*
 * otlp_config.c — mst_otlp_config_from_env: the OTLP exporter settings from
 * the standard OTEL_EXPORTER_OTLP_[TRACES_]* variables (docs/configuration.md, docs/reference/otlp.md), plus
 * the "k=v,k2=v2" header-list parser shared with the transport.
 *
 * Rules (the OTLP exporter spec, as vLLM's Python exporter applies them):
 *   - the TRACES endpoint is used as-is; the generic one is a base URL that
 *     gets "/v1/traces" appended for HTTP protocols and is used as-is for
 *     gRPC (gRPC posts to a fixed method path on the same authority);
 *   - protocol: TRACES_PROTOCOL, then PROTOCOL, default grpc (vLLM's);
 *   - the TRACES_ variant of headers/timeout/compression/insecure and of the
 *     TLS files (CERTIFICATE, CLIENT_CERTIFICATE, CLIENT_KEY) wins when set,
 *     each variable on its own (the spec's precedence);
 *   - an empty variable counts as unset;
 *   - the TLS files are checked here (readable, a key only with its
 *     certificate), so a typo fails at start, naming the variable, instead
 *     of at the first export.
 * Every bad value is an error with a message naming the variable: silently
 * exporting somewhere else than vLLM's own spans would split the traces.
 */
#include "otlp/otlp_config.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/err_text.h"
#include "otlp/otlp_curl.h"

#define ENV_PREFIX "OTEL_EXPORTER_OTLP_"
#define OTLP_MAX_TIMEOUT_MS (3600u * 1000u) /* an hour: anything above is a typo */

/* Value of OTEL_EXPORTER_OTLP_TRACES_<what>, else OTEL_EXPORTER_OTLP_<what>;
 * `used` receives the name actually read (for messages). NULL when unset. */
static const char *env_pair(const char *what, char *used, size_t used_size) {
    char name[96];
    snprintf(name, sizeof name, ENV_PREFIX "TRACES_%s", what);
    const char *v = getenv(name);
    if (!v || !*v) {
        snprintf(name, sizeof name, ENV_PREFIX "%s", what);
        v = getenv(name);
    }
    snprintf(used, used_size, "%s", name);
    return (v && *v) ? v : NULL;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* RFC 7230 token characters: what an HTTP header name may contain. */
static int is_token_char(int c) {
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Copies [s, s+n) trimmed of blanks into out, percent-decoding when asked.
 * Fails on a bad %XX escape, a control character or overflow. */
static int copy_trimmed(const char *s, size_t n, bool decode, char *out, size_t out_size) {
    while (n && isspace((unsigned char)*s)) { s++; n--; }
    while (n && isspace((unsigned char)s[n - 1])) n--;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (decode && c == '%') {
            if (i + 2 >= n) return -1; /* "%" or "%X" at the end */
            int h = hexval((unsigned char)s[i + 1]), l = hexval((unsigned char)s[i + 2]);
            if (h < 0 || l < 0) return -1;
            c = h * 16 + l;
            i += 2;
        }
        if (c == 0 || c == '\r' || c == '\n') return -1; /* header injection */
        if (o + 1 >= out_size) return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

mst_status mst_otlp_headers_parse(const char *spec, mst_otlp_header_cb cb, void *ctx,
                                  char *err, size_t err_size) {
    if (!spec) return MST_OK;
    char key[256], value[2048];
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        bool blank = true;
        for (size_t i = 0; i < n; i++) blank = blank && isspace((unsigned char)p[i]);
        if (!blank) {
            if (!eq) {
                mst_err_set(err, err_size, "header entry \"%.*s\" has no '='", (int)n, p);
                return MST_ERR_PARSE;
            }
            if (copy_trimmed(p, (size_t)(eq - p), false, key, sizeof key) != 0 || !key[0]) {
                mst_err_set(err, err_size, "header entry \"%.*s\" has an empty or too long key", (int)n, p);
                return MST_ERR_PARSE;
            }
            for (const char *k = key; *k; k++) {
                if (!is_token_char((unsigned char)*k)) {
                    mst_err_set(err, err_size, "header name \"%s\" has an invalid character", key);
                    return MST_ERR_PARSE;
                }
            }
            if (copy_trimmed(eq + 1, n - (size_t)(eq + 1 - p), true, value, sizeof value) != 0) {
                mst_err_set(err, err_size, "header \"%s\" has a bad %%-escape, a control character "
                        "or a value over %zu bytes", key, sizeof value - 1);
                return MST_ERR_PARSE;
            }
            if (cb && cb(ctx, key, value) != 0) {
                mst_err_set(err, err_size, "out of memory while storing header \"%s\"", key);
                return MST_ERR_NOMEM;
            }
        }
        p += n;
        if (*p == ',') p++;
    }
    return MST_OK;
}

/* "http://" or "https://" (any case): the only schemes libcurl posts OTLP to. */
static bool has_http_scheme(const char *url) {
    return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

mst_status mst_otlp_url_check_basic(const char *url, const char *var, char *err, size_t err_size) {
    if (!has_http_scheme(url)) {
        mst_err_set(err, err_size, "%s=\"%s\": the URL must start with http:// or https://", var, url);
        return MST_ERR_PARSE;
    }
    for (const char *c = url; *c; c++) {
        if ((unsigned char)*c <= ' ') {
            mst_err_set(err, err_size, "%s=\"%s\": the URL contains a blank or control character", var, url);
            return MST_ERR_PARSE;
        }
    }
    return MST_OK;
}

/* A full check by libcurl's own URL parser, so what passes here is what the
 * transport can post to. */
static mst_status check_url(const char *url, const char *var, char *err, size_t err_size) {
    mst_status st = mst_otlp_url_check_basic(url, var, err, err_size);
    if (st != MST_OK) return st;
    const char *auth = strstr(url, "://") + 3;
    if (strcspn(auth, "/?#") == 0) { /* libcurl would accept "http:///x" */
        mst_err_set(err, err_size, "%s=\"%s\": the URL has no host", var, url);
        return MST_ERR_PARSE;
    }
    CURLU *u = curl_url();
    if (!u) return MST_ERR_NOMEM;
    char *host = NULL;
    CURLUcode rc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (rc == CURLUE_OK) rc = curl_url_get(u, CURLUPART_HOST, &host, 0);
    bool ok = rc == CURLUE_OK && host && host[0];
    curl_free(host);
    curl_url_cleanup(u);
    if (!ok) {
        mst_err_set(err, err_size, "%s=\"%s\": not a valid URL with a host", var, url);
        return MST_ERR_PARSE;
    }
    return MST_OK;
}

/* gRPC endpoints are often written without an http(s) scheme ("host:4317",
 * "grpc://host:4317", vLLM's own example). Like the Python exporter: https
 * means TLS, http plaintext, anything else plaintext only when
 * OTEL_EXPORTER_OTLP_[TRACES_]INSECURE=true. */
static mst_status grpc_endpoint(const char *raw, const char *var, char *out, size_t out_size,
                                char *err, size_t err_size) {
    if (has_http_scheme(raw)) {
        if (strlen(raw) >= out_size) goto too_long;
        snprintf(out, out_size, "%s", raw);
        return MST_OK;
    }
    const char *sep = strstr(raw, "://");
    const char *rest = sep ? sep + 3 : raw;
    char used[96];
    const char *insecure = env_pair("INSECURE", used, sizeof used);
    if (insecure && strcasecmp(insecure, "true") != 0 && strcasecmp(insecure, "false") != 0) {
        mst_err_set(err, err_size, "%s=\"%s\": expected true or false", used, insecure);
        return MST_ERR_PARSE;
    }
    bool plain = insecure && strcasecmp(insecure, "true") == 0;
    int n = snprintf(out, out_size, "%s://%s", plain ? "http" : "https", rest);
    if (n < 0 || (size_t)n >= out_size) goto too_long;
    return MST_OK;
too_long:
    mst_err_set(err, err_size, "%s is longer than %zu bytes", var, out_size - 1);
    return MST_ERR_TOO_LARGE;
}

static mst_status read_endpoint(mst_otlp_config *cfg, char *err, size_t err_size) {
    const char *var = ENV_PREFIX "TRACES_ENDPOINT";
    const char *v = getenv(var);
    bool base = false;
    if (!v || !*v) {
        var = ENV_PREFIX "ENDPOINT";
        v = getenv(var);
        base = true;
    }
    if (!v || !*v) {
        mst_err_set(err, err_size, "no OTLP endpoint: set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "
                "(vLLM: --otlp-traces-endpoint) or OTEL_EXPORTER_OTLP_ENDPOINT");
        return MST_ERR_UNAVAILABLE;
    }
    mst_status st;
    if (cfg->protocol == MST_OTLP_GRPC) {
        st = grpc_endpoint(v, var, cfg->endpoint, sizeof cfg->endpoint, err, err_size);
    } else {
        size_t n = strlen(v);
        if (base) {
            while (n > 0 && v[n - 1] == '/') n--; /* no "//v1/traces" */
        }
        const char *suffix = base ? "/v1/traces" : "";
        if (n + strlen(suffix) >= sizeof cfg->endpoint) {
            mst_err_set(err, err_size, "%s is longer than %zu bytes", var, sizeof cfg->endpoint - 1);
            return MST_ERR_TOO_LARGE;
        }
        snprintf(cfg->endpoint, sizeof cfg->endpoint, "%.*s%s", (int)n, v, suffix);
        st = MST_OK;
    }
    if (st != MST_OK) return st;
    snprintf(cfg->endpoint_from, sizeof cfg->endpoint_from, "%s", var);
    return check_url(cfg->endpoint, var, err, err_size);
}

static mst_status read_protocol(mst_otlp_config *cfg, char *err, size_t err_size) {
    char var[96];
    const char *v = env_pair("PROTOCOL", var, sizeof var);
    if (!v || strcmp(v, "grpc") == 0) cfg->protocol = MST_OTLP_GRPC;
    else if (strcmp(v, "http/protobuf") == 0) cfg->protocol = MST_OTLP_HTTP_PROTOBUF;
    else if (strcmp(v, "http/json") == 0) cfg->protocol = MST_OTLP_HTTP_JSON;
    else {
        mst_err_set(err, err_size, "%s=\"%s\": expected grpc, http/protobuf or http/json", var, v);
        return MST_ERR_UNSUPPORTED;
    }
    return MST_OK;
}

static mst_status read_headers(mst_otlp_config *cfg, char *err, size_t err_size) {
    char var[96], why[512];
    const char *v = env_pair("HEADERS", var, sizeof var);
    if (!v) return MST_OK;
    if (strlen(v) >= sizeof cfg->headers) {
        mst_err_set(err, err_size, "%s is longer than %zu bytes", var, sizeof cfg->headers - 1);
        return MST_ERR_TOO_LARGE;
    }
    mst_status st = mst_otlp_headers_parse(v, NULL, NULL, why, sizeof why);
    if (st != MST_OK) {
        mst_err_set(err, err_size, "%s: %s", var, why);
        return st;
    }
    snprintf(cfg->headers, sizeof cfg->headers, "%s", v);
    return MST_OK;
}

static mst_status read_timeout(mst_otlp_config *cfg, char *err, size_t err_size) {
    char var[96];
    const char *v = env_pair("TIMEOUT", var, sizeof var);
    if (!v) return MST_OK;
    bool digits = true;
    for (const char *c = v; *c; c++) digits = digits && isdigit((unsigned char)*c);
    errno = 0;
    unsigned long long ms = digits ? strtoull(v, NULL, 10) : 0;
    if (!digits || errno != 0 || ms == 0 || ms > OTLP_MAX_TIMEOUT_MS) {
        mst_err_set(err, err_size, "%s=\"%s\": expected milliseconds, 1..%u", var, v,
                OTLP_MAX_TIMEOUT_MS);
        return MST_ERR_PARSE;
    }
    cfg->timeout_ms = (uint32_t)ms;
    return MST_OK;
}

static mst_status read_compression(mst_otlp_config *cfg, char *err, size_t err_size) {
    char var[96];
    const char *v = env_pair("COMPRESSION", var, sizeof var);
    if (!v || strcasecmp(v, "none") == 0) cfg->gzip = false;
    else if (strcasecmp(v, "gzip") == 0) cfg->gzip = true;
    else {
        mst_err_set(err, err_size, "%s=\"%s\": expected gzip or none", var, v);
        return MST_ERR_UNSUPPORTED;
    }
    return MST_OK;
}

/* One TLS file variable: its value (a path) into `path`, the name read
 * into `from` (the generic name when neither is set, for messages). */
static mst_status read_tls_file(const char *what, char *path, size_t path_size, char *from,
                                size_t from_size, char *err, size_t err_size) {
    const char *v = env_pair(what, from, from_size);
    if (!v) {
        snprintf(from, from_size, ENV_PREFIX "%s", what);
        return MST_OK;
    }
    if (strlen(v) >= path_size) {
        mst_err_set(err, err_size, "%s is longer than %zu bytes", from, path_size - 1);
        return MST_ERR_TOO_LARGE;
    }
    snprintf(path, path_size, "%s", v);
    return MST_OK;
}

static mst_status read_tls(mst_otlp_tls *tls, char *err, size_t err_size) {
    mst_status st = read_tls_file("CERTIFICATE", tls->ca_file, sizeof tls->ca_file, tls->ca_from,
                                  sizeof tls->ca_from, err, err_size);
    if (st == MST_OK)
        st = read_tls_file("CLIENT_CERTIFICATE", tls->cert_file, sizeof tls->cert_file, tls->cert_from,
                           sizeof tls->cert_from, err, err_size);
    if (st == MST_OK)
        st = read_tls_file("CLIENT_KEY", tls->key_file, sizeof tls->key_file, tls->key_from,
                           sizeof tls->key_from, err, err_size);
    return st == MST_OK ? mst_otlp_tls_check(tls, err, err_size) : st;
}

mst_status mst_otlp_config_from_env(mst_otlp_config *cfg, char *err, size_t err_size) {
    if (!cfg) return MST_ERR_INVALID_ARG;
    memset(cfg, 0, sizeof *cfg);
    cfg->timeout_ms = 10000;
    if (err && err_size) err[0] = '\0';
    mst_status st;
    /* protocol first: the endpoint rule depends on it */
    if ((st = read_protocol(cfg, err, err_size)) != MST_OK) return st;
    if ((st = read_endpoint(cfg, err, err_size)) != MST_OK) return st;
    if ((st = read_headers(cfg, err, err_size)) != MST_OK) return st;
    if ((st = read_timeout(cfg, err, err_size)) != MST_OK) return st;
    if ((st = read_tls(&cfg->tls, err, err_size)) != MST_OK) return st;
    return read_compression(cfg, err, err_size);
}
