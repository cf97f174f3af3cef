"""overhead_ab.py — the summary of bench/overhead_serve.py: per layout (pinned,
together, unpinned) and traced case (perfetto, grpc, http), the paired differences case −
off of the same round (same prompts, neighbours in time), their mean, a 95 % t
interval and a 95 % bootstrap interval (percentile, 10,000 resamples of the
pairs, fixed seed), for throughput, latency, and the CPU time per request of
every process; then the exporter threads' CPU per span over each traced
process's life.

Why paired and why CPU: on a shared VM the machine's speed drifts between
minutes; a load is compared with the baseline load next to it in time, and the
spread of those differences is the honest uncertainty. CPU time per request
moves far less with other load than throughput does, so its intervals are the
ones that resolve mstrace's cost. Nothing is asserted.

Usage: python bench/overhead_ab.py OUT   (OUT/records.jsonl, OUT/lifetime.json)
"""
import json
import math
import os
import random
import statistics
import sys

# two-sided 95 % Student t quantiles by degrees of freedom (beyond 30: 2.0)
T95 = [None, 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13, 2.12,
       2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04]
VLLM_ROLES = ("api_server", "engine_core", "worker")


def metrics(rec):
    """The figures of one load, flattened: {name: value}."""
    cpu, exp = rec["cpu_ms_per_req"], rec.get("export_ms_per_req", {})
    m = {"req/s": rec["req_s"], "TPOT mean ms": rec["tpot_ms"], "TTFT mean ms": rec["ttft_ms"],
         "E2E mean ms": rec["e2e_ms"]}
    vllm = 0.0
    for role in sorted(cpu):
        if role in ("forwarder", "jaeger"):
            continue
        m["CPU ms/req: %s" % role] = cpu[role]
        vllm += cpu[role]
    m["CPU ms/req: vLLM total"] = vllm
    if rec.get("vllm_ticks_ms_per_req") is not None:
        m["CPU ms/req: vLLM total, utime+stime (10 ms ticks)"] = rec["vllm_ticks_ms_per_req"]
    for side in ("forwarder", "jaeger"):
        if side in cpu:
            m["CPU ms/req: %s" % side] = cpu[side]
    for role in sorted(exp):
        if exp[role] > 0:
            m["of which mstrace-export thread, ms/req: %s" % role] = exp[role]
    steps = rec.get("steps") or 0
    if steps > 0:
        m["engine steps/req"] = steps / rec["completed"]
        for role in ("engine_core", "worker"):
            if role in cpu:  # the process's CPU per engine step, its exporter thread left out
                m["CPU µs/step, exporter thread excluded: %s" % role] = \
                    1e3 * (cpu[role] - exp.get(role, 0.0)) * rec["completed"] / steps
    return m


def t_interval(d):
    if len(d) < 2:
        return float("nan"), float("nan")
    half = (T95[len(d) - 1] if len(d) - 1 < len(T95) else 2.0) * statistics.stdev(d) / math.sqrt(len(d))
    m = statistics.mean(d)
    return m - half, m + half


def bootstrap_interval(d, n=10000, seed=1):
    if len(d) < 2:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(d, k=len(d))) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def fmt(v):
    if v is None or v != v:
        return "-"
    a = abs(v)
    return "%.0f" % v if a >= 100 else "%.1f" % v if a >= 10 else "%.2f" % v if a >= 1 else "%.3f" % v


def signed(v):
    s = fmt(v)
    return s if s.startswith("-") or s == "-" else "+" + s


def load_records(out):
    with open(os.path.join(out, "records.jsonl")) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def paired(recs, layout, case):
    """{round: (off metrics, case metrics)} of one layout."""
    by = {}
    for r in recs:
        if r["layout"] == layout and r["case"] in ("off", case):
            by.setdefault(r["round"], {})[r["case"]] = metrics(r)
    return {k: (v["off"], v[case]) for k, v in sorted(by.items()) if "off" in v and case in v}


def layout_table(recs, layout, cases):
    sel = [r for r in recs if r["layout"] == layout]
    if not sel:
        return []
    loads = [r["load"] for r in sel]
    lines = ["### %s: %d rounds, load average %.1f–%.1f (1-min, at the start of each load)" % (
        layout, len({r["round"] for r in sel}), min(loads), max(loads)), ""]
    names = []
    for r in sel:
        for k in metrics(r):
            if k not in names:
                names.append(k)
    head = "| metric | off (median) | " + " | ".join(
        "%s (median) | %s − off: mean [95 %% t] [95 %% bootstrap] (rel.)" % (c, c) for c in cases) + " |"
    lines += [head, "|---|---|" + "---|---|" * len(cases)]
    pairs = {c: paired(recs, layout, c) for c in cases}
    for name in names:
        offs = [m[name] for r in sel if r["case"] == "off" for m in [metrics(r)] if m.get(name) is not None]
        cells = [fmt(statistics.median(offs)) if offs else "-"]
        for c in cases:
            ons = [p[1][name] for p in pairs[c].values() if p[1].get(name) is not None]
            d = [p[1][name] - p[0][name] for p in pairs[c].values()
                 if p[1].get(name) is not None and p[0].get(name) is not None]
            cells.append(fmt(statistics.median(ons)) if ons else "-")
            if len(d) >= 2:
                lo, hi = t_interval(d)
                blo, bhi = bootstrap_interval(d)
                base = statistics.mean([p[0][name] for p in pairs[c].values() if p[0].get(name) is not None])
                rel = " (%+.1f %%)" % (100 * statistics.mean(d) / base) if base else ""
                cells.append("%s [%s, %s] [%s, %s]%s" % (signed(statistics.mean(d)), signed(lo), signed(hi),
                                                          signed(blo), signed(bhi), rel))
            else:
                cells.append("-")
        lines.append("| %s | %s |" % (name, " | ".join(cells)))
    lines.append("")
    lines.append("loads (round: case req/s @ load): " + "; ".join(
        "r%d %s %.1f @ %.1f" % (r["round"], r["case"], r["req_s"], r["load"]) for r in sel))
    lines.append("")
    return lines


def lifetime_table(out):
    path = os.path.join(out, "lifetime.json")
    if not os.path.exists(path):
        return []
    life = json.load(open(path))
    lines = ["### exporter threads over each traced process's life (warm-up and every load)", "",
             "| case | process | spans exported | dropped | failed | mstrace-export CPU s | µs per span exported |",
             "|---|---|---|---|---|---|---|"]
    for case in sorted(life):
        for role, row in sorted(life[case].items()):
            n, cpu = row.get("spans_exported"), row.get("export_cpu_s")
            per = "%.2f" % (1e6 * cpu / n) if n and cpu is not None else "-"
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                case, role, n if n is not None else "- (no exit line)", row.get("spans_dropped", "-"),
                row.get("spans_failed", "-"), "%.3f" % cpu if cpu is not None else "-", per))
    return lines + [""]


def report(out):
    recs = load_records(out)
    cases = []
    for r in recs:
        if r["case"] != "off" and r["case"] not in cases:
            cases.append(r["case"])
    lines = []
    for layout in ("pinned", "together", "unpinned"):
        lines += layout_table(recs, layout, cases)
    lines += lifetime_table(out)
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(report(sys.argv[1]))
