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
# free of the warm-up's first calls. Second column: the engine thread's
# whole step with the single-process executor (schedule + the executor's,
# worker's and model runner's `model` spans given the step's
# SchedulerOutput + 2 `call` spans; bench_hook.py --engine-step), the plain
# calls inside it included (a few hundred instructions each).
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
count() {  # count SIZE STEPS TOGGLE [--engine-step] -> instructions on the calling thread
  rm -f "$OUT"/cg.*
  valgrind --tool=callgrind --separate-threads=yes --collect-atstart=no --toggle-collect="$3" \
    --callgrind-out-file="$OUT/cg.%p" "$PY" bench/bench_hook.py --build "$BUILD" --steps "$1" \
    --count-steps "$2" ${4:-} >/dev/null 2>"$OUT/log" || { cat "$OUT/log" >&2; exit 1; }
  # the calling (main) thread's file is the one ending in -01
  sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$OUT"/cg.*-01
}
printf '%-10s %16s %26s\n' requests "schedule instr/step" "engine step instr/step"
for size in ${SIZES//,/ }; do
  one=$(count "$size" "$STEPS" hook_vectorcall)
  two=$(count "$size" $((2 * STEPS)) hook_vectorcall)
  eone=$(count "$size" "$STEPS" hook_vectorcall --engine-step)
  etwo=$(count "$size" $((2 * STEPS)) hook_vectorcall --engine-step)
  printf '%-10s %16d %26d\n' "$size" $(((two - one) / STEPS)) $(((etwo - eone) / STEPS))
done
