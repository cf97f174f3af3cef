"""No span lost on the longer load of the analyze check, on a real vLLM server (CPU).

Owns the check that, with the serve of test_real_vllm_analyze.py (the tiny model, 40 KV blocks of
32, 24 concurrent requests) and a `vllm bench serve` load of 48 prompts of 128 input and 192 output
tokens (about 50 preemptions, so many large step-record spans in a few seconds), every span each
traced process exported is in the forwarder's file: no gap in the engine's step.index
(data_quality.missing_steps == 0), no loss reported anywhere (data_quality.spans_dropped == 0,
each process's exit line counts nothing dropped or failed), and for every process the spans in the
trace equal the spans its tracer exported (its "spans at exit" line). This load once lost 70
consecutive engine steps, or every span of two processes after the first second, while the
forwarder counted no drop (docs/forwarder.md "Loss reports"). Skipped, with the reason, without
a vLLM interpreter, the extension or the `mstrace` binary.
"""

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_real_vllm_analyze import serve_and_analyze  # noqa: E402

INPUT, OUTPUT = 128, 192
EXIT_LINE = re.compile(r"\[mstrace pid=(\d+)\] mstrace: spans at exit: started=(\d+) exported=(\d+) "
                       r"dropped=(\d+) failed=(\d+)")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return serve_and_analyze(tmp_path_factory.mktemp("long_load_vllm"), INPUT, OUTPUT)


def test_every_exported_span_is_in_the_trace(run):
    quality = run["analysis"]["data_quality"]
    assert run["preemptions"] > 0, "the small KV cache should force preemptions"
    assert quality["missing_steps"] == 0, quality["warnings"]
    assert quality["spans_dropped"] == 0, quality
    assert quality["steps_with_record"] > 0, quality
    exits = {int(m.group(1)): tuple(int(x) for x in m.groups()[1:]) for m in EXIT_LINE.finditer(run["log"])}
    in_trace = {p["pid"]: p["spans"] for p in quality["processes"]}
    assert set(in_trace) <= set(exits), (in_trace, exits, run["log"][-3000:])
    for pid, spans in in_trace.items():
        started, exported, dropped, failed = exits[pid]
        assert dropped == 0 and failed == 0, (pid, exits[pid])
        assert spans == exported == started, (pid, spans, exits[pid])
