"""Tests of the C `mstrace._native.Hook` type (python/mstrace/_native/hook.c).

Owns: transparency (names, doc, __wrapped__, signature, descriptor binding of
functions, methods, staticmethods and classmethods), the `call` adapter's
spans (attributes, nesting through the per-thread stack), exceptions passing
through unchanged, the profiling-handler chain (business runs exactly once),
the switch-off after 5 internal failures, async functions, and exact
refcounts. Spans are read back through `_native._capture`, which mirrors what
the hook handed to the C core; the Perfetto path is covered in
test_native_adapters.py. Uses the session `native` fixture (null exporter).
"""

import asyncio
import gc
import inspect
import logging
import sys
import threading
import time

import pytest


@pytest.fixture
def cap(native):
    spans = native._capture(True)
    yield spans
    native._capture(False)


def only(spans, name):
    found = [s for s in spans if s["name"] == name]
    assert len(found) == 1, [s["name"] for s in spans]
    return found[0]


# ------------------------------------------------------------ transparency


def business(x, y=2, *args, z=3, **kw):
    """Business docstring."""
    return (x, y, args, z, kw)


def test_hook_is_transparent_for_a_function(native):
    h = native.Hook(business, name="b")
    assert h.__wrapped__ is business
    assert h.__name__ == "business"
    assert h.__qualname__ == "business"
    assert h.__doc__ == "Business docstring."
    assert h.__module__ == __name__
    assert inspect.signature(h) == inspect.signature(business)
    assert h(1, 5, 6, z=7, k=8) == (1, 5, (6,), 7, {"k": 8})
    assert isinstance(h, native.Hook)
    assert "b" in repr(h)
    h.extra = 1  # hooks take attributes like functions do
    assert h.extra == 1


def test_hook_arguments_are_validated(native):
    with pytest.raises(TypeError):
        native.Hook(business)  # name is required
    with pytest.raises(ValueError):
        native.Hook(business, name="x", adapter="nope")
    with pytest.raises(ValueError):
        native.Hook(business, name="x", kind="SIDEWAYS")
    assert native.Hook(business, name="x", kind="server")._mstrace_hook["kind"] == 2


class Engine:
    """Engine docstring."""

    def step(self, a, b=1):
        """Step docstring."""
        return (self, a, b)

    @staticmethod
    def static(a):
        return ("static", a)

    @classmethod
    def klass(cls, a):
        return (cls, a)


class SubEngine(Engine):
    pass


@pytest.fixture
def hooked_engine(native):
    saved = {k: Engine.__dict__[k] for k in ("step", "static", "klass")}
    Engine.step = native.Hook(saved["step"], name="engine.step")
    Engine.static = native.Hook(saved["static"], name="engine.static")
    Engine.klass = native.Hook(saved["klass"], name="engine.klass")
    yield Engine
    for k, v in saved.items():
        setattr(Engine, k, v)


def test_methods_bind_like_the_wrapped_kinds(hooked_engine, cap):
    e = SubEngine()
    assert e.step(1) == (e, 1, 1)                       # LOAD_METHOD path
    bound = e.step                                      # __get__ path
    assert bound(2, b=3) == (e, 2, 3)
    assert bound.__self__ is e
    assert Engine.step(e, 4) == (e, 4, 1)               # via the class, unbound
    assert e.static(5) == ("static", 5) == SubEngine.static(5)
    assert e.klass(6) == (SubEngine, 6)
    assert Engine.klass(7) == (Engine, 7)
    assert [s["name"] for s in cap] == ["engine.step"] * 3 + ["engine.static"] * 2 + ["engine.klass"] * 2


def test_signatures_follow_wrapped_and_binding(hooked_engine):
    e = Engine()
    assert str(inspect.signature(Engine.step)) == "(self, a, b=1)"
    assert str(inspect.signature(e.step)) == "(a, b=1)"
    assert str(inspect.signature(e.static)) == "(a)"
    assert str(inspect.signature(e.klass)) == "(a)"
    assert Engine.__dict__["step"].__doc__ == "Step docstring."
    assert Engine.__dict__["step"].__qualname__ == "Engine.step"
    assert inspect.unwrap(Engine.__dict__["step"]) is Engine.__dict__["step"].__wrapped__


