"""test_otlp_grpc.py — the OTLP exporter's gRPC paths (docs/reference/otlp.md "OTLP/gRPC") against a real
grpcio server (grpc_test_server.GrpcTestServer).

Owns: driving $MSTRACE_BUILD_DIR/test_otlp_transport_driver with
--protocol grpc through OK, partial success, retryable statuses, RetryInfo,
non-retryable statuses, a slow collector (export timeout), gzip
(grpc-encoding) and several batches on one exporter (one connection), and checking the number
of calls the server saw and the exporter counters the driver prints; and the
OTLP relay's stop cancelling a gRPC send in flight. No wall-clock assertions
except the lower bound a RetryInfo delay sets.
"""
import signal
import sys
from pathlib import Path

import pytest

grpc = pytest.importorskip("grpc")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpc_test_server import GrpcTestServer, error, ok, partial, slow, unavailable  # noqa: E402
from test_otlp_relay import (FAST, make_request, relay_env, relay_factory,  # noqa: E402,F401
                             send_mindie)
from otlp_driver import N, driver, run_driver  # noqa: E402,F401  (driver: the fixture)

SC = grpc.StatusCode


def run(driver, url, **kw):
    return run_driver(driver, url, protocol="grpc", **kw)


def test_ok(driver):
    with GrpcTestServer([ok()]) as srv:
        c = run(driver, srv.url, env={"OTEL_SERVICE_NAME": "grpc-ok"})
        calls = list(srv.calls)
    assert len(calls) == 1
    assert calls[0].span_count == N
    attrs = {kv.key: kv.value for kv in calls[0].request.resource_spans[0].resource.attributes}
    assert attrs["service.name"].string_value == "grpc-ok"
    assert calls[0].spans[0].trace_id.hex() == c["trace_id"]
    assert c["status"] == "ok" and c["calls_failed"] == 0
    assert c["spans_exported"] == N and c["spans_failed"] == 0 and c["spans_rejected"] == 0
    assert c["batches_ok"] == 1 and c["retries"] == 0


def test_partial_success_not_retried(driver):
    with GrpcTestServer([partial(4, "4 spans too old"), ok()]) as srv:
        c = run(driver, srv.url)
        n = len(srv.calls)
    assert n == 1
    assert c["spans_rejected"] == 4 and c["spans_exported"] == N - 4 and c["spans_failed"] == 0
    assert c["batches_ok"] == 1 and c["batches_failed"] == 0 and c["retries"] == 0
    # reported to the tracer as not fully delivered
    assert c["calls_failed"] == 1 and c["status"] == "remote end rejected the data"
    assert "4 span(s) rejected" in c["stderr"] and "4 spans too old" in c["stderr"]


def test_partial_success_message_only(driver):
    with GrpcTestServer([partial(0, "only a warning")]) as srv:
        c = run(driver, srv.url)
        n = len(srv.calls)
    assert n == 1
    assert c["status"] == "ok" and c["spans_exported"] == N and c["spans_rejected"] == 0
    assert "only a warning" in c["stderr"]


@pytest.mark.parametrize("code", [SC.UNAVAILABLE, SC.DEADLINE_EXCEEDED, SC.ABORTED])
def test_retryable_status_then_ok(driver, code):
    with GrpcTestServer([error(code), error(code), ok()]) as srv:
        c = run(driver, srv.url)
        calls = list(srv.calls)
    assert len(calls) == 3
    assert [x.answered for x in calls] == [code, code, SC.OK]
    assert all(x.span_count == N for x in calls)  # the same batch re-sent
    assert c["status"] == "ok" and c["retries"] == 2
    assert c["spans_exported"] == N and c["spans_failed"] == 0 and c["batches_ok"] == 1


def test_unavailable_then_ok(driver):
    with GrpcTestServer([unavailable(), ok()]) as srv:
        c = run(driver, srv.url)
        n = len(srv.calls)
    assert n == 2
    assert c["retries"] == 1 and c["spans_exported"] == N


def test_resource_exhausted_with_retry_info_waits(driver):
    # backoff is scaled to 1 %: only RetryInfo (1.5 s) can make the gap this long
    with GrpcTestServer([error(SC.RESOURCE_EXHAUSTED, "slow down", retry_delay_s=1.5), ok()]) as srv:
        c = run(driver, srv.url, backoff_scale=0.01)
        calls = list(srv.calls)
    assert len(calls) == 2
    assert calls[1].received_at - calls[0].received_at >= 1.49
    assert c["status"] == "ok" and c["retries"] == 1
    assert c["spans_exported"] == N and c["batches_ok"] == 1


def test_resource_exhausted_retry_info_beyond_timeout(driver):
    # a RetryInfo delay past the export timeout: give up without a second call
    with GrpcTestServer([error(SC.RESOURCE_EXHAUSTED, retry_delay_s=30), ok()]) as srv:
        c = run(driver, srv.url, timeout_ms=2000)
        n = len(srv.calls)
    assert n == 1
    assert c["status"] == "remote end unavailable"
    assert c["spans_failed"] == N and c["batches_failed"] == 1 and c["retries"] == 0


