"""test_otlp_retry.py — the OTLP exporter's retry, timeout, partial-success,
gzip and header rules (docs/reference/otlp.md) against a scripted local collector.

Owns: driving $MSTRACE_BUILD_DIR/test_otlp_transport_driver (the real
exporter: config from env, encoder, libcurl transport) against
otlp_test_server.OTLPTestServer and checking request counts and the exporter
counters it prints. No wall-clock assertions except lower bounds that a
Retry-After header sets.
"""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from otlp_test_server import (OTLPTestServer, ok, partial_json, partial_proto,  # noqa: E402
                              slow, status)
from otlp_driver import N, clean_env, driver  # noqa: E402,F401  (driver: the fixture)
from otlp_driver import run_driver as run  # noqa: E402  (protocol defaults to http/protobuf)


def test_429_retry_after_then_success(driver):
    with OTLPTestServer([status(429, retry_after="1"), ok()]) as srv:
        c = run(driver, srv.url())
        reqs = srv.requests
    assert len(reqs) == 2
    assert reqs[1].received_at - reqs[0].received_at >= 0.99  # Retry-After: 1 honoured
    assert c["spans_exported"] == N and c["spans_failed"] == 0
    assert c["retries"] == 1 and c["batches_ok"] == 1 and c["batches_failed"] == 0
    assert reqs[1].span_count == N


def test_retry_after_http_date(driver):
    from email.utils import formatdate
    import time
    when = formatdate(time.time() + 2, usegmt=True)
    with OTLPTestServer([status(503, retry_after=when), ok()]) as srv:
        c = run(driver, srv.url())
        reqs = srv.requests
    assert len(reqs) == 2
    assert reqs[1].received_at - reqs[0].received_at >= 0.9  # date has 1 s resolution
    assert c["spans_exported"] == N and c["retries"] == 1


@pytest.mark.parametrize("code", [408, 502, 503, 504])
def test_retryable_codes_back_off_then_succeed(driver, code):
    with OTLPTestServer([status(code), status(code), ok()]) as srv:
        c = run(driver, srv.url())
        n = len(srv.requests)
    assert n == 3
    assert c["retries"] == 2
    assert c["spans_exported"] == N and c["spans_failed"] == 0 and c["batches_ok"] == 1


@pytest.mark.parametrize("code", [400, 401, 404, 413, 500])
def test_other_codes_not_retried(driver, code):
    with OTLPTestServer([status(code), ok()]) as srv:
        c = run(driver, srv.url())
        n = len(srv.requests)
    assert n == 1
    assert c["retries"] == 0
    assert c["spans_exported"] == 0 and c["spans_failed"] == N
    assert c["batches_failed"] == 1 and c["status"] == "remote end rejected the data"


