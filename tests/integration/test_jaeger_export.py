"""test_jaeger_export.py — the OTLP exporter against the real Jaeger (docs/reference/jaeger.md).

Owns: exporting a request-shaped set of spans (a SERVER request span, INTERNAL
children of it, one ERROR child, and "batch" spans in their own traces that
link to the request) with $MSTRACE_BUILD_DIR/test_otlp_transport_driver over
each of grpc, http/protobuf and http/json (plain and gzip), then finding them
through Jaeger's query API: CHILD_OF and FOLLOWS_FROM references, attributes
as typed tags, otel.scope.name, span.kind, error status. Jaeger comes from
jaeger_fixture.py (tests/harness/jaeger.sh, loopback only). Through a
counting loopback proxy (h2_count_proxy.py): many gRPC exports on one
connection; a reconnect without loss when that connection ends (a GOAWAY or a
plain close as the next export starts, a close right after a reply); a reply
that lost its trailers; a fork()ed child exporting on a connection of its own
while the parent keeps its own.
"""
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jaeger_fixture import jaeger  # noqa: E402,F401  (the fixture)
from otlp_driver import driver_path  # noqa: E402
from h2_count_proxy import H2CountProxy  # noqa: E402

N = 12  # span 0 request; i % 3 == 2 batch; else child (ERROR when i % 4 == 0)


def export(jaeger, protocol: str, service: str, gzip: bool = False) -> dict:  # noqa: F811
    path = driver_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found; build it or set MSTRACE_BUILD_DIR")
    url = (f"http://{jaeger.otlp_grpc_addr}" if protocol == "grpc"
           else jaeger.traces_endpoint)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_SERVICE_NAME"] = service
    argv = [str(path), "--url", url, "--protocol", protocol, "--spans", str(N),
            "--timeout-ms", "10000"]
    if gzip:
        argv.append("--gzip")
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["status"] == "ok", p.stderr
    assert out["spans_exported"] == N and out["spans_failed"] == 0, out
    return out


def expected_names():
    names = []
    for i in range(N):
        names.append("request" if i == 0 else "batch" if i % 3 == 2 else "child")
    return names


