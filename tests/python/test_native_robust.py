"""Regression tests for defects found by attacking the C extension
`mstrace._native` (fuzzing, generators, fork, shutdown).

Owns: the fuzz_trace_headers finding (an output whose request_id is None
finished the request registered as "None") replayed both as a direct check
and through the fuzz harness; hooked generators and async generators (the
span covers the iteration); os.fork() inside a hooked call (the open span is
exported once, by the process that ends it).
"""

import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FINDING = os.path.join(REPO, "tests", "fuzz", "corpus", "fuzz_trace_headers", "regression-output-request-id-none")
T1, S1 = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


@pytest.fixture
def cap(native):
    native._reset_requests()
    spans = native._capture(True)
    yield spans
    native._capture(False)
    native._reset_requests()


class Output(object):
    def __init__(self, request_id, finish_reason=None):
        self.request_id = request_id
        self.finish_reason = finish_reason


# ------------------------------------------------- fuzz_trace_headers finding


def test_output_with_request_id_none_names_no_request(native, cap):
    """request_id None is "no id" (as in the request adapter), not the string "None".

    vLLM's FinishReason is an IntEnum (STOP == 0), so finish_reason 0 is set."""
    assert native.register_request(None, {"traceparent": "00-%s-%s-01" % (T1, S1)})  # keyed "None"
    tracked = native.stats()["requests_tracked"]
    hook = native.Hook(lambda outs: "ok", name="out", adapter="output")
    assert hook([Output(None, finish_reason=0)]) == "ok"
    assert native.lookup_request("None") == (T1, S1, True)
    assert native.stats()["requests_tracked"] == tracked
    span = [s for s in cap if s["name"] == "out"][0]
    assert "None" not in span["attributes"].get("request.ids", [])
    assert span["attributes"]["batch.request_count"] == 1
    # A real id with finish_reason 0 (FinishReason.STOP) is finished.
    assert native.register_request("r0", {"traceparent": "00-%s-%s-01" % (T1, S1)})
    assert hook([Output("r0", finish_reason=0)]) == "ok"
    assert native.lookup_request("r0") is None


def test_fuzz_trace_headers_finding_replays_clean(native):
    """The input CI's fuzz stage found (requests_tracked 2 vs model 3), through the harness itself."""
    pytest.importorskip("atheris")
    assert os.path.isfile(FINDING)
    env = dict(os.environ)
    env.setdefault("MSTRACE_PY_BUILD", os.path.dirname(os.path.dirname(os.path.dirname(native.__file__))))
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "fuzz", "fuzz_trace_headers.py"), FINDING],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out[-3000:]
    assert "Violation" not in out
