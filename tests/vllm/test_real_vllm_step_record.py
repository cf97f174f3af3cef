"""The step record on a real vLLM server (CPU) whose KV cache is small on
purpose, checked against vLLM's own numbers.

Owns the check that, with `vllm serve` traced into the real forwarder (Chrome
Trace JSON) and more concurrent requests than the KV cache holds
(--num-gpu-blocks-override, --block-size 32, prefix caching off so every
token a request computes is in its scheduled tokens), the
`vllm.scheduler.schedule` spans carry the step record of
docs/architecture.md "1a": every step's index, tokens and phases; requests
queue (step.queued_ns before they are first scheduled), are preempted and
resumed; for every request the tokens scheduled in each life (from a new or
resumed step to a preemption or the end) add up to prompt + outputs so far - 1
(the last sampled token is never fed back) and its token-producing steps
(phases P and d) to its outputs; the preemptions
in the step records equal the `vllm:num_preemptions_total` delta scraped from
/metrics around the load; the output spans name each finished request with
its reason. Skipped, with the reason, without a vLLM interpreter, the
extension or the `mstrace` binary.
"""

import json
import os
import re
import subprocess
import sys
import time
from decimal import Decimal

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllm_serve  # noqa: E402
sys.path.append(os.path.join(HERE, "..", "integration"))  # pftrace_model (after tests/python's conftest)

REQUESTS = 16          # concurrent; max_num_seqs is 8
PROMPT = 96            # tokens per prompt
OUTPUT = 40            # tokens per answer (ignore_eos)
BLOCKS = 12            # x 32 tokens: 384 tokens of KV cache for 16 x 136
BATCH_TOKENS = 64      # per step: prompts are prefilled in chunks (phases p, then P)


def _preemptions(server):
    value = vllm_serve.metric_sum(server.metrics(), "vllm:num_preemptions_total")
    assert value is not None, "no vllm:num_preemptions_total in /metrics"
    return value


@pytest.fixture(scope="module")
def jaeger():
    """A real Jaeger on loopback ports of its own (tests/integration/jaeger_fixture.py)."""
    from jaeger_fixture import running_jaeger
    with running_jaeger() as j:
        yield j


@pytest.fixture(scope="module")
def run(tmp_path_factory, jaeger):
    python, binary = vllm_serve.traced_setup()
    tmp = tmp_path_factory.mktemp("steprec")
    out_json = tmp / "trace.json"
    out_pf = tmp / "trace.pftrace"
    with vllm_serve.Forwarder(binary, ["--perfetto-output", out_json, "--perfetto-output", out_pf],
                              tmp / "forward.log", prefix="mst_step") as fwd:
        # the hook spans also go to Jaeger (mstrace's own OTLP exporter; vLLM's tracing stays off)
        env = vllm_serve.traced_env(fwd.sock, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=jaeger.traces_endpoint,
                                    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
                                    OTEL_SERVICE_NAME="mst-steprec")
        with vllm_serve.Server(python, env, [
                "--max-model-len", 256, "--max-num-seqs", 8, "--block-size", 32, "--num-gpu-blocks-override",
                BLOCKS, "--no-enable-prefix-caching", "--max-num-batched-tokens", BATCH_TOKENS],
                tmp / "vllm.log") as server:
            before = _preemptions(server)
            answers = server.complete_concurrently(
                [[(17 * i + 3 * k) % 1900 + 50 for k in range(PROMPT)] for i in range(REQUESTS)], OUTPUT)
            after = _preemptions(server)
    vllm_serve.keep_files(tmp, ("trace.json", "trace.pftrace", "vllm.log", "forward.log"))
    assert len(answers) == REQUESTS, vllm_serve.read_log(tmp / "vllm.log")
    events = json.loads(out_json.read_text())
    spans = [e for e in events if e.get("ph") == "X"]
    return {"answers": answers, "preemptions": after - before, "spans": spans, "events": events,
            "json": out_json, "pftrace": out_pf, "binary": binary, "jaeger": jaeger}


def _steps(spans):
    steps = [e["args"] for e in spans if e["name"] == "vllm.scheduler.schedule"]
    steps.sort(key=lambda a: a["step.index"])
    return steps


