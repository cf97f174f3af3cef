"""overhead_vllm.py — what mstrace's hooks add to a vLLM engine step, with
vLLM's own objects, and what its exporter thread and the forwarder spend per
span. Run with the vLLM venv's Python (vLLM importable, the CPU build is
enough: no model runs here).

Owns the critical-path and off-critical-path figures of docs/performance.md:

  * A real `vllm.v1.core.sched.scheduler.Scheduler` (vLLM's config for the
    model in --model, a KV cache of 8,192 blocks, prefix caching off) is kept
    full at N running requests: each step is the EngineCore thread's
    `schedule()` → executor `execute_model(scheduler_output)` →
    `sample_tokens()` → `update_from_output()`, with a `ModelRunnerOutput`
    of one sampled token per request standing in for the model (finished
    requests are replaced by new ones, so steps mix decode, prefill and
    finished requests as in a serve).
  * live: consecutive steps alternate plain and hooked (each of the four
    calls wrapped by mstrace's C Hook with the adapter of
    python/mstrace/default_symbols.yaml: schedule, model, call, call), so
    a hooked step is paired with the plain one next to it; the figure is
    the median of (hooked − plain) calling-thread CPU per call.
  * replay: the SchedulerOutput of one real step and the real Scheduler are
    kept, and the hooked call is timed against the plain one on exactly
    those objects, many times (the precise per-adapter figure; the worker's
    `execute_model` runs the same model adapter on the same object).
    The output adapter (API server) is replayed on N real
    `EngineCoreOutput`s.
  * export: with --forward, the spans go to a real `mstrace forward`
    (JSON output into a temporary directory), and the CPU time of this
    process's `mstrace-export` thread and of the forwarder process
    (/proc/.../stat, utime + stime) is divided by the spans exported.

Every request has a sampled trace context registered (a link per request,
at most 128), as with MS_PROFILER_AUTO_TRACE=1. Times are thread CPU
(time.thread_time_ns), medians; the machine's load average is printed.

Usage: python bench/overhead_vllm.py --build DIR [--model DIR] [--sizes 1,8,64,256]
       [--steps N] [--replays N] [--forward MSTRACE_BINARY]
"""
import argparse
import copy
import glob
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def load_native(build):
    found = [p for p in glob.glob(os.path.join(build, "**", "_native*.so"), recursive=True)
             if "staging" not in p] or glob.glob(os.path.join(build, "**", "_native*.so"), recursive=True)
    if not found:
        sys.exit("no _native module under %s" % build)
    spec = importlib.util.spec_from_file_location("mstrace._native", found[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["mstrace._native"] = mod
    return mod


def thread_cpu_s(pid, name):
    """utime + stime (s) of the threads of `pid` called `name`."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in glob.glob("/proc/%d/task/*/stat" % pid):
        try:
            text = open(stat).read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        if comm == name:
            f = text[text.rindex(")") + 2:].split()
            total += int(f[11]) + int(f[12])
    return total / tick


def process_cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read()
    f = f[f.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


class Engine:
    """A real vLLM Scheduler kept at `size` running requests, stepped as
    EngineCore steps it."""

    def __init__(self, vllm_config, size):
        import torch
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.structured_output import StructuredOutputManager
        spec = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=8, dtype=torch.float32)
        kvc = KVCacheConfig(num_blocks=8192, kv_cache_tensors=[],
                            kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
        vllm_config.cache_config.num_gpu_blocks = 8192
        vllm_config.scheduler_config.max_num_seqs = size
        self.sched = Scheduler(vllm_config, kvc, StructuredOutputManager(vllm_config), block_size=16)
        self.size, self.serial, self.native = size, 0, None

    def add(self, n):
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request
        for _ in range(n):
            i = self.serial
            self.serial += 1
            rid = "cmpl-%032x-0-%08x" % (i, i)
            if self.native is not None:
                self.native.register_request(rid, {"traceparent": "00-%032x-%016x-01" % (i + 1, i + 1)})
            # prompts of 24-87 tokens, 40-103 output tokens: a mix of new, decoding and finished requests
            self.sched.add_request(Request(rid, [100 + (i * 7 + k) % 900 for k in range(24 + i % 64)],
                                           SamplingParams(max_tokens=40 + (i * 13) % 64, ignore_eos=True), None))

    def calls(self):
        """The four calls of one step, plain (functions of the scheduler)."""
        from vllm.v1.outputs import ModelRunnerOutput
        s = self.sched

        def execute_model(scheduler_output):
            ids = list(scheduler_output.num_scheduled_tokens)
            self.last = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                                          sampled_token_ids=[[7]] * len(ids))
            return None

        def sample_tokens(grammar_output):
            return self.last

        return {"schedule": type(s).schedule, "execute_model": execute_model,
                "sample_tokens": sample_tokens, "update_from_output": type(s).update_from_output}


ADAPTERS = {"schedule": ("vllm.scheduler.schedule", "Schedule", "schedule"),
            "execute_model": ("vllm.executor.execute_model", "Execute", "model"),
            "sample_tokens": ("vllm.executor.sample_tokens", "Execute", "call"),
            "update_from_output": ("vllm.scheduler.update_from_output", "Schedule", "call")}


def hooked(n, calls):
    return {k: n.Hook(fn, name=ADAPTERS[k][0], domain=ADAPTERS[k][1], adapter=ADAPTERS[k][2])
            for k, fn in calls.items()}


def step(eng, fns, cost):
    """One engine step through `fns`; adds each call's thread CPU ns to cost."""
    s = eng.sched
    t = time.thread_time_ns
    t0 = t()
    so = fns["schedule"](s)
    t1 = t()
    fns["execute_model"](so)
    t2 = t()
    out = fns["sample_tokens"](None)
    t3 = t()
    fns["update_from_output"](s, so, out)
    t4 = t()
    for k, dt in (("schedule", t1 - t0), ("execute_model", t2 - t1), ("sample_tokens", t3 - t2),
                  ("update_from_output", t4 - t3)):
        cost[k].append(dt)
    missing = eng.size - len(s.requests)
    if missing > 0:
        eng.add(missing)
    return so


def live(n, eng, steps):
    plain = eng.calls()
    hook = hooked(n, plain)
    pc = {k: [] for k in plain}
    hc = {k: [] for k in plain}
    for _ in range(20):  # warm-up: the batch fills, first calls done
        step(eng, plain, pc)
    pc = {k: [] for k in plain}
    for i in range(steps):
        step(eng, hook if i % 2 else plain, hc if i % 2 else pc)
        if i % 64 == 63:
            n.flush(10000)
    return {k: (statistics.median(hc[k]) - statistics.median(pc[k])) / 1000 for k in plain}, \
        statistics.median(pc["schedule"]) / 1000


def per_call_ns(fn, calls, rounds):
    res = []
    for _ in range(rounds):
        c0 = time.thread_time_ns()
        for _ in range(calls):
            fn()
        res.append((time.thread_time_ns() - c0) / calls)
    return statistics.median(res)


def replay(n, eng, reps):
    """Added µs per call of each adapter on one real step's objects."""
    from vllm.v1.engine import EngineCoreOutput
    s = eng.sched
    so = s.schedule()
    ids = list(so.num_scheduled_tokens)
    outs = [EngineCoreOutput(request_id=r, new_token_ids=[7]) for r in ids]

    def sched_replay(scheduler):  # args[0] is the Scheduler, as for Scheduler.schedule
        return so

    def model(scheduler_output):
        return None

    def process_outputs(engine_core_outputs, engine_core_timestamp=None, iteration_stats=None):
        return None

    # The schedule case runs first and leaves `so` as this thread's step, so
    # the execute_model case is a model span of the step (the engine thread:
    # executor, and worker / model runner with the single-process executor);
    # a copy of `so` is what a worker in another process sees: no step of
    # its own, the SchedulerOutput read in full.
    so_elsewhere = copy.copy(so)
    cases = {"schedule": (sched_replay, "schedule", lambda f: f(s)),
             "execute_model": (model, "model", lambda f: f(so)),
             "execute_model (worker process)": (model, "model", lambda f: f(so_elsewhere)),
             "sample_tokens": (model, "call", lambda f: f(None)),
             "process_outputs (API server)": (process_outputs, "output", lambda f: f(outs))}
    res = {}
    rounds = 9
    calls = max(reps // rounds, 50)
    for name, (fn, adapter, call) in cases.items():
        h = n.Hook(fn, name="bench." + adapter, domain="Bench", adapter=adapter)
        p = per_call_ns(lambda: call(fn), calls, rounds)
        m = per_call_ns(lambda: call(h), calls, rounds)
        n.flush(10000)
        res[name] = (m - p) / 1000
    return res, len(ids), so


def start_forwarder(binary, tmp, out="hook_tracing.json"):
    name = "mst_overhead_%d_%s" % (os.getpid(), os.path.basename(tmp))
    log = open(os.path.join(tmp, "forward.log"), "wb")
    proc = subprocess.Popen([binary, "forward", "--log-level", "info", "--socket-name", name,
                             "--perfetto-output", os.path.join(tmp, out)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while "listening on" not in open(os.path.join(tmp, "forward.log"), errors="replace").read():
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("forwarder did not start: " + open(os.path.join(tmp, "forward.log")).read())
        time.sleep(0.02)
    return proc, name


def export_step_spans(n, so, sched, count):
    """Exports `count` schedule spans of the replayed step `so` through a schedule hook, flushing every
    256 so that none is dropped."""
    h = n.Hook(lambda scheduler: so, name="vllm.scheduler.schedule", domain="Schedule", adapter="schedule")
    for i in range(count):
        h(sched)
        if i % 256 == 255:
            n.flush(30000)
    n.flush(30000)


def export_only(n, a, vllm_config_for):
    """Per size and output format: a fresh forwarder, EXPORT_SPANS step spans
    of one real step, then the exporter thread's and the forwarder's CPU and
    the output file's bytes per span (the forwarder stopped, file complete)."""
    print("| requests/step | format | spans | exporter thread µs/span | forwarder µs/span | file bytes/span | load |")
    print("|---|---|---|---|---|---|---|")
    for size in [int(x) for x in a.sizes.split(",")]:
        for fmt in ("json", "pftrace"):
            tmp = tempfile.mkdtemp(prefix="mst-export-")
            out = "hook_tracing." + fmt
            fwd, sock = start_forwarder(a.forward, tmp, out)
            n.init(forward_socket=sock, otlp=False, perfetto=True)
            eng = Engine(vllm_config_for(size), size)
            n._reset_requests()
            eng.native = n
            eng.add(size)
            plain = eng.calls()
            cost = {k: [] for k in plain}
            for _ in range(20):
                step(eng, plain, cost)
            so = eng.sched.schedule()
            st0 = n.stats()
            cpu0 = thread_cpu_s(os.getpid(), "mstrace-export")
            fcpu0 = process_cpu_s(fwd.pid)
            export_step_spans(n, so, eng.sched, a.export_spans)
            spans = n.stats()["spans_exported"] - st0["spans_exported"]
            ecpu = thread_cpu_s(os.getpid(), "mstrace-export") - cpu0
            n.shutdown()
            time.sleep(1.0)
            fcpu = process_cpu_s(fwd.pid) - fcpu0
            fwd.send_signal(signal.SIGTERM)
            fwd.wait(timeout=120)
            size_b = os.path.getsize(os.path.join(tmp, out))
            print("| %d | %s | %d | %.2f | %.2f | %.0f | %.1f |" % (
                size, fmt, spans, ecpu * 1e6 / spans, fcpu * 1e6 / spans, size_b / spans, os.getloadavg()[0]))
            sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="directory holding the built _native module")
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/mstrace/tiny-llama"))
    ap.add_argument("--sizes", default="1,8,64,256")
    ap.add_argument("--steps", type=int, default=600, help="live steps per size (half hooked)")
    ap.add_argument("--replays", type=int, default=9000, help="replayed calls per adapter and size")
    ap.add_argument("--export-spans", type=int, default=20000,
                    help="with --forward: step spans sent for the CPU-per-span figures")
    ap.add_argument("--forward", metavar="MSTRACE_BINARY",
                    help="export to a real `mstrace forward` and report CPU per span")
    ap.add_argument("--export-only", action="store_true",
                    help="with --forward: only the export figures, JSON and .pftrace, a forwarder per run")
    a = ap.parse_args()
    import logging
    logging.disable(logging.WARNING)
    from vllm.engine.arg_utils import EngineArgs
    n = load_native(a.build)

    def vllm_config_for(size):
        return EngineArgs(model=a.model, load_format="dummy", dtype="float32", max_model_len=512,
                          max_num_seqs=size, max_num_batched_tokens=8192, enforce_eager=True,
                          enable_prefix_caching=False, block_size=16).create_engine_config()
    if a.export_only and a.forward:
        print("load average %.2f %.2f %.2f on %d CPUs" % (*os.getloadavg(), os.cpu_count()))
        export_only(n, a, vllm_config_for)
        return
    tmp = tempfile.mkdtemp(prefix="mst-overhead-")
    fwd = None
    if a.forward:
        fwd, sock = start_forwarder(a.forward, tmp)
        n.init(forward_socket=sock, otlp=False, perfetto=True)
    else:
        n.init(null_exporter=True, otlp=False, perfetto=False)
    sizes = [int(x) for x in a.sizes.split(",")]
    print("load average %.2f %.2f %.2f on %d CPUs; exporter: %s" % (
        *os.getloadavg(), os.cpu_count(), "mstrace forward (JSON)" if fwd else "null"))
    rows = []
    for size in sizes:
        eng = Engine(vllm_config_for(size), size)
        n._reset_requests()
        eng.native = n
        eng.add(size)
        st0 = n.stats()
        cpu0 = thread_cpu_s(os.getpid(), "mstrace-export")
        fcpu0 = process_cpu_s(fwd.pid) if fwd else 0
        lv, plain_sched = live(n, eng, a.steps)
        rp, batch, so = replay(n, eng, a.replays)
        n.flush(30000)
        if fwd:  # the export figures: a run of the replayed step's spans only, all sent
            st0 = n.stats()
            cpu0 = thread_cpu_s(os.getpid(), "mstrace-export")
            fcpu0 = process_cpu_s(fwd.pid)
            export_step_spans(n, so, eng.sched, a.export_spans)
            time.sleep(1.0)  # the forwarder formats what it received
        st1 = n.stats()
        spans = st1["spans_exported"] - st0["spans_exported"]
        exp_cpu = thread_cpu_s(os.getpid(), "mstrace-export") - cpu0
        fcpu = (process_cpu_s(fwd.pid) - fcpu0) if fwd else 0
        rows.append((size, batch, lv, rp, plain_sched, spans, exp_cpu, fcpu,
                     st1["spans_dropped"] - st0["spans_dropped"], os.getloadavg()[0]))
    print()
    print("live steps (hooked − plain, median thread CPU µs per call; plain schedule() for scale)")
    print("| requests/step | schedule | execute_model | sample_tokens | update_from_output | engine thread total "
          "| plain schedule() | load |")
    print("|---|---|---|---|---|---|---|---|")
    for size, batch, lv, rp, ps, *_rest, load in rows:
        tot = sum(lv.values())
        print("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.1f |" % (
            size, lv["schedule"], lv["execute_model"], lv["sample_tokens"], lv["update_from_output"], tot, ps, load))
    print()
    print("replay on one real step's objects (added thread CPU µs per call, median of 9 rounds)")
    print("| requests/step | schedule | model, engine thread (executor; worker, model runner) "
          "| model, worker process | call (sample_tokens, update_from_output) | output (API server) "
          "| engine thread, multiprocess executor (schedule + model + 2 call) "
          "| engine thread, single-process executor (schedule + 3 model + 2 call) |")
    print("|---|---|---|---|---|---|---|---|")
    for size, batch, lv, rp, *_rest in rows:
        mp = rp["schedule"] + rp["execute_model"] + 2 * rp["sample_tokens"]
        up = rp["schedule"] + 3 * rp["execute_model"] + 2 * rp["sample_tokens"]
        print("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
            batch, rp["schedule"], rp["execute_model"], rp["execute_model (worker process)"], rp["sample_tokens"],
            rp["process_outputs (API server)"], mp, up))
    if fwd:
        print()
        print("off the critical path: %d step spans (vllm.scheduler.schedule) per size, CPU per span exported "
              "(utime+stime, 10 ms ticks)" % a.export_spans)
        print("| requests/step | spans exported | dropped | exporter thread µs/span | forwarder µs/span |")
        print("|---|---|---|---|---|")
        for size, batch, lv, rp, ps, spans, ec, fc, dropped, load in rows:
            print("| %d | %d | %d | %.2f | %.2f |" % (size, spans, dropped, ec * 1e6 / max(spans, 1),
                                                    fc * 1e6 / max(spans, 1)))
    n.shutdown()
    if fwd:
        fwd.send_signal(signal.SIGTERM)
        fwd.wait(timeout=60)


if __name__ == "__main__":
    main()
