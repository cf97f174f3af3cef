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
# Env: MST_SHOT_OUT (work dir, default /tmp/mstrace-screenshots),
# MST_SHOT_PROMPTS (48), MST_SHOT_CONCURRENCY (8), MSTRACE_VLLM_VENV,
# MST_E2E_MODEL_DIR.
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

main() {
    mkdir -p "$OUT"
    build_jaeger_ui
    [[ "${1:-all}" == ui ]] && return 0
}

main "$@"