def test_many_arguments_through_a_bound_hook(hooked_engine, cap):
    def wide(self, *args, **kw):
        return len(args), sorted(kw)

    class W:
        pass

    from mstrace import _native

    W.wide = _native.Hook(wide, name="wide")
    w = W()
    bound = w.wide
    args = list(range(40))
    kw = {"k%d" % i: i for i in range(20)}
    assert bound(*args, **kw) == (40, sorted(kw))
    assert w.wide(*args) == (40, [])


# ------------------------------------------------------------- call spans


def test_call_span_attributes(native, cap):
    h = native.Hook(business, name="biz.call", domain="Execute", kind="CLIENT")
    h(1)
    s = only(cap, "biz.call")
    assert s["scope"] == "ms_service_profiler.hook.Execute"
    assert s["kind"] == 3
    assert s["status"] == "OK"
    assert s["attributes"]["process.pid"] == __import__("os").getpid()
    assert s["attributes"]["thread.id"] == threading.get_native_id()
    assert s["parent_span_id"] == ""
    assert len(s["trace_id"]) == 32 and len(s["span_id"]) == 16
    assert s["start_ns"] <= s["end_ns"]


def test_nested_hooks_are_children_and_current(native, cap):
    seen = {}

    def inner():
        seen["inner"] = native.current_context()

    hin = native.Hook(inner, name="inner")

    def outer():
        seen["outer"] = native.current_context()
        hin()
        seen["after"] = native.current_context()

    native.Hook(outer, name="outer")()
    o, i = only(cap, "outer"), only(cap, "inner")
    assert i["trace_id"] == o["trace_id"]
    assert i["parent_span_id"] == o["span_id"]
    assert seen["outer"] == (o["trace_id"], o["span_id"])
    assert seen["inner"] == (i["trace_id"], i["span_id"])
    assert seen["after"] == seen["outer"]
    assert native.current_context() is None


