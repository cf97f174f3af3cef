"""Integration tests of `mstrace analyze` (docs/analyze.md) on traces made the real way.

Every trace here is produced by the generator $MSTRACE_BUILD_DIR/test_analyze_tracegen
(tests/unit/test_analyze_tracegen.c: a vLLM-like run with one planted bottleneck, recorded
with libmstrace) and sent through the forwarder client to the real `mstrace forward` daemon,
whose Chrome Trace JSON output is what gets analysed. Checked: each planted bottleneck fires
its own rule and no other, the verdict names the planted stage, a balanced run raises no
alarm, two runs from the same distribution compare as "no significant difference" while a
real change is significant, several files merge with pids kept apart by file, a file cut
mid-write (as a SIGKILL leaves it) is analysed up to the cut with a warning, bad inputs exit 2
with one clear line, custom span names get per-name statistics, the CSVs agree with the JSON,
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

# scenario -> (the one rule that must fire, the stage the verdict must name)
PLANTS = {
    "scheduler": ("scheduler_rising", "schedule"),
    "model": ("model_dominant", "model"),
    "executor": ("executor_gap", "ipc"),
    "output": ("output_rising", "output"),
    "waiting": ("host_waiting", "waiting"),
    "tail": ("long_tail", "model"),
    "joining": ("broken_joining", "model"),
}


def tracegen() -> Path:
    path = build_path("test_analyze_tracegen")
    if not os.access(path, os.X_OK):
        pytest.fail(f"trace generator not built at {path}")
    return path


def record(tmp_dir: Path, scenario: str, seed=1, requests=REQUESTS, pid_base=40000, name=None) -> dict:
    """Runs the generator against a fresh forwarder daemon; returns the generator's counts
    plus the output path, once the daemon wrote every span and stopped."""
    out = tmp_dir / f"{name or scenario}.json"
    d = Daemon(mstrace_binary(), out, log_level="info", socket_name=unique_socket_name())
    d.start()
    try:
        gen = subprocess.run([str(tracegen()), "--socket", d.socket_name, "--scenario", scenario,
                              "--requests", str(requests), "--seed", str(seed), "--pid-base", str(pid_base)],
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


def analysis(*paths, extra=()):
    proc = analyze(*paths, "--json", "-", *extra)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """One trace per scenario (and a second balanced one with another seed)."""
    d = tmp_path_factory.mktemp("analyze")
    out = {sc: record(d, sc) for sc in ["balanced"] + list(PLANTS)}
    out["balanced2"] = record(d, "balanced", seed=2, name="balanced2")
    return out


def fired(a):
    return sorted(f["rule"] for f in a["findings"] if f["fired"])


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
    assert {f["rule"] for f in a["findings"]} == {r for r, _ in PLANTS.values()} | set()
    assert all(f["numbers"] and f["sentence"] for f in a["findings"])


@pytest.mark.parametrize("scenario", sorted(PLANTS))
def test_planted_bottleneck_fires_its_rule_only(traces, scenario):
    rule, stage = PLANTS[scenario]
    a = analysis(traces[scenario]["path"])
    assert fired(a) == [rule], [f["sentence"] for f in a["findings"] if f["fired"]]
    assert a["verdict"]["bottleneck"] == stage, a["verdict"]
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
    assert len(c["metrics"]) == 10 and all(m["before"]["n"] > 0 for m in c["metrics"])


def test_real_change_is_significant(traces):
    a = analysis("--compare", traces["balanced"]["path"], traces["model"]["path"])
    sig = {m["metric"]: m for m in a["compare"]["metrics"] if m["significant"]}
    assert "step.model_ms" in sig and sig["step.model_ms"]["change_pct"] > 100
    assert "step.schedule_ms" not in sig and "step.ipc_ms" not in sig
    assert sig["step.model_ms"]["p_value"] < 1e-6


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
