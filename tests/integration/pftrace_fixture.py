"""A deterministic step-record stream for the `.pftrace` encoding tests, and the script that wrote
tests/integration/data/steps_before_delta.pftrace (the file a forwarder wrote before request-id
lists were interned and sent as per-engine deltas; test_pftrace_encoding.py analyses it beside a
file the current forwarder writes from the same stream).

The stream: two engines (EngineCore pids 300 and 500), each with a rolling batch of up to 8
requests (two join and up to two finish per step, in vLLM's order: running requests first, new
ones after), one preemption and resume per engine, 36 steps each — so the lists cross several keyframes —
with the schedule span's step record, a model span and an output span naming the same requests,
and each request's `vllm.request` span on the API server (pid 100), linked from its steps.

Usage (regenerating the fixture needs the forwarder of the encoding it stands for):
    python tests/integration/pftrace_fixture.py MSTRACE_BINARY OUT.pftrace
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import Daemon, make_packet  # noqa: E402

T0 = 1_796_100_000_000_000_000
STEP_NS = 20_000_000
STEPS = 36
BATCH = 8


def _tid(n):
    return "%032x" % (0x7000 + n)


def _sid(n):
    return "%016x" % (0x9000 + n)


def engine_stream(pid, first_request, preempt_at):
    """(packets, requests) of one engine: its steps and the requests it served."""
    out, requests = [], {}
    running, nxt, span_no = [], first_request, pid * 100_000
    computed = {}          # request -> prompt tokens computed
    preempted = None
    for step in range(STEPS):
        t = T0 + step * STEP_NS + pid * 1000
        new, resumed, pre, finished = [], [], [], []
        if step == preempt_at and len(running) > 3:
            preempted = running.pop(2)
            pre.append(preempted)
        elif preempted is not None and step == preempt_at + 3:
            running.insert(1, preempted)          # back near the front (finished in the same step)
            resumed.append(preempted)
            computed[preempted] = 0
            preempted = None
        while len(running) > BATCH - 2:
            finished.append(running.pop(0))
        for _ in range(2):
            rid = f"cmpl-{nxt:05d}-{pid}"
            nxt += 1
            requests[rid] = (t - 3_000_000, t)
            running.append(rid)
            new.append(rid)
            computed[rid] = 0
        tokens, phase = [], ""
        for rid in running:
            if computed[rid] < 96:
                chunk = 64 if computed[rid] == 0 else 32
                computed[rid] += chunk
                tokens.append(str(chunk))
                phase += "p" if computed[rid] < 96 else "P"
            else:
                tokens.append("1")
                phase += "d"
        attrs = {"request.ids": list(running), "step.index": step, "step.tokens": tokens,
                 "step.phase": phase, "batch.request_count": len(running),
                 "batch.scheduled_tokens": sum(map(int, tokens)), "scheduler.waiting": step % 3,
                 "scheduler.running": len(running), "kv_cache.usage": 0.25 + (step % 8) / 32,
                 "scheduler.max_num_seqs": 256, "scheduler.max_num_batched_tokens": 8192,
                 "process.role": "engine_core", "thread.name": "EngineCore"}
        if new:
            attrs["step.new_ids"] = new
            attrs["step.queued_ns"] = [str(requests[r][0] + 1_000_000) for r in new]
            attrs["step.prefix_hit_tokens"] = ["0"] * len(new)
        for key, ids in (("step.resumed_ids", resumed), ("step.preempted_ids", pre),
                         ("step.finished_ids", finished)):
            if ids:
                attrs[key] = ids
        for rid in running:
            requests[rid] = (requests[rid][0], t + 17_000_000)
        link_req = running[-1]
        span_no += 1
        out.append(make_packet("vllm.scheduler.schedule", _tid(span_no), _sid(span_no), t, t + 400_000,
                               link=(_tid(int(link_req[5:10])), _sid(int(link_req[5:10]))),
                               attrs=attrs, pid=pid, tid=pid + 1,
                               category="ms_service_profiler.hook.Schedule"))
        span_no += 1
        out.append(make_packet("vllm.model.execute", _tid(span_no), _sid(span_no), t + 500_000,
                               t + 15_000_000, attrs={"request.ids": list(running),
                                                      "batch.request_count": len(running),
                                                      "process.role": "engine_core"},
                               pid=pid, tid=pid + 1))
        span_no += 1
        out.append(make_packet("vllm.scheduler.update_from_output", _tid(span_no), _sid(span_no),
                               t + 15_100_000, t + 15_600_000,
                               attrs={"process.role": "engine_core"}, pid=pid, tid=pid + 1))
        span_no += 1
        out.append(make_packet("vllm.output.process", _tid(span_no), _sid(span_no), t + 16_000_000,
                               t + 16_800_000, attrs={"request.ids": list(running),
                                                      "process.role": "api_server"},
                               pid=100, tid=101))
    return out, requests


def packets():
    """The whole stream, engines interleaved step by step, request spans last."""
    a, ra = engine_stream(300, 0, preempt_at=20)
    b, rb = engine_stream(500, 50_000, preempt_at=26)
    out = [p for pair in zip(a, b) for p in pair]
    for rid, (arrival, end) in sorted({**ra, **rb}.items()):
        n = int(rid[5:10])
        out.append(make_packet("vllm.request", _tid(n), _sid(n), arrival, end,
                               attrs={"request.id": rid, "process.role": "api_server"},
                               pid=100, tid=101))
    return out


def write_stream(binary, out, stream, log_prefix):
    """`stream` (packets) into a real forwarder writing `out` (its log in a
    temporary directory named after `log_prefix`)."""
    log = Path(tempfile.mkdtemp(prefix=log_prefix)) / "forward.log"
    d = Daemon(Path(binary), Path(out), log_level="info", stderr_path=log)
    d.start()
    try:
        d.send(*stream)
    finally:
        assert d.stop() == 0, d.log()
    return Path(out)


def write(binary, out):
    """The stream into a real forwarder writing `out`."""
    return write_stream(binary, out, packets(), "pftrace-fixture-")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("Usage")[1])
    write(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[2]}: {Path(sys.argv[2]).stat().st_size} bytes, {len(packets())} spans")
