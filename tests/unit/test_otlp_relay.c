/*
 * test_otlp_relay.c — unit tests of the OTLP relay (relay/otlp_relay.h)
 * without a daemon: the environment rules of mst_otlp_relay_config_from_env
 * (docs/relay.md: both variables required, http(s) with an explicit port, base URL
 * gets /v1/traces, a full /v1/traces URL and the TRACES endpoint are kept
 * as-is) and the queue accounting of the frame callback (valid payloads are
 * queued up to the item/byte caps, the newest is dropped and counted,
 * garbage is rejected; received = rejected + dropped + queued). The sender
 * thread is never started here, so nothing touches the network.
 */
#include <stdlib.h>
#include <string.h>

#include "relay/otlp_relay.h"
#include "testlib.h"

static void clear_env(void) {
    static const char *const vars[] = {
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* Returns the status; *cfg and err filled. */
static mst_status cfg_with(const char *endpoint, const char *protocol, mst_otlp_config *cfg,
                           char *err, size_t err_size) {
    clear_env();
    if (endpoint) setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint, 1);
    if (protocol) setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol, 1);
    return mst_otlp_relay_config_from_env(cfg, err, err_size);
}

static void test_endpoint_forms(void) {
    mst_otlp_config c;
    char err[512];
    CHECK_EQ_INT(cfg_with("http://localhost:4318", "http/protobuf", &c, err, sizeof err), MST_OK);
    CHECK_EQ_STR(c.endpoint, "http://localhost:4318/v1/traces");
    CHECK_EQ_INT(c.protocol, MST_OTLP_HTTP_PROTOBUF);
    CHECK_EQ_INT(cfg_with("http://localhost:4318/", "http/protobuf", &c, err, sizeof err), MST_OK);
    CHECK_EQ_STR(c.endpoint, "http://localhost:4318/v1/traces");
    CHECK_EQ_INT(cfg_with("http://localhost:4318/v1/traces", "http/protobuf", &c, err, sizeof err), MST_OK);
    CHECK_EQ_STR(c.endpoint, "http://localhost:4318/v1/traces");
    CHECK_EQ_INT(cfg_with("https://[::1]:4318/otlp", "http/protobuf", &c, err, sizeof err), MST_OK);
    CHECK_EQ_STR(c.endpoint, "https://[::1]:4318/otlp/v1/traces");
    CHECK_EQ_INT(cfg_with("http://collector:4317", "grpc", &c, err, sizeof err), MST_OK);
    CHECK_EQ_STR(c.endpoint, "http://collector:4317");
    CHECK_EQ_INT(c.protocol, MST_OTLP_GRPC);
    CHECK_EQ_INT(c.timeout_ms, 10000);
    /* The TRACES endpoint wins and is used as-is. */
    clear_env();
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:9/custom", 1);
    setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", 1);
    setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1234", 1);
    CHECK_EQ_INT(mst_otlp_relay_config_from_env(&c, err, sizeof err), MST_OK);
    CHECK_EQ_STR(c.endpoint, "http://h:9/custom");
    CHECK_EQ_INT(c.timeout_ms, 1234);
    clear_env();
}

static void expect_error(const char *endpoint, const char *protocol, const char *word) {
    mst_otlp_config c;
    char err[512] = "";
    mst_status st = cfg_with(endpoint, protocol, &c, err, sizeof err);
    CHECK(st != MST_OK);
    if (!strstr(err, word)) {
        fprintf(stderr, "  endpoint=%s protocol=%s: \"%s\" lacks \"%s\"\n", endpoint ? endpoint : "-",
                protocol ? protocol : "-", err, word);
        mst_test_failed_flag = 1;
    }
}

static void test_bad_environment(void) {
    expect_error(NULL, "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT");
    expect_error("http://h:1", NULL, "OTEL_EXPORTER_OTLP_PROTOCOL");
    expect_error("http://h:1", "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL");
    expect_error("http://h:1", "HTTP/PROTOBUF", "OTEL_EXPORTER_OTLP_PROTOCOL");
    expect_error("http://h/v1/traces", "http/protobuf", "explicit port");
    expect_error("http://h:/v1/traces", "http/protobuf", "explicit port");
    expect_error("http://h:0", "grpc", "explicit port");
    expect_error("http://h:65536", "grpc", "explicit port");
    expect_error("http://h:12a", "grpc", "explicit port");
    expect_error("http://:4318", "grpc", "explicit port");
    expect_error("http://[::1]", "grpc", "explicit port");
    expect_error("h:4317", "grpc", "http://");
    expect_error("grpc://h:4317", "grpc", "http://");
    expect_error("http://h :4317", "grpc", "blank");
    clear_env();
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:1", 1);
    setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", 1);
    setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon", 1);
    mst_otlp_config c;
    char err[512] = "";
    CHECK(mst_otlp_relay_config_from_env(&c, err, sizeof err) != MST_OK);
    CHECK(strstr(err, "OTEL_EXPORTER_OTLP_TIMEOUT") != NULL);
    clear_env();
}

