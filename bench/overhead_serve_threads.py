"""overhead_serve_threads.py — where a real serve's EngineCore CPU per engine
step goes, thread by thread, tracing off vs Perfetto only.

Two `vllm serve` (bench/overhead_serve.py's Server: CPU build, tiny model,
pinned to CPU 0, forwarder on CPU 1), 'off' and 'perfetto', loaded at the same
moment (the 'together' layout) for N rounds of 300 requests, 4 at a time. Per
load and EngineCore thread (by tid): on-CPU time (/proc/PID/task/TID/schedstat,
ns), voluntary and involuntary context switches, per engine step (vLLM's own
step counter). Also the CPU the engine thread spends busy-waiting in vLLM's
shared-memory queue (SpinCondition.wait, measured by a sitecustomize placed in
the staged package, the same in both servers, with an estimated 0.6 us per
wait for the check between waits). With --export-off-engine-cpu the
EngineCore's exporter thread runs on the side CPU; --export-batch N sets the
traced server's OTEL_BSP_MAX_EXPORT_BATCH_SIZE. With --perf, `perf record -F 10000` on
each EngineCore process during each load (OUT/perf.CASE.rN.data; read with
`perf report -i FILE --tid TID --no-children --sort dso,sym -n`).

Prints one JSON line per load and server, then the split per engine step:
the engine (main) thread — the critical path —, the `mstrace-export` thread
and EngineCore's other threads (off it), each off, perfetto and their paired
difference per round (median, mean and 95 % t interval over the rounds).
Run with the vLLM venv's Python. Nothing is asserted: this measures.

Usage: python bench/overhead_serve_threads.py --build DIR [--out OUT] [--rounds N] [--prompts N] [--perf]
       [--export-off-engine-cpu] [--export-batch N]
"""
import argparse
import asyncio
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead_serve as ov  # noqa: E402  (the servers, the load, the /proc readings)
from overhead_ab import t_interval  # noqa: E402

SPIN_METER = r'''
# Measurement only (bench/overhead_serve_threads.py): the CPU time each thread
# spends in vLLM's SpinCondition.wait, written every 256 waits to SPIN_DIR/PID.TID.
import importlib.abc, importlib.util, os, sys, threading, time
_TARGET = "vllm.distributed.device_communicators.shm_broadcast"
_SPIN_DIR = %r
_acc = {}


def _patch(mod):
    orig = mod.SpinCondition.wait

    def wait(self, timeout_ms=None):
        t0 = time.thread_time_ns()
        try:
            return orig(self, timeout_ms)
        finally:
            tid = threading.get_native_id()
            a = _acc.setdefault(tid, [0, 0])
            a[0] += time.thread_time_ns() - t0 + 600
            a[1] += 1
            if a[1] %% 256 == 0:
                with open(os.path.join(_SPIN_DIR, "%%d.%%d" %% (os.getpid(), tid)), "w") as fh:
                    fh.write("%%d %%d\n" %% (a[0], a[1]))
    mod.SpinCondition.wait = wait


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        old = spec.loader.exec_module

        def exec_module(module):
            old(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
'''


def input_error(msg):
    """A bad argument: one line, exit status 2."""
    sys.stderr.write("overhead_serve_threads.py: %s\n" % msg)
    sys.exit(2)


def threads(pid):
    """tid -> (comm, on-CPU ns, voluntary, involuntary context switches)."""
    res = {}
    for t in glob.glob("/proc/%d/task/*" % pid):
        try:
            comm = open(t + "/comm").read().strip()
            ns = int(open(t + "/schedstat").read().split()[0])
            status = dict(line.split(":", 1) for line in open(t + "/status").read().splitlines() if ":" in line)
            res[int(os.path.basename(t))] = (comm, ns, int(status["voluntary_ctxt_switches"]),
                                             int(status["nonvoluntary_ctxt_switches"]))
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return res


def spin(spin_dir, pid):
    """tid -> (ns in SpinCondition.wait, waits) as last written."""
    res = {}
    for f in glob.glob(os.path.join(spin_dir, "%d.*" % pid)):
        try:
            ns, n = map(int, open(f).read().split())
        except (OSError, ValueError):
            continue
        res[int(f.rsplit(".", 1)[1])] = (ns, n)
    return res


def per_step(before, after, steps):
    out = {}
    for tid, (comm, ns, vol, nvol) in after.items():
        _, ns0, vol0, nvol0 = before.get(tid, (comm, 0, 0, 0))
        us = (ns - ns0) / 1e3 / steps
        if us > 0.5:
            out["%s/%d" % (comm, tid)] = [round(us, 1), round((vol - vol0) / steps, 2), round((nvol - nvol0) / steps, 2)]
    return out


def thread_split(pid, before, after, steps):
    """µs per engine step of the engine (main) thread, the exporter thread and
    every other thread of the EngineCore process (on-CPU time)."""
    out = {"engine thread": 0.0, "mstrace-export thread": 0.0, "other threads": 0.0}
    for tid, (comm, ns, _, _) in after.items():
        us = (ns - before.get(tid, (comm, 0, 0, 0))[1]) / 1e3 / steps
        key = "engine thread" if tid == pid else "mstrace-export thread" if comm == ov.EXPORT_THREAD else "other threads"
        out[key] += us
    out["process, exporter thread left out"] = out["engine thread"] + out["other threads"]
    return out


