#!/usr/bin/env bash
# bench_analyze_scale.sh — `mstrace analyze` on traces whose keys are all distinct:
# N processes (pids), each with its own request id, one engine naming them all in steps
# of 1000 (tests/integration/analyze_scale_trace.py). Every table keyed by outside values
# (pids, request ids, trace ids, names) is a hash or a sorted index, so wall time and
# peak RSS grow linearly with N; the largest case is 1 M distinct pids and 1 M distinct
# request ids. Prints per N: file bytes, wall (median of RUNS), CPU, peak RSS, and the
# wall time per 1 M keys, and checks the analysis counted every pid and request.
#
# Usage: bench/bench_analyze_scale.sh [N ...]   (default 100000 200000 400000 1000000)
# Env: MSTRACE_BUILD_DIR (default build), RUNS (default 3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${MSTRACE_BUILD_DIR:-$ROOT/build}
RUNS=${RUNS:-3}
work=$(mktemp -d /tmp/mstrace-bench-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT
. "$ROOT/bench/analyze_bench_lib.sh"

machine_line
[ $# -gt 0 ] || set -- 100000 200000 400000 1000000
for n in "$@"; do
  python3 "$ROOT/tests/integration/analyze_scale_trace.py" "$work/t.json" "$n"
  times=(); rss=(); cpus=()
  for _ in $(seq "$RUNS"); do
    read -r t m c < <(measure "$B/mstrace" analyze --quiet --json "$work/a.json" "$work/t.json")
    times+=("$t"); rss+=("$m"); cpus+=("$c")
  done
  python3 - "$work/a.json" "$n" <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); n = int(sys.argv[2])
assert len(a["data_quality"]["processes"]) == n + 1 and a["requests"]["joined"] == n, "miscounted"
PY
  t=$(printf '%s\n' "${times[@]}" | median); m=$(printf '%s\n' "${rss[@]}" | median)
  c=$(printf '%s\n' "${cpus[@]}" | median)
  echo "N=$n pids and request ids: $(stat -c %s "$work/t.json") bytes, wall $t s (runs ${times[*]}), cpu $c s," \
       "peak RSS $m KiB, $(awk -v t="$t" -v n="$n" 'BEGIN {printf "%.2f", t * 1e6 / n}') s per 1 M keys"
done
