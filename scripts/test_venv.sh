#!/usr/bin/env bash
# test_venv.sh — makes the project's Python test venv, or brings it up to
# date, and prints its path on stdout (everything else goes to stderr).
#
# The venv (~/.cache/mstrace/test-venv, shared by every checkout) holds the
# pinned packages of scripts/requirements-test.txt, wheels only, never a
# system interpreter's site-packages (Debian's refuses anyway:
# externally-managed-environment). It is rebuilt only when the requirements
# file or the interpreter changes (a stamp holds their hash); flock keeps
# concurrent runs from racing on it. A warm venv costs a hash and a stat.
#
# Used by scripts/deps.sh (the test suite's dependencies) and by
# scripts/e2e_vllm.sh, whose checkers need `perfetto` and must run from a
# fresh clone without the suite having run first.
#
# Env: MSTRACE_TEST_VENV (venv path), MSTRACE_VENV_PYTHON (interpreter that
# creates it, default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mstrace
VENV=${MSTRACE_TEST_VENV:-$CACHE/test-venv}
VENV_PYTHON=${MSTRACE_VENV_PYTHON:-/usr/bin/python3}
REQ=scripts/requirements-test.txt
mkdir -p "$CACHE"
stamp_want="$(sha256sum "$REQ" | cut -c1-16) $("$VENV_PYTHON" -c 'import sys; print(sys.version.split()[0])')"
(
  flock 9
  if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.mstrace-stamp" 2>/dev/null)" != "$stamp_want" ]; then
    t=$SECONDS
    [ -x "$VENV/bin/python" ] || "$VENV_PYTHON" -m venv "$VENV"
    echo "test_venv: installing the Python test packages into $VENV ($REQ, wheels only)" >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: -r "$REQ" >&2
    echo "$stamp_want" >"$VENV/.mstrace-stamp"
    echo "test_venv: ready in $((SECONDS - t)) s" >&2
  fi
) 9>"$CACHE/test-venv.lock"
echo "$VENV"
