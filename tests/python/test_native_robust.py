"""Regression tests for defects found by attacking the C extension
`mstrace._native` (fuzzing, generators, fork, shutdown).

Owns: the fuzz_trace_headers finding (an output whose request_id is None
finished the request registered as "None") replayed both as a direct check
and through the fuzz harness; hooked generators and async generators (the
span covers the iteration); os.fork() inside a hooked call (the open span is
exported once, by the process that ends it).
"""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FINDING = os.path.join(REPO, "tests", "fuzz", "corpus", "fuzz_trace_headers", "regression-output-request-id-none")
T1, S1 = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


@pytest.fixture
def cap(native):
    native._reset_requests()
    spans = native._capture(True)
    yield spans
    native._capture(False)
    native._reset_requests()


class Output(object):
    def __init__(self, request_id, finish_reason=None):
        self.request_id = request_id
        self.finish_reason = finish_reason


# ------------------------------------------------- fuzz_trace_headers finding


def test_output_with_request_id_none_names_no_request(native, cap):
    """request_id None is "no id" (as in the request adapter), not the string "None".

    vLLM's FinishReason is an IntEnum (STOP == 0), so finish_reason 0 is set."""
    assert native.register_request(None, {"traceparent": "00-%s-%s-01" % (T1, S1)})  # keyed "None"
    tracked = native.stats()["requests_tracked"]
    hook = native.Hook(lambda outs: "ok", name="out", adapter="output")
    assert hook([Output(None, finish_reason=0)]) == "ok"
    assert native.lookup_request("None") == (T1, S1, True)
    assert native.stats()["requests_tracked"] == tracked
    span = [s for s in cap if s["name"] == "out"][0]
    assert "None" not in span["attributes"].get("request.ids", [])
    assert span["attributes"]["batch.request_count"] == 1
    # A real id with finish_reason 0 (FinishReason.STOP) is finished.
    assert native.register_request("r0", {"traceparent": "00-%s-%s-01" % (T1, S1)})
    assert hook([Output("r0", finish_reason=0)]) == "ok"
    assert native.lookup_request("r0") is None


def test_fuzz_trace_headers_finding_replays_clean(native):
    """The input CI's fuzz stage found (requests_tracked 2 vs model 3), through the harness itself."""
    pytest.importorskip("atheris")
    assert os.path.isfile(FINDING)
    env = dict(os.environ)
    env.setdefault("MSTRACE_PY_BUILD", os.path.dirname(os.path.dirname(os.path.dirname(native.__file__))))
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "fuzz", "fuzz_trace_headers.py"), FINDING],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out[-3000:]
    assert "Violation" not in out


# ------------------------------------------------- generators and async generators


def spans_named(cap, name):
    return [s for s in cap if s["name"] == name]


@pytest.fixture
def probe(native):
    """A hooked plain function: its span's parent tells which hook span was current."""
    return native.Hook(lambda *a: native.current_context(), name="probe")


def test_generator_span_covers_the_iteration(native, cap, probe):
    def numbers(n):
        for i in range(n):
            probe()  # inside a step: a child of the generator span
            yield i
        return "done"

    hook = native.Hook(numbers, name="gen")

    def consume():
        got = []
        got.append((yield from hook(3)))
        return got

    it = hook(3)
    assert spans_named(cap, "gen") == []  # not iterated yet: nothing recorded
    assert native.current_context() is None
    first = next(it)
    assert native.current_context() is None  # not current between steps
    probe()  # the consumer's call between steps: not a child
    rest = list(it)
    assert [first] + rest == [0, 1, 2]
    [g] = spans_named(cap, "gen")
    assert g["status"] == "OK"
    probes = spans_named(cap, "probe")
    inside = [p for p in probes if p["parent_span_id"] == g["span_id"]]
    outside = [p for p in probes if p["parent_span_id"] == ""]
    assert len(inside) == 3 and len(outside) == 1
    assert all(g["start_ns"] <= p["start_ns"] and p["end_ns"] <= g["end_ns"] for p in inside)
    assert outside[0]["end_ns"] <= g["end_ns"]  # the span was still open while the consumer ran
    # The return value reaches a `yield from` caller (StopIteration.value).
    consumer = consume()
    assert list(consumer) == [0, 1, 2]
    assert native.stats()["spans_in_flight"] == 0


def test_generator_exception_passes_through_with_status_error(native, cap):
    class Boom(Exception):
        pass

    boom = Boom("at item 1")

    def failing():
        yield 0
        raise boom

    it = native.Hook(failing, name="gen.fail")()
    assert next(it) == 0
    with pytest.raises(Boom) as info:
        next(it)
    assert info.value is boom
    assert any(tb.tb_frame.f_code is failing.__code__ for tb in _tb_entries(info.value.__traceback__))
    [g] = spans_named(cap, "gen.fail")
    assert g["status"] == "ERROR" and g["status_message"] == "Boom: at item 1"


