#!/usr/bin/env bash
# forward_table.sh — the forwarder's cost per step span at 1 / 8 / 64 / 256 request ids per span,
# before and after: the `mstrace forward` daemon built at BASE_REF and at the working tree, both
# driven by the same client (bench_forward --ids N from the working tree: each of 4 clients is one
# engine with a rolling batch of N requests, as a real engine has — each step keeps most of the
# previous step's requests, a few finish and a few join — one step span per packet).
#
# Prints two tables (before, after) of
#   request ids per span | JSON spans/s | JSON bytes/span | .pftrace spans/s | .pftrace bytes/span
# with the median of ROUNDS runs per cell (the two daemons alternated round by round, the formats
# alternated inside each run), then the after/before ratios and the load average.
#
# How: BASE_REF is checked out into a temporary `git worktree` under $TMPDIR (removed after), the
# daemon is built there and from the working tree (Release, `mstrace` only; the bench client from
# the working tree), each in a build directory under the same temporary directory.
#
# Usage: bench/forward_table.sh [BASE_REF]     (default: the merge-base of HEAD and main)
# Env: ROUNDS (default 3), IDS (default "1 8 64 256"), CLIENTS (default 4),
#      SPANS (spans per run; default 2,000,000 / ids, at least 100,000),
#      JOBS (ninja -j, default 2).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
IDS=${IDS:-1 8 64 256}
CLIENTS=${CLIENTS:-4}
JOBS=${JOBS:-2}
cd "$ROOT"
BASE_REF=${1:-$(git merge-base HEAD main)}
base_commit=$(git rev-parse --verify "$BASE_REF^{commit}") || {
    echo "forward_table.sh: not a commit: $BASE_REF" >&2
    exit 2
}
work=$(mktemp -d "${TMPDIR:-/tmp}/forward_table.XXXXXX")
cleanup() {
    git -C "$ROOT" worktree remove --force "$work/src-base" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

build() { # SRC DIR TARGETS...
    local src=$1 dir=$2
    shift 2
    cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMST_BUILD_TESTS=OFF \
        >"$dir.log" 2>&1 && ninja -C "$dir" -j "$JOBS" "$@" >>"$dir.log" 2>&1 || {
        echo "forward_table.sh: build of $src failed, see the log:" >&2
        tail -20 "$dir.log" >&2
        exit 1
    }
}

echo "forward_table.sh: base $BASE_REF ($(git rev-parse --short "$base_commit")), after: the working tree" \
     "($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + uncommitted changes'))"
git worktree add --detach "$work/src-base" "$base_commit" >/dev/null 2>&1
echo "building the base daemon and the working tree's daemon and bench client (Release) ..."
build "$work/src-base" "$work/build-base" mstrace
build "$ROOT" "$work/build-after" mstrace bench_forward
client=$work/build-after/bench_forward
declare -A bin=([before]=$work/build-base/mstrace [after]=$work/build-after/mstrace)

# One run of one daemon: prints "json_sps json_bps proto_sps proto_bps".
run_one() { # BIN IDS SPANS
    "$client" -b "$1" --ids "$2" -n "$3" -t "$CLIENTS" -r 1 -f both >"$work/run.out" 2>&1 || {
        echo "forward_table.sh: bench_forward failed ($1, --ids $2):" >&2
        tail -5 "$work/run.out" >&2
        exit 1
    }
    awk '/^SUMMARY bench_forward (json|proto):/ {
            f = $3; sub(":", "", f)
            for (i = 1; i <= NF; i++) {
                if ($i == "median") sps[f] = $(i + 1)
                if ($i == "bytes/span),") { b = $(i - 1); sub("\\(", "", b); bps[f] = b }
            }
         }
         END { print sps["json"], bps["json"], sps["proto"], bps["proto"] }' "$work/run.out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for n in $IDS; do
    spans=${SPANS:-$(( 2000000 / n > 100000 ? 2000000 / n : 100000 ))}
    for r in $(seq 1 "$ROUNDS"); do
        order="before after"
        [ $((r % 2)) -eq 0 ] && order="after before"
        for which in $order; do
            run_one "${bin[$which]}" "$n" "$spans" >>"$work/$which.$n"
        done
    done
    echo "  $n ids/span: $ROUNDS rounds of $spans spans done (load $(cut -d' ' -f1 /proc/loadavg))"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

cell() { # WHICH IDS COLUMN(1..4)
    awk -v c="$3" '{ print $c }' "$work/$1.$2" | median
}
fmt_k() { awk -v v="$1" 'BEGIN { if (v >= 1e6) printf "%.2f M", v / 1e6; else printf "%.0f k", v / 1e3 }'; }
fmt_b() { awk -v v="$1" 'BEGIN { s = sprintf("%.0f", v); r = ""
    while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
    print s r }'; }

for which in before after; do
    echo
    if [ "$which" = before ]; then echo "before ($BASE_REF, $(git rev-parse --short "$base_commit")):"
    else echo "after (working tree):"; fi
    echo
    echo "| request ids per span | JSON spans/s | JSON bytes/span | .pftrace spans/s | .pftrace bytes/span |"
    echo "|---|---|---|---|---|"
    for n in $IDS; do
        echo "| $n | $(fmt_k "$(cell $which $n 1)") | $(fmt_b "$(cell $which $n 2)") |" \
             "$(fmt_k "$(cell $which $n 3)") | $(fmt_b "$(cell $which $n 4)") |"
    done
done
echo
echo "after / before (medians):"
echo
echo "| request ids per span | JSON spans/s | JSON bytes/span | .pftrace spans/s | .pftrace bytes/span |"
echo "|---|---|---|---|---|"
for n in $IDS; do
    row="| $n |"
    for c in 1 2 3 4; do
        row="$row $(awk -v a="$(cell after $n $c)" -v b="$(cell before $n $c)" 'BEGIN { printf "%.2fx", a / b }') |"
    done
    echo "$row"
done
echo
echo "$CLIENTS clients, one step span per packet, median of $ROUNDS runs per cell;" \
     "$(nproc) CPUs, load average $load_start at the start, $load_end at the end."
