"""Two EngineCores (data parallelism) on a real vLLM server (CPU): each engine's steps are its own.

Owns the check that, with `vllm serve --data-parallel-size 2` traced into the real forwarder (Chrome
Trace JSON), whose two EngineCore processes step at the same time:
  * both engines ran steps, and every request was scheduled by exactly one of them;
  * every worker forward and every output processing that the forwarder joined to an engine step
    (a flow from the step's slice) is joined to a step of the engine whose scheduling steps named
    its requests — a forward naming none (an idle engine's dummy batch) to its worker process's
    engine's — never to the other engine's step that overlaps it in time
    (docs/architecture.md "One step on the timeline");
  * each engine's step slices are on its own `engine steps` track, one per schedule span;
  * `mstrace analyze` of the file reports both engines with their busy steps and every request.
Skipped, with the reason, without a vLLM interpreter, the extension or the `mstrace` binary.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllm_serve  # noqa: E402

REQUESTS = 16   # concurrent; the API servers spread them over the two engines
PROMPT = 48     # tokens per prompt
OUTPUT = 24     # tokens per answer (ignore_eos)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    python, binary = vllm_serve.traced_setup()
    tmp = tmp_path_factory.mktemp("dp2")
    out_json = tmp / "trace.json"
    with vllm_serve.Forwarder(binary, ["--perfetto-output", out_json], tmp / "forward.log",
                              prefix="mst_dp2") as fwd:
        env = vllm_serve.traced_env(fwd.sock)
        with vllm_serve.Server(python, env, ["--max-model-len", 256, "--max-num-seqs", 4,
                                             "--data-parallel-size", 2], tmp / "vllm.log") as server:
            answers = server.complete_concurrently(
                [[(13 * i + 5 * k) % 1900 + 50 for k in range(PROMPT)] for i in range(REQUESTS)], OUTPUT)
    vllm_serve.keep_files(tmp, ("trace.json", "vllm.log", "forward.log"))
    assert len(answers) == REQUESTS, vllm_serve.read_log(tmp / "vllm.log")
    events = json.loads(out_json.read_text())
    return {"answers": answers, "events": events, "json": out_json, "binary": binary}


def _spans(run, name):
    return [e for e in run["events"] if e.get("ph") == "X" and e["name"] == name]


def _engine_of(run):
    """request id -> the pids of the engines whose scheduling steps named it."""
    if "engine_of" not in run:
        of = {}
        for e in _spans(run, "vllm.scheduler.schedule"):
            for rid in e["args"].get("request.ids", []):
                of.setdefault(rid, set()).add(e["pid"])
        run["engine_of"] = of
    return run["engine_of"]


def _engines(run):
    return sorted({e["pid"] for e in _spans(run, "vllm.scheduler.schedule")})


def _step_marks(run, name_is_outputs):
    """The `B` events of the step tracks: the steps' slices (`step N`) or their `outputs` markers."""
    return [e for e in run["events"] if e.get("ph") == "B" and e.get("cat") == "mstrace.step"
            and (e["name"] == "outputs") == name_is_outputs]


def test_both_engines_ran_steps_and_every_request_was_one_engines(run):
    engines = _engines(run)
    assert len(engines) == 2, engines
    busy = {pid: 0 for pid in engines}
    for e in _spans(run, "vllm.scheduler.schedule"):
        if e["args"].get("batch.request_count", 0) > 0:
            busy[e["pid"]] += 1
    assert all(busy.values()), busy
    of = _engine_of(run)
    # vLLM's internal ids are the external id, then "-<n>-<suffix>"
    for a in run["answers"].values():
        named = [rid for rid in of if rid.startswith(a["id"] + "-")]
        assert len(named) == 1, (a["id"], named)
        assert len(of[named[0]]) == 1, (named[0], of[named[0]])  # a request never moves between engines


