"""bench_hook.py — what one hooked call costs, mstrace's C hook vs the same
hook written with the OpenTelemetry Python SDK.

Owns the figures for the brief's goal (<= 1 us added per hooked call and >= 15x
cheaper than the OTel SDK): for the `call` adapter (a span around a plain
function) and the `schedule` adapter (a 64-request batch: request ids, batch
attributes, 64 links) it prints the median per-call time over many rounds of
the plain call, the mstrace hook (null exporter, the real queue and exporter
thread running) and the OTel SDK version (TracerProvider + BatchSpanProcessor
+ a no-op exporter, tracer.start_as_current_span around the call), the added
cost of each and their ratio. Span drops are reported, not hidden.

With --steps 1,8,64,256 it measures only the schedule adapter per engine step on a
vLLM-0.32-shaped SchedulerOutput and Scheduler (new, resumed, preempted and
finished requests, prefill and decode phases: the step record of
docs/architecture.md 1a), calling-thread CPU added per step at each size.

Run: python bench/bench_hook.py [--build DIR] [--rounds N] [--calls N] [--steps N,N,...]
(DIR holds python/mstrace/_native*.so; default $MSTRACE_PY_BUILD or build-py).
"""
import argparse
import collections
import glob
import importlib.util
import os
import statistics
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def load_native(build):
    for pattern in ("python/mstrace/_native*.so", "staging/mstrace/_native*.so", "**/_native*.so"):
        found = glob.glob(os.path.join(build, pattern), recursive=True)
        if found:
            spec = importlib.util.spec_from_file_location("mstrace._native", found[0])
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules["mstrace._native"] = mod
            return mod
    sys.exit("no _native module under %s: build with -DMST_BUILD_PYTHON=ON" % build)


def per_call_ns(fn, calls, rounds):
    """(median wall ns, median calling-thread CPU ns) per call over rounds.
    The CPU figure is what the hooked thread itself pays; on a loaded host
    wall time also counts time spent waiting for a CPU."""
    wall, cpu = [], []
    for _ in range(rounds):
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(calls):
            fn()
        cpu.append((time.thread_time_ns() - c0) / calls)
        wall.append((time.perf_counter_ns() - t0) / calls)
    return statistics.median(wall), statistics.median(cpu)


def otel_tracer():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class NoopExporter(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

        def shutdown(self):
            pass

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(NoopExporter(), max_queue_size=65536))
    return provider, provider.get_tracer("ms_service_profiler.hook.Tracing")


class SchedulerOutput:
    def __init__(self, n):
        self.num_scheduled_tokens = {"cmpl-%032x-%08x" % (i, i): 16 for i in range(n)}
        self.total_num_scheduled_tokens = 16 * n


# ---- a vLLM-0.32-shaped scheduling step (vllm/v1/core/sched/output.py, scheduler.py, v1/request.py)


class NewRequestData:
    def __init__(self, req_id, prompt, hit):
        self.req_id = req_id
        self.prompt_token_ids = list(range(prompt))
        self.num_computed_tokens = hit


class CachedRequestData:
    def __init__(self, req_ids, resumed):
        self.req_ids = req_ids
        self.resumed_req_ids = resumed
        self.new_token_ids = []
        self.num_computed_tokens = []


class StepOutput:
    def __init__(self, new, cached, nst, finished, preempted):
        self.scheduled_new_reqs = new
        self.scheduled_cached_reqs = cached
        self.num_scheduled_tokens = nst
        self.total_num_scheduled_tokens = sum(nst.values())
        self.scheduled_spec_decode_tokens = {}
        self.finished_req_ids = finished
        self.preempted_req_ids = preempted


