/*
 * test_otlp_curl.c — the TLS half of src/otlp/otlp_curl.c without a
 * network: mst_otlp_tls_check (files readable, a key needs its
 * certificate) and mst_otlp_curl_tls_problem's reading of libcurl's
 * failures (which ones are configuration, and that each line names the
 * setting to fix). The handshakes themselves, the probe included, are
 * tested against the real Jaeger (tests/integration/test_otlp_tls.py).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "otlp/otlp_curl.h"
#include "testlib.h"

static mst_otlp_tls named(const char *ca, const char *cert, const char *key) {
    mst_otlp_tls t;
    memset(&t, 0, sizeof t);
    snprintf(t.ca_file, sizeof t.ca_file, "%s", ca);
    snprintf(t.cert_file, sizeof t.cert_file, "%s", cert);
    snprintf(t.key_file, sizeof t.key_file, "%s", key);
    snprintf(t.ca_from, sizeof t.ca_from, "CA_VAR");
    snprintf(t.cert_from, sizeof t.cert_from, "CERT_VAR");
    snprintf(t.key_from, sizeof t.key_from, "KEY_VAR");
    return t;
}

static void test_check_files(void) {
    char path[] = "/tmp/mstrace-test-curl-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    char err[512];
    mst_otlp_tls t = named("", "", "");
    CHECK_EQ_INT(mst_otlp_tls_check(&t, err, sizeof err), MST_OK); /* nothing set: system CAs */
    t = named(path, path, path);
    CHECK_EQ_INT(mst_otlp_tls_check(&t, err, sizeof err), MST_OK);
    t = named("/nonexistent/ca.pem", "", "");
    CHECK_EQ_INT(mst_otlp_tls_check(&t, err, sizeof err), MST_ERR_PARSE);
    CHECK_EQ_STR(err, "CA_VAR=\"/nonexistent/ca.pem\": not a readable file");
    t = named("", "", path);
    CHECK_EQ_INT(mst_otlp_tls_check(&t, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "KEY_VAR is set but CERT_VAR is not") != NULL);
    t = named("", "/tmp", "");
    CHECK_EQ_INT(mst_otlp_tls_check(&t, err, sizeof err), MST_ERR_PARSE); /* a directory */
    unlink(path);
}

static void test_untrusted_server_names_the_ca_variable(void) {
    char out[512];
    mst_otlp_tls t = named("", "", "");
    const char *why = "SSL certificate problem: unable to get local issuer certificate";
    CHECK(mst_otlp_curl_tls_problem(CURLE_PEER_FAILED_VERIFICATION, why, "https://h:1", &t, 0, out, sizeof out));
    CHECK(strstr(out, "not trusted by the system CAs") != NULL && strstr(out, "set CA_VAR") != NULL);
    t = named("/etc/ca.pem", "", "");
    CHECK(mst_otlp_curl_tls_problem(CURLE_PEER_FAILED_VERIFICATION, why, "https://h:1", &t, 0, out, sizeof out));
    CHECK(strstr(out, "not signed by the CA in CA_VAR=\"/etc/ca.pem\"") != NULL && strstr(out, "fix CA_VAR"));
    CHECK(mst_otlp_curl_tls_problem(CURLE_PEER_FAILED_VERIFICATION,
                                    "SSL: no alternative certificate subject name matches target host name 'h'",
                                    "https://h:1", &t, 0, out, sizeof out));
    CHECK(strstr(out, "does not name this host") != NULL);
}

static void test_client_certificate_alerts(void) {
    char out[512];
    mst_otlp_tls none = named("", "", ""), mine = named("", "/c.pem", "/c.key");
    const char *required = "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required";
    CHECK(mst_otlp_curl_tls_problem(CURLE_RECV_ERROR, required, "https://h:1", &none, 0, out, sizeof out));
    CHECK(strstr(out, "requires a client certificate") != NULL && strstr(out, "set CERT_VAR and KEY_VAR"));
    const char *unknown = "OpenSSL SSL_read: error:0A000418:SSL routines::tlsv1 alert unknown ca";
    CHECK(mst_otlp_curl_tls_problem(CURLE_RECV_ERROR, unknown, "https://h:1", &mine, 0, out, sizeof out));
    CHECK(strstr(out, "refused the client certificate CERT_VAR=\"/c.pem\"") != NULL);
    CHECK(mst_otlp_curl_tls_problem(CURLE_SSL_CERTPROBLEM, "could not load PEM client certificate",
                                    "https://h:1", &mine, 0, out, sizeof out));
    CHECK(strstr(out, "CERT_VAR=\"/c.pem\"") != NULL && strstr(out, "KEY_VAR=\"/c.key\"") != NULL);
}

static void test_outages_are_not_configuration(void) {
    char out[64] = "untouched";
    mst_otlp_tls t = named("", "", "");
    CHECK(!mst_otlp_curl_tls_problem(CURLE_COULDNT_CONNECT, "Connection refused", "https://h:1", &t, 0, out,
                                     sizeof out));
    CHECK(!mst_otlp_curl_tls_problem(CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host", "https://h:1", &t,
                                     0, out, sizeof out));
    /* a reset on plain http: nothing to probe, an outage */
    CHECK(!mst_otlp_curl_tls_problem(CURLE_RECV_ERROR, "Connection reset by peer", "http://h:1", &t, 0, out,
                                     sizeof out));
    CHECK_EQ_STR(out, "untouched");
}

static void test_https_to_plain_server(void) {
    char out[512];
    mst_otlp_tls t = named("", "", "");
    CHECK(mst_otlp_curl_tls_problem(CURLE_SSL_CONNECT_ERROR,
                                    "OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number",
                                    "https://h:1", &t, 0, out, sizeof out));
    CHECK(strstr(out, "does not speak TLS") != NULL);
}

static const mst_test_case tests[] = {
    {"check_files", test_check_files},
    {"untrusted_server_names_the_ca_variable", test_untrusted_server_names_the_ca_variable},
    {"client_certificate_alerts", test_client_certificate_alerts},
    {"outages_are_not_configuration", test_outages_are_not_configuration},
    {"https_to_plain_server", test_https_to_plain_server},
};

MST_TEST_MAIN(tests)