def test_resource_exhausted_huge_retry_info_gives_up(driver):
    # RetryInfo of exactly 2**58 ms: unclamped, delay_ms * 10**6 wraps to 0 in
    # uint64, the "past the deadline?" check passed and the exporter slept
    # ~9 million years. A collector's delay must be clamped like Retry-After.
    ms = 2 ** 58
    with GrpcTestServer([error(SC.RESOURCE_EXHAUSTED, retry_delay_s=(ms // 1000, (ms % 1000) * 10**6)),
                         ok()]) as srv:
        c = run(driver, srv.url, timeout_ms=2000)
        n = len(srv.calls)
    assert n == 1
    assert c["status"] == "remote end unavailable"
    assert c["spans_failed"] == N and c["batches_failed"] == 1 and c["retries"] == 0


def test_resource_exhausted_without_retry_info_not_retried(driver):
    with GrpcTestServer([error(SC.RESOURCE_EXHAUSTED, "quota"), ok()]) as srv:
        c = run(driver, srv.url)
        n = len(srv.calls)
    assert n == 1
    assert c["status"] == "remote end rejected the data" and c["spans_failed"] == N


@pytest.mark.parametrize("code", [SC.INVALID_ARGUMENT, SC.PERMISSION_DENIED, SC.UNIMPLEMENTED,
                                  SC.INTERNAL])
def test_non_retryable_status_exactly_one_call(driver, code):
    with GrpcTestServer([error(code, "no thanks"), ok()]) as srv:
        c = run(driver, srv.url)
        calls = list(srv.calls)
    assert len(calls) == 1
    assert calls[0].answered == code
    assert c["status"] == "remote end rejected the data" and c["calls_failed"] == 1
    assert c["retries"] == 0 and c["spans_exported"] == 0 and c["spans_failed"] == N
    assert c["batches_failed"] == 1
    assert f"grpc-status {code.value[0]}" in c["stderr"]
    assert "no thanks" in c["stderr"]


def test_slow_collector_hits_export_timeout(driver):
    with GrpcTestServer([slow(4.0), ok()]) as srv:
        c = run(driver, srv.url, timeout_ms=1000)
        n = len(srv.calls)
    assert n == 1  # a timed-out export is not retried
    assert c["status"] == "timed out"
    assert c["spans_failed"] == N and c["spans_exported"] == 0 and c["batches_failed"] == 1


def test_gzip_is_decoded_by_grpc_server(driver):
    with GrpcTestServer() as srv:
        c = run(driver, srv.url, spans=60, gzip=True)
        calls = list(srv.calls)
    assert len(calls) == 1
    assert calls[0].span_count == 60  # grpcio inflated the compressed message
    # on the wire: 5-byte prefix + the compressed message, smaller than the plain one
    wire = int(calls[0].metadata["content-length"])
    assert wire < 5 + calls[0].request.ByteSize()
    assert c["status"] == "ok" and c["spans_exported"] == 60


def test_several_batches_on_one_exporter(driver):
    k = 6
    with GrpcTestServer() as srv:
        c = run(driver, srv.url, spans=60, batches=k)
        calls = list(srv.calls)
    assert c["calls"] == k and c["calls_failed"] == 0
    assert len(calls) == k
    assert [x.span_count for x in calls] == [10] * k
    ids = {s.span_id for x in calls for s in x.spans}
    assert len(ids) == 60  # every span once
    assert c["spans_exported"] == 60 and c["batches_ok"] == k and c["retries"] == 0
    assert len({x.peer for x in calls}) == 1  # one connection (on libcurl < 8 too: the h2c workaround)


def test_several_batches_with_failures_between(driver):
    # a retried and a rejected batch in the middle do not disturb the others
    script = [ok(), unavailable(), ok(), error(SC.INVALID_ARGUMENT), ok()]
    with GrpcTestServer(script) as srv:
        c = run(driver, srv.url, spans=40, batches=4)
        calls = list(srv.calls)
    assert len(calls) == 5
    assert c["calls"] == 4 and c["calls_failed"] == 1
    assert c["spans_exported"] == 30 and c["spans_failed"] == 10
    assert c["batches_ok"] == 3 and c["batches_failed"] == 1 and c["retries"] == 1


def test_relay_stop_cancels_send_in_flight(relay_factory):  # noqa: F811
    """The collector holds the relay's send (export timeout 120 s); SIGTERM
    with a 300 ms flush bound cancels it instead of waiting it out. The daemon
    must stop well inside Daemon.stop's 60 s (without the cancel it would take
    the 120 s export timeout); the payload counts as lost at exit."""
    with GrpcTestServer([slow(300)]) as srv:
        env = relay_env(srv.url, "grpc", OTEL_EXPORTER_OTLP_TIMEOUT="120000")
        d = relay_factory(env, FAST + ["--relay-flush-timeout-ms", "300"]).start()
        send_mindie(d.socket_name, make_request(0))
        assert len(srv.wait_calls(1, timeout=30)) == 1
        assert d.stop(signal.SIGTERM, timeout=60) == 0
    s = d.summary()
    assert s["received"] == 1 and s["forwarded"] == 0
    assert s["lost_at_exit"] == 1 and s["failed"] == 0
    assert "cancelling it" in d.log()
