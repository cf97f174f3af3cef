"""The e2e checker: the seed's four acceptance levels (docs/e2e.md "Acceptance levels"), measured on
what one e2e case left behind (Jaeger's query API and the Perfetto JSON).

Owns the verdicts and their evidence, nothing else. It reads:
  * CASE_DIR/window.json     service name and the run's microsecond window
  * CASE_DIR/hook_tracing.json  the forwarder's Chrome Trace JSON
  * CASE_DIR/hook_tracing.pftrace  the same run in native Perfetto format, when present
    (decoded with the `perfetto` package's protos through tests/integration/pftrace_model.py)
  * CASE_DIR/bench.json      vllm bench serve's result (completed requests)
  * CASE_DIR/traced_requests.json  the requests sent with their own traceparent
  * Jaeger: /api/services, /api/traces?service=&start=&end=&limit=, /api/traces/{id}

Levels:
  L1 data out       Jaeger returns traces; the JSON is valid and holds complete X events.
  L2 spans shown    schedule/model/output (+ worker/model-runner) hook spans with
                    non-zero durations, in both sinks; counts and medians.
  L3 requests joined every completed request's llm_request (vLLM's span) shares a trace
                    with, or is linked from, >=1 schedule, >=1 model and >=1 output span.
                    --perfetto-only: every request seen by the output stage is tied to
                    schedule, model and output spans through request.ids/links/flows.
  L4 analysis       `mstrace analyze --json` (docs/analyze.md) on the JSON: per-step stages
                    (schedule, model, ipc, output, waiting) all measured, batch attributes present,
                    a bottleneck named, joining not broken; with --expect-bottleneck, the named
                    stage must be the planted one.
  P1 .pftrace       (when the case wrote one) every packet parses, interned ids resolve, every
                    flow has both ends, and it holds the same slices, links, request tracks and
                    counters as the JSON of the same run.
A level that fails prints why; the checks are not weakened to pass. Exit 1 if any fails.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

SCHEDULE = "vllm.scheduler.schedule"
MODEL = "vllm.model.execute"
OUTPUT = "vllm.output.process"
WORKER = "vllm.worker.execute_model"
RUNNER = "vllm.model_runner.execute"
SAMPLE = "vllm.model.sample_tokens"
UPDATE = "vllm.scheduler.update_from_output"
REQUIRED = [SCHEDULE, MODEL, OUTPUT, WORKER, RUNNER]
OPTIONAL = [SAMPLE, UPDATE]
HOOK_SCOPE = "ms_service_profiler.hook."


def _p(*a):
    print(*a, flush=True)


def _med(xs):
    return statistics.median(xs) if xs else 0.0


def _load_json(path, default=None):
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return default


# --------------------------------------------------------------- Jaeger side

class Jaeger(object):
    def __init__(self, url):
        self.url = url.rstrip("/")

    def get(self, path, params=None):
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=60) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def services(self):
        return self.get("/api/services").get("data") or []

    def traces(self, service, start_us, end_us, limit):
        return self.get("/api/traces", {"service": service, "start": start_us, "end": end_us,
                                        "limit": limit}).get("data") or []

    def trace(self, trace_id):
        try:
            data = self.get("/api/traces/" + trace_id).get("data") or []
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise
        return data[0] if data else None


def _flatten(traces):
    spans = {}
    for t in traces:
        procs = t.get("processes", {})
        for s in t.get("spans", []):
            s = dict(s)
            s["tagmap"] = {x["key"]: x["value"] for x in s.get("tags", [])}
            s["proc"] = procs.get(s.get("processID"), {})
            spans[(s["traceID"], s["spanID"])] = s
    return list(spans.values())


def _is_hook(s):
    return str(s["tagmap"].get("otel.scope.name", "")).startswith(HOOK_SCOPE)


# -------------------------------------------------------------- Perfetto side

def load_perfetto(path):
    """(events, error) — error is a string when the file is not valid JSON."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        return None, "cannot read %s: %s" % (path, e)
    try:
        ev = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        return None, "not valid JSON (%d bytes): %s" % (len(raw), e)
    if not isinstance(ev, list):
        return None, "top level is %s, not an array" % type(ev).__name__
    return ev, None


def _valid_x(e):
    return (isinstance(e.get("name"), str) and isinstance(e.get("ts"), (int, float)) and
            isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0 and isinstance(e.get("pid"), int) and
            isinstance(e.get("tid"), int) and isinstance(e.get("args"), dict))


