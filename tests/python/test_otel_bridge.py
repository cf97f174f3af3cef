"""MS_TRACE_EXPORTER=otel: hook spans handed to the global OpenTelemetry
TracerProvider as SDK ReadableSpans (python/mstrace/_native/otel_bridge.c).

Owns the bridge's observable behaviour: names, ids, parents, links, typed
attributes, status, scope and resource of the spans an SDK span processor
receives; the no-provider / no-SDK / bad-value fallbacks (one warning, calls
still work); a fork()ed child; exit with spans still queued. The global
provider can be set only once per process and the native tracer is
process-global, so every case runs in its own child Python that prints one
JSON line.
"""

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

PRELUDE = textwrap.dedent('''
    import json, logging, os, sys
    records = []
    class _H(logging.Handler):
        def emit(self, r):
            records.append((r.levelname, r.getMessage()))
    logging.getLogger("mstrace").addHandler(_H())
    logging.getLogger("mstrace").setLevel(logging.DEBUG)

    def sdk_provider():
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        mem = InMemorySpanExporter()
        p = TracerProvider(resource=Resource.create({"service.name": "bridge-test", "k": "v"}))
        p.add_span_processor(SimpleSpanProcessor(mem))
        trace.set_tracer_provider(p)
        return p, mem

    def warnings(text):
        return sum(1 for lvl, m in records if lvl == "WARNING" and text in m)

    def out(**kw):
        print("RESULT " + json.dumps(kw), flush=True)
''')


def run(subprocess_env, body, env=None, timeout=60):
    e = dict(subprocess_env)
    e.update(env if env is not None else {"MS_TRACE_EXPORTER": "otel"})
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], env=e, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout + proc.stderr
    return [json.loads(ln[len("RESULT "):]) for ln in lines], proc.stderr


@pytest.fixture
def need_native(native):
    return native


TID = "4bf92f3577b34da6a3ce929d0e0e4736"
SID = "00f067aa0ba902b7"


