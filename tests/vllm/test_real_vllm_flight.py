"""The flight recorder on a real vLLM (CPU): every request traced, no
sampling, one request planted slow, and `mstrace forward --flight-recorder`
must keep exactly that one, with the engine steps that carried it; the same
run without the plant keeps nothing. With --flight-otlp the real Jaeger of the
session holds exactly the dump's spans: the kept request's trace and its
steps' traces, nothing of the ordinary requests.

The plant: a symbols YAML (the packaged default plus a profiling handler on
OutputProcessor.process_outputs) whose handler sleeps once, in the API
server's output processing of the slow request's last output; that request
asks for many more tokens than the others, so by then it is alone and the
sleep delays no other request. The others finish within a few engine steps.
The trigger is `e2e>4s` against a sleep of 8 s.

Owns: one dump (Chrome JSON: this venv has no Perfetto protos); its log line names the slow request; the dump holds the
request's vllm.request span and, for each of the SLOW_TOKENS engine steps
that carried it, the schedule, executor, worker, model-runner and output
spans naming it; `mstrace analyze`
names it as the slowest request. Skipped, with the reason, without a vLLM
interpreter, the extension or the binary (as test_real_vllm_e2e.py).
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllm_serve  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from jaeger_fixture import jaeger  # noqa: E402,F401  (session fixture: the suite's real Jaeger)

SLOW_EXTERNAL_ID = "5"
SLOW_TOKENS = 24
SLEEP_S = 8

PLANT = r'''
import time
_done = []

def slow_output(original, self, engine_core_outputs, *args, **kwargs):
    # The slow request's last output: sleep once, before vLLM finishes it.
    if not _done and any(o.request_id.rsplit("-", 1)[0] == "%s" and o.finish_reason is not None
                         for o in engine_core_outputs):
        _done.append(1)
        time.sleep(%d)
    return original(self, engine_core_outputs, *args, **kwargs)
''' % (SLOW_EXTERNAL_ID, SLEEP_S)

RUN = vllm_serve.offline_script(8, """
    params = [SamplingParams(max_tokens=%d if i == %s else 3, ignore_eos=True, detokenize=False)
              for i in range(8)]
    outs = llm.generate([TokensPrompt(prompt_token_ids=[5, 6, 7, 8 + i]) for i in range(8)], params)
    print("E2E", json.dumps([o.request_id for o in outs]), flush=True)