# -------------------------------------------------------------------- levels

class Verdicts(object):
    def __init__(self):
        self.levels = {}

    def set(self, level, ok, why):
        self.levels[level] = (ok, why)
        _p("==> %s: %s — %s" % (level, "PASS" if ok else "FAIL", why))


def level1(v, jspans, jtraces, events, perr, perfetto_only):
    _p("\n### L1 data out")
    reasons, ok = [], True
    if not perfetto_only:
        nhook = sum(1 for s in jspans if _is_hook(s))
        _p("Jaeger: %d traces, %d spans (%d hook spans, %d vLLM spans)" % (len(jtraces), len(jspans), nhook,
                                                                          len(jspans) - nhook))
        if not jtraces:
            ok = False
            reasons.append("Jaeger returned no traces")
    if perr:
        ok = False
        reasons.append("Perfetto JSON: " + perr)
        _p("Perfetto: " + perr)
    else:
        xs = [e for e in events if e.get("ph") == "X"]
        bad = [e for e in xs if not _valid_x(e)]
        phs = {}
        for e in events:
            phs[e.get("ph")] = phs.get(e.get("ph"), 0) + 1
        _p("Perfetto: %d events by ph %s; %d complete (X) events, %d malformed" % (len(events), phs, len(xs),
                                                                                  len(bad)))
        if not xs:
            ok = False
            reasons.append("no X events in the JSON")
        if bad:
            ok = False
            reasons.append("%d malformed X events, e.g. %s" % (len(bad), json.dumps(bad[0])[:300]))
    v.set("L1", ok, "; ".join(reasons) or ("valid complete events in the JSON" if perfetto_only else
                                            "traces in Jaeger and valid complete events in the JSON"))


def _stats_by_name(items, names):
    out = {}
    for n in names:
        durs = [d for (name, d) in items if name == n]
        out[n] = (len(durs), sum(1 for d in durs if d > 0), _med(durs))
    return out


def level2(v, jspans, xs, perfetto_only):
    _p("\n### L2 spans shown (durations in microseconds)")
    ok, reasons = True, []
    sinks = [("Perfetto", [(e["name"], float(e["dur"])) for e in xs])]
    if not perfetto_only:
        sinks.insert(0, ("Jaeger", [(s["operationName"], float(s["duration"])) for s in jspans if _is_hook(s)]))
    for sink, items in sinks:
        st = _stats_by_name(items, REQUIRED + OPTIONAL)
        _p("%-8s %-36s %7s %9s %12s" % ("sink", "span", "count", "dur>0", "median_us"))
        for n in REQUIRED + OPTIONAL:
            c, nz, m = st[n]
            _p("%-8s %-36s %7d %9d %12.1f%s" % (sink, n, c, nz, m, "" if n in REQUIRED else "  (optional)"))
            if n in REQUIRED:
                if c == 0:
                    ok = False
                    reasons.append("%s: no %s span" % (sink, n))
                elif m <= 0 or nz < 0.95 * c:
                    ok = False
                    reasons.append("%s: %s durations not real (median %.1f, %d/%d non-zero)" % (sink, n, m, nz, c))
        # One schedule, one executor call and one worker call per engine step:
        # counts that disagree mean spans were lost on the way to this sink.
        per_step = {n: st[n][0] for n in (SCHEDULE, MODEL, WORKER, RUNNER)}
        hi, lo = max(per_step.values()), min(per_step.values())
        if hi and lo < 0.95 * hi:
            ok = False
            reasons.append("%s: per-step span counts disagree %s (spans lost)" % (sink, per_step))
        others = sorted({name for name, _ in items} - set(REQUIRED + OPTIONAL))
        if others:
            _p("%-8s other hook span names: %s" % (sink, ", ".join(others)))
    v.set("L2", ok, "; ".join(reasons) or "all expected hook spans with non-zero durations in %s" %
          " and ".join(s for s, _ in sinks))


def _ids_of(args_or_tags):
    ids = args_or_tags.get("request.ids")
    if isinstance(ids, str):
        try:
            ids = json.loads(ids)
        except ValueError:
            ids = [ids]
    return [str(i) for i in ids] if isinstance(ids, list) else []


def _stage(name):
    if name == SCHEDULE:
        return "schedule"
    if name in (MODEL, WORKER, RUNNER):
        return "model"
    if name == OUTPUT:
        return "output"
    return None


