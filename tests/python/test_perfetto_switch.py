"""MSTRACE_PERFETTO: the Perfetto forwarder client of a traced process.

A Jaeger-only deployment (no `mstrace forward` running) must be quiet: at
most one INFO line per process about the absent forwarder, no warning, and
no "failed" counts for a sink nobody asked for (the spans it could not take
are counted as skipped). MSTRACE_PERFETTO=off removes the client; =on makes
an absent forwarder a warning with failed counts. Each case runs the real
extension in a child process; the Jaeger-only case exports to the real
Jaeger (tests/harness/jaeger.sh) and finds the spans there.
"""

import json
import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from jaeger_fixture import jaeger  # noqa: E402,F401  (the fixture)
from test_native_adapters import run_child  # noqa: E402

SPANS = 6

CHILD = """
info = n.init(service_name=os.environ.get("MST_TEST_SERVICE"),
              forward_socket=os.environ["MSTRACE_PERFETTO_SOCKET"])
def work():
    pass
work = n.Hook(work, name="switch.test.span")
for _ in range(%d):
    work()
n.flush(10000)
print(json.dumps({"info": info, "stats": n.stats()}))
""" % SPANS


def forwarder_lines(stderr):
    return [line for line in stderr.splitlines() if "forwarder" in line.lower()]


def test_jaeger_only_run_is_quiet_and_counts_no_failure(native, subprocess_env, jaeger):
    service = "mst-perfetto-switch-%s" % uuid.uuid4().hex[:8]
    p = run_child(subprocess_env, CHILD, {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": jaeger.traces_endpoint,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "MST_TEST_SERVICE": service,
    })
    out = json.loads(p.stdout)
    assert sorted(out["info"]["exporters"]) == ["otlp", "perfetto"], out["info"]
    lines = forwarder_lines(p.stderr)
    assert len(lines) == 1 and " INFO " in lines[0], p.stderr
    assert "MSTRACE_PERFETTO=off" in lines[0]
    assert "WARNING" not in p.stderr, p.stderr
    st = out["stats"]
    perfetto = st["exporters"]["perfetto"]
    assert perfetto["spans_failed"] == 0 and perfetto["batches_failed"] == 0, perfetto
    assert perfetto["spans_skipped"] == SPANS and perfetto["retries"] == 0, perfetto
    assert st["exporters"]["otlp"]["spans_exported"] == SPANS, st
    assert st["spans_failed"] == 0 and st["spans_exported"] == SPANS, st
    assert len(jaeger.wait_for_spans(service, SPANS)) == SPANS


def test_off_creates_no_perfetto_client(native, subprocess_env):
    p = run_child(subprocess_env, CHILD, {"MSTRACE_PERFETTO": "off"})
    out = json.loads(p.stdout)
    assert "perfetto" not in out["info"]["exporters"], out["info"]
    assert out["info"]["perfetto_socket"] is None
    assert "perfetto" not in out["stats"]["exporters"]
    assert forwarder_lines(p.stderr) == [], p.stderr


def test_on_makes_an_absent_forwarder_a_warning_and_a_failure(native, subprocess_env):
    p = run_child(subprocess_env, CHILD, {"MSTRACE_PERFETTO": "on"})
    out = json.loads(p.stdout)
    lines = forwarder_lines(p.stderr)
    assert len(lines) == 1 and " WARNING " in lines[0] and "not reachable" in lines[0], p.stderr
    perfetto = out["stats"]["exporters"]["perfetto"]
    assert perfetto["spans_failed"] == SPANS and perfetto["spans_skipped"] == 0, perfetto


def test_auto_still_delivers_to_a_running_forwarder(native, subprocess_env, daemon):
    env = dict(subprocess_env, MSTRACE_PERFETTO_SOCKET=daemon.socket_name)
    p = run_child(env, CHILD)
    perfetto = json.loads(p.stdout)["stats"]["exporters"]["perfetto"]
    assert perfetto["spans_exported"] == SPANS and perfetto["spans_skipped"] == 0, perfetto
    assert forwarder_lines(p.stderr) == [], p.stderr
    names = [e["name"] for e in daemon.events(SPANS) if e.get("ph") == "X"]
    assert names.count("switch.test.span") == SPANS


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_unknown_value_warns_once_and_means_auto(native, subprocess_env, value):
    p = run_child(subprocess_env, CHILD, {"MSTRACE_PERFETTO": value})
    assert p.stderr.count("MSTRACE_PERFETTO=%s" % value) == 1, p.stderr
    perfetto = json.loads(p.stdout)["stats"]["exporters"]["perfetto"]
    assert perfetto["spans_skipped"] == SPANS and perfetto["spans_failed"] == 0, perfetto
