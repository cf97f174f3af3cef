# analyze_bench_lib.sh — what the `mstrace analyze` benchmarks share (sourced by
# bench_analyze.sh and bench_analyze_pftrace.sh once they have set B, the build dir,
# REQ, the requests to generate, and work, a scratch dir): recording a generated run
# through a real forwarder, timing a command, a median, the machine line.

record() {  # record OUT [PAD] — a generated run (tests/unit/test_analyze_tracegen.c,
            # balanced scenario, 16 clients, seed 1; PAD bytes of filler per span)
            # sent through a real `mstrace forward`, whose output is OUT (format by suffix)
  local sock="bench-analyze-$$-$RANDOM"
  : >"$work/fwd.log"  # emptied here, not by the child: the previous run's "listening on" must not count
  "$B/mstrace" forward --log-level info --perfetto-output "$1" --socket-name "$sock" 2>"$work/fwd.log" &
  local fpid=$!
  for _ in $(seq 300); do grep -q "listening on" "$work/fwd.log" && break; sleep 0.1; done
  "$B/test_analyze_tracegen" --socket "$sock" --scenario balanced --requests "$REQ" --concurrency 16 \
      --seed 1 --pad "${2:-0}" >"$work/gen.out"
  kill -TERM "$fpid"; wait "$fpid"
  echo "generated $(basename "$1"): $(cat "$work/gen.out") -> $(stat -c %s "$1") bytes"
}

measure() {  # measure CMD... ; prints "<wall s> <peak KiB> <cpu s>"
  /usr/bin/time -f "%e %M %U %S" -o "$work/time.out" "$@" >"$work/cmd.out" 2>"$work/cmd.err" || {
    cat "$work/cmd.err" >&2; return 1; }
  tail -1 "$work/time.out" | awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}'
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

machine_line() {
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
}
