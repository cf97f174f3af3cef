"""overhead_ab.py — the summary of bench/overhead_serve.sh: per layout
(pinned, unpinned), the paired differences tracing on − off of the same
round and rep (same --seed), their mean and a 95 % t confidence interval.

Why paired: on a shared VM the machine's speed drifts between minutes; a run
is compared with the baseline run next to it in time, and the spread of those
differences is the honest uncertainty. Every figure is what `vllm bench
serve` saved (bench-<rep>.json); nothing is asserted.

Usage: python bench/overhead_ab.py OUT
"""
import glob
import json
import math
import os
import re
import statistics
import sys

FIELDS = [("request_throughput", "req/s", "%.2f"), ("output_throughput", "output tok/s", "%.1f"),
          ("mean_tpot_ms", "TPOT mean ms", "%.2f"), ("mean_itl_ms", "ITL mean ms", "%.2f"),
          ("mean_ttft_ms", "TTFT mean ms", "%.1f")]
# two-sided 95 % t quantiles by degrees of freedom
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}


def runs(out, layout, case):
    res = {}
    for d in glob.glob(os.path.join(out, "%s-%s-r*" % (layout, case))):
        rnd = int(re.search(r"-r(\d+)$", d).group(1))
        for f in glob.glob(os.path.join(d, "bench-*.json")):
            rep = int(re.search(r"bench-(\d+)\.json$", f).group(1))
            load = open(os.path.join(d, "load-%d.txt" % rep)).read().strip()
            with open(f) as fh:
                res[(rnd, rep)] = (json.load(fh), float(load))
    return res


def main():
    out = sys.argv[1]
    for layout in ("pinned", "unpinned"):
        off, on = runs(out, layout, "off"), runs(out, layout, "on")
        keys = sorted(set(off) & set(on))
        if not keys:
            continue
        loads = [off[k][1] for k in keys] + [on[k][1] for k in keys]
        print("%s: %d pairs, load average %.1f-%.1f" % (layout, len(keys), min(loads), max(loads)))
        print("| metric | off (median) | on (median) | on - off, mean of pairs | 95 % CI | relative |")
        print("|---|---|---|---|---|---|")
        for key, label, fmt in FIELDS:
            a = [off[k][0][key] for k in keys]
            b = [on[k][0][key] for k in keys]
            d = [y - x for x, y in zip(a, b)]
            m = statistics.mean(d)
            half = T95.get(len(d) - 1, 2.0) * statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else float("nan")
            base = statistics.mean(a)
            print(("| %s | " + fmt + " | " + fmt + " | " + fmt + " | [" + fmt + ", " + fmt + "] | %+.1f %% |") % (
                label, statistics.median(a), statistics.median(b), m, m - half, m + half, 100 * m / base))
        print("pairs (round, rep): req/s off -> on, load off / on: " + "; ".join(
            "r%d.%d %.1f -> %.1f (%.1f / %.1f)" % (k[0], k[1], off[k][0]["request_throughput"],
                                                  on[k][0]["request_throughput"], off[k][1], on[k][1])
            for k in keys))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
