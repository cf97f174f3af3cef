"""Integration tests of `mstrace analyze` (docs/analyze.md) on traces made the real way.

Every trace here is produced by the generator $MSTRACE_BUILD_DIR/test_analyze_tracegen
(tests/unit/test_analyze_tracegen.c: a vLLM-v1-like scheduler — token budget, max_num_seqs,
a KV cache that fills and preempts — with one planted bottleneck, its schedule spans carrying
the step record, recorded with libmstrace) and sent through the forwarder client to the real
`mstrace forward` daemon, whose Chrome Trace JSON output is what gets analysed. Checked: each
planted bottleneck fires its own rules and no other, the verdict names the planted stage (or
capacity), balanced, load-ramp and long-output runs raise no alarm, the shares of the engine's
time never exceed 100 % on any trace, vLLM's per-request metrics and the preemption count are
what the generator planted, one slow rank of four is named, a clock offset is a data-quality
warning in every output, a trace without step records (the older format) still analyses,
two runs from the same distribution compare as "no significant difference" while a real change
(also one in the tail only) is significant, several files merge with pids kept apart by file, a
file cut mid-write (as a SIGKILL leaves it) is analysed up to the cut with a warning, --window
and --skip-warmup cut the run, bad inputs exit 2 with one clear line, custom span names get
per-name statistics, the CSVs agree with the JSON, the text summary escapes control characters,
and `python -m mstrace.analyze` runs the same binary.
"""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, Daemon, build_path, mstrace_binary, make_packet, unique_socket_name

REQUESTS = 300

# scenario -> (the rules that must fire and no other, the stage the verdict must name)
PLANTS = {
    "scheduler": (["scheduler_rising"], "schedule"),
    "drain": (["scheduler_rising"], "schedule"),
    "model": (["model_dominant"], "model"),
    "executor": (["executor_gap"], "ipc"),
    "output": (["output_rising"], "output"),
    "waiting": (["host_waiting"], "waiting"),
    "tail": (["long_tail"], "model"),
    "joining": (["broken_joining"], "model"),
    "kvfull": (["capacity", "preemption"], "capacity"),
    "maxseqs": (["capacity"], "capacity"),
    "prefill": (["prefill_interference"], "model"),
}
# Runs with nothing wrong: no rule may fire.
QUIET = ["balanced", "ramp", "longout"]
RULES = {"capacity", "preemption", "prefill_interference", "scheduler_rising", "model_dominant", "executor_gap",
         "output_rising", "host_waiting", "rank_imbalance", "long_tail", "broken_joining", "clock"}
# vLLM's per-request metrics (docs/analyze.md "Requests"), each with n/mean/p50/p90/p99.
REQUEST_METRICS = ["queue_ms", "ttft_ms", "tpot_ms", "e2e_ms", "prefill_ms", "decode_ms", "inference_ms",
                   "handoff_ms", "itl_ms"]


def tracegen() -> Path:
    path = build_path("test_analyze_tracegen")
    if not os.access(path, os.X_OK):
        pytest.fail(f"trace generator not built at {path}")
    return path


def record(tmp_dir: Path, scenario: str, seed=1, requests=REQUESTS, pid_base=40000, name=None, extra=()) -> dict:
    """Runs the generator against a fresh forwarder daemon; returns the generator's counts
    plus the output path, once the daemon wrote every span and stopped."""
    out = tmp_dir / f"{name or scenario}.json"
    d = Daemon(mstrace_binary(), out, log_level="info", socket_name=unique_socket_name())
    d.start()
    try:
        gen = subprocess.run([str(tracegen()), "--socket", d.socket_name, "--scenario", scenario,
                              "--requests", str(requests), "--seed", str(seed), "--pid-base", str(pid_base),
                              *map(str, extra)],
                             capture_output=True, text=True, timeout=300)
        assert gen.returncode == 0, gen.stderr
        counts = json.loads(gen.stdout.strip().splitlines()[-1])
        assert counts["failed"] == 0 and counts["dropped"] == 0, counts
        d.wait_for_spans(counts["spans"], timeout=120)
    finally:
        assert d.stop() == 0, d.log()
    counts["path"] = out
    return counts


