#!/usr/bin/env python3
"""opentelemetry-python's OTLP encoder on the spans bench_otlp_encode.c uses.

Owns: building the same typical hook spans (8 attributes: 4 strings, 2 ints,
a double, a bool; 2 links with one attribute; batch of 512; one scope) as
SDK ReadableSpan objects and timing
opentelemetry.exporter.otlp.proto.common.trace_encoder.encode_spans plus
SerializeToString (the C encoder produces bytes, so bytes are the fair end
point). Prints the median spans/s of several runs. Why: the baseline the C
encoder is compared against (bench/run_otlp_encode.sh).

Usage: otel_python_encode.py [runs=7] [seconds_per_run=0.5]
Needs: pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-common
"""

import random
import statistics
import sys
import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

BATCH = 512


def build_spans():
    rnd = random.Random(42)
    resource = Resource({"service.name": "mindie-service", "process.pid": 12345,
                         "telemetry.sdk.name": "mstrace"})
    scope = InstrumentationScope("ms_service_profiler.hook.Schedule", "0.1.0")
    spans = []
    for i in range(BATCH):
        trace_id = rnd.getrandbits(128) or 1
        ctx = SpanContext(trace_id, rnd.getrandbits(64) or 1, is_remote=False,
                          trace_flags=TraceFlags(1))
        parent = SpanContext(trace_id, rnd.getrandbits(64) or 1, is_remote=False,
                             trace_flags=TraceFlags(1))
        links = [
            Link(SpanContext(rnd.getrandbits(128) or 1, rnd.getrandbits(64) or 1, is_remote=False,
                             trace_flags=TraceFlags(1)), {"link.type": kind})
            for kind in ("batch", "request")
        ]
        start = 1767225600000000000 + i * 1000
        spans.append(ReadableSpan(
            name="Schedule",
            context=ctx,
            parent=parent,
            resource=resource,
            attributes={
                "request.id": f"chatcmpl-{i:08d}",
                "model.name": "qwen2.5-7b-instruct",
                "domain": "BatchSchedule",
                "rid.state": "running",
                "batch.size": 32 + i % 7,
                "iter": 100000 + i,
                "kv.usage": 0.4375,
                "prefill": i % 2 == 0,
            },
            events=(),
            links=links,
            kind=SpanKind.INTERNAL,
            instrumentation_scope=scope,
            status=Status(StatusCode.UNSET),
            start_time=start,
            end_time=start + 123456,
        ))
    return spans


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    spans = build_spans()
    nbytes = len(encode_spans(spans).SerializeToString())
    rates = []
    for _ in range(max(1, runs)):
        batches = 0
        t0 = time.perf_counter()
        while True:
            encode_spans(spans).SerializeToString()
            batches += 1
            t = time.perf_counter()
            if t - t0 >= secs:
                break
        rates.append(batches * BATCH / (t - t0))
    med = statistics.median(rates)
    print(f"otel-python encode_spans+SerializeToString: median {med:.0f} spans/s "
          f"({runs} runs, batch {BATCH}, 8 attrs, 2 links; {nbytes} bytes/batch)")
    print(f"RESULT python_spans_per_s={med:.0f}")


if __name__ == "__main__":
    main()
