#!/usr/bin/env bash
# overhead_serve.sh — the serve A/B of docs/performance.md: `vllm serve` (CPU
# build, the tiny dummy-weight model of tests/e2e/make_tiny_model.py) under a
# `vllm bench serve` load, tracing off vs on (MS_TRACE_ENABLE=1,
# MS_PROFILER_AUTO_TRACE=1, spans to a real `mstrace forward` writing JSON),
# runs alternated (ABBA...), REPS loads per server start.
#
# Two layouts, both reported, each for what it is:
#   pinned    vLLM (API server, EngineCore, worker) on CPU 0 (taskset); the
#             forwarder and the load generator on CPU 1 — the forwarder's and
#             the client's CPU use is then not taken from vLLM, as on a GPU
#             host where they run on other cores than the engine.
#   unpinned  everything shares both CPUs (the box's contention counted as
#             tracing cost: an upper bound, not mstrace's own cost).
# The package under test is this work tree's (python/mstrace + the built
# _native module and mstrace binary from BUILD_DIR), put first on PYTHONPATH;
# the venv's installed mstrace only provides the vLLM plugin entry point.
#
# Prints per layout the paired (on - off, same round and rep) differences of
# request throughput, mean TPOT and mean E2E latency, with their mean and a
# 95 % t confidence interval, and the load average at each run.
#
# Usage: bench/overhead_serve.sh [BUILD_DIR]   (default build-py; the pytest
#   helper's build, with -DMST_BUILD_PYTHON=ON)
# Env: OVH_ROUNDS (4, pinned), OVH_UNPINNED_ROUNDS (2), OVH_REPS (2),
#   OVH_PROMPTS (200), OVH_CONCURRENCY (4), OVH_OUT (/tmp/mstrace-overhead),
#   MSTRACE_VLLM_VENV, MST_E2E_MODEL_DIR.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$REPO/build-py}" && pwd)"
VENV="${MSTRACE_VLLM_VENV:-$HOME/.cache/mstrace/vllm-venv}"
VPY="$VENV/bin/python"
MODEL_DIR="${MST_E2E_MODEL_DIR:-$HOME/.cache/mstrace/tiny-llama}"
OUT="${OVH_OUT:-/tmp/mstrace-overhead}"
ROUNDS="${OVH_ROUNDS:-4}" UNPINNED="${OVH_UNPINNED_ROUNDS:-2}" REPS="${OVH_REPS:-2}"
PROMPTS="${OVH_PROMPTS:-200}" CONC="${OVH_CONCURRENCY:-4}"
E2E="$REPO/tests/e2e"
export VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
unset VLLM_PLUGINS PROFILING_SYMBOLS_PATH MS_PROFILER_SAMPLE_RATE || true
for v in $(env | sed -n 's/^\(OTEL_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

log() { printf '[overhead %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }
[[ -x "$VPY" ]] || die "no vLLM venv at $VENV"
[[ "$(nproc)" -ge 2 ]] || die "the pinned layout needs 2 CPUs"

# The package under test, staged as a wheel lays it out.
STAGE="$OUT/stage"
rm -rf "$OUT" && mkdir -p "$STAGE/mstrace/bin"
cp "$REPO"/python/mstrace/*.py "$REPO"/python/mstrace/*.yaml "$STAGE/mstrace/"
so=$(find "$BUILD" -name '_native*.so' -not -path '*/staging/*' | head -1)
[[ -n "$so" ]] || die "no _native module under $BUILD"
cp "$so" "$STAGE/mstrace/"
MSTRACE_BIN="$BUILD/mstrace"
[[ -x "$MSTRACE_BIN" ]] || MSTRACE_BIN="$REPO/build/mstrace"
[[ -x "$MSTRACE_BIN" ]] || die "no mstrace binary"
cp "$MSTRACE_BIN" "$STAGE/mstrace/bin/mstrace"
"$VPY" "$E2E/make_tiny_model.py" "$MODEL_DIR" >/dev/null

VLLM_PID="" FWD_PID=""
cleanup() {
    set +e
    [[ -n "$VLLM_PID" ]] && { kill -TERM -- "-$VLLM_PID" 2>/dev/null; sleep 3; kill -KILL -- "-$VLLM_PID" 2>/dev/null; }
    [[ -n "$FWD_PID" ]] && { kill -TERM "$FWD_PID" 2>/dev/null; wait "$FWD_PID" 2>/dev/null; }
}
trap cleanup EXIT

free_port() { "$VPY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run_one LAYOUT CASE ROUND: one server start, warm-up, REPS loads.
run_one() {
    local layout=$1 case=$2 round=$3 dir port sock
    dir="$OUT/$layout-$case-r$round"; mkdir -p "$dir"
    port=$(free_port); sock="mst_ovh_$$_${layout}_${case}_$round"
    local -a pin_vllm=() pin_side=() env_case=(PYTHONPATH="$STAGE" VLLM_CPU_KVCACHE_SPACE=1)
    if [[ "$layout" == pinned ]]; then pin_vllm=(taskset -c 0); pin_side=(taskset -c 1); fi
    if [[ "$case" == on ]]; then
        env_case+=(MS_TRACE_ENABLE=1 MS_PROFILER_AUTO_TRACE=1 MSTRACE_PERFETTO_SOCKET="$sock" OTEL_SERVICE_NAME=mstrace-overhead)
        "${pin_side[@]}" "$STAGE/mstrace/bin/mstrace" forward --socket-name "$sock" \
            --perfetto-output "$dir/hook_tracing.json" >"$dir/forwarder.log" 2>&1 &
        FWD_PID=$!
    fi
    env "${env_case[@]}" setsid "${pin_vllm[@]}" "$VPY" "$E2E/vllm_cli.py" serve "$MODEL_DIR" \
        --served-model-name tiny-llama --host 127.0.0.1 --port "$port" --load-format dummy --dtype float32 \
        --max-model-len 512 --max-num-seqs 16 --enforce-eager </dev/null >"$dir/vllm.log" 2>&1 &
    VLLM_PID=$!
    local i ok=0
    for ((i = 0; i < 600; i++)); do
        curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && { ok=1; break; }
        kill -0 "$VLLM_PID" 2>/dev/null || break
        sleep 1
    done
    [[ "$ok" == 1 ]] || { tail -n 40 "$dir/vllm.log" >&2; die "vLLM did not start ($dir)"; }
    seq 8 | xargs -P 4 -I{} curl -fsS -o /dev/null "http://127.0.0.1:$port/v1/completions" \
        -H 'Content-Type: application/json' \
        -d '{"model":"tiny-llama","prompt":"warm up {}","max_tokens":8,"ignore_eos":true}' || true
    for ((i = 1; i <= REPS; i++)); do
        cut -d' ' -f1 /proc/loadavg >"$dir/load-$i.txt"
        "${pin_side[@]}" "$VPY" "$E2E/vllm_cli.py" bench serve --backend vllm --host 127.0.0.1 --port "$port" \
            --endpoint /v1/completions --model tiny-llama --tokenizer "$MODEL_DIR" --dataset-name random \
            --random-input-len 64 --random-output-len 16 --num-prompts "$PROMPTS" --max-concurrency "$CONC" \
            --ignore-eos --seed "$i" --num-warmups 2 --save-result --result-dir "$dir" \
            --result-filename "bench-$i.json" >"$dir/bench-$i.log" 2>&1 || { tail -n 30 "$dir/bench-$i.log" >&2; die "bench failed"; }
    done
    kill -INT "$VLLM_PID" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do kill -0 "$VLLM_PID" 2>/dev/null || break; sleep 0.5; done
    kill -TERM -- "-$VLLM_PID" 2>/dev/null || true
    wait "$VLLM_PID" 2>/dev/null || true
    VLLM_PID=""
    sleep 1
    if [[ -n "$FWD_PID" ]]; then
        awk -v t="$(getconf CLK_TCK)" '{printf "%.2f\n", ($14+$15)/t}' "/proc/$FWD_PID/stat" >"$dir/forwarder.cpu" 2>/dev/null || true
        kill -TERM "$FWD_PID" 2>/dev/null || true; wait "$FWD_PID" 2>/dev/null || true; FWD_PID=""
    fi
    log "$layout $case round $round done ($(cat "$dir"/load-*.txt | tr '\n' ' ')load)"
}

for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then order="off on"; else order="on off"; fi
    for c in $order; do run_one pinned "$c" "$r"; done
done
for ((r = 1; r <= UNPINNED; r++)); do
    if ((r % 2)); then order="off on"; else order="on off"; fi
    for c in $order; do run_one unpinned "$c" "$r"; done
done
"$VPY" "$REPO/bench/overhead_ab.py" "$OUT"
