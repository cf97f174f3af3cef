"""test_otlp_relay.py — the legacy OTLP relay (`mstrace forward` without
--perfetto-output, docs/relay.md) against real collectors.

Owns: producing frames the way MindIE's C++ tracer does (one serialized
ExportTraceServiceRequest with one span per message, one connection per
message, 4-byte big-endian length prefix), built with PyPI
opentelemetry-proto; checking that they reach the scripted OTLP test server
(otlp_test_server.py) and real Jaeger (http/protobuf and grpc, found through
/api/traces); the startup checks of the environment (exit 1 with a message
naming the variable); rejection of garbage while good clients continue; and
the collector-down case: producers never block, RSS stays bounded, every
message is accounted for exactly (sent = forwarded + dropped + rejected) and
delivery resumes when a collector comes back on the same port.

The daemon runs on a unique --socket-name with short backoffs (--relay-*
flags) so the tests are fast; nothing asserts wall-clock times.
"""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import Daemon, frame, tracked_daemons, unique_socket_name  # noqa: E402
from otlp_test_server import OTLPTestServer, status  # noqa: E402

trace_pb2 = pytest.importorskip("opentelemetry.proto.trace.v1.trace_pb2")
svc_pb2 = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

FAST = ["--relay-backoff-min-ms", "50", "--relay-backoff-max-ms", "200"]


# ------------------------------------------------------------ payloads

def make_request(i: int, service: str = "mindie-test", trace_id: bytes = None,
                 pad: int = 0) -> bytes:
    """One ExportTraceServiceRequest holding one span, as MindIE sends it."""
    req = svc_pb2.ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", service
    ss = rs.scope_spans.add()
    ss.scope.name = "mindie.motor"
    sp = ss.spans.add()
    sp.trace_id = trace_id or (b"\x11" * 8 + struct.pack(">Q", i + 1))
    sp.span_id = struct.pack(">Q", 0xABC0000000000000 + i + 1)
    sp.name = f"mindie.span.{i}"
    sp.kind = trace_pb2.Span.SPAN_KIND_SERVER
    now = time.time_ns()
    sp.start_time_unix_nano = now - 1_000_000
    sp.end_time_unix_nano = now
    a = sp.attributes.add()
    a.key, a.value.int_value = "seq", i
    if pad:
        p = sp.attributes.add()
        p.key, p.value.string_value = "pad", "x" * pad
    return req.SerializeToString()


