"""A vLLM-shaped span stream for the flight-recorder tests, framed as the
tracer's forwarder client sends it (docs/forwarder.md "Packets").

Owns: the shape of one engine's traffic — per request a `vllm.request`
span on the API server (request.id; its context is what the steps link
to); per engine step a `vllm.scheduler.schedule` span on EngineCore
(request.ids, step attributes, scheduler counters, one link per request),
its child `vllm.model.execute` (same trace), a `vllm.worker.execute_model`
span in the worker process (a trace of its own, request.ids) and a
`vllm.output.process` span on the API server (request.ids) — with the
ids of every span kept, so tests can say exactly which spans a dump must
hold. Times are synthetic (ns since the epoch), so the tests do not
depend on the machine's speed.
"""

import json
from dataclasses import dataclass, field

from conftest import MAGIC

API_PID, ENGINE_PID, WORKER_PID = 4100, 4200, 4300
T0 = 1_790_000_000_000_000_000
STEP_NS = 10_000_000  # one engine step every 10 ms


def _packet(name, trace_id, span_id, start, end, attrs, pid, tid, parent="", links=(), status=1,
            category="ms_service_profiler.hook.Tracing"):
    attributes = {"process.pid": pid, "thread.id": tid}
    attributes.update(attrs)
    return MAGIC + json.dumps({
        "name": name, "category": category, "trace_id": trace_id, "span_id": span_id,
        "parent_span_id": parent, "start_time_ns": start, "end_time_ns": end, "kind": 1,
        "status": status, "attributes": attributes,
        "resource_attributes": {"service.name": "vllm", "process.pid": pid,
                                "telemetry.sdk.name": "mstrace"},
        "links": [{"trace_id": t, "span_id": s} for t, s in links],
    }, separators=(",", ":")).encode()


@dataclass
class Request:
    rid: str
    arrive_step: int
    finish_step: int
    trace_id: str
    span_id: str
    error: bool = False


@dataclass
class Traffic:
    packets: list = field(default_factory=list)
    requests: list = field(default_factory=list)
    # span id -> (name, set of request ids it names)
    spans: dict = field(default_factory=dict)

    def steps_of(self, rid):
        """Span ids of every step span that carried `rid`."""
        return {sid for sid, (name, ids) in self.spans.items()
                if rid in ids and name != "vllm.request"}


def engine_traffic(n_requests, steps_per_request=10, slow=None, slow_steps=300, error=None,
                   ids_per_step=None, base_step=0, tag=0):
    """n_requests arriving one per step, each running steps_per_request
    steps (the `slow` indices run slow_steps); the `error` index's worker
    span has status ERROR. Returns a Traffic whose packets are in the order
    a real run delivers them: each step's spans, then each request's
    vllm.request span when it finishes."""
    slow = set(slow or ())
    error = set(error or ())
    t = Traffic()
    for i in range(n_requests):
        steps = slow_steps if i in slow else steps_per_request
        t.requests.append(Request(f"cmpl-{tag:02x}{i:06d}-0", base_step + i, base_step + i + steps,
                                  f"{0xA0000000 + tag * 0x100000 + i:032x}",
                                  f"{0xB0000000 + tag * 0x100000 + i:016x}", i in error))
    last = max(r.finish_step for r in t.requests)
    n = 0
    for step in range(base_step, last + 1):
        running = [r for r in t.requests if r.arrive_step <= step < r.finish_step]
        t0 = T0 + step * STEP_NS
        if running:
            ids = [r.rid for r in running]
            shown = ids if ids_per_step is None else (ids * ids_per_step)[:ids_per_step]
            n += 1
            trace = f"{0xC0000000 + tag * 0x1000000 + step:032x}"
            sched, execu = f"{0xD0000000 + tag * 0x1000000 + step:016x}", f"{0xE0000000 + tag * 0x1000000 + step:016x}"
            worker, output = f"{0xF0000000 + tag * 0x1000000 + step:016x}", f"{0x90000000 + tag * 0x1000000 + step:016x}"
            step_attrs = {"request.ids": shown, "step.index": step, "batch.request_count": len(ids),
                          "batch.scheduled_tokens": 16 * len(ids), "scheduler.running": len(ids),
                          "scheduler.waiting": 0, "kv_cache.usage": 0.25,
                          "step.phase": "d" * len(shown)}
            t.packets.append(_packet("vllm.scheduler.schedule", trace, sched, t0, t0 + 500_000,
                                     step_attrs, ENGINE_PID, ENGINE_PID,
                                     links=[(r.trace_id, r.span_id) for r in running]))
            t.packets.append(_packet("vllm.model.execute", trace, execu, t0 + 600_000, t0 + 8_000_000,
                                     {"request.ids": shown, "batch.scheduled_tokens": 16 * len(ids)},
                                     ENGINE_PID, ENGINE_PID, parent=sched))
            bad = any(r.error for r in running)
            t.packets.append(_packet("vllm.worker.execute_model", f"{0x70000000 + tag * 0x1000000 + step:032x}",
                                     worker, t0 + 700_000, t0 + 7_900_000,
                                     {"request.ids": shown}, WORKER_PID, WORKER_PID,
                                     status=2 if bad else 1))
            t.packets.append(_packet("vllm.output.process", f"{0x60000000 + tag * 0x1000000 + step:032x}",
                                     output, t0 + 8_100_000, t0 + 9_000_000,
                                     {"request.ids": shown, "batch.request_count": len(ids)},
                                     API_PID, API_PID + 1))
            for sid, name in ((sched, "vllm.scheduler.schedule"), (execu, "vllm.model.execute"),
                              (worker, "vllm.worker.execute_model"), (output, "vllm.output.process")):
                t.spans[sid] = (name, set(shown))
        for r in t.requests:
            if r.finish_step == step:
                start = T0 + r.arrive_step * STEP_NS - 1_000_000
                end = T0 + step * STEP_NS
                t.packets.append(_packet("vllm.request", r.trace_id, r.span_id, start, end,
                                         {"request.id": r.rid, "request.ids": [r.rid]},
                                         API_PID, API_PID, category="ms_service_profiler.hook.Request"))
                t.spans[r.span_id] = ("vllm.request", {r.rid})
    return t