def level3_jaeger(v, jspans, jaeger, bench, traced):
    _p("\n### L3 requests joined (Jaeger: parent / same trace id / link)")
    reqs = [s for s in jspans if s["operationName"] == "llm_request"]
    by_trace = {}
    for s in jspans:
        by_trace.setdefault(s["traceID"], []).append(s)
    # trace id -> hook spans in that trace or linking (FOLLOWS_FROM/CHILD_OF) into it, with how
    joined = {}
    for s in jspans:
        if not _is_hook(s) or _stage(s["operationName"]) is None:
            continue
        joined.setdefault(s["traceID"], []).append((s, "same-trace"))
        for r in s.get("references", []):
            if r.get("traceID") != s["traceID"]:
                joined.setdefault(r["traceID"], []).append((s, "link" if r.get("refType") == "FOLLOWS_FROM"
                                                            else "parent"))
    completed = (bench or {}).get("completed", 0) + sum(1 for t in traced if t.get("status") == 200)
    _p("llm_request spans: %d; completed requests (bench %s + traceparent %d): %d" % (
        len(reqs), (bench or {}).get("completed"), sum(1 for t in traced if t.get("status") == 200), completed))
    n_joined, rows, unjoined = 0, [], []
    for r in reqs:
        stages = {"schedule": [], "model": [], "output": []}
        for s, how in joined.get(r["traceID"], []):
            stages[_stage(s["operationName"])].append((s, how))
        full = all(stages.values())
        n_joined += full
        rows.append((r, stages))
        if not full:
            unjoined.append(r)
    frac = n_joined / len(reqs) if reqs else 0.0
    _p("joined to schedule+model+output: %d / %d llm_request spans (%.0f%%)" % (n_joined, len(reqs), 100 * frac))
    # MS_PROFILER_AUTO_TRACE=1: the plugin's vllm.request span parents vLLM's llm_request.
    rspans = {s["spanID"] for s in jspans if s["operationName"] == "vllm.request"}
    on_rspan = sum(1 for r in reqs if any(ref.get("refType") == "CHILD_OF" and ref.get("spanID") in rspans
                                          for ref in r.get("references", [])))
    _p("vllm.request spans (auto-trace): %d; llm_request spans parented on one: %d" % (len(rspans), on_rspan))

    # Requests that carried their own traceparent: vLLM parents llm_request on it, hooks must join it.
    tp_ok = 0
    for t in traced:
        tid = t.get("trace_id")
        mine = [r for r in reqs if r["traceID"] == tid]
        parent_ok = any(ref.get("spanID") == t.get("parent_span_id") for r in mine for ref in r.get("references", []))
        st = {k: len(x) for k, x in next((stg for r, stg in rows if r["traceID"] == tid), {}).items()}
        good = bool(mine) and parent_ok and all(st.get(k) for k in ("schedule", "model", "output"))
        tp_ok += good
        _p("  traceparent %s: llm_request %s, parent=%s, hook spans joined %s -> %s" % (
            tid, "found" if mine else "MISSING", "ok" if parent_ok else "no", st or "{}", "joined" if good else "NOT joined"))

    # A few chains, joined ones first.
    rows.sort(key=lambda rs: -sum(bool(x) for x in rs[1].values()))
    for r, stages in rows[:4] + ([rows[-1]] if len(rows) > 4 else []):
        _p("  chain %s llm_request id=%s dur=%.1fms" % (r["traceID"], r["tagmap"].get("gen_ai.request.id"),
                                                         r["duration"] / 1000.0))
        for stg in ("schedule", "model", "output"):
            items = stages[stg]
            hows = sorted({h for _, h in items})
            names = sorted({s["operationName"] for s, _ in items})
            _p("      %-8s %3d spans via %s %s" % (stg, len(items), "/".join(hows) or "-", ",".join(names)))

    # Why unjoined: do the hook spans at least name the request (id join), and where are they?
    if unjoined:
        hook_ids = {}
        for s in jspans:
            if _is_hook(s) and _stage(s["operationName"]):
                for i in _ids_of(s["tagmap"]):
                    hook_ids.setdefault(i, set()).add(_stage(s["operationName"]))
        by_ext = {}
        for i, stg in hook_ids.items():
            ext = i.rsplit("-", 1)[0] if len(i.rsplit("-", 1)[-1]) == 8 else i
            by_ext.setdefault(ext, set()).update(stg)
            by_ext.setdefault(i, set()).update(stg)
        named = sum(1 for r in unjoined if by_ext.get(str(r["tagmap"].get("gen_ai.request.id"))) ==
                    {"schedule", "model", "output"})
        linked_elsewhere = sum(1 for r in unjoined if len(by_trace.get(r["traceID"], [])) == 1)
        _p("  %d llm_request spans are not joined; %d of them sit alone in their trace; %d are named in the "
           "request.ids of schedule+model+output hook spans (an id-only join, which L3 does not count)" % (
               len(unjoined), linked_elsewhere, named))
    ok = bool(reqs) and n_joined == len(reqs) and len(reqs) >= completed and tp_ok == len(traced)
    why = []
    if not reqs:
        why.append("no llm_request span in Jaeger")
    if len(reqs) < completed:
        why.append("%d completed requests but only %d llm_request spans" % (completed, len(reqs)))
    if reqs and n_joined < len(reqs):
        why.append("%d of %d llm_request spans have no schedule+model+output hook span in their trace or linked "
                   "to it" % (len(reqs) - n_joined, len(reqs)))
    if tp_ok < len(traced):
        why.append("%d of %d traceparent requests not fully joined" % (len(traced) - tp_ok, len(traced)))
    v.set("L3", ok, "; ".join(why) or "every llm_request joined (%d/%d), traceparent requests %d/%d" % (
        n_joined, len(reqs), tp_ok, len(traced)))