def _external(internal, answers):
    for a in answers.values():
        if internal.startswith(a["id"] + "-"):
            return a["id"]
    return None


def test_every_step_carries_the_step_record(run):
    steps = _steps(run["spans"])
    assert steps, "no schedule spans"
    idx = [a["step.index"] for a in steps]
    assert len(set(idx)) == len(idx)
    busy = [a for a in steps if a.get("request.ids")]
    assert busy
    for a in busy:
        n = len(a["request.ids"])
        assert n == a["batch.request_count"]  # never cut
        assert len(a["step.tokens"]) == n and len(a["step.phase"]) == n and set(a["step.phase"]) <= set("pPd")
        assert sum(int(t) for t in a["step.tokens"]) == a["batch.scheduled_tokens"]
        assert a["scheduler.max_num_seqs"] == 8 and a["scheduler.max_num_batched_tokens"] == BATCH_TOKENS
        assert a["batch.scheduled_tokens"] <= BATCH_TOKENS
        assert len(a.get("step.prefix_hit_tokens", [])) == len(a.get("step.new_ids", []))
        assert set(a.get("step.prefix_hit_tokens", [])) <= {"0"}  # prefix caching off
    # every request is new exactly once, and was queued before its first step
    new = [i for a in busy for i in a.get("step.new_ids", [])]
    assert sorted({_external(i, run["answers"]) for i in new}) == sorted(a["id"] for a in run["answers"].values())
    assert len(new) == len(set(new)) == REQUESTS
    queued = [(int(q), e["ts"]) for e in run["spans"] if e["name"] == "vllm.scheduler.schedule"
              for q in e["args"].get("step.queued_ns", [])]
    assert len(queued) == REQUESTS
    assert all(0 < q <= ts * 1000 + 1000 for q, ts in queued)  # queued before the step (ts: µs) began
    # requests waited: some were first scheduled while others ran
    assert max(a["scheduler.waiting"] for a in steps) > 0


def test_preemptions_match_vllm_and_every_preempted_request_resumes(run):
    steps = _steps(run["spans"])
    preempted = [i for a in steps for i in a.get("step.preempted_ids", [])]
    resumed = [i for a in steps for i in a.get("step.resumed_ids", [])]
    assert preempted, "the small KV cache should force preemptions"
    assert len(preempted) == run["preemptions"]  # vllm:num_preemptions_total delta
    assert sorted(preempted) == sorted(resumed)  # every preempted request came back (all finished)
    # each resume follows a preemption of the same request
    open_ = set()
    for a in steps:
        for i in a.get("step.resumed_ids", []):
            assert i in open_
            open_.discard(i)
        open_.update(a.get("step.preempted_ids", []))
    assert not open_


def test_token_sums_per_request_match_prompt_and_outputs(run):
    """A (re)start recomputes everything known so far (prefix caching is off):
    each life of a request, from its new or resumed step to its preemption or
    end, schedules prompt + outputs so far - 1 tokens once it has sampled,
    and every token-producing step (P, d) adds one output, kept across a
    preemption."""
    lives = {}  # id -> [[tokens, produced, phases], ...]
    for a in _steps(run["spans"]):
        for i in a.get("step.new_ids", []) + a.get("step.resumed_ids", []):
            lives.setdefault(i, []).append([0, 0, ""])
        for i, t, ph in zip(a.get("request.ids", []), a.get("step.tokens", []), a.get("step.phase", "")):
            lives[i][-1][0] += int(t)
            lives[i][-1][1] += ph in "Pd"
            lives[i][-1][2] += ph
    by_ext = {a["id"]: a for a in run["answers"].values()}
    assert len(lives) == REQUESTS
    for i, segs in lives.items():
        usage = by_ext[_external(i, run["answers"])]["usage"]
        assert usage["prompt_tokens"] == PROMPT and usage["completion_tokens"] == OUTPUT
        outputs = 0
        for tokens, produced, phases in segs:
            assert re.fullmatch(r"p*(Pd*)?", phases), (i, segs)  # chunks, the sampling chunk, decodes
            outputs += produced
            if produced:
                assert tokens == usage["prompt_tokens"] + outputs - 1, (i, segs)
        assert outputs == usage["completion_tokens"], (i, segs)
        assert segs[-1][0] == usage["prompt_tokens"] + usage["completion_tokens"] - 1, (i, segs)
    assert any("p" in life[2] for segs in lives.values() for life in segs)  # chunked prefills seen


