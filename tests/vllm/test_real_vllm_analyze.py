"""`mstrace analyze` against vLLM's own metrics on a real vLLM server (CPU) whose KV cache is
small on purpose.

Owns the check that, with `vllm serve` (the tiny e2e model, --num-gpu-blocks-override 40
--block-size 32: 1,280 tokens of KV cache for 24 concurrent requests of 256 + 64 tokens) traced
into the real forwarder and one `vllm bench serve` load between two scrapes of /metrics, the
analysis of the trace gives vLLM's own per-request means — queue, prefill, decode, TTFT, TPOT, ITL
and e2e, each from the sum/count delta of its Prometheus histogram — within a few percent, the
preemption count equal to the `vllm:num_preemptions_total` delta, and a verdict that names KV
capacity. The figures of a run are in docs/analyze.md ("Checked against vLLM"). Skipped, with the
reason, without a vLLM interpreter, the extension or the `mstrace` binary.
"""

import json
import os
import re
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import conftest as pyconf  # noqa: E402
from test_real_vllm_step_record import MODEL_DIR, _free_port, _get, _stop  # noqa: E402
from test_real_vllm_symbols import _vllm_python  # noqa: E402

CONCURRENCY = 24
PROMPTS = 48
INPUT, OUTPUT = 256, 64
BLOCKS, BLOCK_SIZE = 40, 32

# mstrace's request metric -> vLLM's histogram of the same definition (vllm/v1/metrics/stats.py)
HISTOGRAMS = {
    "queue_ms": "vllm:request_queue_time_seconds",
    "prefill_ms": "vllm:request_prefill_time_seconds",
    "decode_ms": "vllm:request_decode_time_seconds",
    "inference_ms": "vllm:request_inference_time_seconds",
    "ttft_ms": "vllm:time_to_first_token_seconds",
    "tpot_ms": "vllm:request_time_per_output_token_seconds",
    "itl_ms": "vllm:inter_token_latency_seconds",
    "e2e_ms": "vllm:e2e_request_latency_seconds",
}
# Relative tolerance of the means; absolute floor in ms for the small ones (queue on a light
# step, ITL of a tiny model) where a few microseconds of hook placement are a large fraction.
REL, ABS_MS = 0.05, 0.3