def split_table(splits):
    """The per-step split, off / perfetto / paired difference over the rounds (markdown)."""
    rows = ["| µs per engine step | off (median) | perfetto (median) | perfetto − off per round | median | mean [95 % t] |",
            "|---|---|---|---|---|---|"]
    rounds = sorted(set(r for _, r in splits))
    for key in ("engine thread", "other threads", "process, exporter thread left out", "mstrace-export thread"):
        off = [splits[("off", r)][key] for r in rounds]
        on = [splits[("perfetto", r)][key] for r in rounds]
        d = [b - a for a, b in zip(off, on)]
        ci = "%+.1f [%+.1f, %+.1f]" % ((statistics.mean(d),) + t_interval(d)) if len(d) > 1 else "%+.1f" % d[0]
        rows.append("| %s | %.1f | %.1f | %s | %+.1f | %s |" % (
            key, statistics.median(off), statistics.median(on), ", ".join("%+.1f" % x for x in d),
            statistics.median(d), ci))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ov.add_common_args(ap, "/tmp/mstrace-serve-threads-%d" % os.getuid())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=300)
    ap.add_argument("--perf", action="store_true", help="perf record each EngineCore during each load")
    ap.add_argument("--export-batch", type=int, metavar="N",
                    help="OTEL_BSP_MAX_EXPORT_BATCH_SIZE of the traced server (default: the tracer's 512)")
    ap.add_argument("--export-off-engine-cpu", action="store_true",
                    help="move the EngineCore's mstrace-export thread to the side CPU (as on a host with a spare core)")
    a = ap.parse_args()
    if a.rounds < 1 or a.prompts < 1:
        input_error("--rounds and --prompts must be at least 1")
    if a.perf and shutil.which("perf") is None:
        input_error("--perf: no perf on PATH")
    if a.export_batch is not None and a.export_batch < 1:
        input_error("--export-batch must be at least 1")
    ov.clean_environment()
    if a.export_batch:
        os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = str(a.export_batch)
    shutil.rmtree(a.out, ignore_errors=True)
    spin_dir = os.path.join(a.out, "spin")
    os.makedirs(spin_dir)
    stage = ov.stage_package(os.path.abspath(a.build), a.out)
    with open(os.path.join(stage, "sitecustomize.py"), "w") as fh:
        fh.write(SPIN_METER % spin_dir)
    subprocess.run([sys.executable, os.path.join(ov.E2E, "make_tiny_model.py"), a.model], check=True,
                   stdout=subprocess.DEVNULL)
    os.sched_setaffinity(0, ov.SIDE_CPU)
    servers = [ov.Server(c, a.out, stage, a.model, None) for c in ("off", "perfetto")]
    try:
        ov.wait_healthy(servers)
        for s in servers:
            s.discover()
            asyncio.run(ov.run_load(s.url, ov.prompts_for(10 ** 6, 32), 4))
        engine = {s.case: [p for p, r in s.procs.items() if r == "engine_core"][0] for s in servers}
        if a.export_off_engine_cpu:
            for tid, (comm, _, _, _) in threads(engine["perfetto"]).items():
                if comm == ov.EXPORT_THREAD:
                    os.sched_setaffinity(tid, ov.SIDE_CPU)
        splits = {}
        for r in range(1, a.rounds + 1):
            time.sleep(1.5)
            prompts = ov.prompts_for(r, a.prompts)
            steps0 = {s.case: ov.engine_steps(s.url) for s in servers}
            t0 = {c: threads(p) for c, p in engine.items()}
            c0 = {c: ov.process_cpu_s(p) for c, p in engine.items()}
            sp0 = {c: spin(spin_dir, p) for c, p in engine.items()}
            perfs = []
            if a.perf:
                for c, p in engine.items():
                    perfs.append(subprocess.Popen(
                        ["taskset", "-c", ",".join(map(str, ov.SIDE_CPU)), "perf", "record", "-F", "10000", "-p",
                         str(p), "-o", os.path.join(a.out, "perf.%s.r%d.data" % (c, r))],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                time.sleep(0.5)
            load = os.getloadavg()

            async def all_loads():
                return await asyncio.gather(*(ov.run_load(s.url, prompts, 4) for s in servers))
            results = asyncio.run(all_loads())
            for p in perfs:
                p.send_signal(2)
            for p in perfs:
                p.wait()
            c1 = {c: ov.process_cpu_s(p) for c, p in engine.items()}
            t1 = {c: threads(p) for c, p in engine.items()}
            sp1 = {c: spin(spin_dir, p) for c, p in engine.items()}
            for i, s in enumerate(servers):
                steps = ov.engine_steps(s.url) - steps0[s.case]
                rec = dict(case=s.case, round=r, steps=steps, load=[round(x, 1) for x in load],
                           completed=len([x for x in results[i][0] if x]), wall_s=round(results[i][1], 2),
                           engine_core_us_per_step=round((c1[s.case] - c0[s.case]) * 1e6 / steps, 1),
                           threads_us_vol_invol_per_step=per_step(t0[s.case], t1[s.case], steps),
                           spin_us_waits_per_step={
                               tid: [round((ns - sp0[s.case].get(tid, (0, 0))[0]) / 1e3 / steps, 1),
                                     round((n - sp0[s.case].get(tid, (0, 0))[1]) / steps, 2)]
                               for tid, (ns, n) in sp1[s.case].items()})
                print(json.dumps(rec))
                sys.stdout.flush()
                splits[(s.case, r)] = thread_split(engine[s.case], t0[s.case], t1[s.case], steps)
        print(split_table(splits))
    finally:
        ov.stop_servers(servers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