""" % (SLOW_TOKENS, SLOW_EXTERNAL_ID))


def _symbols_with_plant(path):
    text = open(vllm_serve.DEFAULT_SYMBOLS).read()
    entry = "- symbol: vllm.v1.engine.output_processor:OutputProcessor.process_outputs\n"
    assert text.count(entry) == 1
    path.write_text(text.replace(entry, entry + "  handler: slowplant:slow_output\n"))


def _run(tmp_path, plant, jaeger=None):
    """Runs the 8 requests under a flight recorder (with `jaeger`: also
    --flight-otlp to it); returns (forwarder log, dumps directory, binary)."""
    python, binary = vllm_serve.traced_setup()
    (tmp_path / "plant").mkdir()
    (tmp_path / "plant" / "slowplant.py").write_text(PLANT)
    symbols = tmp_path / "symbols.yaml"
    if plant:
        _symbols_with_plant(symbols)
    else:
        symbols.write_text(open(vllm_serve.DEFAULT_SYMBOLS).read())
    dumps_dir = tmp_path / "dumps"
    fwd_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    extra = []
    if jaeger is not None:
        extra = ["--flight-otlp"]
        fwd_env.update(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=jaeger.traces_endpoint,
                       OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    with vllm_serve.Forwarder(binary, ["--log-level", "debug", "--perfetto-output", dumps_dir / "slow.json",
                                       "--flight-recorder", "64MiB", "--trigger", "e2e>4s", "--trigger", "error",
                                       *extra], tmp_path / "forward.log", prefix="mst_flight", env=fwd_env) as fwd:
        env = vllm_serve.traced_env(fwd.sock, [tmp_path / "plant"], PROFILING_SYMBOLS_PATH=str(symbols))
        vllm_serve.run_offline(python, tmp_path, RUN, env)
    log = fwd.log()
    assert fwd.returncode == 0, log[-4000:]
    assert "flight recorder: seen=" in log, log[-4000:]
    return log, dumps_dir, binary


def test_no_slow_request_no_dump(tmp_path):
    log, dumps_dir, _ = _run(tmp_path, plant=False)
    assert "flight recorder: dump" not in log, log[-4000:]
    assert not list(dumps_dir.glob("slow.*"))
    seen = int(re.search(r"flight recorder: seen=(\d+)", log).group(1))
    assert seen >= 5 * SLOW_TOKENS  # the run was traced: every step's spans reached the ring
    assert "triggers=0 = dumps=0" in log


@pytest.fixture
def jaeger_or_skip(request):
    if os.environ.get("MST_SKIP_JAEGER") == "1":
        pytest.skip("MST_SKIP_JAEGER=1")
    return request.getfixturevalue("jaeger")


def test_only_the_planted_slow_request_is_kept_with_its_steps(tmp_path, jaeger_or_skip):
    jaeger = jaeger_or_skip
    log, dumps_dir, binary = _run(tmp_path, plant=True, jaeger=jaeger)
    lines = [l for l in log.splitlines() if "flight recorder: dump " in l]
    assert len(lines) == 1, log[-4000:]
    m = re.search(r"trigger e2e=\S+>4s request (%s-[0-9a-f]{8});" % SLOW_EXTERNAL_ID, lines[0])
    assert m, lines[0]
    slow = m.group(1)
    dumps = sorted(dumps_dir.glob("slow.*.json"))
    assert len(dumps) == 1
    slices = [e for e in json.loads(dumps[0].read_text()) if e.get("ph") == "X"]
    names = lambda s: s["args"].get("request.ids") or []  # noqa: E731
    req = [s for s in slices if s["name"] == "vllm.request"]
    assert [s["args"]["request.id"] for s in req] == [slow]
    # A 4-token prompt is one prefill step that samples the first token, then
    # one decode step per token: SLOW_TOKENS steps carried it, each with its
    # schedule, executor, worker, model-runner and output span.
    for name in ("vllm.scheduler.schedule", "vllm.model.execute", "vllm.worker.execute_model",
                 "vllm.model_runner.execute", "vllm.output.process"):
        assert sum(1 for s in slices if s["name"] == name and slow in names(s)) == SLOW_TOKENS, name
    # Every span in the dump is the request's, a step that carried it, or of their traces.
    traces = {s["args"]["trace_id"] for s in slices if slow in names(s) or s in req}
    for s in slices:
        if s["name"] == "mstrace.flight_recorder.trigger":
            continue
        assert slow in names(s) or s["args"].get("request.id") == slow or s["args"]["trace_id"] in traces, s
    # Jaeger holds exactly the dump's spans: the kept request's trace and the
    # traces of the steps that carried it, nothing of the other requests.
    kept = [s for s in slices if s["name"] != "mstrace.flight_recorder.trigger"]
    by_trace = {}
    for s in kept:
        by_trace.setdefault(s["args"]["trace_id"], set()).add(s["args"]["span_id"])
    for tid, want in by_trace.items():
        got = set()
        for _ in range(300):
            t = jaeger.trace(tid)
            got = {x["spanID"] for x in t["spans"]} if t else set()
            if got >= want:
                break
            time.sleep(0.1)
        assert got == want, tid
    service = kept[0]["args"]["service.name"]
    assert len(jaeger.spans(service)) == len(kept)
    a = subprocess.run([binary, "analyze", str(dumps[0])], capture_output=True, text=True, timeout=300)
    assert a.returncode == 0, a.stderr
    assert re.search(r"request %s .*slowest request" % re.escape(slow), a.stdout), a.stdout[-3000:]
    print(lines[0])