@pytest.mark.parametrize("code,words", [
    (400, ["HTTP 400", "check OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]),
    (401, ["HTTP 401", "credentials", "OTEL_EXPORTER_OTLP_[TRACES_]HEADERS"]),
    (403, ["HTTP 403", "OTEL_EXPORTER_OTLP_[TRACES_]HEADERS"]),
    (404, ["HTTP 404", "no OTLP trace receiver", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]),
])
def test_4xx_is_a_configuration_error_logged_once(driver, code, words):
    """Three batches each refused at once: one line says what to fix."""
    with OTLPTestServer([status(code)] * 3) as srv:
        c = run(driver, srv.url(), batches=3)
        n = len(srv.requests)
    assert n == 3 and c["retries"] == 0  # one request per batch, none again
    assert c["batches_failed"] == 3 and c["spans_failed"] == N
    lines = [line for line in c["stderr"].splitlines() if "configuration error" in line]
    assert len(lines) == 1, c["stderr"]
    for w in words:
        assert w in lines[0], lines[0]


def test_5xx_is_not_a_configuration_error(driver):
    with OTLPTestServer([status(500)]) as srv:
        c = run(driver, srv.url())
    assert c["spans_failed"] == N and c["retries"] == 0
    assert "configuration error" not in c["stderr"] and "HTTP 500" in c["stderr"]


def test_unreachable_collector_is_an_outage_not_configuration(driver):
    """Connection refused keeps the bounded backoff (several attempts)."""
    with OTLPTestServer([]) as srv:
        url = srv.url()
    c = run(driver, url, timeout_ms=2000)
    assert c["spans_failed"] == N and c["retries"] >= 1
    assert "configuration error" not in c["stderr"]


def test_retries_give_up_inside_timeout(driver):
    # Retry-After beyond the export timeout: no second request, spans failed
    with OTLPTestServer([status(503, retry_after="30"), ok()]) as srv:
        c = run(driver, srv.url(), timeout_ms=2000)
        n = len(srv.requests)
    assert n == 1
    assert c["spans_failed"] == N and c["batches_failed"] == 1
    assert c["status"] == "remote end unavailable"


def test_partial_success_protobuf(driver):
    with OTLPTestServer([partial_proto(3, "3 spans too old"), ok()]) as srv:
        c = run(driver, srv.url())
        n = len(srv.requests)
    assert n == 1  # never retried
    # exported = accepted; rejected apart from failed (whole batches lost);
    # the batch call reports the rejection so the tracer never counts it
    assert c["spans_rejected"] == 3
    assert c["spans_exported"] == N - 3 and c["spans_failed"] == 0
    assert c["batches_ok"] == 1 and c["batches_failed"] == 0 and c["retries"] == 0
    assert c["calls_failed"] == 1 and c["status"] == "remote end rejected the data"
    assert "3 span(s) rejected" in c["stderr"] and "3 spans too old" in c["stderr"]


def test_partial_success_json(driver):
    with OTLPTestServer([partial_json(2, "bad attribute"), ok()]) as srv:
        c = run(driver, srv.url(), protocol="http/json")
        reqs = srv.requests
    assert len(reqs) == 1
    assert reqs[0].headers["content-type"] == "application/json"
    assert reqs[0].span_count == N
    assert c["spans_rejected"] == 2 and c["spans_exported"] == N - 2 and c["spans_failed"] == 0
    assert "bad attribute" in c["stderr"]


def test_partial_success_warning_only(driver):
    # rejected_spans = 0 with a message: a warning, nothing counted as rejected
    with OTLPTestServer([partial_proto(0, "just a warning")]) as srv:
        c = run(driver, srv.url())
    assert c["spans_exported"] == N and c["spans_rejected"] == 0
    assert c["calls_failed"] == 0 and c["status"] == "ok"
    assert "just a warning" in c["stderr"]


def test_slow_server_hits_timeout(driver):
    with OTLPTestServer([slow(4.0), ok()]) as srv:
        c = run(driver, srv.url(), timeout_ms=1000)
        n = len(srv.requests)
    assert n == 1
    assert c["spans_failed"] == N and c["spans_exported"] == 0
    assert c["batches_failed"] == 1
    assert c["status"] == "timed out"


def test_connection_refused_counts_failed(driver):
    with OTLPTestServer() as srv:
        url = srv.url()
    c = run(driver, url, timeout_ms=1500)  # nobody listens any more
    assert c["spans_failed"] == N and c["retries"] >= 1
    assert c["status"] == "remote end unavailable"


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_gzip_bodies_decode(driver, protocol):
    with OTLPTestServer() as srv:
        c = run(driver, srv.url(), protocol=protocol, gzip=True)
        reqs = srv.requests
    assert len(reqs) == 1
    r = reqs[0]
    assert r.headers.get("content-encoding") == "gzip"
    assert r.raw[:2] == b"\x1f\x8b"
    assert r.decode_error is None and r.span_count == N
    assert c["spans_exported"] == N


def test_headers_from_env_arrive(driver):
    env = {"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s%20e%3Dcret, x-tenant = t1"}
    with OTLPTestServer() as srv:
        c = run(driver, srv.url(), env=env)
        r = srv.requests[0]
    assert r.headers["x-api-key"] == "s e=cret"
    assert r.headers["x-tenant"] == "t1"
    assert r.headers["content-type"] == "application/x-protobuf"
    assert c["spans_exported"] == N


def test_bad_headers_env_is_an_error(driver):
    p = subprocess.run([str(driver), "--url", "http://127.0.0.1:9/v1/traces", "--protocol",
                        "http/protobuf", "--spans", "1"],
                       env=clean_env({"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "OTEL_EXPORTER_OTLP_HEADERS" in p.stderr


def test_request_content(driver):
    with OTLPTestServer() as srv:
        c = run(driver, srv.url(), env={"OTEL_SERVICE_NAME": "retry-test"})
        r = srv.requests[0]
    assert r.path == "/v1/traces"
    req = r.decoded
    rs = req.resource_spans[0]
    attrs = {kv.key: kv.value for kv in rs.resource.attributes}
    assert attrs["service.name"].string_value == "retry-test"
    spans = [s for ss in rs.scope_spans for s in ss.spans]
    assert len(spans) == N
    assert rs.scope_spans[0].scope.name == "mstrace.test.driver"
    assert spans[0].trace_id.hex() == c["trace_id"]
    children = [s for s in spans if s.name == "child"]
    batches = [s for s in spans if s.name == "batch"]
    assert len(children) + len(batches) == N - 1 and batches
    assert all(s.parent_span_id == spans[0].span_id for s in children)
    assert all(len(s.links) == 1 and s.links[0].span_id == spans[0].span_id
               and s.links[0].trace_id == spans[0].trace_id for s in batches)