def _tb_entries(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_generator_close_and_abandon_end_the_span_without_error(native, cap, probe):
    cleaned = []

    def endless(tag):
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            probe()  # the cleanup runs inside the span, as its child
            cleaned.append(tag)

    hook = native.Hook(endless, name="gen.endless")
    it = hook("closed")
    assert [next(it), next(it)] == [0, 1]
    it.close()  # GeneratorExit is no error
    for i in hook("broken"):  # break: the generator is dropped, Python closes it
        if i == 2:
            break
    assert cleaned == ["closed", "broken"]
    spans = spans_named(cap, "gen.endless")
    assert [s["status"] for s in spans] == ["OK", "OK"]
    probes = spans_named(cap, "probe")
    assert [p["parent_span_id"] for p in probes] == [s["span_id"] for s in spans]
    assert all(p["end_ns"] <= s["end_ns"] for p, s in zip(probes, spans))
    assert native.stats()["spans_in_flight"] == 0


def test_generator_send_and_throw_pass_through(native, cap):
    class Retry(Exception):
        pass

    def echo():
        received = []
        value = yield "ready"
        while value is not None:
            try:
                received.append(value)
                value = yield value.upper()
            except Retry as exc:
                value = yield "retry:%s" % exc
        return received

    it = native.Hook(echo, name="gen.echo")()
    assert next(it) == "ready"
    assert it.send("a") == "A"
    assert it.throw(Retry("x")) == "retry:x"  # handled inside: iteration goes on
    assert it.send("b") == "B"
    with pytest.raises(StopIteration) as stop:
        it.send(None)
    assert stop.value.value == ["a", "b"]
    [g] = spans_named(cap, "gen.echo")
    assert g["status"] == "OK"

    unhandled = ValueError("not handled")
    it = native.Hook(echo, name="gen.echo2")()
    next(it)
    with pytest.raises(ValueError) as info:
        it.throw(unhandled)
    assert info.value is unhandled
    [g] = spans_named(cap, "gen.echo2")
    assert g["status"] == "ERROR" and g["status_message"] == "ValueError: not handled"


def test_generator_hooks_are_transparent_to_inspect(native):
    import inspect

    def gen():
        yield 1

    async def agen():
        yield 1

    class A(object):
        def m(self):
            yield self

        @staticmethod
        def s():
            yield "s"

        @classmethod
        def c(cls):
            yield cls

        async def am(self):
            yield self

    for name in ("m", "s", "c", "am"):
        setattr(A, name, native.Hook(A.__dict__[name], name="A." + name))
    hg, ha = native.Hook(gen, name="g"), native.Hook(agen, name="ag")
    assert inspect.isgeneratorfunction(hg) and not inspect.isasyncgenfunction(hg)
    assert inspect.isasyncgenfunction(ha) and not inspect.isgeneratorfunction(ha)
    assert not inspect.iscoroutinefunction(hg) and not inspect.iscoroutinefunction(ha)
    assert inspect.isgenerator(hg()) and inspect.isasyncgen(ha())
    a = A()
    for f in (A.m, a.m, A.s, a.s, A.c, a.c):
        assert inspect.isgeneratorfunction(f), f
    assert inspect.isasyncgenfunction(a.am)
    assert list(a.m()) == [a] and list(A.s()) == ["s"] and list(a.c()) == [A]
    assert hg._mstrace_hook["generator"] == "generator" and ha._mstrace_hook["generator"] == "async_generator"
    assert native.Hook(lambda: 1, name="f")._mstrace_hook["generator"] is None


def test_async_generator_span_covers_the_iteration(native, cap, probe):
    import asyncio

    async def leaf():
        return native.current_context()

    aleaf = native.Hook(leaf, name="aleaf")

    async def ticks(tag, n):
        for i in range(n):
            await asyncio.sleep(0)
            probe(tag)
            await aleaf()  # an async hook inside a step: a child too
            yield "%s%d" % (tag, i)

    hook = native.Hook(ticks, name="agen")

    async def consume(tag, n):
        out = []
        async for v in hook(tag, n):
            probe("consumer")  # between steps: not a child
            out.append(v)
        return out

    async def main():
        return await asyncio.gather(consume("a", 3), consume("b", 2))

    assert asyncio.run(main()) == [["a0", "a1", "a2"], ["b0", "b1"]]
    gens = spans_named(cap, "agen")
    assert len(gens) == 2 and all(g["status"] == "OK" for g in gens)
    by_id = {g["span_id"]: g for g in gens}
    children = [s for s in cap if s["name"] in ("probe", "aleaf") and s["parent_span_id"] in by_id]
    assert len(children) == 10  # (3 + 2 steps) x (probe + aleaf), interleaved across two tasks
    for c in children:
        g = by_id[c["parent_span_id"]]
        assert g["start_ns"] <= c["start_ns"] and c["end_ns"] <= g["end_ns"]
    consumer = [s for s in spans_named(cap, "probe") if s["parent_span_id"] not in by_id]
    assert len(consumer) == 5 and all(s["parent_span_id"] == "" for s in consumer)
    # The two tasks' steps went to their own generator's span.
    per_gen = sorted(sum(1 for c in children if c["parent_span_id"] == g["span_id"]) for g in gens)
    assert per_gen == [4, 6]
    assert native.stats()["spans_in_flight"] == 0


def test_async_generator_asend_athrow_aclose_and_errors(native, cap):
    import asyncio

    class Skip(Exception):
        pass

    closed = []

    async def worker():
        total = 0
        try:
            while True:
                try:
                    got = yield total
                    total += got
                except Skip:
                    total = -1
        finally:
            await asyncio.sleep(0)  # awaiting in cleanup works under aclose()
            closed.append(total)

    boom = KeyError("k")

    async def failing():
        yield 1
        raise boom

    async def main():
        it = native.Hook(worker, name="agen.worker")()
        assert await it.asend(None) == 0
        assert await it.asend(5) == 5
        assert await it.athrow(Skip()) == -1
        await it.aclose()
        assert closed == [-1]
        f = native.Hook(failing, name="agen.fail")()
        assert await f.__anext__() == 1
        with pytest.raises(KeyError) as info:
            await f.__anext__()
        assert info.value is boom
        unhandled = ValueError("out")
        w = native.Hook(worker, name="agen.worker2")()
        await w.asend(None)
        with pytest.raises(ValueError) as info:  # worker does not catch ValueError
            await w.athrow(unhandled)
        assert info.value is unhandled
        # Left suspended: asyncio's shutdown_asyncgens closes this one and the
        # business generator inside it concurrently; the wrapper must not
        # fail with "aclose(): asynchronous generator is already running".
        left = native.Hook(worker, name="agen.left")()
        await left.asend(None)

    errors = []
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda lp, ctx: errors.append(ctx))
    try:
        loop.run_until_complete(main())
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
    assert errors == []
    [w] = spans_named(cap, "agen.worker")
    assert w["status"] == "OK"
    [f] = spans_named(cap, "agen.fail")
    assert f["status"] == "ERROR" and f["status_message"] == "KeyError: 'k'"
    [w2] = spans_named(cap, "agen.worker2")
    assert w2["status"] == "ERROR" and w2["status_message"] == "ValueError: out"
    [left] = spans_named(cap, "agen.left")
    assert left["status"] == "OK"
    assert native.stats()["spans_in_flight"] == 0