def test_output_spans_name_finished_requests_with_their_reason(run):
    done = {}
    for e in run["spans"]:
        if e["name"] == "vllm.output.process":
            a = e["args"]
            for i, r in zip(a.get("output.finished_ids", []), a.get("output.finish_reasons", [])):
                done[i] = r
    assert len(done) == REQUESTS and set(done.values()) == {"length"}


def test_perfetto_request_tracks_show_the_preemptions(run):
    """The forwarder's request tracks (a thread per request in the JSON, named
    by its id, with its phases as B/E events and markers as instants) draw the
    step record: each preempted request has a preempted slice and its markers,
    and the engine's preemptions counter ends at vLLM's count."""
    steps = _steps(run["spans"])
    preempted = {i for a in steps for i in a.get("step.preempted_ids", [])}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in run["events"]
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    phases = {}
    for e in run["events"]:
        if e.get("cat") == "mstrace.request" and e.get("ph") in ("B", "i"):
            phases.setdefault(names[(e["pid"], e["tid"])], []).append(e["name"])
    assert len(phases) == REQUESTS
    for i, got in phases.items():
        assert got[0] == "queued" and "decode" in got and any(n.startswith("prefill chunk") for n in got)
        if i in preempted:
            assert {"preempted", "preemption", "resume"} <= set(got), (i, got)
        else:
            assert "preempted" not in got, (i, got)
    counter = [e for e in run["events"] if e.get("ph") == "C" and e.get("name") == "preemptions"]
    assert counter and max(e["args"]["(total)"] for e in counter) == run["preemptions"]


# ---- the trace at a glance (docs/forwarder.md "Reading the trace") ----

FORWARDER_TID = 1 << 30  # tids from here on are tracks the forwarder adds


def _names(events):
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    return procs, threads


def _ns(us):
    return int(Decimal(us) * 1000)  # µs with 3 decimals: exact ns


def _exact(run):
    """The JSON's events with exact times (Decimal: a double holds µs since
    1970 only to ~0.2 µs)."""
    if "exact" not in run:
        run["exact"] = json.loads(run["json"].read_text(), parse_float=Decimal)
    return run["exact"]


def test_no_two_complete_events_on_one_thread_overlap_without_nesting(run):
    by_thread = {}
    for e in _exact(run):
        if e.get("ph") == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]))
    assert by_thread
    for key, evs in by_thread.items():
        evs.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for start, end, name in evs:
            while stack and stack[-1][1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][1], (key, name, start, end, stack[-1])
            stack.append((start, end, name))


def test_every_request_has_one_track_with_its_phases(run):
    """One thread per request, named by its id, holding its vllm.request span
    with its phases nested in it; threads ordered by arrival."""
    procs, threads = _names(_exact(run))
    requests = {i for a in _steps([e for e in _exact(run) if e.get("ph") == "X"]) for i in a.get("step.new_ids", [])}
    assert len(requests) == REQUESTS
    by_name = {}
    for key, name in threads.items():
        if key[1] >= FORWARDER_TID and name != "engine steps":
            by_name.setdefault(name, []).append(key)
    assert sorted(by_name) == sorted(requests) and all(len(v) == 1 for v in by_name.values())
    sort = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in _exact(run)
            if e.get("ph") == "M" and e["name"] == "thread_sort_index"}
    spans = {}
    for e in _exact(run):
        if e.get("ph") == "X" and e["name"] == "vllm.request":
            spans[(e["pid"], e["tid"])] = e
    arrival = []
    for rid, (key,) in by_name.items():
        req = spans[key]  # its vllm.request span is on it, not on the API server's thread
        assert req["args"]["request.id"] == rid
        s, e = _ns(req["ts"]), _ns(req["ts"]) + _ns(req["dur"])
        phases = [x for x in _exact(run) if (x.get("pid"), x.get("tid")) == key and x.get("cat") == "mstrace.request"]
        assert {x["name"] for x in phases} >= {"queued", "decode"}
        assert all(s <= _ns(x["ts"]) <= e for x in phases)
        arrival.append((s, sort[key]))
    # sort indexes follow arrival
    ranks = [r for _, r in sorted(arrival)]
    assert ranks == sorted(ranks)


