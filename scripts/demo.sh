#!/usr/bin/env bash
# demo.sh — the README's main command: build mstrace, start the Perfetto
# forwarder, run the traced example serving loop against it, stop the
# forwarder cleanly and summarise the Chrome Trace JSON it wrote.
#
#   bash scripts/demo.sh [OUTPUT.json]        (default out/hook_tracing.json)
#
# Env: REQUESTS / STEPS (example size), BUILD_DIR (default build),
# OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT (the
# example then also exports to that collector, e.g. Jaeger).
# Idempotent: rebuilds only what changed; each run uses its own socket name
# and the forwarder is always stopped on exit (trap).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:-out/hook_tracing.json}
BUILD_DIR=${BUILD_DIR:-build}
REQUESTS=${REQUESTS:-8}
STEPS=${STEPS:-64}
SOCKET_NAME="mstrace-demo-$$-$RANDOM"
LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mstrace-demo.XXXXXX")
FWD_LOG="$LOG_DIR/forwarder.log"
FWD_PID=""

cleanup() {
  local rc=$?
  if [ -n "$FWD_PID" ] && kill -0 "$FWD_PID" 2>/dev/null; then
    kill -TERM "$FWD_PID" 2>/dev/null || true
    wait "$FWD_PID" 2>/dev/null || true
  fi
  if [ $rc -ne 0 ] && [ -s "$FWD_LOG" ]; then
    echo "--- forwarder log ($FWD_LOG):" >&2
    tail -n 20 "$FWD_LOG" >&2
  else
    rm -rf "$LOG_DIR"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- 1. build (first what the demo needs and the machine lacks: compiler,
# cmake, ninja, libcurl and zlib headers, python3; probed, about a second)
bash scripts/deps.sh demo
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
echo "==> building ($BUILD_DIR)"
ninja -C "$BUILD_DIR" mstrace_cli example_request_pipeline >/dev/null

# ---- 2. the forwarder, in the background, on a socket of its own
# The forwarder creates the parent directory itself (mode 0750, docs/forwarder.md "Output path rules").
echo "==> starting: $BUILD_DIR/mstrace forward --perfetto-output $OUT --socket-name $SOCKET_NAME"
"$BUILD_DIR/mstrace" forward --perfetto-output "$OUT" --socket-name "$SOCKET_NAME" \
  --log-level info 2>"$FWD_LOG" &
FWD_PID=$!

# Ready = the abstract socket @NAME is listed in /proc/net/unix with the
# listening flag (__SO_ACCEPTCON = 00010000).
ready=0
for _ in $(seq 1 300); do
  if ! kill -0 "$FWD_PID" 2>/dev/null; then
    echo "forwarder exited early" >&2
    exit 1
  fi
  if awk -v n="@$SOCKET_NAME" '$4 == "00010000" && $8 == n { f = 1 } END { exit !f }' /proc/net/unix; then
    ready=1; break
  fi
  sleep 0.05
done
[ $ready -eq 1 ] || { echo "forwarder socket @$SOCKET_NAME did not appear" >&2; exit 1; }

# ---- 3. the traced example
if [ -n "${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-}${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ]; then
  echo "==> OTLP endpoint set: the example also exports there"
fi
echo "==> running the example ($REQUESTS requests, at most $STEPS engine steps)"
MSTRACE_PERFETTO_SOCKET="$SOCKET_NAME" OTEL_SERVICE_NAME="${OTEL_SERVICE_NAME:-mstrace-demo}" \
  "$BUILD_DIR/example_request_pipeline" --requests "$REQUESTS" --steps "$STEPS"

# ---- 4. stop the forwarder: SIGTERM drains and closes the JSON array
kill -TERM "$FWD_PID"
fwd_rc=0
wait "$FWD_PID" || fwd_rc=$?
FWD_PID=""
if [ $fwd_rc -ne 0 ]; then
  echo "forwarder exited with $fwd_rc" >&2
  exit 1
fi

# ---- 5. validate and summarise
python3 -m json.tool "$OUT" >/dev/null
python3 - "$OUT" <<'PY'
import collections, json, os, sys
path = sys.argv[1]
events = json.load(open(path, encoding="utf-8"))
spans = collections.Counter(e["name"] for e in events if e.get("ph") == "X")
starts = {e["id"] for e in events if e.get("ph") == "s"}
finishes = {e["id"] for e in events if e.get("ph") == "f"}
errors = sum(1 for e in events if e.get("ph") == "X" and e.get("args", {}).get("span.status") == 2)
print("==> %s: valid JSON, %d events" % (path, len(events)))
for name, n in sorted(spans.items()):
    print("    %-28s %5d X events" % (name, n))
print("    flows (request.link)          %5d (%d unpaired)" % (len(starts & finishes),
                                                          len(starts ^ finishes)))
print("    spans with status ERROR       %5d" % errors)
if not spans:
    sys.exit("no spans in the output: did the example reach the forwarder?")
print("Open %s in https://ui.perfetto.dev (Open trace file)" % os.path.abspath(path))
PY
