#!/usr/bin/env bash
# bench_analyze_pftrace.sh — `mstrace analyze` on the forwarder's native .pftrace vs its
# Chrome Trace JSON, for the same generated run (tests/unit/test_analyze_tracegen.c,
# balanced scenario, 16 clients, seed 1) sent through the forwarder client into a real
# `mstrace forward` daemon once per format. Prints each file's size, the median wall and
# CPU time and peak RSS (/usr/bin/time %M) of RUNS analyses of each, the ratios, and
# checks both analyses count the same spans, steps and requests.
#
# Usage: bench/bench_analyze_pftrace.sh [REQUESTS]   (default 20000: ~330 k spans)
# Env: MSTRACE_BUILD_DIR (default build), RUNS (default 3), KEEP=1 keeps the traces.
set -euo pipefail
REQ=${1:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${MSTRACE_BUILD_DIR:-$ROOT/build}
RUNS=${RUNS:-3}
work=$(mktemp -d /tmp/mstrace-bench-analyze-pftrace.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

. "$ROOT/bench/analyze_bench_lib.sh"

machine_line
record "$work/trace.json"
record "$work/trace.pftrace"
declare -A T M C
for fmt in json pftrace; do
  ts=(); ms=(); cs=()
  for _ in $(seq "$RUNS"); do
    read -r t m c < <(measure "$B/mstrace" analyze --quiet --json "$work/$fmt.out.json" "$work/trace.$fmt")
    ts+=("$t"); ms+=("$m"); cs+=("$c")
  done
  T[$fmt]=$(printf '%s\n' "${ts[@]}" | median); M[$fmt]=$(printf '%s\n' "${ms[@]}" | median)
  C[$fmt]=$(printf '%s\n' "${cs[@]}" | median)
  echo "$fmt: $(stat -c %s "$work/trace.$fmt") bytes; median of $RUNS: wall ${T[$fmt]} s, cpu ${C[$fmt]} s, peak RSS $((M[$fmt] / 1024)) MiB"
done
python3 - "$work/json.out.json" "$work/pftrace.out.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
keys = lambda x: (x["data_quality"]["spans"], x["steps"]["count"], x["requests"]["count"])
assert keys(a) == keys(b), (keys(a), keys(b))
print("same spans/steps/requests in both: %d / %d / %d" % keys(a))
PY
awk -v tj="${C[json]}" -v tp="${C[pftrace]}" -v mj="${M[json]}" -v mp="${M[pftrace]}" \
    'BEGIN {printf "pftrace vs json: cpu %.2fx faster, peak RSS %.2fx\n", tj / tp, mp / mj}'