@pytest.mark.parametrize("protocol,gzip", [
    ("grpc", False), ("http/protobuf", False), ("http/json", False),
    ("grpc", True), ("http/protobuf", True),
])
def test_export_reaches_jaeger(jaeger, protocol, gzip):  # noqa: F811
    service = f"mstrace-otlp-{protocol.replace('/', '-')}-{'gz-' if gzip else ''}{uuid.uuid4().hex[:8]}"
    out = export(jaeger, protocol, service, gzip)
    spans = jaeger.wait_for_spans(service, N, timeout_s=30)
    assert len(spans) == N, f"{len(spans)} of {N} spans found for {service}"
    assert sorted(s["operationName"] for s in spans) == sorted(expected_names())

    tags = {s["spanID"]: jaeger.tags(s) for s in spans}
    request = [s for s in spans if s["operationName"] == "request"]
    assert len(request) == 1
    request = request[0]
    rid = request["spanID"]
    assert request["traceID"] == out["trace_id"]
    assert tags[rid]["span.kind"] == "server"
    assert request["process"]["serviceName"] == service
    assert not request.get("references")

    for s in spans:
        t = tags[s["spanID"]]
        assert t["otel.scope.name"] == "mstrace.test.driver"
        assert t["otel.scope.version"] == "1.0"
        assert t["driver.text"] == "hello"
        assert t["driver.flag"] is True
        assert t["driver.ratio"] == 0.5
        assert isinstance(t["driver.index"], int)
        refs = s.get("references") or []
        if s["operationName"] == "child":
            assert t.get("span.kind", "internal") == "internal"
            assert s["traceID"] == out["trace_id"]
            assert [(r["refType"], r["spanID"]) for r in refs] == [("CHILD_OF", rid)]
            if t["driver.index"] % 4 == 0:
                assert t["error"] is True
                assert t["otel.status_code"] == "ERROR"
                assert t["otel.status_description"] == "driver error"
            else:
                assert "error" not in t
        elif s["operationName"] == "batch":
            assert s["traceID"] != out["trace_id"]  # a trace of its own
            assert [(r["refType"], r["traceID"], r["spanID"]) for r in refs] == \
                [("FOLLOWS_FROM", out["trace_id"], rid)]

    # the request's trace holds the request and its children, not the batches
    trace = jaeger.trace(out["trace_id"])
    assert trace is not None
    assert sorted(s["operationName"] for s in trace["spans"]) == \
        sorted(n for n in expected_names() if n != "batch")


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_many_batches_on_one_exporter(jaeger, protocol):  # noqa: F811
    """Several exports from one exporter (on one reused connection) all arrive."""
    path = driver_path()
    service = f"mstrace-otlp-batches-{protocol.replace('/', '-')}-{uuid.uuid4().hex[:8]}"
    url = (f"http://{jaeger.otlp_grpc_addr}" if protocol == "grpc" else jaeger.traces_endpoint)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_SERVICE_NAME"] = service
    p = subprocess.run([str(path), "--url", url, "--protocol", protocol, "--spans", "2000",
                        "--batch", "256"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["spans_exported"] == 2000 and out["batches_ok"] == 8 and out["retries"] == 0, p.stderr
    spans = jaeger.wait_for_spans(service, 2000, timeout_s=30)
    assert len(spans) == 2000


def test_grpc_batches_flag_all_arrive(jaeger):  # noqa: F811
    """--batches K over gRPC on one exporter: every batch reaches Jaeger."""
    path = driver_path()
    k, n = 7, 70
    service = f"mstrace-otlp-grpc-batches-{uuid.uuid4().hex[:8]}"
    env = {k2: v for k2, v in os.environ.items() if not k2.startswith("OTEL_")}
    env["OTEL_SERVICE_NAME"] = service
    p = subprocess.run([str(path), "--url", f"http://{jaeger.otlp_grpc_addr}", "--protocol",
                        "grpc", "--spans", str(n), "--batches", str(k), "--timeout-ms", "10000"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["calls"] == k and out["calls_failed"] == 0, p.stderr
    assert out["batches_ok"] == k and out["spans_exported"] == n and out["retries"] == 0, p.stderr
    spans = jaeger.wait_for_spans(service, n, timeout_s=30)
    assert len(spans) == n
    assert len({s["spanID"] for s in spans}) == n
    assert sorted(s["operationName"] for s in spans) == sorted(
        "request" if i == 0 else "batch" if i % 3 == 2 else "child" for i in range(n))


def _grpc_batches_through(proxy, k: int, n: int, service: str, extra=()) -> dict:
    """The driver's K gRPC exports of N spans in all to Jaeger through `proxy`."""
    env = {k2: v for k2, v in os.environ.items() if not k2.startswith("OTEL_")}
    env["OTEL_SERVICE_NAME"] = service
    p = subprocess.run([str(driver_path()), "--url", f"http://{proxy.addr}", "--protocol", "grpc",
                        "--spans", str(n), "--batches", str(k), "--timeout-ms", "10000",
                        "--backoff-scale", "0.01", *extra], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["stderr"] = p.stderr
    return out


def test_grpc_exports_share_one_connection(jaeger):  # noqa: F811
    """K gRPC exports from one exporter use one TCP connection (the libcurl
    < 8 h2c workaround, docs/architecture.md "The OTLP transport"): the proxy
    accepts exactly one, and every span arrives."""
    k, n = 20, 200
    service = f"mstrace-otlp-grpc-one-conn-{uuid.uuid4().hex[:8]}"
    with H2CountProxy(jaeger.otlp_grpc_addr) as proxy:
        out = _grpc_batches_through(proxy, k, n, service)
        accepted = proxy.accepted
    assert out["batches_ok"] == k and out["spans_exported"] == n, out["stderr"]
    assert out["retries"] == 0 and out["calls_failed"] == 0, out["stderr"]
    assert accepted == 1
    spans = jaeger.wait_for_spans(service, n, timeout_s=30)
    assert len({s["spanID"] for s in spans}) == n


@pytest.mark.parametrize("cut", ["goaway", "close"])
def test_grpc_reconnects_after_the_connection_ends(jaeger, cut):  # noqa: F811
    """The first connection ends when the second export starts on it, with a
    GOAWAY saying that request was not processed (a collector shutting down)
    or a plain close (one killed): the exporter sends that export again at
    once on a second connection and keeps it for the rest, so nothing is
    lost, no batch fails and the one resend is counted as a retry."""
    k, n = 6, 60
    service = f"mstrace-otlp-grpc-{cut}-{uuid.uuid4().hex[:8]}"
    with H2CountProxy(jaeger.otlp_grpc_addr, cut=cut) as proxy:
        out = _grpc_batches_through(proxy, k, n, service)
        accepted, cuts = proxy.accepted, proxy.cuts
    assert cuts == 1
    assert out["batches_ok"] == k and out["batches_failed"] == 0 and out["spans_exported"] == n, out["stderr"]
    assert out["retries"] == 1, out["stderr"]
    assert accepted == 2
    spans = jaeger.wait_for_spans(service, n, timeout_s=30)
    assert len({s["spanID"] for s in spans}) == n


def test_grpc_reconnects_after_a_restart_between_exports(jaeger):  # noqa: F811
    """The first connection is closed right after the first export's reply
    (a collector restarted between two exports): the next export goes out
    on a new connection, found closed before sending (no retry) or, when the
    close arrives just as it sends, failed and sent again at once (one
    retry); either way nothing is lost and no batch fails."""
    k, n = 6, 60
    service = f"mstrace-otlp-grpc-idle-close-{uuid.uuid4().hex[:8]}"
    with H2CountProxy(jaeger.otlp_grpc_addr, cut="idle-close") as proxy:
        out = _grpc_batches_through(proxy, k, n, service)
        accepted, cuts = proxy.accepted, proxy.cuts
    assert cuts == 1
    assert out["batches_ok"] == k and out["batches_failed"] == 0 and out["spans_exported"] == n, out["stderr"]
    assert out["retries"] in (0, 1), out["stderr"]
    assert accepted == 2
    spans = jaeger.wait_for_spans(service, n, timeout_s=30)
    assert len({s["spanID"] for s in spans}) == n


@pytest.mark.parametrize("cut", ["no-trailers", "no-message"])
def test_grpc_reply_without_trailers(jaeger, cut):  # noqa: F811
    """The first reply loses its trailers (what libcurl 7.88 does when the
    server closes right after them): with its response message the export
    counts as delivered (a unary gRPC server sends that message only for a
    call that succeeded); without it, it counts as failed and is not
    retried. (libcurl 7.88 then fails the next request on that connection,
    which is sent again at once on a new one: at most one retry, nothing
    lost.)"""
    k, n = 3, 30
    service = f"mstrace-otlp-grpc-{cut}-{uuid.uuid4().hex[:8]}"
    with H2CountProxy(jaeger.otlp_grpc_addr, cut=cut) as proxy:
        out = _grpc_batches_through(proxy, k, n, service)
        accepted, cuts = proxy.accepted, proxy.cuts
    assert cuts == 1 and accepted <= 2
    assert out["retries"] <= 1, out["stderr"]
    if cut == "no-trailers":
        assert out["batches_ok"] == k and out["spans_exported"] == n, out["stderr"]
    else:
        assert out["batches_ok"] == k - 1 and out["batches_failed"] == 1, out["stderr"]
        assert "without grpc-status" in out["stderr"]
    spans = jaeger.wait_for_spans(service, n, timeout_s=30)  # Jaeger got every batch either way
    assert len({s["spanID"] for s in spans}) == n


def test_grpc_fork_child_leaves_the_parents_connection_alone(jaeger):  # noqa: F811
    """After two exports the driver forks; the child exports one batch on a
    connection of its own and exits; the parent goes on on its first
    connection, on which the child wrote nothing (no GOAWAY before the
    parent's own at its end): two connections in all, no retry in the
    parent, every span once."""
    k, n = 6, 60
    service = f"mstrace-otlp-grpc-fork-{uuid.uuid4().hex[:8]}"
    with H2CountProxy(jaeger.otlp_grpc_addr) as proxy:
        out = _grpc_batches_through(proxy, k, n, service, extra=("--fork-after", "2"))
        accepted, parents = proxy.accepted, list(proxy.client_frames[0])
    assert out["child_ok"] == 1, out["stderr"]
    assert out["batches_ok"] == k - 1 and out["spans_exported"] == n - n // k, out["stderr"]
    assert out["retries"] == 0 and out["calls_failed"] == 0, out["stderr"]
    assert accepted == 2
    goaway, headers = 0x7, 0x1
    assert parents.count(headers) == k - 1  # the parent's exports, all on its connection
    assert goaway not in parents or parents.index(goaway) > max(i for i, t in enumerate(parents) if t == headers)
    spans = jaeger.wait_for_spans(service, n, timeout_s=30)
    assert len({s["spanID"] for s in spans}) == n
