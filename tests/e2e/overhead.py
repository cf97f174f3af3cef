"""Prints the overhead table of an e2e run: vllm bench serve's own figures
(saved with --save-result) per case, side by side with the `off` baseline.

Owns only the reading and formatting; the figures are what vLLM's benchmark
measured. Tests never assert on them (timing on a shared 2-core VM is noise).

Usage: python overhead.py OUT case...
"""

import json
import os
import sys

FIELDS = [("request_throughput", "req/s", "%.2f"), ("output_throughput", "out tok/s", "%.1f"),
          ("mean_ttft_ms", "TTFT mean ms", "%.1f"), ("median_ttft_ms", "TTFT median ms", "%.1f"),
          ("mean_tpot_ms", "TPOT mean ms", "%.1f"), ("median_tpot_ms", "TPOT median ms", "%.1f"),
          ("mean_e2el_ms", "E2E mean ms", "%.1f"), ("median_e2el_ms", "E2E median ms", "%.1f"),
          ("completed", "completed", "%d")]


def main():
    out, cases = sys.argv[1], sys.argv[2:]
    rows = {}
    for c in cases:
        p = os.path.join(out, c, "bench.json")
        if os.path.exists(p):
            with open(p) as fh:
                rows[c] = json.load(fh)
    if not rows:
        print("no bench results")
        return 0
    names = [c for c in cases if c in rows]
    print("| metric | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    base = rows.get("off")
    for key, label, fmt in FIELDS:
        cells = []
        for c in names:
            v = rows[c].get(key)
            if v is None:
                cells.append("-")
                continue
            cell = fmt % v
            if base is not None and c != "off" and base.get(key) and key != "completed":
                cell += " (%+.1f%%)" % (100.0 * (v - base[key]) / base[key])
            cells.append(cell)
        print("| %s | %s |" % (label, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
