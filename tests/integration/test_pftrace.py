"""Native Perfetto output of `mstrace forward` (`.pftrace`), decoded with
Perfetto's official protos (PyPI `perfetto`: perfetto_trace_pb2), against
the real daemon over the real socket.

Owns: every packet parses and interned ids resolve; flows have both ends
whichever span arrives first; tracks nest as described (threads under
processes, request tracks under "Requests" with their phases inside the
request slice, counters under their process); counters carry the values
sent; a SIGKILL-cut file parses up to the cut; the seed scenario and a
mixed span stream say the same thing in JSON and proto; --format and the
extension rule.
"""

import json
import signal
import time

import pytest

from conftest import MAGIC, make_packet, numbered_packet
from pftrace_model import iter_packets, normalized, read_chrome_json, read_pftrace

REQ = ("1" * 32, "2" * 16)
SCHED = ("3" * 32, "4" * 16)
MODEL = ("3" * 32, "5" * 16)
OUTPUT = ("6" * 32, "7" * 16)


def seed_scenario():
    """The seed's story: a schedule step (its own trace) links to the request
    whose span arrives last; model runs under the schedule; an output."""
    sched_attrs = {"request.ids": ["req-A", "req-B"], "batch.request_count": 2,
                   "batch.scheduled_tokens": 37, "scheduler.waiting": 3,
                   "scheduler.running": 2, "kv_cache.usage": 0.4375,
                   "process.role": "engine_core", "thread.name": "EngineCore"}
    sched2_attrs = dict(sched_attrs, **{"request.ids": ["req-A"], "batch.request_count": 1,
                                        "batch.scheduled_tokens": 1, "kv_cache.usage": 0.5})
    return [
        make_packet("vllm.scheduler.schedule", SCHED[0], SCHED[1], 2_000_000, 3_000_000,
                    link=REQ, attrs=sched_attrs, pid=300, tid=301),
        make_packet("vllm.executor.execute_model", MODEL[0], MODEL[1], 3_000_000, 5_000_000,
                    link=REQ, attrs={"request.ids": ["req-A", "req-B"], "process.role": "engine_core"},
                    pid=300, tid=301),
        make_packet("vllm.scheduler.schedule", SCHED[0], "8" * 16, 5_500_000, 5_600_000,
                    link=REQ, attrs=sched2_attrs, pid=300, tid=301),
        make_packet("vllm.output_processor.process_outputs", OUTPUT[0], OUTPUT[1], 6_000_000,
                    6_500_000, link=REQ, attrs={"request.ids": ["req-A"], "process.role": "api_server"},
                    pid=100, tid=101),
        make_packet("vllm.request", REQ[0], REQ[1], 1_000_000, 7_000_000,
                    attrs={"request.id": "req-A", "process.role": "api_server"}, pid=100, tid=101),
    ]


def run(daemon_factory, tmp_path, name, packets, fmt=None):
    d = daemon_factory(output=tmp_path / name)
    if fmt:
        base = d.argv
        d.argv = lambda: base() + ["--format", fmt]
    d.start()
    d.send(*packets)
    wait_received(d, len(packets))
    assert d.stop() == 0
    return d


