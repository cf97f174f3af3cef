"""`mstrace forward --flight-recorder ... --flight-otlp` against the real
Jaeger of the test session (jaeger_fixture.py): the flight recorder's
decision reaches the collector.

Owns: the kept (slow) request's trace and the traces of every engine step
that carried it (schedule with its child execute span, worker, output) are
in Jaeger, each step span once, so the request's links resolve; nothing of an
ordinary request beyond the steps it shared with the kept one (its own
vllm.request trace is not there); the daemon's counters say how many spans
went out. Spans are sent over the daemon's real socket as the tracer frames
them (flight_traffic.py).
"""

import os
import random
import re
import time

import pytest

from conftest import frame
from flight_traffic import engine_traffic

from jaeger_fixture import jaeger  # noqa: F401  (session fixture)


@pytest.fixture
def jaeger_or_skip(request):
    if os.environ.get("MST_SKIP_JAEGER") == "1":
        pytest.skip("MST_SKIP_JAEGER=1")
    return request.getfixturevalue("jaeger")


def _run(daemon_factory, tmp_path, j, traffic, *flags):
    """A flight recorder sending to Jaeger `j`, fed `traffic`, stopped."""
    d = daemon_factory(output=tmp_path / "run.pftrace")
    base = d.argv
    d.argv = lambda: base() + ["--flight-recorder", "64MiB", "--trigger", "e2e>200ms", "--flight-otlp",
                               *flags]
    d.env = dict(os.environ, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=j.traces_endpoint,
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    d.start()
    with d.connect() as s:
        s.sendall(b"".join(frame(p) for p in traffic.packets))
    assert d.stop() == 0, d.log()[-3000:]
    return d


def _wait_trace(j, trace_id):
    """The trace once Jaeger stored it (it stores asynchronously), or None."""
    for _ in range(300):
        t = j.trace(trace_id)
        if t:
            return t
        time.sleep(0.1)
    return None


def test_kept_request_and_its_steps_reach_jaeger(daemon_factory, tmp_path, jaeger_or_skip):
    j = jaeger_or_skip
    traffic = engine_traffic(12, slow=[5], slow_steps=40, tag=random.randrange(1, 200))
    slow = traffic.requests[5]
    d = _run(daemon_factory, tmp_path, j, traffic)
    log = d.log()
    steps = traffic.steps_of(slow.rid)
    assert len(steps) == 4 * 40
    line = [l for l in log.splitlines() if "flight recorder: dump " in l]
    assert len(line) == 1 and f"request {slow.rid}" in line[0]
    assert f"; {len(steps) + 1} spans to the collector" in line[0], line[0]
    # Handed to the relay (the final stats line), then all sent by its
    # flush at the stop (its summary comes after).
    stats = d.stats()
    assert stats["sent"] == len(steps) + 1 and stats["rejected"] == 0
    assert re.search(r"OTLP relay summary: received=%d rejected=0 forwarded=%d " %
                     (len(steps) + 1, len(steps) + 1), log), log[-2000:]
    trace = _wait_trace(j, slow.trace_id)
    assert trace, "the kept request's trace never reached Jaeger"
    assert [s["operationName"] for s in trace["spans"]] == ["vllm.request"]
    # Every step span that carried it, by span id, in Jaeger once.
    found, linked = {}, 0
    for tid in _trace_ids_of(traffic, steps):
        t = _wait_trace(j, tid)
        assert t, tid
        for s in t["spans"]:
            found[int(s["spanID"], 16)] = found.get(int(s["spanID"], 16), 0) + 1
            # Each schedule span links to the kept request, which Jaeger has.
            if s["operationName"] == "vllm.scheduler.schedule":
                linked += any(int(r["traceID"], 16) == int(slow.trace_id, 16) and
                              int(r["spanID"], 16) == int(slow.span_id, 16)
                              for r in s.get("references", []))
    # (Jaeger drops an id's leading zeros: ids compare as numbers.)
    assert set(found) == {int(x, 16) for x in steps} and set(found.values()) == {1}
    assert linked == 40
    # An ordinary request that shared steps: its own trace is not kept.
    ordinary = traffic.requests[0]
    assert ordinary.rid in next(ids for sid, (n, ids) in traffic.spans.items() if sid in steps)
    assert j.trace(ordinary.trace_id) is None


def _trace_ids_of(traffic, span_ids):
    """Trace ids of the given step spans, from the packets sent."""
    import json
    out = set()
    for p in traffic.packets:
        body = json.loads(p[len(b"MSPF_PERFETTO_V1\n"):])
        if body["span_id"] in span_ids:
            out.add(body["trace_id"])
    return out


def test_baseline_sends_ordinary_requests_too(daemon_factory, tmp_path, jaeger_or_skip):
    """--flight-otlp-baseline 1: every ordinary request goes to Jaeger with its
    steps as well (1 in 1), each span once; still one dump file."""
    j = jaeger_or_skip
    traffic = engine_traffic(10, slow=[4], slow_steps=30, tag=random.randrange(200, 400))
    d = _run(daemon_factory, tmp_path, j, traffic, "--flight-otlp-baseline", "1")
    log = d.log()
    assert log.count("flight recorder: dump ") == 1
    stats = d.stats()
    assert stats["baseline_requests"] == 9
    n = len(traffic.packets)  # every span once: the slow request's steps and the others'
    assert stats["sent"] == n and stats["baseline_spans"] == n - (4 * 30 + 1)
    assert re.search(r"OTLP relay summary: received=%d rejected=0 forwarded=%d " % (n, n), log)
    for r in traffic.requests:
        t = _wait_trace(j, r.trace_id)
        assert t and [s["operationName"] for s in t["spans"]] == ["vllm.request"], r.rid