def level3_perfetto(v, xs, events, bench, traced):
    _p("\n### L3 requests joined (Perfetto JSON: request.ids / links / flows)")
    spans_of = {}  # request id -> stage -> [event]
    span_by_id = {}
    for e in xs:
        a = e["args"]
        span_by_id[(a.get("trace_id"), a.get("span_id"))] = e
        stg = _stage(e["name"])
        if stg:
            for i in _ids_of(a):
                spans_of.setdefault(i, {}).setdefault(stg, []).append(e)
    # Requests the API server completed = ids on output spans.
    out_ids = {i for e in xs if e["name"] == OUTPUT for i in _ids_of(e["args"])}
    completed = (bench or {}).get("completed", 0) + sum(1 for t in traced if t.get("status") == 200)
    full = [i for i in out_ids if all(spans_of.get(i, {}).get(k) for k in ("schedule", "model", "output"))]
    _p("requests on output spans: %d (completed: %d); joined to schedule+model+output by request.ids: %d" % (
        len(out_ids), completed, len(full)))
    flows = [e for e in events if e.get("ph") in ("s", "f")]
    n_s = sum(1 for e in flows if e["ph"] == "s")
    n_f = sum(1 for e in flows if e["ph"] == "f")
    _p("flow events: %d starts, %d finishes (links drawn as arrows)" % (n_s, n_f))
    rq = [e for e in xs if e["name"] == "vllm.request"]
    rq_keys = {"%s:%s" % (e["args"].get("trace_id"), e["args"].get("span_id")) for e in rq}
    # args.link = "<linked trace>:<linked span>:<linking span>" (the id is a hex number)
    from_rq = sum(1 for e in flows if e["ph"] == "s" and str(e.get("args", {}).get("link", ""))[:49] in rq_keys)
    _p("vllm.request spans (auto-trace): %d; flow starts from one: %d" % (len(rq), from_rq))
    # Link trace ids per request, per stage: does one request keep one trace id across processes?
    link_traces = {}
    for e in xs:
        stg = _stage(e["name"])
        ids = _ids_of(e["args"])
        if stg and len(ids) == 1:
            link_traces.setdefault(ids[0], set()).add(e["args"].get("trace_id"))
    same = sum(1 for i in full if len(link_traces.get(i, ())) == 1)
    _p("single-request spans of one request share one trace id across processes: %d of %d requests" % (
        same, len(full)))
    for i in sorted(full)[:3]:
        st = spans_of[i]
        _p("  chain %s: %s" % (i, ", ".join("%s x%d (pids %s)" % (k, len(st[k]), sorted({e["pid"] for e in st[k]}))
                                             for k in ("schedule", "model", "output"))))
    ok = bool(out_ids) and len(full) == len(out_ids) and len(out_ids) >= completed
    why = []
    if len(out_ids) < completed:
        why.append("only %d requests on output spans for %d completed" % (len(out_ids), completed))
    if len(full) < len(out_ids):
        miss = sorted(set(out_ids) - set(full))[:3]
        why.append("%d requests lack a schedule/model/output span naming them, e.g. %s" % (
            len(out_ids) - len(full), [(m, sorted(spans_of.get(m, {}))) for m in miss]))
    v.set("L3", ok, "; ".join(why) or "every request (%d) joined to its steps by request.ids" % len(full))