class Request:
    """vllm.v1.request.Request's fields the step record reads (num_tokens is
    a property there too)."""
    def __init__(self, rid, prompt, computed, outputs):
        self.request_id = rid
        self.num_prompt_tokens = prompt
        self._all_token_ids = list(range(prompt + outputs))
        self.num_computed_tokens = computed
        self.is_prefill_chunk = computed < len(self._all_token_ids)
        self.num_preemptions = 0
        self.num_output_placeholders = 0

    @property
    def num_tokens(self):
        return len(self._all_token_ids)


class Usage:
    @property
    def usage(self):
        return 0.4375


def step_of(n):
    """A steady-state step of n requests, as at a GPU batch: one new request
    (a 512-token prompt, 128 tokens from the prefix cache, its first chunk of
    256), one prefill finishing, the rest decoding one token each; one finished
    request and, from 8 up, one preempted and one resumed. Scheduler state as
    schedule() leaves it (num_computed_tokens already advanced)."""
    ids = ["cmpl-%032x-0-%08x" % (i, i) for i in range(n)]
    requests, nst = {}, {}
    new_id = ids[0]
    requests[new_id] = Request(new_id, 512, 128 + 256, 0)
    nst[new_id] = 256
    for j, rid in enumerate(ids[1:], 1):
        if j == 1:
            requests[rid] = Request(rid, 300, 300, 0)  # the last chunk of its prefill
            nst[rid] = 44
        else:
            requests[rid] = Request(rid, 200, 200 + j, j)  # decode
            nst[rid] = 1
    resumed = set(ids[2:3]) if n >= 8 else set()
    for rid in resumed:
        requests[rid].num_preemptions = 1
    cached = CachedRequestData(ids[1:], resumed)
    so = StepOutput([NewRequestData(new_id, 512, 128)], cached, nst,
                    {"cmpl-done-0-0000abcd"}, {"cmpl-gone-0-0000abcd"} if n >= 8 else set())

    class StepScheduler:
        def __init__(self):
            self.requests = requests
            self.waiting = collections.deque(range(3))
            self.running = list(ids)
            self.kv_cache_manager = Usage()
            self.max_num_running_reqs = 256
            self.max_num_scheduled_tokens = 8192

        def schedule(self):
            return so

    return StepScheduler, ids


def step_schedulers(n, size):
    """(plain, hooked) scheduler of a step of `size` requests, every request
    registered with a sampled context (a link each)."""
    n._reset_requests()
    cls, ids = step_of(size)
    for i, rid in enumerate(ids):
        n.register_request(rid, {"traceparent": "00-%032x-%016x-01" % (i + 1, i + 1)})
    hooked_cls = type("HookedStepScheduler", (cls,), {"schedule": n.Hook(
        cls.schedule, name="vllm.scheduler.schedule", domain="Schedule", adapter="schedule")})
    return cls(), hooked_cls()


def engine_step_hooks(n):
    """The engine thread's other hooked calls of a step with the
    single-process executor: the executor's, worker's and model runner's
    execute_model (the `model` adapter, each given the step's
    SchedulerOutput), sample_tokens and update_from_output (`call`). Called
    one after the other, not nested, so that callgrind's collection toggle
    on the Hook's entry counts each (a nested Hook call would toggle it off);
    the adapters' work is the same."""
    def model(scheduler_output):
        return None

    def call(*args):
        return None

    models = [n.Hook(model, name=name, domain="Execute", adapter="model")
              for name in ("vllm.model.execute", "vllm.worker.execute_model", "vllm.model_runner.execute")]
    calls = [n.Hook(call, name=name, domain="Execute", adapter="call")
             for name in ("vllm.model.sample_tokens", "vllm.scheduler.update_from_output")]

    def rest(so):
        for m in models:
            m(so)
        for c in calls:
            c(None)
    return rest