# ------------------------------------------------- os.fork() inside a hooked call


FORK_IN_HOOK = r"""
import json, os, sys
from mstrace import _native as n
ORDER = sys.argv[1]
info = n.init(forward_socket=sys.argv[2], otlp=False)
assert info["exporters"] == ["perfetto"], info
inner = n.Hook(lambda: None, name="fork.inner")
go_r, go_w = os.pipe()

def spawn():
    pid = os.fork()
    if pid == 0:
        inner()  # the child's own span: a child of the open outer span
        if ORDER == "parent_first":
            os.read(go_r, 1)  # the parent has ended and exported its copy
        elif ORDER == "child_never_ends":
            n.flush(5000)
            os._exit(0)  # leaves through the hooked call without returning
        return 0  # returns through the hook: the child ends its copy
    if ORDER == "child_first":
        os.waitpid(pid, 0)  # the child ended (and exported) its copy first
    return pid

outer = n.Hook(spawn, name="fork.outer")
child = outer()
if child == 0:
    n.flush(5000)
    st = n.stats()
    # The child's counters describe the child: its own span, plus the outer
    # span only if it was the first to end it.
    mine = 2 if ORDER == "child_first" else 1
    ok = (st["spans_started"], st["spans_ended"], st["spans_exported"]) == (mine, mine, mine)
    os._exit(0 if ok and st["spans_in_flight"] == 0 else 7)
n.flush(5000)
if ORDER == "parent_first":
    os.write(go_w, b"g")
if ORDER != "child_first":
    _, status = os.waitpid(child, 0)
else:
    status = 0
assert status == 0, status
print(json.dumps({"pid": os.getpid(), "child": child, "stats": n.stats()}))
"""


@pytest.mark.parametrize("order", ["child_first", "parent_first", "child_never_ends"])
def test_span_open_across_fork_is_exported_once_by_the_process_that_ends_it_first(
        native, subprocess_env, daemon, order):
    p = subprocess.run([sys.executable, "-c", FORK_IN_HOOK, order, daemon.socket_name], env=subprocess_env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    xs = [e for e in daemon.events(2) if e.get("ph") == "X"]
    outer = [e for e in xs if e["name"] == "fork.outer"]
    inner = [e for e in xs if e["name"] == "fork.inner"]
    assert len(outer) == 1, outer  # was 2 (parent and child) for child_first / parent_first
    assert len(inner) == 1 and inner[0]["pid"] == out["child"]
    assert inner[0]["args"]["parent_span_id"] == outer[0]["args"]["span_id"]
    # Drawn on the track of the process that started it (its process.pid
    # attribute), whichever process exported it; who exported it is in the
    # counters: the child checked its own (exit status), the parent's are here.
    assert outer[0]["pid"] == out["pid"]
    st = out["stats"]
    assert st["spans_started"] == st["spans_ended"] == 1
    assert st["spans_exported"] == (0 if order == "child_first" else 1)
    assert st["spans_filtered"] == (1 if order == "child_first" else 0)
