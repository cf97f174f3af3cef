"""A deterministic span stream whose trace ids recur and whose spans have parents, for the
`.pftrace` id-encoding tests, and the script that wrote tests/integration/data/ids_before_interning.pftrace
(the file a forwarder wrote while every trace, span and parent span id was an inline string;
test_pftrace_ids.py analyses it beside a file the current forwarder writes from the same stream).

The stream: pftrace_fixture.py's two engines and their requests, with the ids a tracer gives them:
each engine step is one trace (its schedule span the root, the model, update and output spans its
children), each request one trace (its `vllm.request` span the root, sent after its `api.tokenize` child
as a tracer ends them), the
step's link to a request naming that request's span. Ids are pseudo-random hex (a fixed hash of
the span's place), a quarter of them with leading zero digits and about half with the high bit
set, so that every textual edge case of a 64- and 128-bit id is in the file.

Usage (regenerating the fixture needs the forwarder of the encoding it stands for):
    python tests/integration/pftrace_ids_fixture.py MSTRACE_BINARY OUT.pftrace
"""

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import MAGIC, make_packet  # noqa: E402
from pftrace_fixture import engine_stream, write_stream  # noqa: E402


def hex_id(kind, n, digits):
    """A fixed pseudo-random id of `digits` hex digits; every fourth starts with zeros."""
    h = hashlib.sha256(f"{kind}:{n}".encode()).hexdigest()[:digits]
    return "000" + h[3:] if n % 4 == 0 else h


def _span(p):
    return json.loads(p[len(MAGIC):])


def _packet(s):
    return MAGIC + json.dumps(s, separators=(",", ":")).encode("utf-8")


def packets():
    """The whole stream: engines interleaved step by step, then each request's child and root."""
    a, ra = engine_stream(300, 0, preempt_at=20)
    b, rb = engine_stream(500, 50_000, preempt_at=26)
    requests = {**ra, **rb}
    req_trace = {rid: hex_id("request-trace", int(rid[5:10]), 32) for rid in requests}
    req_span = {rid: hex_id("request-span", int(rid[5:10]), 16) for rid in requests}
    by_link = {("%032x" % (0x7000 + int(r[5:10])), "%016x" % (0x9000 + int(r[5:10]))): r
               for r in requests}
    out = []
    for steps, pid in ((a, 300), (b, 500)):
        spans = [_span(p) for p in steps]
        for k in range(0, len(spans), 4):          # schedule, model, update, output
            trace = hex_id(f"step-trace-{pid}", k // 4, 32)
            root = hex_id(f"step-span-{pid}", k, 16)
            for j, s in enumerate(spans[k:k + 4]):
                s["trace_id"] = trace
                s["span_id"] = root if j == 0 else hex_id(f"step-span-{pid}", k + j, 16)
                s["parent_span_id"] = "" if j == 0 else root
                for link in s["links"]:
                    rid = by_link[(link["trace_id"], link["span_id"])]
                    link["trace_id"], link["span_id"] = req_trace[rid], req_span[rid]
        out.append([_packet(s) for s in spans])
    stream = [p for pair in zip(*out) for p in pair]
    for rid, (arrival, end) in sorted(requests.items()):
        n = int(rid[5:10])
        child = _span(make_packet("api.tokenize", req_trace[rid], hex_id("tokenize-span", n, 16),
                                  arrival + 100_000, arrival + 600_000,
                                  attrs={"request.id": rid, "process.role": "api_server"},
                                  pid=100, tid=102))
        child["parent_span_id"] = req_span[rid]
        stream.append(_packet(child))
        stream.append(make_packet("vllm.request", req_trace[rid], req_span[rid], arrival, end,
                                  attrs={"request.id": rid, "process.role": "api_server"},
                                  pid=100, tid=101))
    return stream


def write(binary, out):
    """The stream into a real forwarder writing `out`."""
    return write_stream(binary, out, packets(), "pftrace-ids-fixture-")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("Usage")[1])
    write(sys.argv[1], sys.argv[2])
