"""Cross-checks the C OTLP encoders against the official protobuf bindings.

Owns: running $MSTRACE_BUILD_DIR/test_otlp_vectors --write DIR (a C program
that encodes a fixed set of spans and describes them in expected.json),
decoding spans.pb with opentelemetry-proto's ExportTraceServiceRequest and
checking every field against expected.json, then parsing spans.json (OTLP/
JSON) with google.protobuf.json_format and checking it decodes to the very
same message. Why: an independent decoder catches wire mistakes (field
numbers, fixed64 vs varint, ids, flags) that a self-written decoder shares.
"""

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

REPO = Path(__file__).resolve().parents[2]


def vectors_binary() -> Path:
    build = Path(os.environ.get("MSTRACE_BUILD_DIR", "build"))
    if not build.is_absolute():
        build = REPO / build
    return build / "test_otlp_vectors"


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    exe = vectors_binary()
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} not found; build it or set MSTRACE_BUILD_DIR")
    out = tmp_path_factory.mktemp("otlp_vectors")
    subprocess.run([str(exe), "--write", str(out)], check=True, timeout=60)
    expected = json.loads((out / "expected.json").read_text(encoding="utf-8"))
    req = ExportTraceServiceRequest()
    req.ParseFromString((out / "spans.pb").read_bytes())
    return out, expected, req


# ------------------------------------------------------------- helpers

def check_value(value, exp):
    kind = value.WhichOneof("value")
    t = exp["type"]
    if t == "string":
        assert kind == "string_value"
        assert value.string_value == exp["value"]
    elif t == "int":
        assert kind == "int_value"
        assert value.int_value == exp["value"]
    elif t == "double":
        assert kind == "double_value"
        assert value.double_value == exp["value"]
    elif t == "bool":
        assert kind == "bool_value"
        assert value.bool_value is exp["value"]
    elif t == "string_list":
        assert kind == "array_value"
        items = list(value.array_value.values)
        assert len(items) == len(exp["value"])
        for item, s in zip(items, exp["value"]):
            assert item.WhichOneof("value") == "string_value"
            assert item.string_value == s
    else:
        raise AssertionError(f"unknown type {t}")


def check_attrs(kvs, exp):
    assert [kv.key for kv in kvs] == [a["key"] for a in exp]
    for kv, a in zip(kvs, exp):
        check_value(kv.value, a)


def hex_of(b: bytes) -> str:
    return b.hex()


# --------------------------------------------------------------- binary

def test_structure(vectors):
    _, expected, req = vectors
    assert len(req.resource_spans) == 1
    rs = req.resource_spans[0]
    check_attrs(rs.resource.attributes, expected["resource"]["attributes"])
    assert rs.resource.dropped_attributes_count == expected["resource"]["dropped_attributes_count"]
    # one ScopeSpans per scope, in first-seen order
    assert [(ss.scope.name, ss.scope.version) for ss in rs.scope_spans] == [
        (s["name"], s["version"]) for s in expected["scopes"]]
    assert sum(len(ss.spans) for ss in rs.scope_spans) == expected["span_count"]


def all_pairs(expected, req):
    rs = req.resource_spans[0]
    for ss, es in zip(rs.scope_spans, expected["scopes"]):
        assert len(ss.spans) == len(es["spans"])
        for span, exp in zip(ss.spans, es["spans"]):
            yield span, exp


def test_span_fields(vectors):
    _, expected, req = vectors
    n = 0
    for span, exp in all_pairs(expected, req):
        n += 1
        assert hex_of(span.trace_id) == exp["trace_id"]
        assert hex_of(span.span_id) == exp["span_id"]
        assert hex_of(span.parent_span_id) == exp["parent_span_id"]
        assert span.trace_state == exp["trace_state"]
        assert span.name == exp["name"]
        assert span.kind == exp["kind"]
        assert span.start_time_unix_nano == exp["start_time_unix_nano"]
        assert span.end_time_unix_nano == exp["end_time_unix_nano"]
        assert span.flags == exp["flags"]
        check_attrs(span.attributes, exp["attributes"])
        assert span.dropped_attributes_count == exp["dropped_attributes_count"]
        assert span.dropped_events_count == exp["dropped_events_count"]
        assert span.dropped_links_count == exp["dropped_links_count"]
        assert span.status.code == exp["status"]["code"]
        assert span.status.message == exp["status"]["message"]
    assert n == expected["span_count"]


