"""The custom exporter example (examples/custom_exporter.c): an exporter
written outside the library on the public read-out API alone (mstrace.h,
"read-out"; docs/c-api.md, "Writing an exporter"), linked against
libmstrace only. The example records three spans with known content and
writes each as a JSON line; this test runs the real binary and checks every
field the read-out API gives: ids and parent (local and remote), trace flags
and trace state, kind, status, scope, attributes of every type, links with
their attributes, events, dropped counts and the resource (from
OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES and the process).
"""

import json
import os
import subprocess

import pytest

from conftest import build_path


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    binary = build_path("example_custom_exporter")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"example not found at {binary}; build it or set MSTRACE_BUILD_DIR")
    out = tmp_path_factory.mktemp("jsonl") / "spans.jsonl"
    env = dict(os.environ, OTEL_SERVICE_NAME="custom-engine", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
    proc = subprocess.run([str(binary), str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "tracer: started=3 exported=3 failed=0" in proc.stderr
    assert "jsonl exporter: exported=3 failed=0 batches_ok=" in proc.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    by_name = {}
    for line in lines:
        span = json.loads(line)  # strict: the exporter's own JSON must be valid
        by_name[span["name"]] = span
    assert set(by_name) == {"llm_request", "engine.step", "remote_child"}
    return by_name


def test_root_span(spans):
    req = spans["llm_request"]
    assert req["parent_span_id"] is None and req["parent_is_remote"] is False
    assert len(req["trace_id"]) == 32 and int(req["trace_id"], 16) != 0
    assert len(req["span_id"]) == 16 and int(req["span_id"], 16) != 0
    assert req["trace_flags"] == 1 and req["trace_state"] == ""
    assert req["kind"] == "SERVER"
    assert req["status"] == {"code": "UNSET", "message": ""}
    assert req["scope"] == {"name": "example.engine", "version": "1.2"}
    assert (req["start_ns"], req["end_ns"]) == (1000, 4000)
    assert req["attributes"] == {"request.id": "req-1", "request.tokens": 42, "request.temperature": 0.5,
                                 "request.stream": True, "request.ids": ["a", 'b "quoted"']}
    assert req["links"] == [] and req["events"] == []
    assert req["dropped"] == {"attributes": 0, "links": 0, "events": 0}


def test_child_with_link_event_and_error(spans):
    req, step = spans["llm_request"], spans["engine.step"]
    assert step["trace_id"] == req["trace_id"]
    assert step["parent_span_id"] == req["span_id"] and step["parent_is_remote"] is False
    assert step["kind"] == "INTERNAL"
    assert step["status"] == {"code": "ERROR", "message": "out of memory"}
    assert step["links"] == [{"trace_id": req["trace_id"], "span_id": req["span_id"], "trace_flags": 1,
                              "is_remote": False, "trace_state": "", "attributes": {"link.reason": "batch"}}]
    assert step["events"] == [{"name": "first_token", "time_ns": 2500, "attributes": {"tokens": 7}}]


def test_remote_parent(spans):
    rc = spans["remote_child"]
    assert rc["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert rc["parent_span_id"] == "b7ad6b7169203331" and rc["parent_is_remote"] is True
    assert rc["trace_state"] == "vendor=v1"
    assert rc["kind"] == "CONSUMER"


def test_resource(spans):
    for span in spans.values():
        res = span["resource"]
        assert res["service.name"] == "custom-engine"
        assert res["deployment.environment"] == "test"
        assert res["telemetry.sdk.name"] == "mstrace" and res["telemetry.sdk.language"] == "c"
        assert isinstance(res["process.pid"], int) and res["process.pid"] > 0
    assert len({json.dumps(s["resource"], sort_keys=True) for s in spans.values()}) == 1