def send_mindie(socket_name: str, payload: bytes, timeout: float = 10.0) -> None:
    """One connection, one frame, close — MindIE's tracer pattern."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        while True:
            try:
                s.connect("\0" + socket_name)
                break
            except BlockingIOError:  # listen backlog full for a moment: retry
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.001)
        s.sendall(frame(payload))


def span_names(requests) -> list:
    """Names of the spans the server accepted (answered 200)."""
    return [sp.name for r in requests if r.decoded is not None and r.answered == 200
            for rs in r.decoded.resource_spans for ss in rs.scope_spans for sp in ss.spans]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -------------------------------------------------------------- daemon

class RelayDaemon(Daemon):
    def __init__(self, binary, tmp_path, env, extra_args=(), log_level="info"):
        super().__init__(binary, tmp_path / "unused.json", log_level=log_level)
        self.env = env
        self.extra_args = list(extra_args)

    def argv(self):
        return [str(self.binary), "forward", "--log-level", self.log_level,
                "--socket-name", self.socket_name] + self.extra_args

    def summary(self) -> dict:
        lines = [l for l in self.log().splitlines() if "OTLP relay summary:" in l]
        assert lines, f"no summary line in the daemon log:\n{self.log()[-4000:]}"
        return {k: int(v) for k, v in re.findall(r"([a-z_]+)=(\d+)", lines[-1])}

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")


def relay_env(endpoint=None, protocol=None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    if protocol is not None:
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    env.update(extra)
    return env


@pytest.fixture
def relay_factory(mstrace_bin, tmp_path):
    def build(env, extra_args=(), **kw):
        return RelayDaemon(mstrace_bin, tmp_path, env, extra_args, **kw)

    yield from tracked_daemons(build)


def wait_spans(srv: OTLPTestServer, n: int, timeout: float = 30.0) -> list:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        names = span_names(list(srv.requests))
        if len(names) >= n:
            return names
        time.sleep(0.02)
    return span_names(list(srv.requests))


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("form", ["base", "base-slash", "full"])
def test_mindie_frames_reach_test_server(relay_factory, form):
    n = 40
    with OTLPTestServer() as srv:
        base = f"http://127.0.0.1:{srv.port}"
        endpoint = {"base": base, "base-slash": base + "/", "full": base + "/v1/traces"}[form]
        d = relay_factory(relay_env(endpoint, "http/protobuf"), FAST).start()
        for i in range(n):
            send_mindie(d.socket_name, make_request(i))
        names = wait_spans(srv, n)
        assert sorted(names) == sorted(f"mindie.span.{i}" for i in range(n))
        assert d.stop() == 0
        assert {r.path for r in srv.requests} == {"/v1/traces"}
        assert all(r.headers.get("content-type") == "application/x-protobuf" for r in srv.requests)
        assert all(r.decode_error is None for r in srv.requests)
        # Batching keeps requests at most one per message, usually fewer.
        assert len(srv.requests) <= n
    s = d.summary()
    assert s["received"] == n and s["forwarded"] == n and s["rejected"] == 0
    assert s["spans_received"] == n and s["spans_forwarded"] == n
    assert s["dropped_full"] == 0 and s["failed"] == 0 and s["lost_at_exit"] == 0


def test_traces_endpoint_wins_as_is(relay_factory):
    with OTLPTestServer() as srv:
        env = relay_env("http://127.0.0.1:1", "http/protobuf",
                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=srv.url("/custom/path"))
        d = relay_factory(env, FAST).start()
        send_mindie(d.socket_name, make_request(7))
        assert wait_spans(srv, 1) == ["mindie.span.7"]
        assert d.stop() == 0
        assert {r.path for r in srv.requests} == {"/custom/path"}


def test_batches_merge_requests(relay_factory):
    """Many queued messages become fewer upstream requests whose bodies are
    valid ExportTraceServiceRequests holding every span (concatenation)."""
    n = 300
    # The collector refuses (503) the first attempts, so messages pile up.
    from otlp_test_server import status
    with OTLPTestServer([status(503)] * 3) as srv:
        env = relay_env(f"http://127.0.0.1:{srv.port}", "http/protobuf",
                        OTEL_EXPORTER_OTLP_TIMEOUT="200")
        d = relay_factory(env, ["--relay-backoff-min-ms", "300", "--relay-backoff-max-ms", "300",
                                "--relay-batch-items", "64"]).start()
        for i in range(n):
            send_mindie(d.socket_name, make_request(i))
        names = wait_spans(srv, n)
        assert sorted(names) == sorted(f"mindie.span.{i}" for i in range(n))
        assert d.stop() == 0
        ok = [r for r in srv.requests if r.answered == 200]
        assert len(ok) < n, "queued messages were not batched"
        assert max(len(r.decoded.resource_spans) for r in ok) > 1
        assert all(len(r.decoded.resource_spans) <= 64 for r in ok)
    s = d.summary()
    assert s["forwarded"] == n and s["spans_forwarded"] == n and s["retries"] >= 1


@pytest.mark.parametrize("env_kw, words", [
    (dict(protocol="http/protobuf"), ["OTEL_EXPORTER_OTLP_ENDPOINT", "not set"]),
    (dict(endpoint="http://127.0.0.1:4318"), ["OTEL_EXPORTER_OTLP_PROTOCOL", "not set"]),
    (dict(endpoint="http://127.0.0.1:4318", protocol="http/json"),
     ["OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"]),
    (dict(endpoint="http://127.0.0.1:4318", protocol="thrift"),
     ["OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"]),
    (dict(endpoint="http://localhost/v1/traces", protocol="http/protobuf"),
     ["OTEL_EXPORTER_OTLP_ENDPOINT", "explicit port"]),
    (dict(endpoint="localhost:4317", protocol="grpc"),
     ["OTEL_EXPORTER_OTLP_ENDPOINT", "http://"]),
    (dict(endpoint="ftp://h:21", protocol="grpc"), ["OTEL_EXPORTER_OTLP_ENDPOINT", "http://"]),
    (dict(endpoint="http://h:99999", protocol="grpc"),
     ["OTEL_EXPORTER_OTLP_ENDPOINT", "explicit port"]),
    (dict(endpoint="http://:4318", protocol="grpc"), ["OTEL_EXPORTER_OTLP_ENDPOINT"]),
])
def test_bad_environment_exits_1(mstrace_bin, env_kw, words):
    res = subprocess.run([str(mstrace_bin), "forward", "--socket-name", unique_socket_name()],
                         env=relay_env(**env_kw), capture_output=True, text=True, timeout=30)
    assert res.returncode == 1, res.stderr
    for w in words:
        assert w in res.stderr, res.stderr
    assert "listening on" not in res.stderr


def test_garbage_rejected_good_clients_continue(relay_factory):
    with OTLPTestServer() as srv:
        d = relay_factory(relay_env(f"http://127.0.0.1:{srv.port}", "http/protobuf"),
                          FAST).start()
        bad = [b"\xff\xff\xff\xff", b"not protobuf at all", make_request(1)[:-3],
               b"\x0a\x05\x12\x03\x12\x01\x00"]  # ResourceSpans>ScopeSpans>Span w/o ids
        good = 0
        # A connection that mixes garbage and good frames stays usable.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect("\0" + d.socket_name)
            for i, b in enumerate(bad):
                s.sendall(frame(b))
                s.sendall(frame(make_request(100 + i)))
                good += 1
        for i in range(10):
            send_mindie(d.socket_name, bad[i % len(bad)])
            send_mindie(d.socket_name, make_request(i))
            good += 1
        names = wait_spans(srv, good)
        assert len(names) == good
        assert d.stop() == 0
    s = d.summary()
    assert s["rejected"] == len(bad) + 10
    assert s["received"] == good + len(bad) + 10
    assert s["forwarded"] == good
    assert "rejected a" in d.log()


def test_collector_down_bounded_exact_and_resumes(relay_factory):
    port = free_port()
    queue_items, pad, n = 500, 2048, 50_000
    env = relay_env(f"http://127.0.0.1:{port}", "http/protobuf", OTEL_EXPORTER_OTLP_TIMEOUT="300")
    d = relay_factory(env, FAST + ["--relay-queue-items", str(queue_items),
                                   "--relay-queue-bytes", str(2 * 1024 * 1024)]).start()
    template = [make_request(i, pad=pad) for i in range(256)]
    rss_after_fill = None
    rss_max = 0
    for i in range(n):
        send_mindie(d.socket_name, template[i % len(template)])
        if i % 1000 == 999:
            rss = d.rss_kib()
            rss_max = max(rss_max, rss)
            if i == 4999:
                rss_after_fill = rss
    assert d.proc.poll() is None
    # 50k messages of ~2.2 kB are ~110 MB; the queue holds at most 2 MiB.
    growth_mib = (rss_max - rss_after_fill) / 1024
    assert growth_mib < 40, f"RSS grew by {growth_mib:.1f} MiB while the collector was down"

    # The collector comes back on the same port: delivery resumes by itself.
    with OTLPTestServer(port=port) as srv:
        assert wait_spans(srv, 1, timeout=60), f"delivery did not resume:\n{d.log()[-3000:]}"
        # Let the backlog drain (a condition, not a timing assertion).
        last, stable_since = -1, time.monotonic()
        while time.monotonic() - stable_since < 1.0:
            cur = len(span_names(list(srv.requests)))
            if cur != last:
                last, stable_since = cur, time.monotonic()
            time.sleep(0.05)
        assert d.stop() == 0
        delivered = len(span_names(list(srv.requests)))
    s = d.summary()
    assert s["received"] == n
    assert s["received"] == s["forwarded"] + s["dropped_full"] + s["rejected"] + s["failed"] \
        + s["lost_at_exit"]
    assert s["failed"] == 0 and s["lost_at_exit"] == 0 and s["rejected"] == 0
    # Most were dropped (the queue holds 500; connections still waiting in the
    # kernel's listen backlog when the collector came back may get through).
    assert s["dropped_full"] > n // 2
    assert delivered == s["spans_forwarded"] == s["forwarded"]
    assert "queue is full" in d.log()
    assert "resumed" in d.log()


def test_stop_with_collector_down_counts_lost(relay_factory):
    port = free_port()
    env = relay_env(f"http://127.0.0.1:{port}", "grpc", OTEL_EXPORTER_OTLP_TIMEOUT="200")
    d = relay_factory(env, FAST + ["--relay-flush-timeout-ms", "300"]).start()
    for i in range(25):
        send_mindie(d.socket_name, make_request(i))
    assert d.stop(signal.SIGTERM) == 0
    s = d.summary()
    assert s["received"] == 25 and s["forwarded"] == 0
    assert s["lost_at_exit"] + s["dropped_full"] == 25
    assert "not delivered" in d.log()


# ------------------------------------------------------------- Jaeger

def _jaeger_roundtrip(relay_factory, jaeger, protocol):
    service = f"mstrace-relay-{protocol.replace('/', '-')}-{uuid.uuid4().hex[:8]}"
    trace_id = uuid.uuid4().bytes
    if protocol == "grpc":
        endpoint = f"http://{jaeger.otlp_grpc_addr}"
    else:
        endpoint = jaeger.traces_endpoint  # the full URL, as upstream documents it
    d = relay_factory(relay_env(endpoint, protocol), FAST).start()
    n = 6
    for i in range(n):
        send_mindie(d.socket_name, make_request(i, service=service, trace_id=trace_id))
    deadline = time.monotonic() + 60
    trace = None
    while time.monotonic() < deadline:
        trace = jaeger.trace(trace_id.hex())
        if trace and len(trace["spans"]) >= n:
            break
        time.sleep(0.2)
    assert d.stop() == 0
    assert trace and len(trace["spans"]) == n, d.log()[-3000:]
    assert sorted(s["operationName"] for s in trace["spans"]) == \
        sorted(f"mindie.span.{i}" for i in range(n))
    procs = trace.get("processes", {})
    assert {p["serviceName"] for p in procs.values()} == {service}
    assert d.summary()["spans_forwarded"] == n


@pytest.fixture
def jaeger_or_skip(request):
    if os.environ.get("MST_SKIP_JAEGER") == "1":
        pytest.skip("MST_SKIP_JAEGER=1")
    from jaeger_fixture import jaeger  # noqa: F401
    return request.getfixturevalue("jaeger")


# jaeger_fixture's session fixture, made visible to this module.
from jaeger_fixture import jaeger  # noqa: E402,F401


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_reaches_real_jaeger(relay_factory, jaeger_or_skip, protocol):
    _jaeger_roundtrip(relay_factory, jaeger_or_skip, protocol)


def test_refused_upstream_is_a_configuration_error_not_retried(relay_factory):
    """A 404 (wrong endpoint path) fails the payloads at once, with one
    line naming the variable; no backoff, nothing left queued."""
    with OTLPTestServer([status(404)] * 50) as srv:
        d = relay_factory(relay_env(srv.url("/wrong"), "http/protobuf",
                                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=srv.url("/wrong")), FAST).start()
        for i in range(5):
            send_mindie(d.socket_name, make_request(i))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(r.span_count for r in list(srv.requests)) < 5:
            time.sleep(0.02)
        assert d.stop() == 0
    s = d.summary()
    assert s["failed"] == 5 and s["forwarded"] == 0 and s["lost_at_exit"] == 0, d.log()
    assert len(srv.requests) <= 5  # each payload sent once at most (batched), never again
    lines = [line for line in d.log().splitlines() if "configuration error" in line]
    assert len(lines) == 1 and "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" in lines[0], d.log()
    assert "retrying in" not in d.log()


STACKED = "Trace data is being stacked"
FULL = "Trace data queue is full, discarding the oldest data."


def _wait_log(d, words, timeout=30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and words not in d.log():
        time.sleep(0.02)
    return d.log()


def test_backlog_warning_well_before_loss_in_upstreams_words(relay_factory):
    """With the collector down and --relay-queue-items 300, upstream's
    backlog line comes at a tenth of the bound with nothing lost yet; its
    queue-full line comes at the first drop and says, in the same line,
    that the newest payloads are the ones dropped here."""
    port = free_port()
    env = relay_env(f"http://127.0.0.1:{port}", "http/protobuf", OTEL_EXPORTER_OTLP_TIMEOUT="200")
    d = relay_factory(env, FAST + ["--relay-queue-items", "300"]).start()
    for i in range(100):
        send_mindie(d.socket_name, make_request(i))
    log = _wait_log(d, STACKED)
    stacked = [line for line in log.splitlines() if STACKED in line]
    assert len(stacked) == 1 and f"{STACKED}: 30 payloads" in stacked[0], log[-3000:]
    assert "at 300 payloads" in stacked[0]
    assert FULL not in log and "queue is full" not in log
    for i in range(100, 400):
        send_mindie(d.socket_name, make_request(i))
    log = _wait_log(d, FULL)
    full = [line for line in log.splitlines() if FULL in line]
    assert full and "NEWEST" in full[0] and "300 payloads" in full[0], log[-3000:]
    assert log.index(STACKED) < log.index(FULL)
    assert d.stop() == 0
    s = d.summary()
    assert s["received"] == 400 and s["dropped_full"] >= 100


def test_explicit_warn_threshold_at_or_over_the_bound_is_lowered(relay_factory):
    port = free_port()
    env = relay_env(f"http://127.0.0.1:{port}", "http/protobuf", OTEL_EXPORTER_OTLP_TIMEOUT="200")
    d = relay_factory(env, FAST + ["--relay-queue-items", "50", "--relay-warn-queued", "50"]).start()
    for i in range(10):
        send_mindie(d.socket_name, make_request(i))
    log = _wait_log(d, STACKED)
    assert f"{STACKED}: 5 payloads" in log and FULL not in log, log[-3000:]
    assert d.stop() == 0