def test_events_and_links(vectors):
    _, expected, req = vectors
    seen_events = seen_links = 0
    for span, exp in all_pairs(expected, req):
        assert len(span.events) == len(exp["events"])
        for ev, ee in zip(span.events, exp["events"]):
            seen_events += 1
            assert ev.time_unix_nano == ee["time_unix_nano"]
            assert ev.name == ee["name"]
            check_attrs(ev.attributes, ee["attributes"])
            assert ev.dropped_attributes_count == ee["dropped_attributes_count"]
        assert len(span.links) == len(exp["links"])
        for ln, el in zip(span.links, exp["links"]):
            seen_links += 1
            assert hex_of(ln.trace_id) == el["trace_id"]
            assert hex_of(ln.span_id) == el["span_id"]
            assert ln.trace_state == el["trace_state"]
            check_attrs(ln.attributes, el["attributes"])
            assert ln.dropped_attributes_count == el["dropped_attributes_count"]
            assert ln.flags == el["flags"]
    assert seen_events > 0 and seen_links > 0


def test_flags_bits(vectors):
    """Remote-ness bits (0x100 known, 0x200 remote) on spans and links."""
    _, expected, req = vectors
    remote_parent = [s for s, e in all_pairs(expected, req) if s.flags & 0x200]
    assert remote_parent, "the vectors include a span with a remote parent"
    for span, _ in all_pairs(expected, req):
        assert span.flags & 0x100
        for ln in span.links:
            assert ln.flags & 0x100


def test_fields_are_canonical(vectors):
    """Re-serialising with the official library gives the same bytes: field
    order and encodings (fixed64 times, fixed32 flags) match protobuf's own."""
    out, _, req = vectors
    assert req.SerializeToString(deterministic=True) == (out / "spans.pb").read_bytes()


# ----------------------------------------------------------------- JSON

ID_KEYS = ("traceId", "spanId", "parentSpanId")


def hex_ids_to_base64(obj):
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping wants base64 for
    bytes. The OTLP spec says to convert before handing to json_format."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ID_KEYS and isinstance(v, str):
                out[k] = base64.b64encode(bytes.fromhex(v)).decode("ascii")
            else:
                out[k] = hex_ids_to_base64(v)
        return out
    if isinstance(obj, list):
        return [hex_ids_to_base64(v) for v in obj]
    return obj


def test_json_matches_binary(vectors):
    out, _, req = vectors
    raw = json.loads((out / "spans.json").read_text(encoding="utf-8"))
    # hex ids: lowercase, exact lengths
    span0 = raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span0["traceId"]) == 32 and span0["traceId"] == span0["traceId"].lower()
    assert len(span0["spanId"]) == 16
    # int64 as strings, lowerCamelCase keys
    assert isinstance(span0["startTimeUnixNano"], str)
    parsed = ExportTraceServiceRequest()
    json_format.Parse(json.dumps(hex_ids_to_base64(raw)), parsed)
    assert parsed == req


def test_json_uses_otlp_key_names(vectors):
    out, _, _ = vectors
    text = (out / "spans.json").read_text(encoding="utf-8")
    for key in ("resourceSpans", "scopeSpans", "startTimeUnixNano", "endTimeUnixNano",
                "droppedAttributesCount", "stringValue", "intValue", "arrayValue", "timeUnixNano"):
        assert f'"{key}"' in text
    assert "_" not in "".join(json.loads(text).keys())
