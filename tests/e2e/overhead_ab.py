"""Summarises an overhead-mode e2e run (scripts/e2e_vllm.sh, MST_E2E_MODE=overhead).

Owns only the reading and the arithmetic; every figure is what `vllm bench serve`
saved (bench-<i>.json in OUT/<case>-r<round>/). Why paired differences: on a
shared 2-vCPU VM the machine's speed drifts by tens of percent between minutes,
so a case is compared with the baseline run next to it in time (same round, same
rep index = same --seed), and the spread of those paired differences is the
honest uncertainty. Tests never assert on these figures.

Usage: python overhead_ab.py OUT case...   (the first case is the baseline, e.g. off)
"""

import glob
import json
import os
import re
import statistics
import sys

# (key in bench JSON, label, format, higher is better)
FIELDS = [("request_throughput", "req/s", "%.2f", True), ("output_throughput", "out tok/s", "%.1f", True),
          ("mean_ttft_ms", "TTFT mean ms", "%.1f", False), ("median_ttft_ms", "TTFT median ms", "%.1f", False),
          ("mean_tpot_ms", "TPOT mean ms", "%.2f", False), ("mean_e2el_ms", "E2E mean ms", "%.1f", False),
          ("median_e2el_ms", "E2E median ms", "%.1f", False)]


def load(out, case):
    """{(round, rep): bench dict} for one case."""
    runs = {}
    for d in glob.glob(os.path.join(out, case + "-r*")):
        m = re.search(r"-r(\d+)$", d)
        if not m:
            continue
        for f in glob.glob(os.path.join(d, "bench-*.json")):
            rep = int(re.search(r"bench-(\d+)\.json$", f).group(1))
            with open(f) as fh:
                runs[(int(m.group(1)), rep)] = json.load(fh)
    return runs


def cell(vals, fmt):
    """median [min–max] (n)."""
    return (fmt + " [" + fmt + "–" + fmt + "]") % (statistics.median(vals), min(vals), max(vals))


def main():
    out, cases = sys.argv[1], sys.argv[2:]
    data = {c: load(out, c) for c in cases}
    cases = [c for c in cases if data[c]]
    if not cases:
        print("no bench results")
        return 0
    base = cases[0]
    print("Per case: median [min–max] over all loads (n = %s)."
          % ", ".join("%s %d" % (c, len(data[c])) for c in cases))
    print()
    print("| metric | " + " | ".join(cases) + " |")
    print("|---|" + "---|" * len(cases))
    for key, label, fmt, _ in FIELDS:
        cells = [cell([r[key] for r in data[c].values() if r.get(key) is not None], fmt) for c in cases]
        print("| %s | %s |" % (label, " | ".join(cells)))
    print("| completed/failed | %s |" % " | ".join(
        "%d/%d" % (sum(r.get("completed", 0) for r in data[c].values()),
                   sum(r.get("failed", 0) or 0 for r in data[c].values())) for c in cases))
    print()
    # Noise of the baseline itself: its spread relative to its median.
    for c in cases:
        v = [r["request_throughput"] for r in data[c].values()]
        print("%s req/s spread: (max-min)/median = %.1f%%" % (c, 100 * (max(v) - min(v)) / statistics.median(v)))
    print()
    print("Paired differences vs %s (same round and rep = same seed, neighbours in time), %%: "
          "median [min–max] (pairs); + = case larger." % base)
    print()
    others = cases[1:]
    print("| metric | " + " | ".join(others) + " |")
    print("|---|" + "---|" * len(others))
    for key, label, _, _ in FIELDS:
        cells = []
        for c in others:
            d = [100.0 * (data[c][k][key] - data[base][k][key]) / data[base][k][key]
                 for k in sorted(data[c]) if k in data[base] and data[base][k].get(key)]
            cells.append("%+.1f [%+.1f … %+.1f] (%d)" % (statistics.median(d), min(d), max(d), len(d)) if d else "-")
        print("| %s | %s |" % (label, " | ".join(cells)))
    print()
    # Per-block medians: shows drift between server starts (rounds).
    print("Per block (one server start) median req/s:")
    for c in cases:
        rounds = sorted({k[0] for k in data[c]})
        print("  %s: %s" % (c, ", ".join(
            "r%d %.2f" % (r, statistics.median([v["request_throughput"] for k, v in data[c].items() if k[0] == r]))
            for r in rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
