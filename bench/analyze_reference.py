#!/usr/bin/env python3
"""analyze_reference.py — the straightforward Python analysis that `mstrace analyze` is
measured against (bench/bench_analyze.sh): json.load the whole Chrome Trace JSON file, then
compute the same core metrics with plain Python (docs/analyze.md "The model"): engine steps
with the schedule / model / ipc / output / waiting split, per request queue / TTFT / TPOT /
e2e, per-name count / total / p50 / p90 / p99. Prints one JSON line of results so the
benchmark can check that both computed the same numbers.

Usage: analyze_reference.py TRACE.json
"""
import bisect
import json
import sys

SCHED = "vllm.scheduler.schedule"
UPDATE = "vllm.scheduler.update_from_output"
EXEC = ("vllm.model.execute", "vllm.model.sample_tokens")
WORKER = "vllm.worker.execute_model"
RUNNERS = ("vllm.model_runner.execute", "vllm_ascend.model_runner.execute")
OUTPUT = "vllm.output.process"
REQUEST = ("vllm.request", "llm_request")


def q(v, p):
    if not v:
        return None
    pos = p * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def main(path):
    with open(path) as fh:
        events = json.load(fh)
    xs = [e for e in events if e.get("ph") == "X"]
    for e in xs:
        e["s"] = round(e["ts"] * 1000)
        e["e"] = e["s"] + round(e.get("dur", 0) * 1000)
    names = {}
    for e in xs:
        names.setdefault(e["name"], []).append(e["e"] - e["s"])
    name_stats = {}
    for n, d in names.items():
        d.sort()
        name_stats[n] = [len(d), sum(d) / 1e6, q(d, 0.5) / 1e6, q(d, 0.9) / 1e6, q(d, 0.99) / 1e6]

    sched = sorted((e for e in xs if e["name"] == SCHED), key=lambda e: (e["pid"], e["s"]))
    steps, starts = [], {}
    for e in sched:
        ids = e["args"].get("request.ids") or []
        bs = e["args"].get("batch.request_count", len(ids))
        steps.append({"pid": e["pid"], "s": e["s"], "end": e["e"], "ids": ids, "bs": bs,
                      "st": [(e["e"] - e["s"]) / 1e6, 0.0, 0.0, 0.0, 0.0],
                      "xlo": None, "xhi": None, "fwd": {}, "mend": None})
        starts.setdefault(e["pid"], []).append(len(steps) - 1)
    sstart = {p: [steps[i]["s"] for i in idx] for p, idx in starts.items()}

    def step_for(pid, t):
        best = None
        for p in ([pid] if pid in starts else list(starts)):
            k = bisect.bisect_right(sstart[p], t) - 1
            if k >= 0:
                i = starts[p][k]
                if best is None or steps[i]["s"] > steps[best]["s"]:
                    best = i
        return best

    have_worker = any(e["name"] == WORKER for e in xs)
    fwd_names = (WORKER,) if have_worker else RUNNERS
    for e in xs:
        n = e["name"]
        if n == UPDATE or n in EXEC or n in fwd_names:
            i = step_for(e["pid"], e["s"])
            if i is None:
                continue
            st = steps[i]
            st["end"] = max(st["end"], e["e"])
            if n == UPDATE:
                st["st"][0] += (e["e"] - e["s"]) / 1e6
            elif n in EXEC:
                st["xlo"] = e["s"] if st["xlo"] is None else min(st["xlo"], e["s"])
                st["xhi"] = e["e"] if st["xhi"] is None else max(st["xhi"], e["e"])
            else:
                st["fwd"][e["pid"]] = st["fwd"].get(e["pid"], 0) + (e["e"] - e["s"]) / 1e6
                st["mend"] = e["e"] if st["mend"] is None else max(st["mend"], e["e"])
    reqs = {}

    def req(rid):
        return reqs.setdefault(rid, {"arr": None, "fin": None, "steps": 0, "first": None, "fdone": None,
                                     "ldone": None, "outs": 0, "fo": None, "lo": None})

    for e in xs:
        if e["name"] == OUTPUT:
            i = step_for(e["pid"], e["s"])
            if i is not None:
                steps[i]["st"][3] += (e["e"] - e["s"]) / 1e6
            for rid in e["args"].get("request.ids") or []:
                r = req(rid)
                r["outs"] += 1
                r["fo"] = e["e"] if r["fo"] is None else min(r["fo"], e["e"])
                r["lo"] = e["e"] if r["lo"] is None else max(r["lo"], e["e"])
        elif e["name"] in REQUEST:
            rid = e["args"].get("request.id") or e["args"].get("gen_ai.request.id")
            if rid:
                r = req(rid)
                r["arr"] = e["s"] if r["arr"] is None else min(r["arr"], e["s"])
                r["fin"] = e["e"] if r["fin"] is None else max(r["fin"], e["e"])
    for i, st in enumerate(steps):
        if st["fwd"]:
            st["st"][1] = max(st["fwd"].values())
        if st["xlo"] is not None:
            win = (st["xhi"] - st["xlo"]) / 1e6
            if st["fwd"]:
                st["st"][2] = max(0.0, win - st["st"][1])
            else:
                st["st"][1] = win
        nxt = steps[i + 1] if i + 1 < len(steps) and steps[i + 1]["pid"] == st["pid"] else None
        paired = st["bs"] > 0 and nxt is not None and nxt["bs"] > 0
        lo, hi = st["s"], (nxt["s"] if paired else st["end"])
        st["wall"] = (hi - lo) / 1e6
        # The parts split the wall: schedule, model, ipc clipped to what is left, waiting the rest.
        left = max(0.0, st["wall"])
        for g in (0, 1, 2):
            st["st"][g] = min(max(st["st"][g], 0.0), left)
            left -= st["st"][g]
        st["st"][4] = left
        done = st["mend"] if st["mend"] is not None else st["end"]
        for rid in st["ids"]:
            r = req(rid)
            r["steps"] += 1
            if r["first"] is None or st["s"] < r["first"]:
                r["first"], r["fdone"] = st["s"], done
            r["ldone"] = done if r["ldone"] is None else max(r["ldone"], done)
    busy = [s for s in steps if s["bs"] > 0]
    wall = sum(s["wall"] for s in busy)
    stages = {}
    for g, name in enumerate(["schedule", "model", "ipc", "output", "waiting"]):
        v = sorted(s["st"][g] for s in busy)
        stages[name] = [sum(v), sum(v) / wall if wall else 0, q(v, 0.5), q(v, 0.99)]
    metrics = {"queue_ms": [], "ttft_ms": [], "tpot_ms": [], "e2e_ms": []}
    for r in reqs.values():
        ft = r["fo"] if r["fo"] is not None else r["fdone"]
        end = r["fin"] if r["fin"] is not None else (r["lo"] if r["lo"] is not None else r["ldone"])
        if r["arr"] is not None:
            if r["first"] is not None:
                metrics["queue_ms"].append(max(0.0, (r["first"] - r["arr"]) / 1e6))
            if ft is not None:
                metrics["ttft_ms"].append((ft - r["arr"]) / 1e6)
            if end is not None:
                metrics["e2e_ms"].append((end - r["arr"]) / 1e6)
        if r["outs"] >= 2:
            metrics["tpot_ms"].append((r["lo"] - r["fo"]) / 1e6 / (r["outs"] - 1))
        elif r["steps"] >= 2:
            metrics["tpot_ms"].append((r["ldone"] - r["fdone"]) / 1e6 / (r["steps"] - 1))
    out = {"spans": len(xs), "steps": len(steps), "busy": len(busy), "requests": len(reqs), "stages": stages,
           "names": len(name_stats)}
    for k, v in metrics.items():
        v.sort()
        out[k] = [len(v), q(v, 0.5), q(v, 0.9), q(v, 0.99)]
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