def test_spans_reach_the_sdk_provider(need_native, subprocess_env):
    [r], _ = run(subprocess_env, '''
        provider, mem = sdk_provider()
        from mstrace import _native
        info = _native.init(perfetto=False)
        _native.register_request("req-1", {"traceparent": "00-%s-%s-01", "tracestate": "ro=1"})

        class SO:
            num_scheduled_tokens = {"req-1": 3, "req-2": 4}
            total_num_scheduled_tokens = 7

        def inner(x):
            return x + 1
        def outer(x):
            return hinner(x) * 2
        def sched():
            return SO()
        def bad():
            raise KeyError("nope")
        hinner = _native.Hook(inner, name="inner.op", domain="Execute")
        houter = _native.Hook(outer, name="outer.op", domain="Execute", kind="SERVER")
        hsched = _native.Hook(sched, name="vllm.scheduler.schedule", domain="Schedule", adapter="schedule")
        hbad = _native.Hook(bad, name="bad.op")
        assert houter(1) == 4
        assert isinstance(hsched(), SO)
        try:
            hbad()
        except KeyError:
            pass
        assert _native.flush()
        from opentelemetry.sdk.trace import ReadableSpan
        spans = {s.name: s for s in mem.get_finished_spans()}
        def ctx(c):
            return None if c is None else ["%%032x" %% c.trace_id, "%%016x" %% c.span_id, c.is_remote,
                                           int(c.trace_flags), c.trace_state.to_header()]
        res = {}
        for n, s in spans.items():
            res[n] = dict(
                cls=isinstance(s, ReadableSpan), ctx=ctx(s.context), parent=ctx(s.parent), kind=s.kind.name,
                attrs={k: [type(v).__name__, list(v) if isinstance(v, tuple) else v]
                       for k, v in s.attributes.items()},
                links=[[ctx(l.context), dict(l.attributes)] for l in s.links],
                status=[s.status.status_code.name, s.status.description],
                scope=[s.instrumentation_scope.name, s.instrumentation_scope.version],
                same_resource=s.resource is provider.resource,
                times=[s.start_time, s.end_time], events=len(s.events))
        out(info=info, spans=res, pid=os.getpid(), stats=_native.stats()["exporters"])
    ''' % (TID, SID))
    assert r["info"]["exporter_mode"] == "otel" and r["info"]["exporters"] == ["otel"]
    spans = r["spans"]
    assert set(spans) == {"inner.op", "outer.op", "vllm.scheduler.schedule", "bad.op"}
    for s in spans.values():
        assert s["cls"] and s["same_resource"]
        assert s["times"][0] <= s["times"][1] and s["times"][0] > 10 ** 18
        assert s["attrs"]["process.pid"] == ["int", r["pid"]]
        assert s["attrs"]["thread.id"][0] == "int"
        assert s["ctx"][2] is False and s["ctx"][3] == 1
    # nesting: inner's parent is outer (local parent)
    outer, inner = spans["outer.op"], spans["inner.op"]
    assert inner["parent"][:3] == [outer["ctx"][0], outer["ctx"][1], False]
    assert inner["ctx"][0] == outer["ctx"][0]
    assert outer["parent"] is None and outer["kind"] == "SERVER" and inner["kind"] == "INTERNAL"
    assert outer["scope"] == ["ms_service_profiler.hook.Execute", None]
    assert outer["status"] == ["OK", None]
    # schedule: joined to the registered request's trace, remote parent, link with request.id
    sch = spans["vllm.scheduler.schedule"]
    assert sch["ctx"][0] == TID
    assert sch["parent"][:3] == [TID, SID, True]
    assert sch["scope"][0] == "ms_service_profiler.hook.Schedule"
    assert sch["links"] == [[[TID, SID, True, 1, ""], {"request.id": "req-1"}]]
    assert sch["attrs"]["batch.request_count"] == ["int", 2]
    assert sch["attrs"]["batch.scheduled_tokens"] == ["int", 7]
    assert sch["attrs"]["request.ids"] == ["tuple", ["req-1", "req-2"]]
    # error status with the exception text
    bad = spans["bad.op"]
    assert bad["status"] == ["ERROR", "KeyError: 'nope'"]
    assert bad["scope"][0] == "ms_service_profiler.hook.Tracing"
    assert r["stats"]["otel"]["spans_exported"] == 4 and r["stats"]["otel"]["spans_failed"] == 0


def test_no_provider_warns_once_and_calls_still_work(need_native, subprocess_env):
    [r], err = run(subprocess_env, '''
        from mstrace import _native
        info = _native.init(perfetto=False)
        h = _native.Hook(lambda x: x * 3, name="op")
        vals = []
        for _ in range(3):
            vals.append(h(2))
            _native.flush()
        # vLLM installs its provider later: from then on spans arrive
        provider, mem = sdk_provider()
        vals.append(h(5))
        _native.flush()
        out(info=info, vals=vals, warned=warnings("no OpenTelemetry SDK TracerProvider"),
            got=[s.name for s in mem.get_finished_spans()], stats=_native.stats()["exporters"]["otel"])
    ''')
    assert r["vals"] == [6, 6, 6, 15]
    assert r["warned"] == 1
    assert r["got"] == ["op"]
    assert r["stats"]["spans_failed"] == 3 and r["stats"]["spans_exported"] == 1


def test_sdk_not_importable_is_a_noop(need_native, subprocess_env):
    [r], _ = run(subprocess_env, '''
        import sys
        sys.modules["opentelemetry"] = None   # import opentelemetry -> ImportError
        from mstrace import _native
        info = _native.init(perfetto=False)
        h = _native.Hook(lambda: "ok", name="op")
        vals = [h(), h()]
        _native.flush()
        st = _native.stats()
        out(info=info, vals=vals, warned=warnings("OpenTelemetry SDK cannot be used"),
            started=st["spans_started"])
    ''')
    assert r["vals"] == ["ok", "ok"]
    assert r["warned"] == 1
    assert r["info"]["exporters"] == [] and r["info"]["exporter_mode"] == "otel"
    assert r["started"] == 0


