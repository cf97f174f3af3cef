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
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import conftest as pyconf  # noqa: E402
from test_real_vllm_symbols import _vllm_python  # noqa: E402

MODEL_DIR = os.environ.get("MST_E2E_MODEL_DIR") or os.path.expanduser("~/.cache/mstrace/tiny-llama")
REQUESTS = 16          # concurrent; max_num_seqs is 8
PROMPT = 96            # tokens per prompt
OUTPUT = 40            # tokens per answer (ignore_eos)
BLOCKS = 12            # x 32 tokens: 384 tokens of KV cache for 16 x 136
BATCH_TOKENS = 64      # per step: prompts are prefilled in chunks (phases p, then P)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def _preemptions(port):
    text = _get("http://127.0.0.1:%d/metrics" % port)
    values = [float(m.group(1)) for m in
              re.finditer(r"^vllm:num_preemptions_total(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M)]
    assert values, "no vllm:num_preemptions_total in /metrics"
    return sum(values)


def _complete(port, i, out):
    body = {"model": "tiny-llama", "prompt": [(17 * i + 3 * k) % 1900 + 50 for k in range(PROMPT)],
            "max_tokens": OUTPUT, "ignore_eos": True, "temperature": 0}
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        out[i] = json.loads(r.read())


def _stop(proc, timeout):
    """SIGINT to the process itself (vLLM's API server then shuts its engine
    and workers down, and each process flushes its spans at exit); its whole
    process group is killed only when that does not end it in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    python, why = _vllm_python()
    if python is None:
        pytest.skip(why)
    pyconf.pytest_configure(None)
    build = pyconf.build_native()
    if build.native is None or build.binary is None:
        pytest.skip("mstrace._native or the mstrace binary unavailable: %s" % build.reason)
    tmp = tmp_path_factory.mktemp("steprec")
    subprocess.run([python, os.path.join(REPO, "tests", "e2e", "make_tiny_model.py"), MODEL_DIR], check=True,
                   capture_output=True, timeout=600)
    sock = "mst_step_" + uuid.uuid4().hex[:8]
    out_json = tmp / "trace.json"
    fwd = subprocess.Popen([build.binary, "forward", "--socket-name", sock, "--perfetto-output", str(out_json)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    port = _free_port()
    env = dict(os.environ, MS_TRACE_ENABLE="1", MS_PROFILER_AUTO_TRACE="1", MSTRACE_PERFETTO_SOCKET=sock,
               VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
               VLLM_CPU_KVCACHE_SPACE="1", PYTHONPATH=pyconf.STAGING)
    for key in list(env):
        if key.startswith(("OTEL_", "PROFILING_SYMBOLS", "VLLM_PLUGINS", "MS_PROFILER_SAMPLE")):
            del env[key]
    log = open(tmp / "vllm.log", "w")
    server = subprocess.Popen(
        [python, os.path.join(REPO, "tests", "e2e", "vllm_cli.py"), "serve", MODEL_DIR,
         "--served-model-name", "tiny-llama", "--host", "127.0.0.1", "--port", str(port),
         "--load-format", "dummy", "--dtype", "float32", "--max-model-len", "256", "--max-num-seqs", "8",
         "--enforce-eager", "--block-size", "32", "--num-gpu-blocks-override", str(BLOCKS),
         "--no-enable-prefix-caching", "--max-num-batched-tokens", str(BATCH_TOKENS),
         "--shutdown-timeout", "60"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    answers = {}
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                _get("http://127.0.0.1:%d/health" % port, timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, open(tmp / "vllm.log").read()[-4000:]
                time.sleep(1)
        before = _preemptions(port)
        threads = [threading.Thread(target=_complete, args=(port, i, answers)) for i in range(REQUESTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = _preemptions(port)
    finally:
        _stop(server, 120)
        log.close()
        _stop(fwd, 60)
    keep = os.environ.get("MSTRACE_TEST_KEEP")  # a directory to keep the trace and the server log in
    if keep:
        os.makedirs(keep, exist_ok=True)
        for f in ("trace.json", "vllm.log"):
            if (tmp / f).exists():
                open(os.path.join(keep, f), "wb").write((tmp / f).read_bytes())
    assert len(answers) == REQUESTS, open(tmp / "vllm.log").read()[-4000:]
    events = json.loads(out_json.read_text())
    spans = [e for e in events if e.get("ph") == "X"]
    return {"answers": answers, "preemptions": after - before, "spans": spans, "events": events}


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
    """The forwarder's request tracks (async events in the JSON) draw the step
    record: each preempted request has a preempted slice and its markers, and
    the engine's preemptions counter ends at vLLM's count."""
    steps = _steps(run["spans"])
    preempted = {i for a in steps for i in a.get("step.preempted_ids", [])}
    phases = {}
    for e in run["events"]:
        if e.get("cat") == "request" and e.get("ph") == "b":
            phases.setdefault(e["id"], []).append(e["name"])
    assert len(phases) == REQUESTS
    for i, names in phases.items():
        assert names[0] == "request" and "decode" in names and any(n.startswith("prefill chunk") for n in names)
        if i in preempted:
            assert {"preempted", "preemption", "resume"} <= set(names), (i, names)
        else:
            assert "preempted" not in names, (i, names)
    counter = [e for e in run["events"] if e.get("ph") == "C" and e.get("name") == "scheduler.preemptions"]
    assert counter and max(e["args"]["value"] for e in counter) == run["preemptions"]
