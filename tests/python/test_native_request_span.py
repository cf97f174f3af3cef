"""Tests of the auto-trace request span of `mstrace._native` (context.c,
reqtable.c): with MS_PROFILER_AUTO_TRACE=1 the `request` adapter starts a real
`vllm.request` span named by the generated context and writes that context
into the request object's `trace_headers`, so EngineCore (a forked child here)
registers the same context, its spans link to the request span, and the
Perfetto forwarder draws flow arrows.

Owns: injection rules (None -> new dict, dict without traceparent -> copy plus
traceparent, client header never replaced, read-only/missing attribute
skipped), span id == injected parent-id, start at arrival_time, end at finish
(OK) or eviction (`mstrace.evicted`), the s/f flow pair from the request span to
a schedule span in another process (real `mstrace forward` daemon), the
request_context adapter never auto-generating, MS_PROFILER_AUTO_TRACE unset and
MS_PROFILER_SAMPLE_RATE. Every case runs a child Python (the tracer and env
rules are process-global).
"""

import json
import subprocess
import sys
import textwrap

T1, S1 = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"

PRELUDE = """
import json, os, sys, time, logging
from dataclasses import dataclass, field
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from mstrace import _native as n

@dataclass
class Req:                      # vLLM's EngineCoreRequest, the fields read
    request_id: str
    trace_headers: object = None
    arrival_time: float = 0.0
    external_req_id: object = None

class NoHeaders:                # no trace_headers attribute at all
    def __init__(self, rid): self.request_id = rid

class ReadOnly:                 # trace_headers is a read-only property
    def __init__(self, rid): self.request_id = rid
    @property
    def trace_headers(self): return None

@dataclass
class SO:
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int

@dataclass
class Out:
    request_id: str
    finish_reason: object = None
    trace_headers: object = None

class Front:                    # the API server: OutputProcessor
    def add_request(self, request, prompt=None): pass
    def process_outputs(self, outputs): return len(outputs)

class Core:                     # EngineCore + Scheduler
    def add_request(self, request): pass
    def schedule(self): return self.so

Front.add_request = n.Hook(Front.add_request, name="vllm.request.add", domain="Request", adapter="request")
Front.process_outputs = n.Hook(Front.process_outputs, name="vllm.output.process", domain="Request",
                               adapter="output")
Core.add_request = n.Hook(Core.add_request, name="ctx", domain="Request", adapter="request_context")
Core.schedule = n.Hook(Core.schedule, name="vllm.scheduler.schedule", domain="Schedule", adapter="schedule")
"""


def run_child(subprocess_env, code, env):
    e = dict(subprocess_env)
    e.pop("MS_PROFILER_AUTO_TRACE", None)
    e.pop("MS_PROFILER_SAMPLE_RATE", None)
    e.update(env)
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], env=e,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


PIPELINE = """
info = n.init(forward_socket=%(sock)r, otlp=False)
assert info["exporters"] == ["perfetto"] and info["auto_trace"], info
f = Front()
arrival = time.time() - 2.0
a = Req("cmpl-a-0123abcd", None, arrival, "cmpl-a")
shared = {"x-other": "1"}
b = Req("cmpl-b-0123abcd", shared, time.time())
c = Req("cmpl-c-0123abcd", {"traceparent": "00-%(t1)s-%(s1)s-01"})
d = Req("cmpl-d-0123abcd", {"traceparent": "garbage"})
for r in (a, b, c, d, NoHeaders("cmpl-e-0123abcd"), ReadOnly("cmpl-f-0123abcd")):
    f.add_request(r, "prompt")
st0 = n.stats()
lookup_e = n.lookup_request("cmpl-e-0123abcd")

pid = os.fork()
if pid == 0:                    # EngineCore: gets the same requests (their trace_headers)
    core = Core()
    for r in (a, b):
        core.add_request(Req(r.request_id, dict(r.trace_headers)))
    core.so = SO({a.request_id: 5, b.request_id: 3}, 8)
    core.schedule()
    n.flush(5000)
    os._exit(0 if n.stats()["exporters"]["perfetto"]["spans_exported"] == 1 else 3)
_, status = os.waitpid(pid, 0)
assert os.WEXITSTATUS(status) == 0, status

f.process_outputs([Out(a.request_id, "stop", a.trace_headers), Out(b.request_id, None, b.trace_headers)])
st1 = n.stats()
for i in range(n.REQUEST_TABLE_SIZE):   # pushes b (still running) out of the table
    n.register_request("filler-%%d" %% i, {"traceparent": "00-%(t1)s-%(s1)s-01"})
st2 = n.stats()
assert n.flush(5000)
print(json.dumps({"pid": os.getpid(), "child": pid, "arrival": arrival,
                  "headers": [r.trace_headers for r in (a, b, c, d)], "shared": shared,
                  "lookup_e": lookup_e,
                  "st0": st0, "st1": st1, "st2": st2}))
"""


