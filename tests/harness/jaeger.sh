#!/usr/bin/env bash
# jaeger.sh — builds, starts, stops and waits for the real Jaeger (v2, Go
# module github.com/jaegertracing/jaeger@v1.76.0, docs/reference/jaeger.md) that the mstrace
# integration tests export to. Why a build: there is no prebuilt binary in
# the test environment and `go install` refuses the module (replace
# directive), so it is built once as the main module from a writable copy of
# the module cache dir and kept in ~/.cache/mstrace/jaeger/.
#
#   jaeger.sh build    build the binary unless it already exists
#   jaeger.sh start    build if needed, start on loopback, wait until ready
#   jaeger.sh stop     stop the instance started by `start`
#   jaeger.sh wait     wait until /api/services answers (MST_JAEGER_WAIT_S, 60)
#   jaeger.sh status   print running/stopped (exit 0 when running)
#
# Environment: MST_JAEGER_RUN_DIR (pid + log, default /tmp/mstrace-jaeger-$UID),
# MST_JAEGER_QUERY_HTTP / MST_JAEGER_OTLP_GRPC / MST_JAEGER_OTLP_HTTP /
# MST_JAEGER_QUERY_GRPC / MST_JAEGER_HEALTH (host:port, all 127.0.0.1 by
# default; see jaeger-config.yaml). MST_JAEGER_TLS_DIR: TLS on both OTLP
# receivers and both query listeners, with DIR/server.pem + DIR/server.key
# (signed by DIR/ca.pem); when DIR/client-ca.pem exists, mutual TLS too
# (clients need a certificate signed by it; `wait` then uses
# DIR/client.pem + DIR/client.key). The health check stays plain HTTP.
set -euo pipefail

VERSION=v1.76.0
MODULE=github.com/jaegertracing/jaeger
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONFIG="$HERE/jaeger-config.yaml"
CACHE_DIR="${MST_JAEGER_CACHE_DIR:-$HOME/.cache/mstrace/jaeger}"
BIN="$CACHE_DIR/jaeger-$VERSION"
RUN_DIR="${MST_JAEGER_RUN_DIR:-/tmp/mstrace-jaeger-$(id -u)}"
PID_FILE="$RUN_DIR/jaeger.pid"
LOG_FILE="$RUN_DIR/jaeger.log"
QUERY="${MST_JAEGER_QUERY_HTTP:-127.0.0.1:16686}"

TLS_DIR="${MST_JAEGER_TLS_DIR:-}"

die() { echo "jaeger.sh: $*" >&2; exit 1; }

# --set flags that turn TLS on for every listener but the health check.
tls_args() {
    [[ -n "$TLS_DIR" ]] || return 0
    local p
    for p in receivers::otlp::protocols::grpc receivers::otlp::protocols::http \
             extensions::jaeger_query::http extensions::jaeger_query::grpc; do
        printf '%s\n' "--set=$p::tls::cert_file=$TLS_DIR/server.pem" "--set=$p::tls::key_file=$TLS_DIR/server.key"
        [[ -f "$TLS_DIR/client-ca.pem" ]] && printf '%s\n' "--set=$p::tls::client_ca_file=$TLS_DIR/client-ca.pem"
    done
}

# How `wait` reaches the query API: plain, TLS, or mutual TLS.
query_probe() {
    if [[ -z "$TLS_DIR" ]]; then curl -fsS -o /dev/null "http://$QUERY/api/services"; return; fi
    local client=()
    [[ -f "$TLS_DIR/client-ca.pem" ]] && client=(--cert "$TLS_DIR/client.pem" --key "$TLS_DIR/client.key")
    curl -fsS -o /dev/null --cacert "$TLS_DIR/ca.pem" "${client[@]}" "https://$QUERY/api/services"
}

do_build() {
    if [[ -x "$BIN" ]]; then return 0; fi
    # The image ships Go in /usr/local/go, which a non-login shell may not
    # have on PATH; Debian's golang-go (scripts/deps.sh) is the fallback.
    command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || export PATH="$PATH:/usr/local/go/bin"
    command -v go >/dev/null || die "go is not installed"
    mkdir -p "$CACHE_DIR"
    local json dir src
    json=$(go mod download -json "$MODULE@$VERSION") || die "go mod download failed"
    dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    [[ -d "$dir" ]] || die "module dir not found in: $json"
    # The module cache is read-only: build from a writable copy so go may
    # update go.sum and write nothing into the cache tree.
    src="$CACHE_DIR/src-$VERSION"
    rm -rf "$src.tmp"
    cp -r "$dir" "$src.tmp"
    chmod -R u+w "$src.tmp"
    rm -rf "$src" && mv "$src.tmp" "$src"
    echo "jaeger.sh: building $MODULE@$VERSION (takes minutes)" >&2
    local t0=$SECONDS
    (cd "$src" && GOFLAGS="-mod=mod -buildvcs=false" go build -o "$BIN.tmp" ./cmd/jaeger) \
        || die "go build failed"
    mv "$BIN.tmp" "$BIN"
    rm -rf "$src" # only the binary is kept (the module cache has the source)
    echo "jaeger.sh: built $BIN in $((SECONDS - t0)) s" >&2
}

pid_alive() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid=$(cat "$PID_FILE")
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

do_wait() {
    local limit=${MST_JAEGER_WAIT_S:-60} i
    for ((i = 0; i < limit * 5; i++)); do
        if query_probe 2>/dev/null; then return 0; fi
        if [[ -f "$PID_FILE" ]] && ! pid_alive; then
            tail -n 30 "$LOG_FILE" >&2 || true
            die "jaeger exited during startup (log: $LOG_FILE)"
        fi
        sleep 0.2
    done
    die "jaeger did not answer on $QUERY/api/services within ${limit}s (log: $LOG_FILE)"
}

do_start() {
    do_build
    mkdir -p "$RUN_DIR"
    if pid_alive; then
        echo "jaeger.sh: already running (pid $(cat "$PID_FILE"))" >&2
        do_wait
        return 0
    fi
    # setsid: own process group, so a Ctrl-C in the test runner does not
    # race our stop; stdin from /dev/null so it never holds a terminal.
    local extra=()
    mapfile -t extra < <(tls_args)
    setsid "$BIN" --config "$CONFIG" "${extra[@]}" </dev/null >"$LOG_FILE" 2>&1 &
    echo $! >"$PID_FILE"
    do_wait
    echo "jaeger.sh: running (pid $(cat "$PID_FILE")), query http://$QUERY" >&2
}

do_stop() {
    if ! pid_alive; then rm -f "$PID_FILE"; return 0; fi
    local pid i
    pid=$(cat "$PID_FILE")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PID_FILE"
}

case "${1:-}" in
    build) do_build ;;
    start) do_start ;;
    stop) do_stop ;;
    wait) do_wait ;;
    status) if pid_alive; then echo "running (pid $(cat "$PID_FILE"))"; else echo stopped; exit 1; fi ;;
    *) echo "usage: $0 build|start|stop|wait|status" >&2; exit 2 ;;
esac
