#!/usr/bin/env bash
# deps.sh — installs everything the build and the test suite need on a fresh
# Debian machine (apt packages, Python test packages, a Go toolchain check).
# Idempotent: it only installs what is missing, so a warm machine costs
# seconds. Heavy artefacts (Jaeger, vLLM's venv) are cached under
# ~/.cache/mstrace by their own scripts, not here.
set -euo pipefail

APT_PACKAGES=(build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev libfuzzer-14-dev
              libcurl4-openssl-dev zlib1g-dev valgrind python3 python3-venv curl ca-certificates git
              chromium fonts-dejavu-core strace)
PIP_PACKAGES=(pytest pyyaml protobuf opentelemetry-proto opentelemetry-sdk
              opentelemetry-exporter-otlp-proto-common scikit-build-core grpcio googleapis-common-protos atheris
              websocket-client perfetto)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing apt packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
need_pip=0
for mod in pytest yaml google.protobuf opentelemetry.proto opentelemetry.sdk \
           opentelemetry.exporter.otlp.proto.common scikit_build_core grpc google.rpc.status_pb2 atheris websocket \
           perfetto.protos.perfetto.trace.perfetto_trace_pb2; do
  "$PY" -c "import $mod" >/dev/null 2>&1 || need_pip=1
done
if [ $need_pip -eq 1 ]; then
  echo "deps: installing Python packages"
  "$PY" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
fi

# Go builds Jaeger for the integration tests (tests/harness/jaeger.sh). This
# kind of machine ships Go in /usr/local/go (new enough: Jaeger v1.76.0 needs
# Go >= 1.24, and any Go >= 1.21 fetches the toolchain its go.mod names
# through the module proxy by itself). Debian 12's golang-go (1.19) is only a
# last resort on a machine without Go, and is too old to do that: say so.
export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "deps: installing golang-go"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go
fi
go_minor=$(go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$go_minor" ] || [ "$go_minor" -lt 21 ]; then
  echo "deps: WARNING: $(go version 2>/dev/null || echo 'no go') cannot build Jaeger v1.76.0 (needs Go >= 1.21 to fetch its toolchain); the Jaeger tests will fail" >&2
fi
echo "deps: ok"