def test_other_values_warn_and_use_native(need_native, subprocess_env):
    [r], _ = run(subprocess_env, '''
        from mstrace import _native
        info = _native.init(perfetto=False)
        out(info=info, warned=warnings("MS_TRACE_EXPORTER=jaeger"))
    ''', env={"MS_TRACE_EXPORTER": "jaeger"})
    assert r["info"]["exporter_mode"] == "native" and r["warned"] == 1
    [r], _ = run(subprocess_env, '''
        from mstrace import _native
        out(info=_native.init(perfetto=False), warned=len([x for x in records if x[0] == "WARNING"]))
    ''', env={"MS_TRACE_EXPORTER": "native"})
    assert r["info"]["exporter_mode"] == "native" and r["warned"] == 0


def test_forked_child_still_exports(need_native, subprocess_env):
    results, _ = run(subprocess_env, '''
        provider, mem = sdk_provider()
        from mstrace import _native
        _native.init(perfetto=False)
        h = _native.Hook(lambda: 1, name="op")
        h()
        _native.flush()
        pid = os.fork()
        if pid == 0:
            mem.clear()
            h()
            _native.flush()
            out(who="child", pid=os.getpid(),
                got=[[s.name, s.attributes["process.pid"]] for s in mem.get_finished_spans()])
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        h()
        _native.flush()
        out(who="parent", status=status, n=len(mem.get_finished_spans()))
    ''')
    child = [x for x in results if x["who"] == "child"][0]
    parent = [x for x in results if x["who"] == "parent"][0]
    assert child["got"] == [["op", child["pid"]]]
    assert parent["status"] == 0 and parent["n"] == 2


def test_exit_with_queued_spans_reaches_the_provider(need_native, subprocess_env, tmp_path):
    """No flush before exit: the atexit close hands the queued spans to the
    provider before its own atexit shutdown, and exit does not hang."""
    path = tmp_path / "exported.txt"
    [r], _ = run(subprocess_env, '''
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
        class FileExporter(SpanExporter):
            def export(self, spans):
                with open(%r, "a") as fh:
                    for s in spans:
                        fh.write(s.name + "\\n")
                return SpanExportResult.SUCCESS
        p = TracerProvider()
        p.add_span_processor(BatchSpanProcessor(FileExporter()))
        trace.set_tracer_provider(p)
        from mstrace import _native
        _native.init(perfetto=False)
        h = _native.Hook(lambda: None, name="late.op")
        for _ in range(3):
            h()
        out(queued=_native.stats()["queue_depth"])
    ''' % str(path), timeout=30)
    assert r["queued"] == 3
    assert path.read_text().split() == ["late.op"] * 3


def test_plugin_resolves_after_vllm_init_tracer_in_otel_mode(need_native, subprocess_env):
    """otel mode: vLLM's init_tracer is followed by a provider resolution, not
    by a native shutdown/re-init (the OTLP re-arm of native mode)."""
    [r], _ = run(subprocess_env, '''
        from mstrace import plugin
        calls = []
        class FakeNative:
            def shutdown(self): calls.append("shutdown")
            def init(self, **kw): calls.append("init")
        plugin._state["init"] = {"exporter_mode": "otel", "exporters": ["otel"]}
        provider, mem = sdk_provider()
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:9/v1/traces"
        plugin._rearm_native(FakeNative())
        from mstrace import otel_bridge
        got = otel_bridge.resolve()
        out(calls=calls, resolved=got is not None and got[1] is provider.resource,
            logged=sum(1 for lvl, m in records if "vLLM installed its TracerProvider" in m))
    ''')
    assert r == {"calls": [], "resolved": True, "logged": 1}
