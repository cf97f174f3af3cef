#!/usr/bin/env bash
# hook_instructions.sh — instructions per hooked engine step of the schedule
# adapter (bench/bench_hook.py's vLLM-0.32-shaped step), counted by callgrind:
# the repeatable figure beside bench_hook.py's times on a shared, loaded box.
#
# Collection is toggled on the Hook's call entry (hook_vectorcall), on the
# calling thread only (--separate-threads), so the interpreter start, the
# set-up and the exporter thread are not counted; the count includes the
# plain schedule() call inside the hook (a Python method returning an
# attribute: a few hundred instructions). Two runs per size, STEPS and
# 2 x STEPS hooked steps: their difference / STEPS is the per-step figure,
# free of the warm-up's first calls.
#
# Usage: bench/hook_instructions.sh [BUILD_DIR] [SIZES] [STEPS]
#   BUILD_DIR holds the _native module (default build-py), SIZES e.g. 1,8,64,256,
#   STEPS hooked steps per size (default 2000). Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-py}
SIZES=${2:-1,8,64,256}
STEPS=${3:-2000}
PY=${PYTHON:-python3}
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
count() {  # count SIZE STEPS TOGGLE -> instructions on the calling thread
  rm -f "$OUT"/cg.*
  valgrind --tool=callgrind --separate-threads=yes --collect-atstart=no --toggle-collect="$3" \
    --callgrind-out-file="$OUT/cg.%p" "$PY" bench/bench_hook.py --build "$BUILD" --steps "$1" \
    --count-steps "$2" >/dev/null 2>"$OUT/log" || { cat "$OUT/log" >&2; exit 1; }
  # the calling (main) thread's file is the one ending in -01
  sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$OUT"/cg.*-01
}
printf '%-10s %16s\n' requests "instr/step"
for size in ${SIZES//,/ }; do
  one=$(count "$size" "$STEPS" hook_vectorcall)
  two=$(count "$size" $((2 * STEPS)) hook_vectorcall)
  printf '%-10s %16d\n' "$size" $(((two - one) / STEPS))
done