def _scrape(port):
    """{name: (sum, count)} of the histograms, and the preemption counter, summed over labels."""
    text = _get("http://127.0.0.1:%d/metrics" % port)
    out = {}
    for name in HISTOGRAMS.values():
        vals = []
        for suffix in ("_sum", "_count"):
            vals.append(sum(float(m.group(1)) for m in re.finditer(
                r"^%s%s(?:\{[^}]*\})? ([0-9.e+-]+)$" % (re.escape(name), suffix), text, re.M)))
        out[name] = tuple(vals)
    out["preemptions"] = sum(float(m.group(1)) for m in re.finditer(
        r"^vllm:num_preemptions_total(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M))
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return serve_and_analyze(tmp_path_factory.mktemp("analyze_vllm"), INPUT, OUTPUT)


def serve_and_analyze(tmp, input_len, output_len):
    """The traced serve, one bench load of `input_len`/`output_len` tokens between two scrapes,
    and the analysis of its trace (also used by test_real_vllm_long_load.py)."""
    python, why = _vllm_python()
    if python is None:
        pytest.skip(why)
    pyconf.pytest_configure(None)
    build = pyconf.build_native()
    if build.native is None or build.binary is None:
        pytest.skip("mstrace._native or the mstrace binary unavailable: %s" % build.reason)
    subprocess.run([python, os.path.join(REPO, "tests", "e2e", "make_tiny_model.py"), MODEL_DIR], check=True,
                   capture_output=True, timeout=600)
    sock = "mst_anv_" + uuid.uuid4().hex[:8]
    trace = tmp / "trace.json"
    fwd = subprocess.Popen([build.binary, "forward", "--socket-name", sock, "--perfetto-output", str(trace)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    port = _free_port()
    env = dict(os.environ, MS_TRACE_ENABLE="1", MS_PROFILER_AUTO_TRACE="1", MSTRACE_PERFETTO_SOCKET=sock,
               VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
               VLLM_CPU_KVCACHE_SPACE="1", PYTHONPATH=pyconf.STAGING)
    for key in list(env):
        if key.startswith(("OTEL_", "PROFILING_SYMBOLS", "VLLM_PLUGINS", "MS_PROFILER_SAMPLE")):
            del env[key]
    log = open(tmp / "vllm.log", "w")
    cmd = [python, os.path.join(REPO, "tests", "e2e", "vllm_cli.py"), "serve", MODEL_DIR,
           "--served-model-name", "tiny-llama", "--host", "127.0.0.1", "--port", str(port),
           "--load-format", "dummy", "--dtype", "float32", "--max-model-len", "512", "--enforce-eager",
           "--block-size", str(BLOCK_SIZE), "--num-gpu-blocks-override", str(BLOCKS), "--shutdown-timeout", "60"]
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              start_new_session=True)
    bench_cmd = [python, os.path.join(REPO, "tests", "e2e", "vllm_cli.py"), "bench", "serve", "--backend", "vllm",
                 "--host", "127.0.0.1", "--port", str(port), "--endpoint", "/v1/completions",
                 "--model", "tiny-llama", "--tokenizer", MODEL_DIR, "--dataset-name", "random",
                 "--random-input-len", str(input_len), "--random-output-len", str(output_len),
                 "--num-prompts", str(PROMPTS), "--max-concurrency", str(CONCURRENCY), "--ignore-eos",
                 "--seed", "1", "--num-warmups", "0", "--save-result", "--result-dir", str(tmp),
                 "--result-filename", "bench.json"]
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                _get("http://127.0.0.1:%d/health" % port, timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, open(tmp / "vllm.log").read()[-4000:]
                time.sleep(1)
        before = _scrape(port)
        bench = subprocess.run(bench_cmd, env=dict(env, MS_TRACE_ENABLE="0"), capture_output=True, text=True,
                               timeout=1800)
        assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
        after = _scrape(port)
    finally:
        _stop(server, 120)
        log.close()
        _stop(fwd, 60)
    keep = os.environ.get("MSTRACE_TEST_KEEP")
    if keep:
        os.makedirs(keep, exist_ok=True)
        for f in ("trace.json", "vllm.log", "bench.json"):
            if (tmp / f).exists():
                open(os.path.join(keep, f), "wb").write((tmp / f).read_bytes())
    p = subprocess.run([build.binary, "analyze", str(trace), "--json", str(tmp / "analysis.json")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    vllm = {k: ((after[h][0] - before[h][0]) * 1000.0, after[h][1] - before[h][1]) for k, h in HISTOGRAMS.items()}
    analysis = json.loads((tmp / "analysis.json").read_text())
    # The comparison needs every engine step in the trace: a gap in step.index means the
    # engine's tracer lost spans before the forwarder (a loss the analysis reports, not one
    # it can undo).
    assert analysis["data_quality"]["missing_steps"] == 0, analysis["data_quality"]["warnings"]
    return {"analysis": analysis, "text": p.stdout, "vllm": vllm, "log": (tmp / "vllm.log").read_text(),
            "preemptions": after["preemptions"] - before["preemptions"],
            "bench": json.loads((tmp / "bench.json").read_text())}


def test_means_match_vllms_histograms(run):
    a, rows = run["analysis"], []
    for key, (sum_ms, count) in run["vllm"].items():
        mean = sum_ms / count if count else float("nan")
        ours = a["requests"][key]
        rows.append("%-12s vLLM %9.3f ms (n=%d)  mstrace %9.3f ms (n=%d)" % (key, mean, count, ours["mean"], ours["n"]))
    print("\n" + "\n".join(rows))
    for key, (sum_ms, count) in run["vllm"].items():
        ours = a["requests"][key]
        assert count > 0 and ours["n"] == count, (key, ours["n"], count, rows)
        mean = sum_ms / count
        assert abs(ours["mean"] - mean) <= max(REL * mean, ABS_MS), (key, rows)


def test_preemptions_equal_vllms_counter(run):
    a = run["analysis"]
    assert run["preemptions"] > 0, "the small KV cache should force preemptions"
    assert a["requests"]["preemptions"] == run["preemptions"]


def test_verdict_names_kv_capacity(run):
    a = run["analysis"]
    print("\n" + run["text"])
    assert a["verdict"]["bottleneck"] == "capacity", a["verdict"]
    assert "KV cache is full" in a["verdict"]["sentence"]
    fired = {f["rule"] for f in a["findings"] if f["fired"]}
    assert "capacity" in fired, fired
    assert a["parts_share"] <= 1.0 + 1e-9 and all(s["share"] <= 1.0 + 1e-9 for s in a["stages"].values())
    assert "verdict: Capacity" in run["text"] and "latency (ms)" in run["text"]
