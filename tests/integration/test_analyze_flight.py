"""`mstrace analyze` on a flight-recorder dump of the real `mstrace forward`
daemon (fed the vLLM-shaped stream of flight_traffic.py, as
test_forward_flight.py does).

Owns: the dump's `mstrace.flight_recorder.trigger` span (read back from the
dump by the independent Python readers of pftrace_model.py) is shown first:
the text summary's first line names the trigger, the request and its
queue / prefill / decode split (equal to the JSON's request row); the
JSON's top-level `flight_recorder` holds the trigger, its window and every
request it names; the span counts as no stage's model span; the HTML
report draws the trigger as its first section with every number from the
JSON. A trace that is not a dump has no `flight_recorder` and no trigger
line.
"""

import json
import subprocess

import pytest

from flight_traffic import engine_traffic
from test_analyze_report import artifacts, browser, check_numbers, open_report  # noqa: F401 (fixtures)
from test_forward_flight import _dumps, _flight, _read, _send

TRIGGER = "mstrace.flight_recorder.trigger"


def _analyze(mstrace_bin, tmp_path, path, html=False):
    js = tmp_path / "analysis.json"
    argv = [str(mstrace_bin), "analyze", str(path), "--json", str(js)]
    if html:
        argv += ["-o", str(tmp_path / "report.html")]
    a = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert a.returncode == 0, a.stderr
    return a.stdout, json.loads(js.read_text(encoding="utf-8"))


def _one_dump(daemon_factory, tmp_path, ext, traffic, *flags):
    d = _flight(daemon_factory, tmp_path / f"run{ext}", *flags)
    _send(d, traffic.packets)
    assert d.stop() == 0, d.log()[-3000:]
    dumps = _dumps(tmp_path, ext=ext)
    assert len(dumps) == 1, d.log()[-3000:]
    (trig,) = [s for s in _read(dumps[0]).slices if s["name"] == TRIGGER]
    return dumps[0], trig


def _request_line(row):
    return f"flight-recorder request {row['id']}: e2e {row['e2e_ms']:.1f} ms (queue {row['queue_ms']:.1f} ms, " \
           f"prefill {row['prefill_ms']:.1f} ms, decode {row['decode_ms']:.1f} ms) over {row['steps']} steps, " \
           f"at most {row['max_shared']} requests in a step"


@pytest.mark.parametrize("ext", [".pftrace", ".json"])
def test_slow_request_dump_shows_its_trigger_first(daemon_factory, tmp_path, mstrace_bin, ext):
    traffic = engine_traffic(30, slow=[7], slow_steps=150)
    slow = traffic.requests[7]
    dump, trig = _one_dump(daemon_factory, tmp_path, ext, traffic, "--trigger", "e2e>1s")
    reason = trig["args"]["flight.trigger"]
    assert trig["args"]["flight.request_ids"] == [slow.rid] and ">1s" in reason
    text, an = _analyze(mstrace_bin, tmp_path, dump)

    fr = an["flight_recorder"]
    assert list(an)[:3] == ["schema", "generated_by", "flight_recorder"]
    assert fr["triggers_not_shown"] == 0 and len(fr["triggers"]) == 1
    (t,) = fr["triggers"]
    assert t["trigger"] == reason and t["on_demand"] is False and t["request_ids_total"] == 1
    assert t["start_ns"] == trig["ts"] and t["end_ns"] == trig["ts"] + trig["dur"]
    (q,) = t["requests"]
    # The named request is the slowest one, and the trigger carries its row.
    row = an["requests"]["slowest"][0]
    assert q["id"] == row["id"] == slow.rid and q["in_dump"] is True
    for k in ("queue_ms", "ttft_ms", "prefill_ms", "decode_ms", "e2e_ms", "steps", "preemptions"):
        assert q[k] == row[k], k
    assert q["steps"] == 150 and q["e2e_ms"] > 1000

    lines = text.splitlines()
    assert lines[0] == f"flight-recorder dump: trigger {reason}, window {t['start_ns']}..{t['end_ns']} ns " \
                       f"({t['window_ms']:.1f} ms)", lines[0]
    assert f"request {slow.rid}" in lines[0]
    assert lines[1] == _request_line(q)
    assert lines[2].startswith("data: ")
    # The trigger span is in no stage: the steps are those of the traffic alone.
    assert an["steps"]["count"] == len({s for s, (name, _) in traffic.spans.items()
                                        if name == "vllm.scheduler.schedule"} & traffic.steps_of(slow.rid))
    assert an["span_names"] and any(n["name"] == TRIGGER for n in an["span_names"])


def test_error_dump_names_every_request_of_the_failing_steps(daemon_factory, tmp_path, mstrace_bin):
    traffic = engine_traffic(12, error=[4])
    dump, trig = _one_dump(daemon_factory, tmp_path, ".pftrace", traffic, "--trigger", "error")
    ids = trig["args"]["flight.request_ids"]
    assert len(ids) > 1
    text, an = _analyze(mstrace_bin, tmp_path, dump)
    (t,) = an["flight_recorder"]["triggers"]
    kept = ids[:8]
    assert [q["id"] for q in t["requests"]] == kept and t["request_ids_total"] == len(ids)
    rows = {r["id"]: r for r in an["requests"]["slowest"]}
    lines = text.splitlines()
    assert lines[0].startswith(f"flight-recorder dump: trigger {trig['args']['flight.trigger']}, window ")
    for i, q in enumerate(t["requests"]):
        assert q["in_dump"] and lines[1 + i] == _request_line(q)
        if q["id"] in rows:
            assert q["e2e_ms"] == rows[q["id"]]["e2e_ms"]
    rest = lines[1 + len(kept):]
    if len(ids) > 8:
        assert rest[0] == f"flight-recorder: {len(ids) - 8} more requests named (the first 8 are shown)"
        rest = rest[1:]
    assert rest[0].startswith("data: ")


