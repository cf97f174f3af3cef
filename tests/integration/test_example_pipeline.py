"""End-to-end: the C example (examples/request_pipeline.c, linked against
libmstrace) traced through the forwarder client into a real `mstrace forward`
daemon on a unique abstract socket, then the Chrome Trace JSON checked.

Owns: the demo path of the README (scripts/demo.sh does the same by hand):
the four span names arrive, the scheduler's request links draw no flow
(request.ids joins the step to its requests), pids/tids are the example's
own, exactly one span carries status ERROR, and the client's counters say
every span was delivered. Also: with no daemon, the example still finishes
and counts the spans as failed. No wall-clock assertions.
"""

import collections
import os
import re
import subprocess

SPAN_NAMES = {"llm_request", "vllm.scheduler.schedule", "vllm.model.execute", "vllm.output.process"}


def run_example(example_bin, socket_name, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["MSTRACE_PERFETTO_SOCKET"] = socket_name
    proc = subprocess.run([str(example_bin), *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def counters(stdout, prefix):
    line = next(l for l in stdout.splitlines() if l.startswith(prefix))
    return {k: int(v) for k, v in re.findall(r"([a-z_]+)=(\d+)", line)}


def test_example_spans_reach_the_perfetto_file(daemon, example_bin):
    proc = run_example(example_bin, daemon.socket_name, "--requests", "6", "--steps", "40")
    client = counters(proc.stdout, "perfetto forwarder client:")
    tracer = counters(proc.stdout, "tracer:")
    assert client["failed"] == 0
    assert client["exported"] == tracer["started"] == tracer["exported"]
    daemon.wait_for_spans(client["exported"])
    assert daemon.stop() == 0

    events = daemon.events()  # strict json.loads: the file must be valid JSON
    spans = [e for e in events if e.get("ph") == "X"]
    assert len(spans) == client["exported"]
    names = collections.Counter(e["name"] for e in spans)
    assert set(names) == SPAN_NAMES
    assert names["llm_request"] == 6

    # Every span carries the example's own pid and a real thread id.
    pids = {e["pid"] for e in spans}
    assert len(pids) == 1 and pids != {daemon.proc.pid}
    assert all(isinstance(e["tid"], int) and e["tid"] > 0 for e in spans)
    # Two threads: the API server (llm_request) and the engine core.
    req_tids = {e["tid"] for e in spans if e["name"] == "llm_request"}
    engine_tids = {e["tid"] for e in spans if e["name"] != "llm_request"}
    assert len(req_tids) == 1 and len(engine_tids) == 1 and req_tids != engine_tids

    # Categories are the instrumentation scopes.
    cats = {e["name"]: e["cat"] for e in spans}
    assert cats["vllm.scheduler.schedule"] == "ms_service_profiler.hook.Schedule"
    assert cats["vllm.model.execute"] == "ms_service_profiler.hook.Execute"
    assert cats["vllm.output.process"] == "ms_service_profiler.hook.Request"

    # Scheduler attributes, and each request id scheduled at least once.
    scheds = [e for e in spans if e["name"] == "vllm.scheduler.schedule"]
    for s in scheds:
        assert s["args"]["batch.request_count"] == len(s["args"]["request.ids"])
        assert s["args"]["batch.scheduled_tokens"] >= s["args"]["batch.request_count"]
    scheduled = {rid for s in scheds for rid in s["args"]["request.ids"]}
    assert scheduled == {e["args"]["request.id"] for e in spans if e["name"] == "llm_request"}

    # The scheduler's links are request links (attribute request.id, on a
    # span with request.ids): no flow for them, the join is request.ids
    # (checked above). The hook packet marks them, so none is drawn.
    assert not [e for e in events if e.get("ph") in ("s", "f")]
    by_span_id = {e["args"]["span_id"]: e for e in spans}

    # Exactly one error span: the aborted request.
    errors = [e for e in spans if e["args"]["span.status"] == 2]
    assert len(errors) == 1
    assert errors[0]["name"] == "llm_request"
    assert errors[0]["args"]["error.type"] == "ClientDisconnected"

    # Execute/output spans are children of their step's scheduler span.
    for e in spans:
        if e["name"] in ("vllm.model.execute", "vllm.output.process"):
            parent = by_span_id[e["args"]["parent_span_id"]]
            assert parent["name"] == "vllm.scheduler.schedule"
            assert parent["args"]["trace_id"] == e["args"]["trace_id"]

    # Resource attributes travel with every span.
    assert all(e["args"].get("service.name") for e in spans)


def test_example_without_forwarder_finishes_and_counts_failed(example_bin):
    from conftest import unique_socket_name
    proc = run_example(example_bin, unique_socket_name(), "--requests", "3", "--steps", "10")
    client = counters(proc.stdout, "perfetto forwarder client:")
    tracer = counters(proc.stdout, "tracer:")
    assert client["exported"] == 0
    assert client["failed"] == tracer["started"] > 0
    assert "not reachable" in proc.stderr
    # Logged once per episode, not per span or batch.
    assert proc.stderr.count("not reachable") == 1


def test_example_rejects_bad_flags(example_bin):
    proc = subprocess.run([str(example_bin), "--requests", "0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "must be" in proc.stderr
