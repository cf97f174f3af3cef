"""Sends a few real /v1/completions requests that carry their own W3C
`traceparent`, and records which trace context each one carried.

Owns the "requests with their own context" part of the e2e load: vLLM must
parent its `llm_request` span on that context and the mstrace hook spans
(schedule/model/output) must join the same trace (docs/reference/spans.md, docs/reference/vllm-internals.md). The requests
are sent concurrently so they share scheduler steps with each other.

Usage: python send_traced.py --url http://127.0.0.1:PORT --model NAME --count K --out FILE
Writes FILE: [{"trace_id", "parent_span_id", "status", "completion_id", "output_tokens"}].
"""

import argparse
import json
import secrets
import sys
import threading
import urllib.request


def _one(url, model, i, rec):
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    rec.update(trace_id=trace_id, parent_span_id=span_id, index=i)
    body = json.dumps({"model": model, "prompt": "request %d trace span model token the of and" % i,
                       "max_tokens": 8, "ignore_eos": True, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, method="POST", headers={
        "Content-Type": "application/json", "traceparent": "00-%s-%s-01" % (trace_id, span_id)})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            out = json.loads(resp.read().decode())
            rec.update(status=resp.status, completion_id=out.get("id"),
                       output_tokens=(out.get("usage") or {}).get("completion_tokens"))
    except Exception as exc:  # recorded, the checker reports it
        rec.update(status="error", error="%s: %s" % (type(exc).__name__, exc))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    recs = [dict() for _ in range(a.count)]
    threads = [threading.Thread(target=_one, args=(a.url, a.model, i, recs[i])) for i in range(a.count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(a.out, "w") as fh:
        json.dump(recs, fh, indent=1)
    bad = [r for r in recs if r.get("status") != 200]
    print("traced requests: %d sent, %d ok" % (len(recs), len(recs) - len(bad)))
    for r in recs:
        print("  traceparent 00-%s-%s-01 -> %s %s" % (r["trace_id"], r["parent_span_id"], r.get("status"),
                                                   r.get("completion_id") or r.get("error")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
