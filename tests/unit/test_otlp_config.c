/*
 * test_otlp_config.c — mst_otlp_config_from_env (src/otlp/otlp_config.c):
 * endpoint rules (TRACES as-is, base + /v1/traces, gRPC as-is), protocol
 * default grpc, TRACES_ over generic, headers parsing and percent-decoding,
 * timeout/compression values, the TLS files (each TRACES_ variable over its
 * generic one, checked readable, a key only with its certificate), INSECURE
 * values, and clear errors for bad values.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "otlp/otlp_config.h"
#include "otlp/otlp_transport.h"
#include "testlib.h"

static void clear_env(void) {
    static const char *const what[] = {"ENDPOINT", "PROTOCOL", "HEADERS", "TIMEOUT",
                                       "COMPRESSION", "INSECURE", "CERTIFICATE",
                                       "CLIENT_CERTIFICATE", "CLIENT_KEY"};
    char name[96];
    for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) {
        snprintf(name, sizeof name, "OTEL_EXPORTER_OTLP_%s", what[i]);
        unsetenv(name);
        snprintf(name, sizeof name, "OTEL_EXPORTER_OTLP_TRACES_%s", what[i]);
        unsetenv(name);
    }
}

static mst_status load(mst_otlp_config *cfg, char *err, size_t n) {
    return mst_otlp_config_from_env(cfg, err, n);
}

static void test_no_endpoint(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_UNAVAILABLE);
    CHECK(strstr(err, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != NULL);
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "", 1); /* empty = unset */
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_UNAVAILABLE);
}

static void test_defaults_grpc(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_INT(cfg.protocol, MST_OTLP_GRPC);
    CHECK_EQ_STR(cfg.endpoint, "http://localhost:4317"); /* as-is for grpc */
    CHECK_EQ_INT(cfg.timeout_ms, 10000);
    CHECK(!cfg.gzip);
    CHECK_EQ_STR(cfg.headers, "");
}

static void test_traces_endpoint_as_is(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", 1);
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/custom/path", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "http://collector:4318/custom/path");
    CHECK_EQ_INT(cfg.protocol, MST_OTLP_HTTP_PROTOBUF);
}

static void test_base_endpoint_http(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", 1);
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "http://localhost:4318/v1/traces");
    CHECK_EQ_INT(cfg.protocol, MST_OTLP_HTTP_JSON);
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:443/", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "https://otel.example:443/v1/traces"); /* no double slash */
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://gw:8080/otlp//", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "http://gw:8080/otlp/v1/traces");
}

static void test_protocol_precedence_and_errors(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://localhost:4318/v1/traces", 1);
    setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_INT(cfg.protocol, MST_OTLP_HTTP_PROTOBUF);
    setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_UNSUPPORTED);
    CHECK(strstr(err, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") != NULL);
    CHECK(strstr(err, "thrift") != NULL);
}

static void test_grpc_schemes(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    /* vLLM's example: grpc://host:port with INSECURE=true → plaintext h2c */
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "grpc://localhost:4317", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "http://localhost:4317");
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE");
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "https://localhost:4317"); /* secure unless told */
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4317", 1);
    setenv("OTEL_EXPORTER_OTLP_INSECURE", "TRUE", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "http://collector:4317");
}

static void test_bad_urls(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://x/v1/traces", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "http://") != NULL);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "localhost:4318", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http:///v1/traces", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://a b/", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
}

typedef struct hdrs { int n; char keys[8][64]; char values[8][128]; } hdrs;

static int collect(void *ctx, const char *k, const char *v) {
    hdrs *h = ctx;
    if (h->n >= 8) return -1;
    snprintf(h->keys[h->n], sizeof h->keys[0], "%s", k);
    snprintf(h->values[h->n], sizeof h->values[0], "%s", v);
    h->n++;
    return 0;
}

static void test_headers(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://localhost:4317", 1);
    setenv("OTEL_EXPORTER_OTLP_HEADERS", "generic=1", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", " api-key = se%20cret ,x-tenant=a%2Cb,, ", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.headers, " api-key = se%20cret ,x-tenant=a%2Cb,, ");
    hdrs h = {0};
    CHECK_EQ_INT(mst_otlp_headers_parse(cfg.headers, collect, &h, err, sizeof err), MST_OK);
    CHECK_EQ_INT(h.n, 2);
    CHECK_EQ_STR(h.keys[0], "api-key");
    CHECK_EQ_STR(h.values[0], "se cret");
    CHECK_EQ_STR(h.keys[1], "x-tenant");
    CHECK_EQ_STR(h.values[1], "a,b");
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS");
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.headers, "generic=1");
    /* errors */
    static const char *const bad[] = {"novalue", "=v", "bad key=v", "k=%zz", "k=%4", "k=a%0Db"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", bad[i], 1);
        CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
        CHECK(strstr(err, "OTEL_EXPORTER_OTLP_TRACES_HEADERS") != NULL);
    }
    h.n = 0;
    CHECK_EQ_INT(mst_otlp_headers_parse("k=", collect, &h, err, sizeof err), MST_OK);
    CHECK_EQ_INT(h.n, 1);
    CHECK_EQ_STR(h.values[0], "");
}