def test_auto_trace_request_span_injection_and_flows(native, subprocess_env, daemon):
    out = run_child(subprocess_env, PIPELINE % {"sock": daemon.socket_name, "t1": T1, "s1": S1},
                    {"MS_PROFILER_AUTO_TRACE": "1"})
    ha, hb, hc, hd = out["headers"]
    # a: None -> a new dict with only our traceparent (sampled)
    assert set(ha) == {"traceparent"}
    va, ta, sa, fa = ha["traceparent"].split("-")
    assert va == "00" and fa == "01" and len(ta) == 32 and len(sa) == 16
    # b: a dict without traceparent -> a copy with it added; the shared dict is untouched
    assert hb["x-other"] == "1" and set(hb) == {"x-other", "traceparent"}
    assert out["shared"] == {"x-other": "1"}
    _, tb, sb, _ = hb["traceparent"].split("-")
    # c, d: a client's header (valid or not) is never replaced
    assert hc == {"traceparent": "00-%s-%s-01" % (T1, S1)}
    assert hd == {"traceparent": "garbage"}
    # no attribute / read-only attribute: skipped silently, context still generated
    assert out["lookup_e"] is not None
    st0, st1, st2 = out["st0"], out["st1"], out["st2"]
    assert st0["hook_failures"] == 0
    assert st0["request_spans_started"] == 2 and st0["request_spans_open"] == 2
    assert st1["request_spans_finished"] == 1 and st1["request_spans_open"] == 1
    assert st2["request_spans_evicted"] == 1 and st2["request_spans_open"] == 0

    events = daemon.events(4)
    xs = [e for e in events if e.get("ph") == "X"]
    reqs = {e["args"]["request.id"]: e for e in xs if e["name"] == "vllm.request"}
    assert sorted(reqs) == ["cmpl-a-0123abcd", "cmpl-b-0123abcd"], [e["name"] for e in xs]
    ra, rb = reqs["cmpl-a-0123abcd"], reqs["cmpl-b-0123abcd"]
    # the span id IS the injected parent-id
    assert (ra["args"]["trace_id"], ra["args"]["span_id"]) == (ta, sa)
    assert (rb["args"]["trace_id"], rb["args"]["span_id"]) == (tb, sb)
    assert ra["cat"] == "ms_service_profiler.hook.Request" and ra["pid"] == out["pid"]
    assert ra["args"]["request.external_id"] == "cmpl-a"
    assert "request.external_id" not in rb["args"]
    # a: started at its arrival_time (2 s before registration), ended at finish
    assert abs(ra["ts"] - out["arrival"] * 1e6) < 1000
    assert ra["dur"] >= 2.0e6
    assert "mstrace.evicted" not in ra["args"]
    # b: ended by eviction from the request table
    assert rb["args"]["mstrace.evicted"] is True
    # EngineCore (the forked child) registered the injected contexts: its schedule
    # span links to both request spans (request links, marked in the hook packet),
    # which the forwarder draws no flow for: request.ids joins them instead
    sched = [e for e in xs if e["name"] == "vllm.scheduler.schedule"]
    assert len(sched) == 1 and sched[0]["pid"] == out["child"]
    assert sorted(sched[0]["args"]["request.ids"]) == ["cmpl-a-0123abcd", "cmpl-b-0123abcd"]
    sid = sched[0]["args"]["span_id"]
    flows = [e for e in events if e.get("cat") == "Tracing.Flow"]
    for t, s in ((ta, sa), (tb, sb)):
        assert not [e for e in flows if e["args"]["link"] == "%s:%s:%s" % (t, s, sid)], flows
    # the output span (API server) links to both too
    outp = [e for e in xs if e["name"] == "vllm.output.process"]
    assert len(outp) == 1 and outp[0]["pid"] == out["pid"]


RULES = """
n.init(null_exporter=True)
f, core = Front(), Core()
reqs = [Req("cmpl-%d-0123abcd" % i) for i in range(9)]
for r in reqs:
    f.add_request(r)
plain = Req("engine-only")
core.add_request(plain)          # request_context never auto-generates
print(json.dumps({"headers": [r.trace_headers for r in reqs],
                  "lookup": [n.lookup_request(r.request_id) for r in reqs],
                  "engine_only": n.lookup_request("engine-only"), "plain": plain.trace_headers,
                  "stats": n.stats()}))
"""


def test_auto_trace_unset_injects_nothing(native, subprocess_env):
    out = run_child(subprocess_env, RULES, {})
    assert out["headers"] == [None] * 9 and out["lookup"] == [None] * 9
    assert out["stats"]["request_spans_started"] == 0 and out["stats"]["auto_contexts"] == 0
    assert out["engine_only"] is None


def test_sample_rate_only_sampled_requests_get_headers(native, subprocess_env):
    out = run_child(subprocess_env, RULES, {"MS_PROFILER_AUTO_TRACE": "1", "MS_PROFILER_SAMPLE_RATE": "3"})
    got = [h is not None for h in out["headers"]]
    assert got == [True, False, False] * 3
    for h, l in zip(out["headers"], out["lookup"]):
        assert l is not None                     # every request has a context here
        if h is not None:
            assert h["traceparent"] == "00-%s-%s-01" % (l[0], l[1]) and l[2] is True
        else:
            assert l[2] is False                 # sampled out: known, unsampled
    st = out["stats"]
    assert st["request_spans_started"] == 3 and st["request_spans_open"] == 3
    assert st["auto_contexts"] == 9 and st["auto_contexts_unsampled"] == 6
    assert out["engine_only"] is None and out["plain"] is None