def test_the_two_engines_steps_overlap_in_time(run):
    """What makes the joins below a test of the engine rule: by time alone, a span inside one
    engine's step is often inside the other's too."""
    spans = {}
    for e in run["events"]:
        if e.get("cat") == "mstrace.step" and e["name"] != "outputs" and e.get("ph") in ("B", "E"):
            spans.setdefault((e["pid"], e["name"]), {})[e["ph"]] = e["ts"]
    a, b = ([(v["B"], v["E"]) for (pid, _), v in spans.items() if pid == p] for p in _engines(run))
    assert any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


def test_each_engine_has_one_step_slice_per_schedule_span_on_its_own_track(run):
    procs_threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in run["events"]
                     if e.get("ph") == "M" and e["name"] == "thread_name"}
    for pid in _engines(run):
        sched = sorted(e["args"]["step.index"] for e in _spans(run, "vllm.scheduler.schedule") if e["pid"] == pid)
        slices = [e for e in _step_marks(run, False) if e["pid"] == pid]
        assert sorted(e["args"]["step.index"] for e in slices) == sched
        assert {procs_threads[(e["pid"], e["tid"])] for e in slices} == {"engine steps"}


def test_every_joined_forward_is_in_a_step_of_its_own_engine(run):
    """A forward naming requests joins the step that scheduled them; one naming none (an idle
    engine's dummy batch: with data parallelism an engine with nothing to do still steps while
    another one does) the step of its worker process's engine."""
    of = _engine_of(run)
    forwards = _spans(run, "vllm.worker.execute_model")
    worker_engine = {}
    for w in forwards:
        for rid in w["args"].get("request.ids", []):
            worker_engine.setdefault(w["pid"], set()).update(of.get(rid, ()))
    assert len(worker_engine) == 2 and all(len(v) == 1 for v in worker_engine.values()), worker_engine
    workers = {e["bind_id"]: e for e in forwards if e.get("flow_in")}
    sched = {(e["pid"], e["args"]["step.index"]): e for e in _spans(run, "vllm.scheduler.schedule")}
    joined = {pid: 0 for pid in _engines(run)}
    for b in _step_marks(run, False):
        w = workers.get(b.get("bind_id"))
        if w is None:
            continue
        assert worker_engine.get(w["pid"]) == {b["pid"]}, (b, w["pid"], worker_engine)
        ids = w["args"].get("request.ids", [])
        # the forward ran the batch that step scheduled (none: an empty step)
        assert ids == sched[(b["pid"], b["args"]["step.index"])]["args"].get("request.ids", [])
        joined[b["pid"]] += 1
    # every step that ran a batch reaches its forward
    for pid in joined:
        busy = sum(1 for (p, _), e in sched.items() if p == pid and e["args"].get("batch.request_count", 0) > 0)
        assert joined[pid] >= busy, (pid, joined[pid], busy)


def test_every_joined_output_processing_is_of_its_own_engine(run):
    of = _engine_of(run)
    outputs = {e["bind_id"]: e for e in _spans(run, "vllm.output.process") if e.get("flow_in")}
    joined = {pid: 0 for pid in _engines(run)}
    for b in _step_marks(run, True):
        o = outputs.get(b.get("bind_id"))
        if o is None:
            continue
        ids = o["args"].get("request.ids", [])
        assert ids and of.get(ids[0]) == {b["pid"]}, (b, o["args"])
        assert o["ts"] >= b["ts"]  # after its step's end
        joined[b["pid"]] += 1
    assert all(joined.values()), joined


def test_analyze_reports_both_engines_and_every_request(run):
    out = subprocess.run([run["binary"], "analyze", str(run["json"]), "--json", "-", "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    busy = {}
    for e in _spans(run, "vllm.scheduler.schedule"):
        if e["args"].get("batch.request_count", 0) > 0:
            busy[e["pid"]] = busy.get(e["pid"], 0) + 1
    assert {e["pid"]: e["busy_steps"] for e in report["engines"]} == busy
    assert report["requests"]["count"] == REQUESTS and report["requests"]["joined"] == REQUESTS
