/*
 * otlp_curl.c — libcurl's one-time init, the TLS files of an HTTPS client
 * and the plain-words reading of a TLS failure (see otlp_curl.h).
 *
 * How a TLS failure is told apart from an outage: libcurl reports an
 * untrusted server certificate as CURLE_PEER_FAILED_VERIFICATION, an
 * unusable CA or client file as CURLE_SSL_CACERT_BADFILE / _CERTPROBLEM;
 * a server that refuses the client certificate (or wants one) answers with
 * a TLS alert, which libcurl passes on as OpenSSL's text ("... alert
 * certificate required", "... alert bad certificate", "... alert unknown
 * ca") under CURLE_SSL_CONNECT_ERROR or, with TLS 1.3 where the alert
 * arrives after the handshake, CURLE_RECV_ERROR / CURLE_SEND_ERROR. Those
 * texts are matched because no code carries the difference.
 *
 * Why a probe: with TLS 1.3 the server checks the client certificate only
 * after the client has finished its handshake, so libcurl has already sent
 * the request when the alert comes; the server then resets the connection
 * and the kernel drops the unread alert ("getpeername() failed", "Send
 * failure: Connection reset by peer"). When a failure looks like that, one
 * probe handshake that sends nothing and waits to read (CURLOPT_CONNECT_ONLY
 * + curl_easy_recv, HTTP/1.1 so libcurl sends no HTTP/2 preface either)
 * receives the alert whole when no client certificate was sent. When one
 * was sent and refused, the server resets even the probe (its certificate
 * messages are still unread there), so the alert is lost again; what is
 * left is that the server drops a fresh TLS connection right after the
 * handshake, before any request, which a server that accepted the
 * certificate never does (it waits for the request; the probe times out).
 */
#include "otlp/otlp_curl.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>
#include <string.h>
#include <sys/stat.h>

#include "core/err_text.h"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void) { g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

mst_status mst_otlp_curl_init(char *err, size_t err_size) {
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc == CURLE_OK) return MST_OK;
    mst_err_set(err, err_size, "libcurl global init failed: %s", curl_easy_strerror(g_curl_init_rc));
    return MST_ERR_INTERNAL;
}

static mst_status check_file(const char *path, const char *from, char *err, size_t err_size) {
    if (!path[0]) return MST_OK;
    struct stat st;
    FILE *f = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? fopen(path, "r") : NULL;
    if (!f) {
        mst_err_set(err, err_size, "%s=\"%s\": not a readable file", from, path);
        return MST_ERR_PARSE;
    }
    fclose(f);
    return MST_OK;
}

mst_status mst_otlp_tls_check(const mst_otlp_tls *tls, char *err, size_t err_size) {
    mst_status st = check_file(tls->ca_file, tls->ca_from, err, err_size);
    if (st == MST_OK) st = check_file(tls->cert_file, tls->cert_from, err, err_size);
    if (st == MST_OK) st = check_file(tls->key_file, tls->key_from, err, err_size);
    if (st == MST_OK && tls->key_file[0] && !tls->cert_file[0]) {
        mst_err_set(err, err_size, "%s is set but %s is not: a client key needs its certificate",
                    tls->key_from, tls->cert_from);
        st = MST_ERR_PARSE;
    }
    return st;
}

CURLcode mst_otlp_curl_set_tls(CURL *c, const mst_otlp_tls *tls) {
    CURLcode rc = CURLE_OK;
    if (tls->ca_file[0]) rc = curl_easy_setopt(c, CURLOPT_CAINFO, tls->ca_file);
    if (rc == CURLE_OK && tls->cert_file[0]) rc = curl_easy_setopt(c, CURLOPT_SSLCERT, tls->cert_file);
    if (rc == CURLE_OK && tls->cert_file[0]) rc = curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    if (rc == CURLE_OK && tls->key_file[0]) rc = curl_easy_setopt(c, CURLOPT_SSLKEY, tls->key_file);
    return rc;
}

static bool says(const char *why, const char *what) { return why && strstr(why, what) != NULL; }

/* A TLS alert about the client certificate, in OpenSSL's words. */
static bool client_cert_alert(const char *why, const mst_otlp_tls *tls) {
    return says(why, "certificate required") || says(why, "bad certificate") || says(why, "unknown ca") ||
           says(why, "certificate unknown") || (says(why, "handshake failure") && !tls->cert_file[0]);
}

/* The alert follows the handshake at once; the bound is for a loaded
 * machine, and only a healthy server (it waits for a request) uses it all. */
#define PROBE_TIMEOUT_MAX_MS 5000L

typedef enum probe_result {
    PROBE_KEPT_OPEN,        /* the server waited for a request: TLS is fine */
    PROBE_DROPPED,          /* closed right after the handshake, in `why`   */
    PROBE_NO_HANDSHAKE      /* no TLS session at all (why says why)         */
} probe_result;