def count_steps(n, size, calls, engine_step=False):
    """Only `calls` hooked steps of `size` requests after a warm-up, no
    timing: the workload bench/hook_instructions.sh counts under callgrind
    (collection toggled on the Hook's call entry, so setup, the warm-up's
    first-call costs and the exporter thread are not counted). With
    engine_step, each step is the single-process executor's whole engine
    thread: schedule + 3 model + 2 call (engine_step_hooks)."""
    n.init(null_exporter=True, otlp=False, perfetto=False)
    plain, hs = step_schedulers(n, size)
    rest = engine_step_hooks(n) if engine_step else None

    def one():
        so = hs.schedule()
        if rest:
            rest(so)
    for _ in range(50):
        one()
    n.flush(10000)
    for i in range(calls):
        one()
        if i % 256 == 255:
            n.flush(10000)
    n.flush(10000)
    n.shutdown()


def bench_steps(n, sizes, calls, rounds):
    """Calling-thread CPU added by the schedule adapter per step, at each
    batch size, every request with a known context (a link each)."""
    n.init(null_exporter=True, otlp=False, perfetto=False)
    print("-- schedule adapter per step, vLLM-0.32-shaped SchedulerOutput + Scheduler "
          "(median of %d rounds x %d calls, calling-thread CPU)" % (rounds, calls))
    print("%-10s %12s %12s %14s" % ("requests", "plain ns", "mstrace ns", "added us"))
    for size in sizes:
        plain, hs = step_schedulers(n, size)
        p = per_call_ns(plain.schedule, calls, rounds)[1]
        m = per_call_ns(hs.schedule, calls, rounds)[1]
        print("%-10d %12.0f %12.0f %14.2f" % (size, p, m, (m - p) / 1000))
        n.flush(10000)
    st = n.stats()
    print("mstrace spans: started=%d exported=%d dropped(queue full)=%d" % (
        st["spans_started"], st["spans_exported"], st["spans_dropped"]))
    n.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("MSTRACE_PY_BUILD") or os.path.join(REPO, "build-py"))
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--steps", default="", metavar="N,N,...",
                    help="only the schedule adapter per step at these batch sizes (e.g. 1,8,64,256)")
    ap.add_argument("--count-steps", type=int, default=0, metavar="N",
                    help="with one --steps size: run N hooked steps, no timing (for callgrind)")
    ap.add_argument("--engine-step", action="store_true",
                    help="with --count-steps: each step is schedule + 3 model + 2 call (the engine thread, "
                         "single-process executor)")
    a = ap.parse_args()
    os.environ.setdefault("OTEL_BSP_MAX_QUEUE_SIZE", "65536")
    os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "200")
    n = load_native(a.build)
    if a.count_steps:
        count_steps(n, int(a.steps), a.count_steps, a.engine_step)
        return
    if a.steps:
        bench_steps(n, [int(x) for x in a.steps.split(",")], max(a.calls // 20, 500), a.rounds)
        return
    n.init(null_exporter=True, otlp=False, perfetto=False)

    def work(x):
        return x

    hooked = n.Hook(work, name="bench.call")
    provider, tracer = otel_tracer()

    def otel_call(x):
        with tracer.start_as_current_span("bench.call"):
            return work(x)

    rows = []
    plain = per_call_ns(lambda: work(1), a.calls, a.rounds)
    ms = per_call_ns(lambda: hooked(1), a.calls, a.rounds)
    ot = per_call_ns(lambda: otel_call(1), a.calls, a.rounds)
    rows.append(("call adapter", plain, ms, ot))

    # schedule adapter, 64 requests all with a known context
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    so = SchedulerOutput(64)
    links = []
    for i, rid in enumerate(so.num_scheduled_tokens):
        t, s = "%032x" % (i + 1), "%016x" % (i + 1)
        n.register_request(rid, {"traceparent": "00-%s-%s-01" % (t, s)})
        links.append((rid, SpanContext(int(t, 16), int(s, 16), True, TraceFlags(1))))
    ctx_by_id = dict(links)

    class Scheduler:
        def schedule(self):
            return so

    plain_sched = Scheduler()
    Hooked = type("HookedScheduler", (), {"schedule": n.Hook(Scheduler.schedule, name="vllm.scheduler.schedule",
                                                                domain="Schedule", adapter="schedule")})
    hs = Hooked()

    def otel_schedule():
        start = time.time_ns()
        out = plain_sched.schedule()
        ids = list(out.num_scheduled_tokens)
        span = tracer.start_span(
            "vllm.scheduler.schedule", start_time=start,
            links=[Link(ctx_by_id[r], {"request.id": r}) for r in ids if r in ctx_by_id],
            attributes={"process.pid": os.getpid(), "request.ids": ids,
                        "batch.request_count": len(ids),
                        "batch.scheduled_tokens": out.total_num_scheduled_tokens})
        span.end()
        return out

    sc = max(a.calls // 20, 500)
    plain = per_call_ns(plain_sched.schedule, sc, a.rounds)
    ms = per_call_ns(hs.schedule, sc, a.rounds)
    ot = per_call_ns(otel_schedule, sc, a.rounds)
    rows.append(("schedule adapter, 64 requests", plain, ms, ot))

    n.flush(10000)
    st = n.stats()
    provider.shutdown()
    print("median ns per call over %d rounds (Python %s, load average %.1f on %d CPUs)" % (
        a.rounds, sys.version.split()[0], os.getloadavg()[0], os.cpu_count()))
    for label, k in (("wall clock", 0), ("calling-thread CPU time", 1)):
        print("-- %s" % label)
        print("%-30s %10s %12s %12s %14s %14s %8s" % ("case", "plain", "mstrace", "otel-sdk", "mstrace added",
                                                     "otel added", "ratio"))
        for name, p, m, o in rows:
            am, ao = m[k] - p[k], o[k] - p[k]
            print("%-30s %10.0f %12.0f %12.0f %14.0f %14.0f %7.1fx" % (
                name, p[k], m[k], o[k], am, ao, ao / am if am > 0 else 0))
    print("mstrace spans: started=%d exported=%d dropped(queue full)=%d" % (
        st["spans_started"], st["spans_exported"], st["spans_dropped"]))
    n.shutdown()
    bench_otel_bridge(n, hooked, hs, sc)


def bench_otel_bridge(n, hooked, hs, count):
    """MS_TRACE_EXPORTER=otel: the hooked call is the same C hot path; the
    cost moves to the exporter thread (GIL held: C builds one SDK ReadableSpan
    per span and calls the provider's span processor on_end). Reported as
    spans/s of one flush of `count` queued spans into a TracerProvider with
    a BatchSpanProcessor + no-op exporter (vLLM's set-up)."""
    sys.path.insert(0, os.path.join(REPO, "python"))  # mstrace.otel_bridge
    from opentelemetry import trace
    provider, _ = otel_tracer()
    trace.set_tracer_provider(provider)
    # one batch, exported only by the flush below
    os.environ.update(MS_TRACE_EXPORTER="otel", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="65536",
                      OTEL_BSP_SCHEDULE_DELAY="600000")
    print("-- MS_TRACE_EXPORTER=otel bridge (exporter thread, GIL held)")
    for label, fn in (("call adapter", lambda: hooked(1)), ("schedule adapter, 64 links", hs.schedule)):
        n.init(perfetto=False)
        fn()
        n.flush(10000)  # provider resolved, caches warm
        for _ in range(count):
            fn()
        t0 = time.perf_counter_ns()
        n.flush(60000)
        dt = time.perf_counter_ns() - t0
        ex = n.stats()["exporters"].get("otel", {})
        print("%-30s %10.0f spans/s  (%d spans in %.1f ms, handed over %d, failed %d)" % (
            label, count * 1e9 / dt, count, dt / 1e6, ex.get("spans_exported", 0), ex.get("spans_failed", 0)))
        n.shutdown()
    provider.shutdown()


if __name__ == "__main__":
    main()