def test_thread_ids_are_per_thread(native, cap):
    h = native.Hook(business, name="threaded")
    tids = []

    def run():
        tids.append(threading.get_native_id())
        h(1)

    ts = [threading.Thread(target=run) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    got = sorted(s["attributes"]["thread.id"] for s in cap if s["name"] == "threaded")
    assert got == sorted(tids)


# --------------------------------------------------------------- exceptions


class Boom(Exception):
    pass


def test_exception_passes_through_unchanged(native, cap):
    err = Boom("it broke")

    def fails():
        raise err

    def plain_tb():
        try:
            fails()
        except Boom as e:
            return e.__traceback__

    h = native.Hook(fails, name="fails")
    with pytest.raises(Boom) as info:
        h()
    assert info.value is err
    # Same frames as an unhooked call (the C hook adds none).
    frames = [f.f_code.co_name for f, _ in __import__("traceback").walk_tb(info.value.__traceback__)]
    assert frames[-1] == "fails"
    assert "plain_tb" not in frames
    assert plain_tb() is not None
    s = only(cap, "fails")
    assert s["status"] == "ERROR"
    assert s["status_message"] == "Boom: it broke"


def test_error_message_is_bounded_on_a_char_boundary(native, cap):
    def fails():
        raise ValueError("é" * 2000)

    with pytest.raises(ValueError):
        native.Hook(fails, name="long")()
    msg = only(cap, "long")["status_message"]
    assert len(msg.encode()) <= 1024
    assert msg.startswith("ValueError: éé")


def test_exception_with_failing_str_still_propagates(native, cap):
    class Weird(Exception):
        def __str__(self):
            raise RuntimeError("no str")

    def fails():
        raise Weird()

    with pytest.raises(Weird):
        native.Hook(fails, name="weird")()
    assert only(cap, "weird")["status_message"] == "Weird"


# ----------------------------------------------------------------- handler


def test_handler_chain_runs_business_once(hooked_engine, native, cap):
    calls = []

    def step(self, a):
        calls.append(("business", a))
        return a * 10

    def handler(original, *args, **kwargs):
        calls.append(("handler", args[0].__class__.__name__))
        assert original.__name__ == "step"
        return original(*args, **kwargs)

    class E:
        pass

    E.step = native.Hook(step, name="handled", handler=handler)
    assert E().step(4) == 40
    assert calls == [("handler", "E"), ("business", 4)]
    assert only(cap, "handled")["status"] == "OK"


def test_handler_gets_every_argument_past_the_stack_buffer(native, cap):
    # call_prefixed (hook_invoke.c) keeps up to 15 arguments on the stack and
    # allocates beyond: both sides must hand the handler the same arguments.
    seen = []

    def work(*args, **kw):
        return len(args), sorted(kw.items())

    def handler(original, *args, **kwargs):
        seen.append((args, kwargs))
        return original(*args, **kwargs)

    h = native.Hook(work, name="wide-handled", handler=handler)
    for n_args, n_kw in ((3, 2), (15, 0), (16, 0), (40, 20)):
        args = tuple(range(n_args))
        kw = {"k%d" % i: i for i in range(n_kw)}
        assert h(*args, **kw) == (n_args, sorted(kw.items()))
        assert seen[-1] == (args, kw)


@pytest.mark.parametrize("mode", ["raise_before", "raise_after", "never_calls", "calls_twice", "returns_other"])
def test_handler_failures_never_break_the_business(native, cap, mode):
    calls = []

    def work(a):
        calls.append(a)
        return a + 1

    def handler(original, *args, **kwargs):
        if mode == "raise_before":
            raise RuntimeError("handler broke")
        if mode == "never_calls":
            return None
        r = original(*args, **kwargs)
        if mode == "calls_twice":
            original(*args, **kwargs)
        if mode == "raise_after":
            raise RuntimeError("handler broke late")
        if mode == "returns_other":
            return "other"
        return r

    h = native.Hook(work, name="h-" + mode, handler=handler)
    before = native.stats()["hook_failures"]
    assert h(1) == 2
    assert calls == [1]
    failed = mode in ("raise_before", "raise_after", "never_calls")
    assert native.stats()["hook_failures"] - before == (1 if failed else 0)


def test_handler_business_exception_is_the_one_raised(native, cap):
    err = Boom("from business")

    def work():
        raise err

    def handler(original, *args, **kwargs):
        try:
            return original(*args, **kwargs)
        except Boom:
            raise RuntimeError("handler rewrapped it")

    with pytest.raises(Boom) as info:
        native.Hook(work, name="hb", handler=handler)()
    assert info.value is err
    assert only(cap, "hb")["status_message"] == "Boom: from business"


# ------------------------------------------------------------ switch-off


class ExplodingOutput:
    @property
    def num_scheduled_tokens(self):
        raise RuntimeError("attribute read failed")


def test_hook_switches_itself_off_after_five_failures(native, cap, caplog):
    calls = []

    def execute(so):
        calls.append(1)
        return "ok"

    h = native.Hook(execute, name="exploding", adapter="model")
    before = native.stats()
    with caplog.at_level(logging.WARNING, logger="mstrace"):
        for _ in range(8):
            assert h(ExplodingOutput()) == "ok"
    assert len(calls) == 8
    after = native.stats()
    assert after["hook_failures"] - before["hook_failures"] == 5
    assert after["hooks_disabled"] - before["hooks_disabled"] == 1
    assert h._mstrace_hook["disabled"] is True
    warnings = [r for r in caplog.records if "switched off" in r.getMessage()]
    assert len(warnings) == 1 and "exploding" in warnings[0].getMessage()
    # spans were still recorded while it was on (5 calls), none afterwards
    assert len([s for s in cap if s["name"] == "exploding"]) == 5


# ------------------------------------------------------------------- async


def test_async_function_span_covers_the_awaited_execution(native, cap):
    marks = {}

    async def fetch(x):
        marks["inside"] = time.time_ns()
        await asyncio.sleep(0)
        return x * 2

    h = native.Hook(fetch, name="fetch")
    assert asyncio.iscoroutinefunction(h)
    assert inspect.iscoroutinefunction(h.__wrapped__)

    async def main():
        coro = h(21)
        marks["created"] = time.time_ns()
        assert not cap  # nothing recorded before the first send
        return await coro

    assert asyncio.run(main()) == 42
    s = only(cap, "fetch")
    assert s["status"] == "OK"
    assert marks["created"] <= s["start_ns"] <= marks["inside"] <= s["end_ns"]


def test_async_exception_and_children(native, cap):
    err = Boom("async boom")

    def child():
        return native.current_context()

    hchild = native.Hook(child, name="child")

    async def work(n):
        ctx = hchild()
        await asyncio.sleep(0)
        if n == 2:
            raise err
        return ctx

    h = native.Hook(work, name="work")

    async def main():
        return await asyncio.gather(h(0), h(1), h(2), return_exceptions=True)

    r0, r1, r2 = asyncio.run(main())
    assert r2 is err
    works = {s["span_id"]: s for s in cap if s["name"] == "work"}
    children = [s for s in cap if s["name"] == "child"]
    assert len(works) == 3 and len(children) == 3
    for c in children:  # each child is parented by its own task's span
        assert c["parent_span_id"] in works
        assert works[c["parent_span_id"]]["trace_id"] == c["trace_id"]
    assert len({c["parent_span_id"] for c in children}) == 3
    assert sorted(s["status"] for s in works.values()) == ["ERROR", "OK", "OK"]
    assert native.current_context() is None


def test_async_spans_inside_a_sync_hook_that_runs_an_event_loop(native, cap):
    # A traced sync entry point driving an event loop (asyncio.run, as an
    # offline script or a benchmark driver does around AsyncLLM): hook spans
    # started inside the loop nest under the async span that is running, not
    # under the sync span still on the thread stack.
    class Engine(object):
        def step(self):
            return native.current_context()

        async def generate(self, k):
            await asyncio.sleep(0)
            first = self.step()
            await asyncio.sleep(0)
            return first, self.step()

        def run(self):
            async def main():
                return await asyncio.gather(self.generate(1), self.generate(2))
            return asyncio.run(main())

    for attr in ("step", "generate", "run"):
        setattr(Engine, attr, native.Hook(Engine.__dict__[attr], name="e." + attr))
    results = Engine().run()
    run = only(cap, "e.run")
    gens = {s["span_id"]: s for s in cap if s["name"] == "e.generate"}
    steps = [s for s in cap if s["name"] == "e.step"]
    assert len(gens) == 2 and len(steps) == 4
    for g in gens.values():
        assert g["parent_span_id"] == run["span_id"]
    for s in steps:
        assert s["parent_span_id"] in gens, "step parented on %s" % s["parent_span_id"]
    assert sorted(s["parent_span_id"] for s in steps) == sorted(list(gens) * 2)
    # current_context() inside step() is step's own span
    own = sorted((s["trace_id"], s["span_id"]) for s in steps)
    assert sorted(tuple(c) for pair in results for c in pair) == own
    assert native.current_context() is None

    # a sync span pushed inside the async one still wins for its children,
    # also in a worker thread that inherited the task's context
    def leaf():
        return native.current_context()

    hleaf = native.Hook(leaf, name="leaf")

    def mid():
        return hleaf()

    hmid = native.Hook(mid, name="mid")

    async def outer():
        return await asyncio.to_thread(hmid), hmid()

    del cap[:]
    asyncio.run(native.Hook(outer, name="outer")())
    o = only(cap, "outer")
    mids = [s for s in cap if s["name"] == "mid"]
    leaves = [s for s in cap if s["name"] == "leaf"]
    assert [m["parent_span_id"] for m in mids] == [o["span_id"]] * 2
    assert sorted(l["parent_span_id"] for l in leaves) == sorted(m["span_id"] for m in mids)


def test_async_method_binds(native, cap):
    class A:
        async def go(self, v):
            return (self, v)

    A.go = native.Hook(A.__dict__["go"], name="a.go")
    a = A()
    assert asyncio.run(a.go(3)) == (a, 3)
    assert only(cap, "a.go")["status"] == "OK"


def test_async_static_and_class_methods_still_look_async(native, cap):
    # Frameworks pick "await it" vs "call it" with (asyncio|inspect).
    # iscoroutinefunction on what attribute access returns (A.m, a.m): a
    # hooked async staticmethod/classmethod must answer like the unwrapped one.
    class Handler(object):
        @staticmethod
        async def ping(v):
            return v

        @classmethod
        async def make(cls, v):
            return (cls, v)

        def plain(self):
            return 1

    class Sub(Handler):
        pass

    for attr in ("ping", "make", "plain"):
        setattr(Handler, attr, native.Hook(Handler.__dict__[attr], name="h." + attr))
    obj = Sub()
    for bound in (Handler.ping, obj.ping, Sub.make, obj.make):
        assert asyncio.iscoroutinefunction(bound), bound
        assert inspect.iscoroutinefunction(bound), bound
    for bound in (Handler.plain, obj.plain):
        assert not asyncio.iscoroutinefunction(bound)
        assert not inspect.iscoroutinefunction(bound)
    assert asyncio.run(obj.ping(1)) == 1
    assert asyncio.run(obj.make(2)) == (Sub, 2)
    # an attribute set on the hook is seen through its bound forms too
    Handler.__dict__["plain"].tag = "t"
    assert obj.plain.tag == "t"
    assert [s["name"] for s in cap] == ["h.ping", "h.make"]


def test_hooks_pickle_and_copy_by_reference_like_functions(native, monkeypatch):
    # A function is pickled (multiprocessing spawn targets and args, cloudpickle
    # RPCs) and deep-copied (configs holding callables) by reference; a hooked
    # one must be too, instead of raising "cannot pickle 'Hook' object".
    import copy
    import pickle
    import types

    mod = types.ModuleType("mstrace_pickle_probe")
    exec(
        "def double(x):\n"
        "    return 2 * x\n"
        "class Engine(object):\n"
        "    def __init__(self, k=3):\n"
        "        self.k = k\n"
        "    def step(self, x):\n"
        "        return self.k * x\n"
        "    @classmethod\n"
        "    def build(cls):\n"
        "        return cls(5)\n",
        mod.__dict__,
    )
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    mod.double = native.Hook(mod.double, name="p.double")
    mod.Engine.step = native.Hook(mod.Engine.__dict__["step"], name="p.step")
    mod.Engine.build = native.Hook(mod.Engine.__dict__["build"], name="p.build")
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(mod.double, proto)) is mod.double
        assert pickle.loads(pickle.dumps(mod.Engine.step, proto)) is mod.Engine.__dict__["step"]
        bound = pickle.loads(pickle.dumps(mod.Engine(4).step, proto))
        assert isinstance(bound, native.Hook) and bound(2) == 8
        assert pickle.loads(pickle.dumps(mod.Engine.build, proto))().k == 5
    assert copy.copy(mod.double) is mod.double
    assert copy.deepcopy({"fn": mod.double})["fn"] is mod.double
    e = mod.Engine(7)
    dup = copy.deepcopy(e.step)
    assert dup(1) == 7 and dup.__self__ is not e and isinstance(dup.__self__, mod.Engine)