/* One handshake with `url`'s server that sends nothing and waits for what
 * the server says; libcurl's error text into why. */
static probe_result probe_handshake(const char *url, const mst_otlp_tls *tls, long timeout_ms, char *why,
                                    size_t why_size) {
    char errbuf[CURL_ERROR_SIZE] = "";
    why[0] = '\0';
    CURL *c = curl_easy_init();
    if (!c) return PROBE_NO_HANDSHAKE;
    CURLcode rc = curl_easy_setopt(c, CURLOPT_URL, url);
    if (rc == CURLE_OK) rc = curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
    if (rc == CURLE_OK) rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (rc == CURLE_OK) rc = curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (rc == CURLE_OK) rc = curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    if (rc == CURLE_OK) rc = curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    if (rc == CURLE_OK) rc = mst_otlp_curl_set_tls(c, tls);
    if (rc == CURLE_OK) rc = curl_easy_perform(c);
    probe_result res = rc == CURLE_OK ? PROBE_KEPT_OPEN : PROBE_NO_HANDSHAKE;
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (rc == CURLE_OK && curl_easy_getinfo(c, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK &&
        fd != CURL_SOCKET_BAD) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        char buf[256];
        size_t n = 0;
        while (poll(&pfd, 1, (int)timeout_ms) > 0) {
            rc = curl_easy_recv(c, buf, sizeof buf, &n);
            if (rc == CURLE_AGAIN) continue; /* a TLS record that held no data */
            /* an error, the end of the stream (n == 0) or bytes nobody asked for */
            res = rc != CURLE_OK || n == 0 ? PROBE_DROPPED : PROBE_KEPT_OPEN;
            break;
        }
    }
    if (res != PROBE_KEPT_OPEN)
        snprintf(why, why_size, "%s", errbuf[0] ? errbuf : rc != CURLE_OK ? curl_easy_strerror(rc)
                                                                         : "connection closed");
    curl_easy_cleanup(c);
    return res;
}

bool mst_otlp_curl_tls_problem(CURLcode rc, const char *why, const char *url, const mst_otlp_tls *tls,
                               long probe_ms, char *out, size_t out_size) {
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
        if (says(why, "subject name") || says(why, "host name"))
            mst_err_set(out, out_size, "the server's certificate does not name this host (%s): use the "
                        "host name the certificate was issued for", why);
        else if (tls->ca_file[0])
            mst_err_set(out, out_size, "the server's certificate is not signed by the CA in %s=\"%s\" (%s): "
                        "fix %s", tls->ca_from, tls->ca_file, why, tls->ca_from);
        else
            mst_err_set(out, out_size, "the server's certificate is not trusted by the system CAs (%s): "
                        "set %s to the CA file that signed it", why, tls->ca_from);
        return true;
    case CURLE_SSL_CACERT_BADFILE:
        mst_err_set(out, out_size, "%s=\"%s\": not a usable CA file (%s)", tls->ca_from, tls->ca_file, why);
        return true;
    case CURLE_SSL_CERTPROBLEM:
        mst_err_set(out, out_size, "the client certificate %s=\"%s\" or its key %s=\"%s\" is not usable "
                    "(%s)", tls->cert_from, tls->cert_file, tls->key_from,
                    tls->key_file[0] ? tls->key_file : tls->cert_file, why);
        return true;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
        break;
    default:
        return false;
    }
    if (says(why, "wrong version number") || says(why, "packet length too long")) {
        mst_err_set(out, out_size, "the server does not speak TLS (%s): use an http:// URL, or the "
                    "server's TLS port", why);
        return true;
    }
    char probed[CURL_ERROR_SIZE];
    if (!client_cert_alert(why, tls)) {
        if (strncasecmp(url, "https://", 8) != 0) return false;
        long ms = probe_ms > 0 && probe_ms < PROBE_TIMEOUT_MAX_MS ? probe_ms : PROBE_TIMEOUT_MAX_MS;
        probe_result pr = probe_handshake(url, tls, ms, probed, sizeof probed);
        /* Dropped with a client certificate sent: refused (see the top). */
        bool refused = pr == PROBE_DROPPED && tls->cert_file[0];
        if (!refused && !client_cert_alert(probed, tls)) return false;
        why = probed;
    }
    if (tls->cert_file[0])
        mst_err_set(out, out_size, "the server refused the client certificate %s=\"%s\" (%s): use one "
                    "signed by a CA the server trusts", tls->cert_from, tls->cert_file, why);
    else
        mst_err_set(out, out_size, "the server requires a client certificate (%s): set %s and %s",
                    why, tls->cert_from, tls->key_from);
    return true;
}