def test_every_step_has_one_step_slice_and_one_flow_to_its_worker_forward(run):
    events = _exact(run)
    procs, threads = _names(events)
    sched = {e["args"]["step.index"]: e for e in [e for e in _exact(run) if e.get("ph") == "X"] if e["name"] == "vllm.scheduler.schedule"}
    steps = {}
    for e in events:
        if e.get("ph") == "B" and e.get("cat") == "mstrace.step" and e["name"] != "outputs":
            assert e["name"] == "step %d" % e["args"]["step.index"]
            steps.setdefault(e["args"]["step.index"], []).append(e)
    assert sorted(steps) == sorted(sched) and all(len(v) == 1 for v in steps.values())
    for i, (b,) in steps.items():
        assert threads[(b["pid"], b["tid"])] == "engine steps" and b["pid"] == sched[i]["pid"]
        assert b["ts"] == sched[i]["ts"]  # from the schedule span's start
    ends = {}
    for e in events:
        if e.get("ph") == "E" and e.get("cat") == "mstrace.step" and e["name"] != "outputs":
            ends[(e["pid"], e["name"])] = _ns(e["ts"])
    updates = sorted((_ns(e["ts"]) + _ns(e["dur"])) for e in [e for e in _exact(run) if e.get("ph") == "X"]
                     if e["name"] == "vllm.scheduler.update_from_output")
    assert sorted(ends.values()) == updates  # ... to the end of its update_from_output
    # flows (bind ids on the slices): from each step to the worker forward inside it, and from its
    # "outputs" marker to an output processing
    xs = [e for e in events if e.get("ph") == "X"]
    workers = {e["bind_id"]: e for e in xs if e["name"] == "vllm.worker.execute_model" and e.get("flow_in")}
    outputs = {e["bind_id"]: e for e in xs if e["name"] == "vllm.output.process" and e.get("flow_in")}
    to_worker = {i: workers[b["bind_id"]] for i, (b,) in steps.items() if b.get("bind_id") in workers}
    marks = [e for e in events if e.get("ph") == "B" and e["name"] == "outputs" and e.get("cat") == "mstrace.step"]
    assert len(marks) == len(steps) and all(e.get("flow_out") for e in marks)
    n_output = sum(1 for e in marks if e["bind_id"] in outputs)
    # every step that ran a batch (an empty one runs no forward) reaches one forward, within the step
    busy = {i for i, e in sched.items() if e["args"].get("batch.request_count", 0) > 0}
    assert busy and busy <= set(to_worker)
    assert len({id(w) for w in to_worker.values()}) == len(to_worker)  # one step per forward
    for i, w in to_worker.items():
        assert _ns(steps[i][0]["ts"]) <= _ns(w["ts"]) <= ends[(steps[i][0]["pid"], steps[i][0]["name"])]
    # an output processing joins the latest step that ended before it began, once: how many steps
    # reach one depends on how the API server's loop interleaves with the engine (it may take several
    # steps' outputs in one call), so the check is the join's rule, not a share of the steps
    assert n_output >= 1
    out_of = {}
    for b in marks:
        if b["bind_id"] in outputs:
            assert b["bind_id"] not in out_of  # one step per output processing
            out_of[b["bind_id"]] = b
            o = outputs[b["bind_id"]]
            assert _ns(o["ts"]) >= _ns(b["ts"])  # the marker sits at its step's end


def test_every_thread_and_process_has_a_role_name(run):
    procs, threads = _names(_exact(run))
    for e in [e for e in _exact(run) if e.get("ph") == "X"]:
        role = e["args"]["process.role"]
        assert procs[e["pid"]].startswith(role + " ("), (procs[e["pid"]], role)
        name = threads[(e["pid"], e["tid"])]
        assert name == role or e["tid"] >= FORWARDER_TID, (name, role)


