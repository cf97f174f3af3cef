#!/usr/bin/env bash
# run_otlp_encode.sh — runs the C OTLP encode benchmark (bench_otlp_encode)
# and opentelemetry-python's encoder on the same spans
# (otel_python_encode.py), then prints the speed-up of the C encoders.
# Usage: MSTRACE_BUILD_DIR=build bench/run_otlp_encode.sh [runs] [seconds_per_run]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD="${MSTRACE_BUILD_DIR:-build}"
[[ "$BUILD" = /* ]] || BUILD="$HERE/../$BUILD"
RUNS="${1:-7}"
SECS="${2:-0.5}"
BIN="$BUILD/bench_otlp_encode"
[[ -x "$BIN" ]] || { echo "run_otlp_encode.sh: $BIN not built" >&2; exit 1; }
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import opentelemetry.exporter.otlp.proto.common.trace_encoder' 2>/dev/null; then
    echo "run_otlp_encode.sh: installing opentelemetry-exporter-otlp-proto-common" >&2
    "$PY" -m pip install -q opentelemetry-sdk opentelemetry-exporter-otlp-proto-common
fi
c_out=$("$BIN" "$RUNS" "$SECS")
py_out=$("$PY" "$HERE/otel_python_encode.py" "$RUNS" "$SECS")
printf '%s\n%s\n' "$c_out" "$py_out" | grep -v '^RESULT'
pb=$(sed -n 's/.*proto_spans_per_s=\([0-9]*\).*/\1/p' <<<"$c_out")
js=$(sed -n 's/.*json_spans_per_s=\([0-9]*\).*/\1/p' <<<"$c_out")
py=$(sed -n 's/.*python_spans_per_s=\([0-9]*\).*/\1/p' <<<"$py_out")
awk -v pb="$pb" -v js="$js" -v py="$py" 'BEGIN {
    printf "ratio: C proto / otel-python = %.1fx, C json / otel-python = %.1fx\n", pb / py, js / py }'