def level4(v, case_dir, jspans, perfetto_only, mstrace_bin, expect_bottleneck=None):
    """L4 through the product: `mstrace analyze --json` on the forwarder's JSON (docs/analyze.md)."""
    _p("\n### L4 analysis (mstrace analyze --json)")
    trace = os.path.join(case_dir, "hook_tracing.json")
    out = os.path.join(case_dir, "analysis.json")
    if not mstrace_bin:
        v.set("L4", False, "no mstrace binary to run (--mstrace or $MSTRACE_BIN)")
        return
    proc = subprocess.run([mstrace_bin, "analyze", trace, "--json", out, "--quiet"], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        v.set("L4", False, "mstrace analyze exited %d: %s" % (proc.returncode, proc.stderr.strip()))
        return
    a = _load_json(out, {})
    dq, st, steps = a["data_quality"], a["stages"], a["steps"]
    _p("data: %d spans, %d processes (%s), %d engine steps (%d busy), %d requests (%d joined), lossy %s" % (
        dq["spans"], len(dq["processes"]), ", ".join(sorted({p["role"] for p in dq["processes"]})),
        steps["count"], steps["busy"], a["requests"]["count"], a["requests"]["joined"], dq["lossy"]))
    for w in dq["warnings"]:
        _p("  data warning: %s" % w)
    _p("verdict: %s" % a["verdict"]["sentence"])
    for k in ("schedule", "model", "ipc", "output", "waiting"):
        _p("  %-9s %6.1f%% of busy time, p50 %s ms, p99 %s ms" % (
            k, 100 * st[k]["share"], st[k]["p50_ms"], st[k]["p99_ms"]))
    for f in a["findings"]:
        _p("  [%s%s] %s: %s" % ("FIRED " if f["fired"] else "", f["severity"], f["rule"], f["sentence"]))
    fit = steps["model_fit"]
    _p("model time vs %s: slope %s ms, r2 %s; step kinds %s" % (fit["x"], fit["slope_ms"], fit["r2"], steps["kinds"]))
    for r in ("queue_ms", "ttft_ms", "tpot_ms", "e2e_ms"):
        m = a["requests"][r]
        _p("  request %-8s n %d p50 %s p90 %s p99 %s" % (r, m["n"], m["p50"], m["p90"], m["p99"]))
    for t in a["profile_targets"][:3]:
        _p("  profile: %s pid %d %d..%d ns (%s)" % (t["what"], t["pid"], t["start_ns"], t["end_ns"], t["why"]))
    if not perfetto_only:
        jm = [s["duration"] for s in jspans if s["operationName"] == MODEL]
        js = [s["duration"] for s in jspans if s["operationName"] == SCHEDULE]
        _p("cross-check Jaeger: median schedule %.0f us, model %.0f us" % (_med(js), _med(jm)))
    why = []
    busy = [s for s in steps["series"] if s["batch_size"] > 0]
    if not busy:
        why.append("no step scheduled a request")
    elif not any(s["scheduled_tokens"] > 0 for s in busy):
        why.append("batch.scheduled_tokens missing on the steps")
    if not (st["schedule"]["total_ms"] > 0 and st["model"]["total_ms"] > 0 and st["output"]["total_ms"] > 0):
        why.append("a stage has no time: %s" % {k: round(x["total_ms"], 1) for k, x in st.items()})
    if a["verdict"]["bottleneck"] is None:
        why.append("no bottleneck named")
    if any(f["fired"] and f["rule"] == "broken_joining" for f in a["findings"]):
        why.append("joining is broken")
    if expect_bottleneck and a["verdict"]["bottleneck"] != expect_bottleneck:
        why.append("the planted bottleneck is %s but the verdict names %s" % (expect_bottleneck,
                                                                          a["verdict"]["bottleneck"]))
    v.set("L4", not why, "; ".join(why) or "stages separated; bottleneck: %s (%.0f%%)%s" % (
        a["verdict"]["bottleneck"], 100 * a["verdict"]["share"],
        ", as planted" if expect_bottleneck else ""))


def level_pftrace(v, case_dir):
    """P1: the native file of the same run says what the JSON says."""
    path = os.path.join(case_dir, "hook_tracing.pftrace")
    if not os.path.exists(path):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "integration"))
    try:
        import pftrace_model
    except ImportError as e:
        v.set("P1", False, "cannot decode the .pftrace (%s; scripts/deps.sh installs `perfetto`)" % e)
        return
    try:
        mp = pftrace_model.read_pftrace(path)
        mj = pftrace_model.read_chrome_json(os.path.join(case_dir, "hook_tracing.json"))
    except Exception as e:  # a decode or consistency failure is the verdict
        v.set("P1", False, "%s: %s" % (type(e).__name__, e))
        return
    if mp.dangling_flows:
        v.set("P1", False, "%d flow ids with one end only" % len(mp.dangling_flows))
        return
    np_, nj = pftrace_model.normalized(mp), pftrace_model.normalized(mj)
    diff = [k for k in nj if nj[k] != np_[k]]
    _p("pftrace: %d bytes, %d slices, %d links, %d request slices, %d counter samples" % (
        os.path.getsize(path), len(mp.slices), len(mp.links), len(mp.requests), len(mp.counters)))
    ok = not diff and len(mp.slices) > 0
    v.set("P1", ok, "same slices, links, request tracks and counters as the JSON" if ok else
          "differs from the JSON in: %s" % (", ".join(diff) or "no slices"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case-dir", required=True)
    ap.add_argument("--jaeger", help="Jaeger query URL, e.g. http://127.0.0.1:16686")
    ap.add_argument("--perfetto-only", action="store_true")
    ap.add_argument("--limit", type=int, default=20000)
    ap.add_argument("--mstrace", default=os.environ.get("MSTRACE_BIN"),
                    help="the mstrace binary that runs L4's analysis (default $MSTRACE_BIN)")
    ap.add_argument("--expect-bottleneck", help="L4 passes only if the verdict names this stage (planted cases)")
    a = ap.parse_args()
    d = a.case_dir
    win = _load_json(os.path.join(d, "window.json"), {})
    bench = _load_json(os.path.join(d, "bench.json"))
    traced = _load_json(os.path.join(d, "traced_requests.json"), [])
    events, perr = load_perfetto(os.path.join(d, "hook_tracing.json"))
    xs = [e for e in (events or []) if e.get("ph") == "X" and _valid_x(e)]
    _p("case %s: service %s, window %s..%s us; bench completed %s failed %s" % (
        win.get("case"), win.get("service"), win.get("start_us"), win.get("end_us"),
        (bench or {}).get("completed"), (bench or {}).get("failed")))

    jspans, jtraces, jaeger = [], [], None
    if not a.perfetto_only:
        if not a.jaeger:
            ap.error("--jaeger URL is required unless --perfetto-only")
        jaeger = Jaeger(a.jaeger)
        services = jaeger.services()
        _p("Jaeger services: %s" % services)
        svc = win.get("service")
        if svc in services:
            jtraces = jaeger.traces(svc, win["start_us"] - 10**6, win["end_us"] + 60 * 10**6, a.limit)
            jspans = _flatten(jtraces)
        names = {}
        for s in jspans:
            key = (s["operationName"], s["tagmap"].get("otel.scope.name", "?"), s["proc"].get("serviceName"))
            names[key] = names.get(key, 0) + 1
        _p("span names in Jaeger (name, scope, service): count")
        for k in sorted(names):
            _p("  %s: %d" % (k, names[k]))

    v = Verdicts()
    level1(v, jspans, jtraces, events or [], perr, a.perfetto_only)
    level2(v, jspans, xs, a.perfetto_only)
    if a.perfetto_only:
        level3_perfetto(v, xs, events or [], bench, traced)
    else:
        level3_jaeger(v, jspans, jaeger, bench, traced)
        level3_perfetto(Verdicts(), xs, events or [], bench, traced)  # information: the JSON's view
    level4(v, d, jspans, a.perfetto_only, a.mstrace, a.expect_bottleneck)
    level_pftrace(v, d)
    _p("\nVERDICT %s: %s" % (win.get("case"), ", ".join("%s %s" % (k, "PASS" if ok else "FAIL")
                                                       for k, (ok, _) in sorted(v.levels.items()))))
    return 0 if all(ok for ok, _ in v.levels.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