def test_counters_carry_units_once_per_engine(run):
    counters = [e for e in _exact(run) if e.get("ph") == "C" and not e["name"].startswith("forwarder.")]
    assert counters
    engine = {e["pid"] for e in [e for e in _exact(run) if e.get("ph") == "X"] if e["name"] == "vllm.scheduler.schedule"}
    for c in counters:
        (key, value), = c["args"].items()
        assert key.startswith("(") and key.endswith(")"), c  # "KV cache usage" "(%)"
        assert c["pid"] in engine
    kv = [c["args"]["(%)"] for c in counters if c["name"] == "KV cache usage"]
    assert kv and max(kv) > 1 and all(0 <= v <= 100 for v in kv)  # percent, not a fraction
    n_steps = len([e for e in [e for e in _exact(run) if e.get("ph") == "X"] if e["name"] == "vllm.scheduler.schedule"])
    assert len([c for c in counters if c["name"] == "batch size"]) == n_steps  # once per step


def test_no_counter_outside_the_traced_window(run):
    """Every counter sample of both files, the forwarder's own included, lies
    within the spans' time range: the exporters' last batches reach the
    daemon seconds after the load, and its own counters are not sampled
    after the last span ends (the viewer's default view is the traced
    work); the last samples still hold the final counts."""
    from pftrace_model import read_pftrace
    xs = [e for e in _exact(run) if e.get("ph") == "X"]
    first, last = min(_ns(e["ts"]) for e in xs), max(_ns(e["ts"]) + _ns(e["dur"]) for e in xs)
    counters = [e for e in _exact(run) if e.get("ph") == "C"]
    assert any(c["name"].startswith("forwarder.") for c in counters)
    out = [(c["name"], _ns(c["ts"])) for c in counters if not first <= _ns(c["ts"]) <= last]
    assert not out, (first, last, out[:5])
    received = [c["args"]["value"] for c in counters if c["name"] == "forwarder.spans_received"]
    assert received[-1] == max(received) >= len(xs)
    m = read_pftrace(run["pftrace"])
    pf_first = min(s["ts"] for s in m.slices)
    pf_last = max(s["ts"] + s["dur"] for s in m.slices)
    out = [(n, ts) for pid, n, ts, v in m.counters if not pf_first <= ts <= pf_last]
    assert not out, (pf_first, pf_last, out[:5])
    assert any(n.startswith("forwarder.") for pid, n, ts, v in m.counters)


def test_pftrace_tracks_are_not_empty_and_request_threads_rank_by_arrival(run):
    """Every track descriptor of the .pftrace has events on it or under it,
    but the root one (uuid 0): it carries only `thread_ordering` (the only
    way Perfetto orders a process's threads by `sibling_order_rank`, per
    track_descriptor.proto) and no event is on it, so today's importer, which
    makes a track only for a descriptor an event or a child uses, makes none
    of it. The request threads' ranks follow their requests' arrival."""
    from pftrace_model import iter_packets, read_pftrace
    tracks, used, roots = {}, set(), []
    for _, p in iter_packets(run["pftrace"].read_bytes()):
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            (roots if td.uuid == 0 else []).append(td)
            tracks[td.uuid] = td
        if p.HasField("track_event"):
            used.add(p.track_event.track_uuid)
    assert len(roots) == 1 and 0 not in used
    root = roots[0]
    assert [f.name for f, _ in root.ListFields()] == ["uuid", "thread_ordering"]
    process_track = {td.process.pid: u for u, td in tracks.items() if td.HasField("process")}

    def parent(u):
        td = tracks[u]
        return td.parent_uuid or (process_track.get(td.thread.pid, 0) if td.HasField("thread") else 0)

    shown = set()
    for u in used:
        while u and u not in shown:
            shown.add(u)
            u = parent(u)
    empty = [str(tracks[u]).replace("\n", " ") for u in tracks if u and u not in shown]
    assert not empty, empty
    m = read_pftrace(run["pftrace"])
    rank = {(td.thread.pid, td.thread.tid): td.sibling_order_rank for td in tracks.values() if td.HasField("thread")}
    reqs = sorted((s["ts"], rank[(s["pid"], s["tid"])]) for s in m.slices if s["name"] == "vllm.request")
    assert len(reqs) == REQUESTS and all(r > 0 for _, r in reqs)
    assert [r for _, r in reqs] == sorted(r for _, r in reqs)
    assert all(r == 0 for (pid, tid), r in rank.items() if tid < FORWARDER_TID)