# ----------------------------------------------------------------- refcounts


def test_refcounts_are_exact(native, hooked_engine):
    class Arg:
        pass

    arg, result = Arg(), Arg()
    err = Boom("x")

    def ok(a):
        return result

    def bad(a):
        raise err

    def handler(original, *args, **kwargs):
        return original(*args, **kwargs)

    hooks = [native.Hook(ok, name="rc.ok"), native.Hook(ok, name="rc.h", handler=handler)]
    hbad = native.Hook(bad, name="rc.bad")
    e = Engine()

    def run(n):
        for _ in range(n):
            for h in hooks:
                h(arg)
            try:
                hbad(arg)
            except Boom:
                pass
            e.step(arg)
            e.klass(arg)

    run(10)
    err.__traceback__ = None
    gc.collect()
    counts = (sys.getrefcount(arg), sys.getrefcount(result), sys.getrefcount(err), sys.getrefcount(e))
    run(1000)
    err.__traceback__ = None
    gc.collect()
    assert (sys.getrefcount(arg), sys.getrefcount(result), sys.getrefcount(err), sys.getrefcount(e)) == counts
    if hasattr(sys, "gettotalrefcount"):  # debug builds: the whole heap
        total = sys.gettotalrefcount()
        run(1000)
        gc.collect()
        assert abs(sys.gettotalrefcount() - total) < 50