static void test_timeout_and_compression(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[256];
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://localhost:4317", 1);
    setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500", 1);
    setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_INT(cfg.timeout_ms, 2500);
    CHECK(cfg.gzip);
    setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_INT(cfg.timeout_ms, 700);
    CHECK(!cfg.gzip);
    static const char *const bad_timeouts[] = {"0", "-5", "10s", "1.5", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_timeouts / sizeof bad_timeouts[0]; i++) {
        setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", bad_timeouts[i], 1);
        CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
        CHECK(strstr(err, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") != NULL);
    }
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT");
    setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_UNSUPPORTED);
    CHECK(strstr(err, "zstd") != NULL);
}

static void test_exporter_create_checks(void) {
    clear_env();
    mst_otlp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    mst_exporter *exp = NULL;
    CHECK_EQ_INT(mst_otlp_exporter_create(NULL, &exp), MST_ERR_INVALID_ARG);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "localhost:4318");
    cfg.protocol = MST_OTLP_HTTP_PROTOBUF;
    CHECK_EQ_INT(mst_otlp_exporter_create(&cfg, &exp), MST_ERR_PARSE);
    CHECK(exp == NULL);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "http://127.0.0.1:1/v1/traces");
    snprintf(cfg.headers, sizeof cfg.headers, "a=b");
    CHECK_EQ_INT(mst_otlp_exporter_create(&cfg, &exp), MST_OK);
    CHECK(exp != NULL);
    if (!exp) return;
    mst_exporter_stats st;
    exp->ops->get_stats(exp, &st);
    CHECK_EQ_INT(st.spans_exported, 0);
    CHECK_EQ_INT(exp->ops->export_batch(exp, NULL, 0), MST_OK);
    CHECK_EQ_INT(exp->ops->export_batch(exp, NULL, 3), MST_ERR_INVALID_ARG);
    exp->ops->destroy(exp);
}

static void test_tls_files(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[512];
    char readable[] = "/tmp/mstrace-test-tls-XXXXXX"; /* a readable file of the test's own */
    int fd = mkstemp(readable);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.tls.ca_file, "");
    CHECK_EQ_STR(cfg.tls.ca_from, "OTEL_EXPORTER_OTLP_CERTIFICATE"); /* named even when unset */
    CHECK_EQ_STR(cfg.tls.cert_from, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE");
    CHECK_EQ_STR(cfg.endpoint_from, "OTEL_EXPORTER_OTLP_ENDPOINT");
    /* generic set, TRACES_ wins, each variable on its own */
    setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/generic.pem", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", readable, 1);
    setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", readable, 1);
    setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", readable, 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.tls.ca_file, readable);
    CHECK_EQ_STR(cfg.tls.ca_from, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE");
    CHECK_EQ_STR(cfg.tls.cert_from, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE");
    CHECK_EQ_STR(cfg.tls.key_file, readable);
    /* an unreadable file fails at load, naming the variable */
    setenv("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/nonexistent/key.pem", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY=\"/nonexistent/key.pem\"") != NULL);
    /* a directory is not a file */
    setenv("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
    /* a key without its certificate */
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY");
    unsetenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE");
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "OTEL_EXPORTER_OTLP_CLIENT_KEY is set but OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE") != NULL);
    /* a certificate without a key is fine (the PEM may hold both) */
    unsetenv("OTEL_EXPORTER_OTLP_CLIENT_KEY");
    setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", readable, 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    clear_env();
    unlink(readable);
}

static void test_insecure_values(void) {
    clear_env();
    mst_otlp_config cfg;
    char err[512];
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317", 1);
    setenv("OTEL_EXPORTER_OTLP_INSECURE", "false", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "https://collector:4317");
    setenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "yes", 1); /* TRACES_ read first */
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "OTEL_EXPORTER_OTLP_TRACES_INSECURE=\"yes\": expected true or false") != NULL);
    setenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "True", 1);
    CHECK_EQ_INT(load(&cfg, err, sizeof err), MST_OK);
    CHECK_EQ_STR(cfg.endpoint, "http://collector:4317");
    clear_env();
}

static const mst_test_case tests[] = {
    {"tls_files", test_tls_files},
    {"insecure_values", test_insecure_values},
    {"no_endpoint", test_no_endpoint},
    {"defaults_grpc", test_defaults_grpc},
    {"traces_endpoint_as_is", test_traces_endpoint_as_is},
    {"base_endpoint_http", test_base_endpoint_http},
    {"protocol_precedence_and_errors", test_protocol_precedence_and_errors},
    {"grpc_schemes", test_grpc_schemes},
    {"bad_urls", test_bad_urls},
    {"headers", test_headers},
    {"timeout_and_compression", test_timeout_and_compression},
    {"exporter_create_checks", test_exporter_create_checks},
};

MST_TEST_MAIN(tests)