def wait_received(d, n, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [l for l in d.log().splitlines() if "received=" in l]
        if lines and int(lines[-1].split("received=")[1].split()[0]) >= n:
            return
        time.sleep(0.05)
    # the stats line is periodic; fall back to stopping (SIGTERM drains)


def test_seed_scenario_proto(daemon_factory, tmp_path):
    d = run(daemon_factory, tmp_path, "seed.pftrace", seed_scenario())
    m = read_pftrace(d.output)
    names = sorted(s["name"] for s in m.slices)
    assert names == sorted(["vllm.scheduler.schedule", "vllm.executor.execute_model",
                            "vllm.scheduler.schedule", "vllm.output_processor.process_outputs",
                            "vllm.request"])
    sched = [s for s in m.slices if s["args"]["span_id"] == SCHED[1]][0]
    assert (sched["pid"], sched["tid"], sched["ts"], sched["dur"]) == (300, 301, 2_000_000, 1_000_000)
    assert sched["cat"] == "ms_service_profiler.hook.Tracing"
    assert sched["args"]["request.ids"] == ["req-A", "req-B"]
    assert sched["args"]["trace_id"] == SCHED[0]
    assert sched["args"]["service.name"] == "vllm"
    assert "process.pid" not in sched["args"]
    # every link has both ends, including the request span that came last
    assert not m.dangling_flows
    assert m.links == {(REQ[1], SCHED[1]), (REQ[1], MODEL[1]), (REQ[1], "8" * 16),
                       (REQ[1], OUTPUT[1])}
    assert m.processes[300] == "engine_core (vllm)"
    assert m.processes[100] == "api_server (vllm)"
    assert m.threads[(300, 301)] == "EngineCore"
    # request tracks: req-A from its request span (on its own thread, named
    # by its id; its phases on its track under Requests), req-B from steps only
    req = [s for s in m.slices if s["name"] == "vllm.request"][0]
    assert req["pid"] == 100 and req["tid"] >= 1 << 30 and m.threads[(100, req["tid"])] == "req-A"
    a = sorted(r for r in m.requests if r[0] == "req-A")
    assert ("req-A", "request", 1_000_000, 7_000_000, "Requests", 0) in a
    assert ("req-A", "queued", 1_000_000, 2_000_000, "Requests", 1) in a
    assert ("req-A", "prefill", 2_000_000, 5_500_000, "Requests", 1) in a
    assert ("req-A", "decode", 5_500_000, 7_000_000, "Requests", 1) in a
    b = sorted(r for r in m.requests if r[0] == "req-B")
    assert ("req-B", "request", 2_000_000, 5_000_000, "Requests", 0) in b
    assert ("req-B", "prefill", 2_000_000, 5_000_000, "Requests", 1) in b
    # counters carry the values sent, on the engine's process
    c = {(pid, n, ts): v for pid, n, ts, v in m.counters}
    assert c[(300, "batch size (requests)", 3_000_000)] == 2
    assert c[(300, "scheduled tokens (tokens)", 3_000_000)] == 37
    assert c[(300, "waiting (requests)", 3_000_000)] == 3
    assert c[(300, "running (requests)", 3_000_000)] == 2
    assert c[(300, "KV cache usage (%)", 3_000_000)] == 43.75  # kv_cache.usage 0.4375
    assert c[(300, "KV cache usage (%)", 5_600_000)] == 50
    own = [x for x in m.counters if x[1].startswith("forwarder.")]
    assert own and own[-1][0] == d.proc.pid
    last = {n: v for _, n, _, v in own}
    assert last["forwarder.spans_received"] == 5
    assert last["forwarder.spans_written"] == 5
    assert last["forwarder.spans_dropped"] == 0


def with_links(packet, links, request_links=0):
    """The packet with these links, and the request_links mark when given."""
    body = json.loads(packet[len(MAGIC):])
    body["links"] = [{"trace_id": t, "span_id": s} for t, s in links]
    if request_links:
        body["request_links"] = request_links
    return MAGIC + json.dumps(body, separators=(",", ":")).encode()


@pytest.mark.parametrize("ext", [".pftrace", ".json"])
def test_request_links_draw_no_flow(daemon_factory, tmp_path, ext):
    """A step and its model span link each request they carried, marked as
    request links (as the hook marks them): no flow for those; the model
    span's link to its step, first, stays a flow; so do unmarked links."""
    req_b = ("9" * 32, "a" * 16)
    ids = {"request.ids": ["req-A", "req-B"], "process.role": "engine_core", "step.index": 1}
    packets = [
        make_packet("vllm.request", REQ[0], REQ[1], 1_000_000, 9_000_000,
                    attrs={"request.id": "req-A", "process.role": "api_server"}, pid=100, tid=101),
        make_packet("vllm.request", req_b[0], req_b[1], 1_000_000, 9_000_000,
                    attrs={"request.id": "req-B", "process.role": "api_server"}, pid=100, tid=101),
        with_links(make_packet("vllm.scheduler.schedule", SCHED[0], SCHED[1], 2_000_000, 3_000_000,
                               attrs=ids, pid=300, tid=301), [REQ, req_b], request_links=2),
        with_links(make_packet("vllm.worker.execute_model", MODEL[0], MODEL[1], 3_000_000, 5_000_000,
                               attrs=ids, pid=400, tid=401), [SCHED, REQ, req_b], request_links=2),
        # a user's span with the same links unmarked: every one drawn
        with_links(make_packet("user.batch", OUTPUT[0], OUTPUT[1], 6_000_000, 6_500_000,
                               attrs={"request.ids": ["req-A", "req-B"]}, pid=500, tid=501),
                   [REQ, req_b]),
    ]
    d = run(daemon_factory, tmp_path, "links" + ext, packets)
    m = read_pftrace(d.output) if ext == ".pftrace" else read_chrome_json(d.output)
    assert not m.dangling_flows
    assert m.links == {(SCHED[1], MODEL[1]), (REQ[1], OUTPUT[1]), (req_b[1], OUTPUT[1])}


def test_same_stream_says_the_same_in_json_and_proto(daemon_factory, tmp_path):
    packets = seed_scenario()
    for n in range(200):   # plus a mixed stream: odd attribute types, links both ways
        link = ("5" * 32, f"000a{n - 1:012x}") if n % 3 == 0 and n else None
        packets.append(make_packet(
            "test.span" if n % 2 else "tést \"quoted\"", "5" * 32, f"000a{n:012x}",
            10_000_000 + n * 1500, 10_000_700 + n * 1500, link=link,
            attrs={"f": 1.5 + n, "b": n % 2 == 0, "s": f"v\n{n}", "l": [n, "x"],
                   "o": {"k": n}, "nul": None, "big": -(2 ** 62)},
            pid=400 + n % 3, tid=n % 5))
    j = run(daemon_factory, tmp_path, "same.json", packets)
    p = run(daemon_factory, tmp_path, "same.pftrace", packets)
    mj, mp = normalized(read_chrome_json(j.output)), normalized(read_pftrace(p.output))
    for key in mj:
        assert mj[key] == mp[key], key
    assert len(mp["slices"]) == len(packets)


def test_two_outputs_from_one_run_say_the_same(daemon_factory, tmp_path):
    d = daemon_factory(output=tmp_path / "both.json")
    base = d.argv
    d.argv = lambda: base() + ["--perfetto-output", str(tmp_path / "both.pftrace")]
    d.start()
    d.send(*seed_scenario())
    wait_received(d, 5)
    assert d.stop() == 0
    mj = normalized(read_chrome_json(tmp_path / "both.json"))
    mp = normalized(read_pftrace(tmp_path / "both.pftrace"))
    assert len(mj["slices"]) == 5
    for key in mj:
        assert mj[key] == mp[key], key


def test_overlapping_spans_of_one_thread_keep_their_durations(daemon_factory, tmp_path):
    """Async code: request spans on one thread overlap without nesting; each
    keeps its own start and duration (lanes under the thread track), as the
    JSON's X events do, and properly nested ones stay on the thread track."""
    packets = []
    for i in range(20):   # request i spans [i, i + 5] ms: each overlaps the next four
        packets.append(make_packet("vllm.request", "7" * 32, f"{i + 1:016x}", (i + 1) * 1_000_000,
                                   (i + 6) * 1_000_000, attrs={"request.id": f"q{i}"}, pid=50, tid=51))
    packets.append(make_packet("inner", "7" * 32, f"{99:016x}", 1_100_000, 1_200_000, pid=50, tid=51))
    j = run(daemon_factory, tmp_path, "lanes.json", packets)
    p = run(daemon_factory, tmp_path, "lanes.pftrace", packets)
    mp = read_pftrace(p.output)
    assert normalized(mp)["slices"] == normalized(read_chrome_json(j.output))["slices"]
    req = sorted((s["ts"], s["dur"]) for s in mp.slices if s["name"] == "vllm.request")
    assert req == [((i + 1) * 1_000_000, 5_000_000) for i in range(20)]


def test_format_flag_overrides_the_extension(daemon_factory, tmp_path):
    d = run(daemon_factory, tmp_path, "forced.json", seed_scenario(), fmt="proto")
    data = d.output.read_bytes()
    assert data[:1] == b"\x0a"
    assert len(read_pftrace(d.output).slices) == 5
    d = run(daemon_factory, tmp_path, "forced.pftrace", seed_scenario(), fmt="json")
    assert len(read_chrome_json(d.output).slices) == 5


def test_sigkill_cut_file_parses_up_to_the_cut(daemon_factory, tmp_path):
    d = daemon_factory(output=tmp_path / "killed.pftrace").start()
    n = 3000
    d.send(*(numbered_packet(i) for i in range(n)))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and d.output.stat().st_size < 200_000:
        time.sleep(0.02)
    d.stop(signal.SIGKILL)
    data = d.output.read_bytes()
    whole = list(iter_packets(data))
    assert len(whole) > 10
    # cut the file at every 7th byte of its last 300 and in the middle: every
    # prefix parses up to its last whole packet, names resolve
    for cut in list(range(len(data) - 300, len(data), 7)) + [len(data) // 2]:
        part = tmp_path / "cut.pftrace"
        part.write_bytes(data[:cut])
        m = read_pftrace(part, strict=False)
        assert all(s["name"] == "test.span" for s in m.slices)
    m = read_pftrace(d.output, strict=False)
    assert len(m.slices) > 0


def test_interning_restarts_stay_resolvable(daemon_factory, tmp_path):
    # more distinct names than the writer's intern table holds: it restarts
    # the sequence state, and every name still resolves
    packets = [make_packet(f"name-{i}", "5" * 32, f"000b{i:012x}", 1_000_000 + i, 1_000_500 + i,
                           attrs={f"key-{i}": i}) for i in range(9000)]
    d = run(daemon_factory, tmp_path, "many.pftrace", packets)
    m = read_pftrace(d.output)
    assert len(m.slices) == 9000
    assert {s["name"] for s in m.slices} == {f"name-{i}" for i in range(9000)}
    assert all(s["args"][f"key-{s['name'][5:]}"] == int(s["name"][5:]) for s in m.slices)


def test_bad_extension_is_refused(daemon_factory, tmp_path, mstrace_bin):
    import subprocess
    r = subprocess.run([str(mstrace_bin), "forward", "--perfetto-output", str(tmp_path / "x.txt")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and ".pftrace" in r.stderr
    r = subprocess.run([str(mstrace_bin), "forward", "--perfetto-output", str(tmp_path / "x.json"),
                        "--format", "xml"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--format" in r.stderr
