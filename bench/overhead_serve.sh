#!/usr/bin/env bash
# overhead_serve.sh — the one command for the serve A/B of docs/performance.md:
# runs bench/overhead_serve.py with the vLLM venv's Python against the
# package of this work tree (python/mstrace + the _native module and the
# mstrace binary of BUILD_DIR) and prints its tables (bench/overhead_ab.py):
# tracing off vs Perfetto only vs Perfetto + OTLP to a real Jaeger (gRPC,
# http/protobuf), ABBA rounds, pinned and unpinned, paired differences with
# 95 % t and bootstrap intervals, for req/s, TPOT and the CPU time per request
# of every vLLM process, the forwarder and Jaeger; the exporter threads' CPU
# per span in the real serve.
#
# Usage: bench/overhead_serve.sh [BUILD_DIR] [--quick] [overhead_serve.py options]
#   BUILD_DIR: a build with -DMST_BUILD_PYTHON=ON (default: build-py, the
#   pytest helper's build). Default run: 9 min at load average 5–22, 17 min at 15–36
#   on a 2-CPU box; --quick about 4 min.
# Env: MSTRACE_VLLM_VENV (default ~/.cache/mstrace/vllm-venv),
#   MST_E2E_MODEL_DIR (default ~/.cache/mstrace/tiny-llama), OVH_OUT (output dir).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/build-py"
if [[ $# -gt 0 && "$1" != -* ]]; then BUILD="$1"; shift; fi
VENV="${MSTRACE_VLLM_VENV:-$HOME/.cache/mstrace/vllm-venv}"
[[ -x "$VENV/bin/python" ]] || { echo "overhead_serve.sh: no vLLM venv at $VENV" >&2; exit 2; }
[[ -d "$BUILD" ]] || { echo "overhead_serve.sh: no build dir $BUILD (cmake -DMST_BUILD_PYTHON=ON)" >&2; exit 2; }
args=(--build "$BUILD" --model "${MST_E2E_MODEL_DIR:-$HOME/.cache/mstrace/tiny-llama}")
[[ -n "${OVH_OUT:-}" ]] && args+=(--out "$OVH_OUT")
exec "$VENV/bin/python" "$REPO/bench/overhead_serve.py" "${args[@]}" "$@"
