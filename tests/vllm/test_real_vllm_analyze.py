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
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_serve  # noqa: E402

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


def _scrape(server):
    """{name: (sum, count)} of the histograms, and the preemption counter, summed over labels."""
    text = server.metrics()
    out = {name: tuple(vllm_serve.metric_sum(text, name + suffix) or 0.0 for suffix in ("_sum", "_count"))
           for name in HISTOGRAMS.values()}
    out["preemptions"] = vllm_serve.metric_sum(text, "vllm:num_preemptions_total") or 0.0
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return serve_and_analyze(tmp_path_factory.mktemp("analyze_vllm"), INPUT, OUTPUT)


def serve_and_analyze(tmp, input_len, output_len):
    """The traced serve, one bench load of `input_len`/`output_len` tokens between two scrapes,
    and the analysis of its trace (also used by test_real_vllm_long_load.py)."""
    python, binary = vllm_serve.traced_setup()
    trace = tmp / "trace.json"
    with vllm_serve.Forwarder(binary, ["--perfetto-output", trace], tmp / "forward.log", prefix="mst_anv") as fwd:
        with vllm_serve.Server(python, vllm_serve.traced_env(fwd.sock),
                               ["--max-model-len", 512, "--block-size", BLOCK_SIZE,
                                "--num-gpu-blocks-override", BLOCKS], tmp / "vllm.log") as server:
            before = _scrape(server)
            server.bench(input_len, output_len, PROMPTS, CONCURRENCY, tmp)
            after = _scrape(server)
    vllm_serve.keep_files(tmp, ("trace.json", "vllm.log", "bench.json", "forward.log"))
    p = subprocess.run([binary, "analyze", str(trace), "--json", str(tmp / "analysis.json")],
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
