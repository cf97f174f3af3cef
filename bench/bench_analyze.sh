#!/usr/bin/env bash
# bench_analyze.sh — `mstrace analyze` against a straightforward Python json.load
# analysis of the same metrics (bench/analyze_reference.py), on a generated trace made
# the real way: tests/unit/test_analyze_tracegen.c (balanced scenario, closed loop of 16
# clients, 20-60 output tokens) sends its spans through the forwarder client to a real
# `mstrace forward` daemon, whose Chrome Trace JSON file is analysed.
#
# Prints for each tool the wall time (median of RUNS for mstrace, one run for Python,
# which needs several GiB) and the peak RSS (/usr/bin/time %M), their ratio, and a
# second mstrace run on a trace with the same steps and requests but ~2x the bytes
# (--pad: a filler attribute on every span), to show that the memory follows steps and
# requests, not file bytes. Both analyses' step/request counts and stage totals are
# compared, so the speed is for the same work.
#
# Usage: bench/bench_analyze.sh [REQUESTS]   (default 100000: ~1.6 M spans, ~1.4 GB)
# Env: MSTRACE_BUILD_DIR (default build), RUNS (default 3), PYTHON_MAX_GB (default 16:
#      the Python reference is skipped, and says so, when the trace is larger than
#      PYTHON_MAX_GB / 5 GB, as json.load needs about 4-5x the file in memory),
#      KEEP=1 keeps the traces.
set -euo pipefail
REQ=${1:-100000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${MSTRACE_BUILD_DIR:-$ROOT/build}
RUNS=${RUNS:-3}
PYTHON_MAX_GB=${PYTHON_MAX_GB:-16}
work=$(mktemp -d /tmp/mstrace-bench-analyze.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

. "$ROOT/bench/analyze_bench_lib.sh"

machine_line
record "$work/trace.json" 0
record "$work/padded.json" 600
bytes=$(stat -c %s "$work/trace.json")
pbytes=$(stat -c %s "$work/padded.json")

times=(); rss=(); cpus=()
for _ in $(seq "$RUNS"); do
  read -r t m c < <(measure "$B/mstrace" analyze --quiet --json "$work/c.json" "$work/trace.json")
  times+=("$t"); rss+=("$m"); cpus+=("$c")
done
c_t=$(printf '%s\n' "${times[@]}" | median); c_m=$(printf '%s\n' "${rss[@]}" | median)
c_c=$(printf '%s\n' "${cpus[@]}" | median)
read -r p_t p_m p_c < <(measure "$B/mstrace" analyze --quiet --json "$work/p.json" "$work/padded.json")
echo "mstrace analyze: wall ${times[*]} s, cpu ${cpus[*]} s, peak RSS ${rss[*]} KiB"

py_t=skipped; py_m=skipped; py_c=skipped
limit=$((PYTHON_MAX_GB * 1024 * 1024 * 1024 / 5))
if [ "$bytes" -le "$limit" ]; then
  read -r py_t py_m py_c < <(measure python3 "$ROOT/bench/analyze_reference.py" "$work/trace.json")
  cp "$work/cmd.out" "$work/py.json"
  python3 - "$work/c.json" "$work/py.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); p = json.loads(open(sys.argv[2]).read())
assert c["steps"]["count"] == p["steps"] and c["requests"]["count"] == p["requests"], "counts differ"
for k, v in c["stages"].items():
    ref = p["stages"][k][0]
    assert abs(v["total_ms"] - ref) <= 1e-3 * max(1.0, ref), (k, v["total_ms"], ref)
print("same work: %d steps, %d requests, stage totals agree within 0.1%%" % (p["steps"], p["requests"]))
EOF
else
  echo "python reference skipped: the trace ($bytes bytes) needs more than PYTHON_MAX_GB=$PYTHON_MAX_GB GiB for json.load"
fi

spans=$(python3 -c "import json;print(json.load(open('$work/c.json'))['data_quality']['spans'])")
echo "SUMMARY trace: $REQ requests, $spans spans, $bytes bytes ($pbytes bytes padded)"
echo "SUMMARY mstrace analyze: median wall $c_t s, cpu $c_c s ($(python3 -c "print(round($bytes/1048576/max($c_c,0.01)))") MiB per cpu-second), peak RSS $((c_m / 1024)) MiB; padded trace: wall $p_t s, cpu $p_c s, peak RSS $((p_m / 1024)) MiB"
if [ "$py_t" != skipped ]; then
  echo "SUMMARY python json.load reference: wall $py_t s, cpu $py_c s, peak RSS $((py_m / 1024)) MiB"
  echo "SUMMARY ratio: $(python3 -c "print('wall %.1fx, cpu %.1fx faster; %.1fx less memory' % ($py_t/$c_t, $py_c/max($c_c,0.01), $py_m/$c_m))")"
fi