def test_pftrace_says_the_same(run):
    """The .pftrace of the same run: each vllm.request on its own thread track
    named by its id, one step slice per step joined to its worker forward,
    named threads, counters with units; `mstrace analyze` reads both files
    alike and counts none of the forwarder's own slices as spans."""
    from pftrace_model import read_pftrace
    m = read_pftrace(run["pftrace"])
    reqs = [s for s in m.slices if s["name"] == "vllm.request"]
    assert len(reqs) == REQUESTS
    assert {m.threads[(s["pid"], s["tid"])] for s in reqs} == {s["args"]["request.id"] for s in reqs}
    sched = [e for e in [e for e in _exact(run) if e.get("ph") == "X"] if e["name"] == "vllm.scheduler.schedule"]
    assert sorted(s["args"]["step.index"] for s in m.steps) == sorted(e["args"]["step.index"] for e in sched)
    assert m.step_flows >= len([e for e in sched if e["args"].get("batch.request_count", 0) > 0])
    for s in m.slices:
        if s["tid"] < FORWARDER_TID:
            assert m.threads[(s["pid"], s["tid"])] == s["args"]["process.role"]
    names = {n for pid, n, ts, v in m.counters if not n.startswith("forwarder.")}
    assert "KV cache usage (%)" in names and all(n.endswith(")") for n in names)
    # every span's request.ids as the JSON has it (the .pftrace writes it as keyframes and deltas)
    ids_json = {e["args"]["span_id"]: e["args"].get("request.ids") for e in _exact(run) if e.get("ph") == "X"}
    ids_pf = {s["args"]["span_id"]: s["args"].get("request.ids") for s in m.slices if "span_id" in s["args"]}
    assert {e["args"]["span_id"] for e in sched} <= set(ids_pf)
    assert {k: ids_json[k] for k in ids_pf} == ids_pf
    views = []
    for path in (run["json"], run["pftrace"]):
        out = subprocess.run([run["binary"], "analyze", str(path), "--json", "-", "--quiet"], capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        views.append(json.loads(out.stdout))
    # the story spans EngineCore writes for Jaeger are not drawn (the phases come from the step record)
    assert not any(s["name"].startswith("vllm.request.") for s in m.slices)
    assert not any(e.get("name", "").startswith("vllm.request.") for e in _exact(run) if e.get("ph") == "X")
    for v in views:
        names = {n["name"] for n in v["span_names"]}
        assert "vllm.request" in names and not any(n.startswith("step ") or n in ("queued", "decode")
                                                   for n in names), names
    assert [n["count"] for n in views[0]["span_names"]] == [n["count"] for n in views[1]["span_names"]]


# ---- a request's story in Jaeger ----

def _jaeger_trace(run, trace_id, want):
    """The trace from Jaeger's query API once it holds `want` spans (the
    processes export at exit; Jaeger stores asynchronously)."""
    deadline = time.monotonic() + 60
    while True:
        t = run["jaeger"].trace(trace_id)
        if t and len(t["spans"]) >= want or time.monotonic() > deadline:
            return t
        time.sleep(0.5)


def _stories(run):
    """request id -> (its vllm.request span, the steps naming it, the
    preemptions) from the JSON (the same spans went to Jaeger)."""
    spans = [e for e in _exact(run) if e.get("ph") == "X"]
    req = {e["args"]["request.id"]: e for e in spans if e["name"] == "vllm.request"}
    steps = {}
    for e in spans:
        if e["name"] == "vllm.scheduler.schedule":
            for i in e["args"].get("request.ids", []):
                steps.setdefault(i, []).append(e)
    return req, steps


def test_jaeger_request_that_shared_a_batch_has_its_phases_and_steps_in_its_own_trace(run):
    req, steps = _stories(run)
    sched = _steps(run["spans"])
    preempted = {i for a in sched for i in a.get("step.preempted_ids", [])}
    shared = [i for i, st in steps.items() if any(e["args"]["batch.request_count"] > 1 for e in st)]
    # How many shared a batch depends on when the box let each client send
    # (the last ones may run alone once the others finished); with 16
    # concurrent requests and 8 seats some always do.
    assert len(shared) >= 2
    checked_preempted = 0
    for rid in shared:
        r = req[rid]
        t = _jaeger_trace(run, r["args"]["trace_id"], 4)
        assert t, rid
        by_id = {s["spanID"]: s for s in t["spans"]}
        assert r["args"]["span_id"] in by_id  # the API server's vllm.request
        phases = [s for s in t["spans"] if s["operationName"].startswith("vllm.request.")]
        names = [s["operationName"] for s in sorted(phases, key=lambda s: s["startTime"])]
        assert names[0] == "vllm.request.queued" and "vllm.request.prefill" in names, (rid, names)
        assert names[-1] == "vllm.request.decode", (rid, names)
        for s in phases:  # children of the request's span, in its trace
            assert [(x["refType"], x["spanID"]) for x in s["references"]] == [("CHILD_OF", r["args"]["span_id"])]
            assert run["jaeger"].tags(s)["request.id"] == rid
        # one step event per engine step it was in, naming that step
        logs = [l for s in phases for l in s.get("logs", [])
                if {f["key"]: f["value"] for f in l["fields"]}.get("event") == "step"]
        got = sorted({f["key"]: f["value"] for f in l["fields"]}["step.index"] for l in logs)
        assert got == sorted(e["args"]["step.index"] for e in steps[rid]), rid
        for l in logs:
            f = {x["key"]: x["value"] for x in l["fields"]}
            (step,) = [e for e in steps[rid] if e["args"]["step.index"] == f["step.index"]]
            assert f["step.span_id"] == step["args"]["span_id"] and f["step.trace_id"] == step["args"]["trace_id"]
            assert f["batch.request_count"] == step["args"]["batch.request_count"]
            k = step["args"]["request.ids"].index(rid)
            assert f["step.tokens"] == int(step["args"]["step.tokens"][k])
        events = [{f["key"]: f["value"] for f in l["fields"]}.get("event") for s in phases for l in s.get("logs", [])]
        if rid in preempted:
            assert "preempted" in events and "resumed" in events, (rid, events)
            checked_preempted += 1
        else:
            assert "preempted" not in events
    assert checked_preempted > 0


def test_jaeger_step_links_resolve_to_every_request_it_carried(run):
    req, steps = _stories(run)
    span_of = {r["args"]["span_id"]: rid for rid, r in req.items()}
    busy = [e for e in run["spans"] if e["name"] == "vllm.scheduler.schedule" and e["args"].get("request.ids")]
    shared = [e for e in busy if e["args"]["batch.request_count"] > 1]
    assert shared
    for e in shared[:40]:
        t = _jaeger_trace(run, e["args"]["trace_id"], 1)
        (s,) = [x for x in t["spans"] if x["spanID"] == e["args"]["span_id"]]
        linked = [x for x in s["references"] if x["refType"] == "FOLLOWS_FROM"]
        got = sorted(span_of[x["spanID"]] for x in linked)
        assert got == sorted(e["args"]["request.ids"]), e["args"]["step.index"]
        for x in linked:  # each resolves: the request's span is in Jaeger, in its trace
            rt = _jaeger_trace(run, x["traceID"], 1)
            assert any(y["spanID"] == x["spanID"] and y["operationName"] == "vllm.request" for y in rt["spans"])


def test_request_links_draw_no_flow_and_the_step_link_does(run):
    """Step and model spans link every request they carried; in the Perfetto JSON those request links
    draw no flow (request.ids joins them), while a model span's link to its step's schedule span does."""
    events = run["events"]
    xs = {e["args"]["span_id"]: e for e in events if e.get("ph") == "X"}
    sources = [e["args"]["link"].split(":") for e in events if e.get("cat") == "Tracing.Flow" and e["ph"] == "s"]
    assert not [s for _, s, _ in sources if s in xs and xs[s]["name"] == "vllm.request"]
    sched = {i for i, e in xs.items() if e["name"] == "vllm.scheduler.schedule"}
    assert not [d for _, _, d in sources if d in sched]  # a schedule span's links are all request links
    step_links = [(s, d) for _, s, d in sources if s in sched and d in xs]
    assert step_links and all("step.index" in xs[d]["args"] for _, d in step_links)
    assert all(xs[d]["args"]["step.index"] == xs[s]["args"]["step.index"] for s, d in step_links)
