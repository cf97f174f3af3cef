"""A step span links every request it carried, in the real Jaeger.

A child Python runs the real extension with the OTLP exporter: 300 requests,
each with a span of its own (a hooked call that registers its context), are
scheduled in one step (the `schedule` adapter, more than the 128 links a
span used to carry), and the executor's `model` span of that step follows.
Through Jaeger's query API (tests/harness/jaeger.sh via
tests/integration/jaeger_fixture.py), over each OTLP protocol: the step
span's references resolve to every request's span, one each; the model span
has the same references plus one to the step span; neither has a span of its own in the
requests' traces (a shared batch is no request's child), where each request's
story span (`vllm.request.prefill`) is.
"""

import json
import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from jaeger_fixture import jaeger  # noqa: E402,F401  (the fixture)
from test_native_adapters import run_child  # noqa: E402

REQUESTS = 300

CHILD = """
from dataclasses import dataclass, field
info = n.init(service_name=os.environ["MST_TEST_SERVICE"])
assert info["exporters"] == ["otlp"], info

@dataclass
class SO:
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    scheduled_new_reqs: list = field(default_factory=list)
    finished_req_ids: set = field(default_factory=set)
    preempted_req_ids: set = field(default_factory=set)

contexts = {}
def arrive(rid):
    t, s = n.current_context()
    n.register_request(rid, {"traceparent": "00-%%s-%%s-01" %% (t, s)})
    contexts[rid] = [t, s]
arrive = n.Hook(arrive, name="test.request")

class Engine:
    def schedule(self):
        return self.so
    def execute_model(self, scheduler_output):
        return None
Engine.schedule = n.Hook(Engine.schedule, name="vllm.scheduler.schedule", domain="Schedule", adapter="schedule")
Engine.execute_model = n.Hook(Engine.execute_model, name="vllm.model.execute", domain="Execute", adapter="model")

ids = ["cmpl-%%04d-0-0123abcd" %% i for i in range(%d)]
for r in ids:
    arrive(r)
e = Engine()
e.so = SO({r: 1 for r in ids}, len(ids))
e.execute_model(e.schedule())
n.end_stories()  # each request's story span (its prefill so far) now, not at exit
assert n.flush(20000)
st = n.stats()
print(json.dumps({"contexts": contexts, "ids": ids, "stats": st}))
""" % REQUESTS


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc", "http/json"])
def test_a_step_of_more_than_128_requests_links_each_of_them(native, subprocess_env, jaeger, protocol):
    service = "mst-step-links-%s-%s" % (protocol.replace("/", "-"), uuid.uuid4().hex[:8])
    endpoint = "http://" + jaeger.otlp_grpc_addr if protocol == "grpc" else jaeger.traces_endpoint
    p = run_child(subprocess_env, CHILD, {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": protocol,
        "MSTRACE_PERFETTO": "off",
        "MST_TEST_SERVICE": service,
    })
    out = json.loads(p.stdout)
    assert out["stats"]["exporters"]["otlp"]["spans_failed"] == 0, out["stats"]
    total = 2 * REQUESTS + 2  # requests, their story spans, the step, its model span
    spans = jaeger.wait_for_spans(service, total, timeout_s=60)
    assert len(spans) == total, "%d of %d spans in Jaeger" % (len(spans), total)
    names = sorted(s["operationName"] for s in spans)
    assert names == sorted(["test.request"] * REQUESTS + ["vllm.request.prefill"] * REQUESTS +
                           ["vllm.scheduler.schedule", "vllm.model.execute"])
    by_ref = {(s["traceID"], s["spanID"]): s for s in spans}
    (step,) = [s for s in spans if s["operationName"] == "vllm.scheduler.schedule"]
    (model,) = [s for s in spans if s["operationName"] == "vllm.model.execute"]

    refs = step.get("references") or []
    assert len(refs) == REQUESTS, len(refs)
    resolved = [by_ref.get((r["traceID"], r["spanID"])) for r in refs]
    assert all(s is not None and s["operationName"] == "test.request" for s in resolved)
    want = {(t, s) for t, s in out["contexts"].values()}
    assert {(r["traceID"], r["spanID"]) for r in refs} == want  # every request, each once
    assert all(r["refType"] == "FOLLOWS_FROM" for r in refs)
    assert jaeger.tags(step)["batch.request_count"] == REQUESTS

    mrefs = {(r["traceID"], r["spanID"]) for r in model.get("references") or []}
    assert mrefs == want | {(step["traceID"], step["spanID"])}
    assert jaeger.tags(model)["step.index"] == jaeger.tags(step)["step.index"]
    request_traces = {t for t, _ in want}
    assert step["traceID"] not in request_traces and model["traceID"] not in request_traces