def test_a_trace_that_is_no_dump_has_no_flight_recorder(daemon_factory, tmp_path, mstrace_bin):
    traffic = engine_traffic(10)
    d = daemon_factory(output=tmp_path / "plain.pftrace").start()
    _send(d, traffic.packets)
    assert d.stop() == 0, d.log()[-3000:]
    text, an = _analyze(mstrace_bin, tmp_path, tmp_path / "plain.pftrace")
    assert an["requests"]["count"] == 10
    assert "flight_recorder" not in an
    assert text.startswith("data: ") and "flight-recorder" not in text


def test_report_draws_the_trigger_first(daemon_factory, tmp_path, mstrace_bin, browser, artifacts):  # noqa: F811
    traffic = engine_traffic(30, slow=[7], slow_steps=150)
    slow = traffic.requests[7]
    dump, trig = _one_dump(daemon_factory, tmp_path, ".pftrace", traffic, "--trigger", "e2e>1s")
    _, an = _analyze(mstrace_bin, tmp_path, dump, html=True)
    open_report(browser, tmp_path / "report.html", an, artifacts, "flight.png")
    shown = check_numbers(browser, an)
    base = ("flight_recorder", "triggers", 0)
    assert base + ("window_ms",) in shown
    for k in ("e2e_ms", "queue_ms", "prefill_ms", "decode_ms", "steps"):
        assert base + ("requests", 0, k) in shown
    sections = browser.evaluate("Array.from(document.querySelectorAll('main > section')).map(e => e.id)")
    assert sections[:2] == ["flight-recorder", "verdict"], sections
    banner = browser.evaluate("document.getElementById('flight-recorder').textContent")
    assert trig["args"]["flight.trigger"] in banner and f"request {slow.rid}: e2e " in banner and ") over 150 steps" in banner


HOSTILE = "\x1b]0;owned\x07\x1b[2J\nverdict: forged\u202e"


def test_trigger_spans_are_bounded_escaped_and_joined(tmp_path, mstrace_bin):
    """A hand-written Chrome Trace JSON (a dump may come from anywhere):
    20 trigger spans, the first with a hostile reason naming one request of
    the trace, one the trace lacks, one that is that request's id up to a NUL
    and 9 more; one on demand."""
    ids = ["present", HOSTILE, "present\x00tail"] + [f"x{i}" for i in range(9)]
    events = [{"name": "vllm.request", "ph": "X", "ts": 1000, "dur": 5000, "pid": 1, "tid": 1, "cat": "x",
               "args": {"request.id": "present", "trace_id": "1" * 32, "span_id": "1" * 16}}]
    for i in range(20):
        args = {"flight.trigger": HOSTILE if i == 0 else f"t{i}", "flight.request_ids": ids if i == 0 else [],
                "flight.on_demand": i == 1, "trace_id": f"{i + 2:032x}", "span_id": f"{i + 2:016x}"}
        events.append({"name": TRIGGER, "ph": "X", "ts": 900 + i, "dur": 7000, "pid": 9, "tid": 9,
                       "cat": "mstrace", "args": args})
    trace = tmp_path / "dump.json"
    trace.write_text(json.dumps(events))
    text, an = _analyze(mstrace_bin, tmp_path, trace)
    fr = an["flight_recorder"]
    assert len(fr["triggers"]) == 16 and fr["triggers_not_shown"] == 4
    t0, t1 = fr["triggers"][0], fr["triggers"][1]
    assert t0["trigger"] == HOSTILE and t0["request_ids_total"] == 12 and t0["on_demand"] is False
    assert [q["id"] for q in t0["requests"]] == ids[:8]
    assert [q["in_dump"] for q in t0["requests"]] == [True] + [False] * 7
    assert t0["requests"][0]["e2e_ms"] == 5 and t0["start_ns"] == 900_000 and t0["window_ms"] == 7
    assert t1["on_demand"] is True and t1["requests"] == [] and t1["trigger"] == "t1"
    assert an["requests"]["count"] == 1 and an["steps"]["count"] == 0

    assert "\x1b" not in text and "\u202e" not in text and "\nverdict: forged" not in text
    lines = text.splitlines()
    escaped = "\\e]0;owned\\x07\\e[2J\\nverdict: forged\\u202e"
    assert lines[0] == f"flight-recorder dump: trigger {escaped}, window 900000..7900000 ns (7.0 ms)"
    assert lines[1].startswith("flight-recorder request present: e2e 5.0 ms (queue ")
    assert lines[2] == f"flight-recorder request {escaped}: not in this dump"
    assert lines[3] == "flight-recorder request present\\x00tail: not in this dump"
    assert lines[4:9] == [f"flight-recorder request x{i}: not in this dump" for i in range(5)]
    assert lines[9] == "flight-recorder: 4 more requests named (the first 8 are shown)"
    assert lines[10].startswith("flight-recorder dump: trigger t1 (the whole ring), window ")
    assert lines[25] == "flight-recorder: 4 more trigger spans (the first 16 are shown)"
    assert lines[26].startswith("data: ")