def analyze(*args, check=True):
    proc = subprocess.run([str(mstrace_binary()), "analyze"] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def check_shares(a):
    """The parts of the engine's time sum to its wall time and no share exceeds 100 %."""
    if a["steps"]["busy"]:
        assert a["parts_share"] == pytest.approx(1.0, abs=1e-6), a["parts_share"]
    for name, st in a["stages"].items():
        assert 0 <= st["share"] <= 1.0 + 1e-9, (name, st["share"])
    assert a["stages"]["output"]["concurrent"] is True


def analysis(*paths, extra=()):
    proc = analyze(*paths, "--json", "-", *extra)
    a = json.loads(proc.stdout)
    check_shares(a)  # on every trace any test analyses
    return a


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """One trace per scenario (and a second balanced one with another seed)."""
    d = tmp_path_factory.mktemp("analyze")
    out = {sc: record(d, sc) for sc in QUIET + list(PLANTS)}
    out["balanced2"] = record(d, "balanced", seed=2, name="balanced2")
    return out


def fired(a):
    return sorted(f["rule"] for f in a["findings"] if f["fired"])


@pytest.mark.parametrize("scenario", QUIET)
def test_quiet_runs_raise_no_alarm(traces, scenario):
    """Balanced, a load ramp (batches grow, cost per request constant) and long outputs."""
    a = analysis(traces[scenario]["path"])
    assert fired(a) == [], [f["sentence"] for f in a["findings"] if f["fired"]]
    assert a["verdict"]["bottleneck"] == "model", a["verdict"]
    assert a["data_quality"]["warnings"] == []


def test_balanced_run_raises_no_alarm(traces):
    a = analysis(traces["balanced"]["path"])
    assert fired(a) == [], [f["sentence"] for f in a["findings"] if f["fired"]]
    assert a["data_quality"]["lossy"] is False
    assert a["data_quality"]["spans"] == traces["balanced"]["spans"]
    assert a["steps"]["count"] == traces["balanced"]["steps"]
    assert a["requests"]["joined"] == REQUESTS
    assert a["data_quality"]["unjoined_requests"] == 0
    roles = sorted(p["role"] for p in a["data_quality"]["processes"])
    assert roles == ["api_server", "engine_core", "worker_0"]
    # Every rule is reported with numbers, fired or not.
    assert {f["rule"] for f in a["findings"]} == RULES
    assert all(f["numbers"] and f["sentence"] for f in a["findings"])


@pytest.mark.parametrize("scenario", sorted(PLANTS))
def test_planted_bottleneck_fires_its_rule_only(traces, scenario):
    rules, stage = PLANTS[scenario]
    a = analysis(traces[scenario]["path"])
    assert fired(a) == sorted(rules), [f["sentence"] for f in a["findings"] if f["fired"]]
    assert a["verdict"]["bottleneck"] == stage, a["verdict"]
    rule = rules[0]
    f = next(f for f in a["findings"] if f["rule"] == rule)
    assert f["severity"] in ("warning", "critical") and f["sentence"]
    if scenario == "tail":
        # The stage that differs for the slowest requests is the stalled forward.
        assert f["numbers"]["stage"] == 1 and "model forward" in f["sentence"]
        assert f["numbers"]["per_step_ratio"] >= 1.5
    if scenario == "model":
        fit = a["steps"]["model_fit"]
        assert fit["x"] == "scheduled_tokens" and fit["r2"] > 0.8
        assert 0.015 < fit["slope_ms"] < 0.025  # planted: 0.02 ms per token
    if scenario == "joining":
        assert a["data_quality"]["unjoined_requests"] == REQUESTS
        assert len(a["data_quality"]["unjoined_examples"]) == 10
    if scenario == "drain":
        # The rise drains again before the end: a first-vs-last comparison would miss it.
        assert f["numbers"]["schedule_peak_bin"] in (2, 3), f["numbers"]
    if scenario == "kvfull":
        assert "KV cache is full" in a["verdict"]["sentence"] and "--gpu-memory-utilization" in f["sentence"]
        assert a["requests"]["preemptions"] == traces[scenario]["preemptions"] > 0
        p = next(x for x in a["findings"] if x["rule"] == "preemption")
        assert p["numbers"]["recomputed_tokens"] > 0 and p["numbers"]["time_lost_ms"] > 0
    if scenario == "maxseqs":
        assert "max_num_seqs is reached" in a["verdict"]["sentence"]
        assert a["requests"]["preemptions"] == 0
    if scenario == "prefill":
        assert f["numbers"]["ratio"] > 3 and f["numbers"]["long_prefill_steps"] >= 4
        assert "--long-prefill-token-threshold" in f["sentence"]


def test_profile_targets_point_at_the_planted_process(traces):
    a = analysis(traces["model"]["path"])
    worker = next(p["pid"] for p in a["data_quality"]["processes"] if p["role"] == "worker_0")
    steps = [t for t in a["profile_targets"] if t["what"].startswith("step")]
    assert steps and all(t["pid"] == worker for t in steps)
    assert all(t["end_ns"] > t["start_ns"] for t in a["profile_targets"])
    assert any(t["what"].startswith("request") for t in a["profile_targets"])


def test_same_distribution_compares_as_no_difference(traces):
    a = analysis("--compare", traces["balanced"]["path"], traces["balanced2"]["path"])
    c = a["compare"]
    assert c["significant"] == 0, [m["sentence"] for m in c["metrics"] if m["significant"]]
    assert c["verdict"].startswith("No significant difference")
    assert len(c["metrics"]) == 15 and all(m["before"]["n"] > 0 for m in c["metrics"])
    assert c["alpha"] == 0.001 and all("p < 0.001" not in m["sentence"] for m in c["metrics"])
    assert c["before_inputs"] == [str(traces["balanced"]["path"])]
    assert c["after_inputs"] == [str(traces["balanced2"]["path"])]


def test_real_change_is_significant(traces):
    a = analysis("--compare", traces["balanced"]["path"], traces["model"]["path"])
    sig = {m["metric"]: m for m in a["compare"]["metrics"] if m["significant"]}
    assert "step.model_ms" in sig and sig["step.model_ms"]["change_pct"] > 100
    assert "step.schedule_ms" not in sig and "step.ipc_ms" not in sig
    assert sig["step.model_ms"]["p_value"] < 1e-6
    assert "p < 0.001" in sig["step.model_ms"]["sentence"] and sig["step.model_ms"]["cliffs_delta"] > 0.9


def test_tail_shift_is_significant(traces):
    """The stall moves only the slowest 3 % of steps: the median stays, the p99 test sees it."""
    a = analysis("--compare", traces["balanced"]["path"], traces["tail"]["path"])
    m = next(m for m in a["compare"]["metrics"] if m["metric"] == "step.model_ms")
    assert abs(m["change_pct"]) < 5 and m["p99_change_pct"] > 100, m
    assert m["significant"] and m["test"] in ("bootstrap-p90", "bootstrap-p99"), m


def test_several_files_merge_and_keep_pids_apart(traces, tmp_path):
    # Same pids in both files (two nodes): kept apart by input.
    other = record(tmp_path, "balanced", seed=3, name="node2")
    a = analysis(traces["balanced"]["path"], other["path"])
    assert len(a["inputs"]) == 2
    procs = a["data_quality"]["processes"]
    assert len(procs) == 6 and sorted({p["input"] for p in procs}) == [0, 1]
    assert a["data_quality"]["engines"] == 2
    assert a["steps"]["count"] == traces["balanced"]["steps"] + other["steps"]
    assert a["data_quality"]["spans"] == traces["balanced"]["spans"] + other["spans"]


def test_cut_file_is_analysed_up_to_the_cut(traces, tmp_path):
    """A forwarder killed in the middle of a write leaves '[...events,{partial' (docs/forwarder.md)."""
    data = traces["balanced"]["path"].read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    proc = analyze(cut, "--json", tmp_path / "cut_out.json")
    assert "warning" in proc.stderr and "cut" in proc.stderr
    a = json.loads((tmp_path / "cut_out.json").read_text())
    assert a["inputs"][0]["truncated"] is True
    assert a["data_quality"]["lossy"] is True
    assert any("cut short" in w for w in a["data_quality"]["warnings"])
    assert 0 < a["data_quality"]["spans"] < traces["balanced"]["spans"]
    assert a["steps"]["count"] > 0


@pytest.mark.parametrize("content,words", [
    (b"", "empty file"),
    (b"   \n", "empty file"),
    (b"hello world\n", "not a Chrome Trace JSON file"),
    (b'{"traceEvents": []}', "top level is a JSON object"),
    (b"42", "top level is a number"),
    (b"[]", "no spans"),
    (b'[{"ph":"M","name":"process_name","pid":1,"args":{"name":"x"}}]', "no spans"),
    (b"\x0a\x10\x08\x01", "Perfetto protobuf"),
    (b"[1,2,", "no spans"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, content, words):
    assert_bad_input_exits_2(tmp_path / "bad.json", content, words)


def assert_bad_input_exits_2(bad, content, words):
    """`content` written to the file `bad` and analysed: exit 2, one stderr line
    "mstrace analyze: error: ..." holding `words`, and no --json output written."""
    bad.write_bytes(content)
    out = bad.with_name("never.json")
    proc = analyze(bad, "--json", out, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mstrace analyze: error:"), proc.stderr
    assert words in lines[0], lines[0]
    assert not out.exists()


def test_missing_file_and_directory_exit_2(tmp_path):
    for path in (tmp_path / "absent.json", tmp_path):
        proc = analyze(path, check=False)
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_usage_errors_exit_2():
    for args in ([], ["--top"], ["--top", "x", "a.json"], ["--bogus", "a.json"], ["--compare", "a.json"]):
        proc = analyze(*args, check=False)
        assert proc.returncode == 2, args
        assert "mstrace analyze: error:" in proc.stderr


def test_custom_span_names_get_statistics(tmp_path):
    """A custom YAML's spans (no vLLM names): per-name statistics, no verdict, exit 0."""
    out = tmp_path / "custom.json"
    d = Daemon(mstrace_binary(), out, log_level="info").start()
    try:
        pk = []
        for i in range(50):
            t0 = 1_700_000_000_000_000_000 + i * 10_000_000
            pk.append(make_packet("my.handler.step", "%032x" % (i + 1), "%016x" % (i + 1), t0,
                                  t0 + (1 + i % 5) * 1_000_000))
        d.send(*pk)
        d.wait_for_spans(50)
    finally:
        d.stop()
    a = analysis(out)
    assert a["verdict"]["bottleneck"] is None and "no engine steps" in a["verdict"]["sentence"].lower()
    names = {n["name"]: n for n in a["span_names"]}
    assert names["my.handler.step"]["count"] == 50
    assert 2.9 < names["my.handler.step"]["p50_ms"] < 3.1
    assert abs(names["my.handler.step"]["max_ms"] - 5.0) < 1e-6
    assert fired(a) == ["broken_joining"] or fired(a) == []


def test_csv_agrees_with_json(traces, tmp_path):
    path = traces["tail"]["path"]
    a = analysis(path, extra=["--top", "5", "--csv", str(tmp_path / "csv")])
    with open(tmp_path / "csv" / "request.csv", newline="") as fh:
        reqs = list(csv.DictReader(fh))
    with open(tmp_path / "csv" / "step.csv", newline="") as fh:
        steps = list(csv.DictReader(fh))
    assert len(reqs) == a["requests"]["count"] and len(steps) == a["steps"]["count"]
    assert len(a["requests"]["slowest"]) == 5
    slowest = a["requests"]["slowest"][0]
    row = next(r for r in reqs if r["request_id"] == slowest["id"])
    assert abs(float(row["execution_time_ms"]) - slowest["e2e_ms"]) < 1e-3
    e2e = sorted(float(r["execution_time_ms"]) for r in reqs if r["execution_time_ms"])
    assert abs(e2e[-1] - a["requests"]["e2e_ms"]["max"]) < 1e-3
    assert sum(float(s["model_ms"]) for s in steps if s["busy"] == "1") == pytest.approx(
        a["stages"]["model"]["total_ms"], rel=1e-6)
    assert slowest["step_windows"] and all(w[1] >= w[0] for w in slowest["step_windows"])


def test_python_module_runs_the_same_binary(traces):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"),
               MSTRACE_BUILD_DIR=str(mstrace_binary().parent))
    py = subprocess.run([sys.executable, "-m", "mstrace.analyze", str(traces["balanced"]["path"]), "--json", "-"],
                        env=env, capture_output=True, text=True, timeout=300)
    assert py.returncode == 0, py.stderr
    assert py.stdout == analyze(traces["balanced"]["path"], "--json", "-").stdout


def test_request_metrics_follow_vllm_definitions(traces):
    """queue (engine received -> first scheduled), prefill, decode, inference, TTFT, TPOT, ITL,
    e2e and the API-server -> engine hand-off, from the step records."""
    a = analysis(traces["balanced"]["path"])
    r = a["requests"]
    for k in REQUEST_METRICS:
        assert {"n", "mean", "p50", "p90", "p99", "max"} <= set(r[k]), k
        assert r[k]["n"] == (REQUESTS if k != "itl_ms" else r["itl_ms"]["n"]) > 0, k
    assert r["preemptions"] == 0
    assert a["data_quality"]["steps_with_record"] == a["steps"]["count"]
    # The generator hands each request to the engine 0.3 ms after it arrived.
    assert r["handoff_ms"]["p50"] == pytest.approx(0.3, abs=0.01)
    # One inter-token gap per output token after a request's first.
    assert r["itl_ms"]["n"] == traces["balanced"]["tokens"] - REQUESTS
    for q in r["slowest"]:
        assert q["inference_ms"] == pytest.approx(q["prefill_ms"] + q["decode_ms"], abs=1e-3)
        assert q["tpot_ms"] == pytest.approx(q["decode_ms"] / (q["tokens"] - 1), rel=1e-6)
        # TTFT (API server) covers hand-off, queue and prefill (engine).
        assert q["ttft_ms"] >= q["handoff_ms"] + q["queue_ms"] + q["prefill_ms"] - 1e-3
        assert q["e2e_ms"] >= q["ttft_ms"]
    # The mean ITL is the mean TPOT weighted by tokens: both are engine-side.
    assert r["itl_ms"]["mean"] == pytest.approx(r["tpot_ms"]["mean"], rel=0.05)


def test_old_format_trace_still_analyses(traces, tmp_path):
    """A trace written before the step record (same seed, same times): the same TTFT, TPOT
    and e2e, queue measured from arrival (so 0.3 ms more: the hand-off) and said so."""
    old = record(tmp_path, "balanced", name="old", extra=["--old-format"])
    a, b = analysis(old["path"]), analysis(traces["balanced"]["path"])
    assert fired(a) == [] and a["verdict"]["bottleneck"] == "model"
    assert a["data_quality"]["steps_with_record"] == 0
    assert any("no step record" in w for w in a["data_quality"]["warnings"])
    for k in ("ttft_ms", "e2e_ms"):
        assert a["requests"][k]["p50"] == pytest.approx(b["requests"][k]["p50"], abs=1e-3), k
    assert a["requests"]["queue_ms"]["mean"] == pytest.approx(b["requests"]["queue_ms"]["mean"] + 0.3, abs=0.01)
    assert a["requests"]["handoff_ms"]["n"] == 0 and a["requests"]["itl_ms"]["n"] > 0


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Four engines in four files (one per rank), balanced and with rank 2's forward 3x slower."""
    d = tmp_path_factory.mktemp("ranks")
    out = {}
    for case, slow in (("even", None), ("slow", 2)):
        out[case] = [record(d, "balanced", seed=10 + k, pid_base=41000 + 1000 * k, name=f"{case}{k}",
                            extra=["--model-scale", "3" if k == slow else "1"]) for k in range(4)]
    return out


def test_one_slow_rank_is_named(ranks):
    a = analysis(*[c["path"] for c in ranks["slow"]])
    assert fired(a) == ["rank_imbalance"], [f["sentence"] for f in a["findings"] if f["fired"]]
    f = next(f for f in a["findings"] if f["rule"] == "rank_imbalance")
    assert f["numbers"]["slowest_pid"] == 43010 and f["numbers"]["slowest_input"] == 2
    assert str(ranks["slow"][2]["path"]) in f["sentence"] and f["numbers"]["ratio"] > 1.5
    assert f["numbers"]["stage"] == 1  # the model forward
    assert len(a["engines"]) == 4 and a["engines"][2]["pid"] == 43010
    even = analysis(*[c["path"] for c in ranks["even"]])
    assert fired(even) == [], [f["sentence"] for f in even["findings"] if f["fired"]]


def test_compare_lists_every_file_and_each_engine(ranks):
    even = ",".join(str(c["path"]) for c in ranks["even"])
    slow = ",".join(str(c["path"]) for c in ranks["slow"])
    c = analysis("--compare", even, slow)["compare"]
    assert c["before_inputs"] == [str(x["path"]) for x in ranks["even"]]
    assert c["after_inputs"] == [str(x["path"]) for x in ranks["slow"]]
    sig = {m["metric"]: m for m in c["metrics"] if m["significant"]}
    assert "step.model_ms" in sig and sig["step.model_ms"]["p90_change_pct"] > 50
    assert "engine2.step.model_ms" in sig and "engine0.step.model_ms" not in sig, sorted(sig)


@pytest.mark.parametrize("fmt", [[], ["--old-format"]])
def test_clock_offset_is_a_warning_in_every_output(tmp_path, fmt):
    """The engine's clock 40 ms ahead of the API server's: a data-quality warning in the JSON,
    the HTML's data and the text summary."""
    c = record(tmp_path, "balanced", name="skew", extra=["--engine-clock-offset-ms", "40", *fmt])
    a = analysis(c["path"])
    assert "clock" in fired(a)
    assert any("clocks disagree" in w for w in a["data_quality"]["warnings"])
    text = analyze(c["path"]).stdout
    assert "data-quality warning:" in text and "clocks disagree" in text


def test_text_summary_has_verdict_warnings_and_latency(traces):
    a = analysis(traces["kvfull"]["path"])
    text = analyze(traces["kvfull"]["path"]).stdout
    lines = text.splitlines()
    assert lines[1] == "verdict: " + a["verdict"]["sentence"]
    rows = {ln.split()[0]: ln.split() for ln in lines if ln.startswith("  ") and len(ln.split()) == 6}
    for label, key in (("queue", "queue_ms"), ("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("ITL", "itl_ms"),
                       ("prefill", "prefill_ms"), ("decode", "decode_ms"), ("e2e", "e2e_ms")):
        n, p50, p90, p99 = int(rows[label][1]), *map(float, rows[label][2:5])
        m = a["requests"][key]
        assert n == m["n"] and abs(p50 - m["p50"]) < 6e-4 and abs(p99 - m["p99"]) < 6e-4, label
        assert abs(p90 - m["p90"]) < 6e-4


def test_text_summary_escapes_control_characters(tmp_path):
    """A request id is outside text: ESC ] ... BEL and ESC [2J never reach the terminal raw."""
    evil = "req-\x1b]0;pwned\x07\x1b[2J-\x9b"
    out = tmp_path / "evil.json"
    d = Daemon(mstrace_binary(), out, log_level="info", socket_name=unique_socket_name()).start()
    try:
        t0, pk = 1_700_000_000_000_000_000, []
        for i in range(3):
            s = t0 + i * 10_000_000
            pk.append(make_packet("vllm.scheduler.schedule", "%032x" % (i + 1), "%016x" % (i + 1), s, s + 1_000_000,
                                  attrs={"request.ids": [evil], "batch.request_count": 1}, pid=10))
        pk.append(make_packet("vllm.request", "%032x" % 9, "%016x" % 9, t0 - 1_000_000, t0 + 25_000_000,
                              attrs={"request.id": evil}, pid=30))
        d.send(*pk)
        d.wait_for_spans(4)
    finally:
        assert d.stop() == 0
    a = analysis(out)
    assert a["requests"]["slowest"][0]["id"] == evil
    text = analyze(out).stdout
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "req-\\e]0;pwned\\x07\\e[2J-\\u009b" in text  # term_text.h's rule


def test_window_and_skip_warmup(traces, tmp_path):
    path = traces["balanced"]["path"]
    full = analysis(path)
    warm = analysis(path, extra=["--skip-warmup"])
    assert warm["steps"]["count"] == full["steps"]["count"] - 1
    assert 0 < warm["requests"]["count"] < full["requests"]["count"]
    assert warm["data_quality"]["outside_window"] == 1 + full["requests"]["count"] - warm["requests"]["count"]
    assert any("--window / --skip-warmup" in w for w in warm["data_quality"]["warnings"])
    half = analysis(path, extra=["--window", "..1s"])
    late = analysis(path, extra=["--window", "1s.."])
    assert half["steps"]["count"] + late["steps"]["count"] == full["steps"]["count"]
    assert half["requests"]["count"] + late["requests"]["count"] == full["requests"]["count"]
    for bad in (["--window", "5s..1s"], ["--window", "abc"], ["--window", ".."], ["--window", "1000000d.."]):
        proc = analyze(path, *bad, check=False)
        assert proc.returncode == 2 and "error: argument --window" in proc.stderr, proc.stderr
    proc = analyze("http://127.0.0.1:9", "--service", "x", "--skip-warmup", check=False)
    assert proc.returncode == 2 and "for file inputs" in proc.stderr