/* ExportTraceServiceRequest{resource_spans{scope_spans{span{trace_id,
 * span_id, name}}}} built by hand: one span. */
static size_t one_span_request(uint8_t *out, uint8_t seq) {
    uint8_t span[2 + 16 + 2 + 8 + 2 + 1];
    size_t n = 0;
    span[n++] = 0x0a; span[n++] = 16;
    for (int i = 0; i < 16; i++) span[n++] = (uint8_t)(i + 1);
    span[n++] = 0x12; span[n++] = 8;
    for (int i = 0; i < 8; i++) span[n++] = (uint8_t)(i == 7 ? seq | 1 : 0x20);
    span[n++] = 0x2a; span[n++] = 1; span[n++] = 'x';
    size_t o = 0;
    out[o++] = 0x0a; out[o++] = (uint8_t)(n + 4);      /* resource_spans */
    out[o++] = 0x12; out[o++] = (uint8_t)(n + 2);      /* scope_spans */
    out[o++] = 0x12; out[o++] = (uint8_t)n;            /* spans */
    memcpy(out + o, span, n);
    return o + n;
}

static void test_queue_accounting(void) {
    mst_otlp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "http://127.0.0.1:9/v1/traces");
    cfg.protocol = MST_OTLP_HTTP_PROTOBUF;
    cfg.timeout_ms = 100;
    mst_otlp_relay_options o;
    memset(&o, 0, sizeof o);
    o.queue_max_items = 10;
    mst_otlp_relay *r = NULL;
    CHECK_EQ_INT(mst_otlp_relay_create(&cfg, &o, &r), MST_OK);
    if (!r) return;
    uint8_t buf[128];
    for (int i = 0; i < 25; i++) {
        size_t n = one_span_request(buf, (uint8_t)i);
        mst_otlp_relay_on_frame(r, buf, n, 1);
        mst_otlp_relay_on_frame(r, (const uint8_t *)"\xff\xff", 2, 2); /* garbage */
    }
    mst_otlp_relay_stats s;
    mst_otlp_relay_get_stats(r, &s);
    CHECK_EQ_INT(s.received, 50);
    CHECK_EQ_INT(s.rejected, 25);
    CHECK_EQ_INT(s.queued, 10);
    CHECK_EQ_INT(s.dropped_full, 15);
    CHECK_EQ_INT(s.spans_received, 25);
    CHECK_EQ_INT(s.spans_dropped, 15);
    CHECK_EQ_INT(s.received, s.rejected + s.dropped_full + s.queued);
    mst_otlp_relay_destroy(r); /* frees the queued items (ASan: no leak) */
}

static void test_byte_cap(void) {
    mst_otlp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "http://127.0.0.1:9");
    cfg.protocol = MST_OTLP_GRPC;
    mst_otlp_relay_options o;
    memset(&o, 0, sizeof o);
    o.queue_max_bytes = 400; /* a few items of ~60 bytes + overhead */
    mst_otlp_relay *r = NULL;
    CHECK_EQ_INT(mst_otlp_relay_create(&cfg, &o, &r), MST_OK);
    if (!r) return;
    uint8_t buf[128];
    for (int i = 0; i < 20; i++) mst_otlp_relay_on_frame(r, buf, one_span_request(buf, (uint8_t)i), 1);
    mst_otlp_relay_stats s;
    mst_otlp_relay_get_stats(r, &s);
    CHECK(s.queued > 0 && s.queued < 20);
    CHECK(s.queued_bytes <= 400);
    CHECK_EQ_INT(s.queued + s.dropped_full, 20);
    mst_otlp_relay_destroy(r);
}

static const mst_test_case TESTS[] = {
    {"endpoint_forms", test_endpoint_forms},
    {"bad_environment", test_bad_environment},
    {"queue_accounting", test_queue_accounting},
    {"byte_cap", test_byte_cap},
};

MST_TEST_MAIN(TESTS)
