"""Tests of mstrace.patcher: symbol resolution (exact, inherited, static/class
methods, patterns), patching modules already imported and modules imported
later (the sys.meta_path finder), missing symbols, no double wrapping, one
trace per resolved symbol.

Every test runs twice: with a pure-Python stand-in hook (so the patcher's
logic is tested even before the C extension builds) and with the real
`mstrace._native.Hook` (skipped, with the reason, while it is unavailable).
Target modules are real files in a temporary package on sys.path, with a
unique name per test so sys.modules never leaks between tests."""

import functools
import importlib
import sys
import textwrap
import uuid

import pytest

from mstrace import patcher as patcher_mod
from mstrace.symbols import parse_entries


class StubHook(object):
    """A transparent wrapper with the _native.Hook calling convention."""

    calls = []

    def __init__(self, wrapped, name, domain="Tracing", kind="INTERNAL", adapter="call", handler=None):
        self.wrapped, self.name, self.domain, self.kind, self.adapter, self.handler = (
            wrapped, name, domain, kind, adapter, handler)

    def __get__(self, obj, objtype=None):
        if isinstance(self.wrapped, (staticmethod, classmethod)):
            return functools.partial(self._run, self.wrapped.__get__(obj, objtype))
        if obj is None:
            return self
        return functools.partial(self._run, self.wrapped.__get__(obj, objtype))

    def __call__(self, *args, **kwargs):
        fn = self.wrapped.__func__ if isinstance(self.wrapped, staticmethod) else self.wrapped
        return self._run(fn, *args, **kwargs)

    def _run(self, fn, *args, **kwargs):
        StubHook.calls.append(self.name)
        if self.handler is not None:
            return self.handler(fn, *args, **kwargs)
        return fn(*args, **kwargs)


@pytest.fixture(params=["stub", "native"])
def hooks(request):
    """(factory, hook types, calls() -> list of span names or None)."""
    if request.param == "stub":
        StubHook.calls = []
        return StubHook, (StubHook,), lambda: list(StubHook.calls)
    native = request.getfixturevalue("native")
    return native.Hook, patcher_mod.native_hook_types(native), None


SOURCE = '''
def top(x):
    return ("top", x)

def other(x):
    return ("other", x)

class Base:
    def run(self, x):
        return ("run", type(self).__name__, x)

    def inherited(self, x):
        return ("inherited", x)

class Engine(Base):
    def run(self, x):
        return ("engine", x)

    @staticmethod
    def util(x):
        return ("util", x)

    @classmethod
    def make(cls, x):
        return ("make", cls.__name__, x)

    async def arun(self, x):
        return ("arun", x)

    class Inner:
        def deep(self):
            return "deep"

    value = 42
    prop = property(lambda self: 1)

class Child(Engine):
    pass
'''


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """A fresh importable package; returns its unique name. Cleaned up after."""
    name = "mst_pkg_" + uuid.uuid4().hex[:8]
    root = tmp_path / name
    (root / "models").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "core.py").write_text(SOURCE)
    (root / "models" / "__init__.py").write_text("")
    for m in ("llava", "qwen"):
        (root / "models" / (m + ".py")).write_text(textwrap.dedent('''
            from %s.core import Engine as Imported  # re-exported: must not be hooked here

            class %sModel:
                def embed_multimodal(self, x):
                    return ("%s", x)
                def forward(self, x):
                    return x

            class %sHelper:
                def embed_multimodal(self, x):
                    return ("helper", x)
        ''' % (name, m.capitalize(), m, m.capitalize())))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield name
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


@pytest.fixture
def make_patcher(hooks):
    made = []

    def make(yaml_text):
        import yaml

        result = parse_entries(yaml.safe_load(textwrap.dedent(yaml_text)))
        assert result.errors == []
        factory, types_, _ = hooks
        p = patcher_mod.Patcher(result.entries, hook_factory=factory, hook_types=types_)
        made.append(p)
        return p

    yield make
    for p in made:
        p.uninstall(restore=True)


def statuses(p):
    return [(r.status, r.target) for r in p.records]


def is_hook(p, obj):
    return p._is_hook(obj)


# --------------------------------------------------------------- tests


def test_already_imported_module_patched_at_once(pkg, make_patcher, hooks):
    core = importlib.import_module(pkg + ".core")
    p = make_patcher("""
        - {symbol: '%s.core:top', trace: {name: t.top}}
        - {symbol: '%s.core:Engine.run', trace: {name: t.run, adapter: call}}
    """ % (pkg, pkg))
    p.install()
    assert is_hook(p, vars(core)["top"]) and is_hook(p, vars(core.Engine)["run"])
    assert core.top(1) == ("top", 1)
    assert core.Engine().run(2) == ("engine", 2)
    assert core.Child().run(3) == ("engine", 3)  # subclass goes through the hook too
    calls = hooks[2]
    if calls:
        assert calls() == ["t.top", "t.run", "t.run"]


def test_module_imported_later_is_patched_by_finder(pkg, make_patcher, hooks):
    p = make_patcher("- {symbol: '%s.core:Engine.run', trace: {name: later}}\n" % pkg)
    p.install()
    assert pkg + ".core" not in sys.modules
    assert p.pending_modules == [pkg + ".core"]
    from_import = importlib.import_module(pkg + ".core")
    assert is_hook(p, vars(from_import.Engine)["run"])
    assert from_import.Engine().run(5) == ("engine", 5)
    assert p.pending_modules == []
    # the loader is left as it was found: no instance attribute stays behind
    assert "exec_module" not in vars(from_import.__spec__.loader)
    # `from mod import name` right after the import gets the hook, too
    ns = {}
    exec("from %s.core import top, Engine" % pkg, ns)
    assert is_hook(p, vars(ns["Engine"])["run"])


def test_finder_ignores_other_modules(pkg, make_patcher):
    p = make_patcher("- {symbol: '%s.core:top', trace: true}\n" % pkg)
    p.install()
    finder = sys.meta_path[0]
    assert finder.find_spec("json.decoder", None) is None
    assert finder.find_spec(pkg + ".models", None) is None
    importlib.import_module(pkg + ".models.llava")  # imports core: only that is patched
    assert [r.target for r in p.records] == [pkg + ".core.top"]


def test_static_class_async_nested_and_inherited(pkg, make_patcher, hooks):
    core = importlib.import_module(pkg + ".core")
    p = make_patcher("""
        - {symbol: '%(p)s.core:Engine.util', trace: {name: s}}
        - {symbol: '%(p)s.core:Engine.make', trace: {name: c}}
        - {symbol: '%(p)s.core:Engine.arun', trace: {name: a}}
        - {symbol: '%(p)s.core:Engine.Inner.deep', trace: {name: d}}
        - {symbol: '%(p)s.core:Child.inherited', trace: {name: i}}
    """ % {"p": pkg})
    p.install()
    assert [s for s, _ in statuses(p)] == ["applied"] * 5
    assert core.Engine.util(1) == ("util", 1) and core.Engine().util(1) == ("util", 1)
    assert core.Engine.make(2) == ("make", "Engine", 2) and core.Child.make(2) == ("make", "Child", 2)
    import asyncio
    assert asyncio.run(core.Engine().arun(3)) == ("arun", 3)
    assert core.Engine.Inner().deep() == "deep"
    # inherited method: the subclass gets its own wrapper, the base stays as is
    assert "inherited" in vars(core.Child) and "inherited" not in vars(core.Engine)
    assert core.Child().inherited(4) == ("inherited", 4)
    assert core.Base().inherited(4) == ("inherited", 4)
    calls = hooks[2]
    if calls:
        assert calls() == ["s", "s", "c", "c", "a", "d", "i"]


def test_missing_module_class_method_skipped_others_work(pkg, make_patcher, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="mstrace")  # a missing symbol is INFO, not a warning
    core = importlib.import_module(pkg + ".core")
    p = make_patcher("""
        - {symbol: '%(p)s.core:Nope.run', trace: true}
        - {symbol: '%(p)s.core:Engine.nope', trace: true}
        - {symbol: '%(p)s.core:nope_fn', trace: true}
        - {symbol: '%(p)s.core:Engine.value', trace: true}
        - {symbol: '%(p)s.core:Engine.prop', trace: true}
        - {symbol: '%(p)s.core:top.attr', trace: true}
        - {symbol: '%(p)s.nosuchmodule:f', trace: true}
        - {symbol: '%(p)s.core:Engine.run', trace: {name: ok}}
    """ % {"p": pkg})
    p.install()
    got = statuses(p)
    assert got[-1] == ("applied", pkg + ".core.Engine.run")
    assert [s for s, _ in got[:-1]] == ["skipped"] * 6
    reasons = " | ".join(r.reason for r in p.records)
    assert "has no attribute 'Nope'" in reasons and "has no attribute 'nope'" in reasons
    assert "has no attribute 'nope_fn'" in reasons and "is a int" in reasons and "is a property" in reasons
    assert "'top' is not a class" in reasons
    assert "hook skipped for entry #0" in caplog.text
    # the missing module only waits for an import that never comes...
    assert p.pending_modules == [pkg + ".nosuchmodule"]
    # ...and a diagnostic import names it
    missing = p.import_and_apply()
    assert list(missing) == [pkg + ".nosuchmodule"] and "ModuleNotFoundError" in missing[pkg + ".nosuchmodule"]
    assert core.Engine().run(1) == ("engine", 1)


def test_no_double_wrap(pkg, make_patcher, hooks):
    core = importlib.import_module(pkg + ".core")
    p = make_patcher("- {symbol: '%s.core:Engine.run', trace: {name: once}}\n" % pkg)
    p.install()
    hook = vars(core.Engine)["run"]
    p.install()  # again: same finder, nothing re-wrapped
    p.apply_module(core)
    assert vars(core.Engine)["run"] is hook
    assert sum(1 for f in sys.meta_path if isinstance(f, patcher_mod._PostImportFinder)) == 1
    # a second patcher (e.g. a second plugin instance) sees the hook and leaves it
    p2 = make_patcher("- {symbol: '%s.core:Engine.run', trace: {name: twice}}\n" % pkg)
    p2.install()
    assert vars(core.Engine)["run"] is hook
    assert statuses(p2) == [("present", pkg + ".core.Engine.run")]
    # a subclass inheriting a hooked method is not wrapped again
    p3 = make_patcher("- {symbol: '%s.core:Child.run', trace: {name: child}}\n" % pkg)
    p3.install()
    assert "run" not in vars(core.Child)
    assert "already traced through" in p3.records[0].reason
    assert core.Child().run(1) == ("engine", 1)
    calls = hooks[2]
    if calls:
        assert calls() == ["once"]


def test_one_trace_per_resolved_symbol(pkg, make_patcher, caplog):
    importlib.import_module(pkg + ".models.llava")
    # the pattern and the exact name meet on the same method: first one wins
    p = make_patcher("""
        - {symbol: '%(p)s.models.*:*Model.embed_multimodal', trace: {name: from.pattern}}
        - {symbol: '%(p)s.models.llava:LlavaModel.embed_multimodal', trace: {name: from.exact}}
    """ % {"p": pkg})
    p.install()
    llava = sys.modules[pkg + ".models.llava"]
    applied = [r for r in p.records if r.status == "applied" and r.target.endswith("LlavaModel.embed_multimodal")]
    assert [r.entry_index for r in applied] == [0] and "from.pattern" in applied[0].reason
    dup = [r for r in p.records if r.status == "duplicate"]
    assert len(dup) == 1 and dup[0].entry_index == 1 and "already traced by entry #0" in dup[0].reason


def test_patterns_now_and_later(pkg, make_patcher, hooks):
    importlib.import_module(pkg + ".models.llava")  # already imported
    p = make_patcher("- {symbol: '%s.models.*:*.embed_multimodal', trace: {name: mm, adapter: call}}\n" % pkg)
    p.install()
    llava = sys.modules[pkg + ".models.llava"]
    assert is_hook(p, vars(llava.LlavaModel)["embed_multimodal"])
    assert is_hook(p, vars(llava.LlavaHelper)["embed_multimodal"])
    assert not is_hook(p, vars(llava.LlavaModel)["forward"])
    # a re-exported class is not patched in the module that merely imports it
    assert not any(r.target.endswith("Imported.embed_multimodal") for r in p.records)
    qwen = importlib.import_module(pkg + ".models.qwen")  # imported later
    assert is_hook(p, vars(qwen.QwenModel)["embed_multimodal"])
    assert qwen.QwenModel().embed_multimodal(1) == ("qwen", 1)
    applied = sorted(r.target.split(".", 2)[2] for r in p.records if r.status == "applied")
    assert applied == ["llava.LlavaHelper.embed_multimodal", "llava.LlavaModel.embed_multimodal",
                       "qwen.QwenHelper.embed_multimodal", "qwen.QwenModel.embed_multimodal"]


def test_function_and_method_patterns(pkg, make_patcher):
    core = importlib.import_module(pkg + ".core")
    p = make_patcher("""
        - {symbol: '%(p)s.core:t*', trace: true}
        - {symbol: '%(p)s.core:Eng*.ma?e', trace: true}
    """ % {"p": pkg})
    p.install()
    assert sorted(r.target.split(".", 1)[1] for r in p.records if r.status == "applied") == [
        "core.Engine.make", "core.top"]
    assert core.other(1) == ("other", 1) and not is_hook(p, vars(core)["other"])


def test_handler_runs_inside_trace_once(pkg, make_patcher, hooks, tmp_path, monkeypatch):
    hname = "mst_handler_" + uuid.uuid4().hex[:8]
    (tmp_path / (hname + ".py")).write_text(textwrap.dedent('''
        seen = []
        def on_run(original, *args, **kwargs):
            seen.append(args[-1])
            return original(*args, **kwargs)
    '''))
    core = importlib.import_module(pkg + ".core")
    p = make_patcher("""
        - {symbol: '%(p)s.core:Engine.run', handler: '%(h)s:on_run', trace: {name: with.handler}}
        - {symbol: '%(p)s.core:top', handler: 'no_such_mod_xyz:fn', trace: {name: bad.handler}}
    """ % {"p": pkg, "h": hname})
    p.install()
    assert core.Engine().run(7) == ("engine", 7)
    assert sys.modules[hname].seen == [7]
    assert core.top(1) == ("top", 1)  # unusable handler: traced without it
    del sys.modules[hname]


def test_exceptions_in_patching_never_break_the_import(pkg, hooks):
    def exploding_factory(raw, **kw):
        raise RuntimeError("boom")

    import yaml
    res = parse_entries(yaml.safe_load("- {symbol: '%s.core:top', trace: true}" % pkg))
    p = patcher_mod.Patcher(res.entries, hook_factory=exploding_factory, hook_types=())
    p.install()
    try:
        core = importlib.import_module(pkg + ".core")
        assert core.top(1) == ("top", 1)
        assert p.records[0].status == "skipped" and "boom" in p.records[0].reason
    finally:
        p.uninstall(restore=True)


def test_uninstall_restore(pkg, make_patcher):
    core = importlib.import_module(pkg + ".core")
    original_run, original_util = vars(core.Engine)["run"], vars(core.Engine)["util"]
    p = make_patcher("""
        - {symbol: '%(p)s.core:Engine.run', trace: true}
        - {symbol: '%(p)s.core:Engine.util', trace: true}
        - {symbol: '%(p)s.core:Child.inherited', trace: true}
    """ % {"p": pkg})
    p.install()
    p.uninstall(restore=True)
    assert vars(core.Engine)["run"] is original_run and vars(core.Engine)["util"] is original_util
    assert "inherited" not in vars(core.Child)
    assert not any(isinstance(f, patcher_mod._PostImportFinder) for f in sys.meta_path)


def test_reload_is_patched_again(pkg, make_patcher):
    p = make_patcher("- {symbol: '%s.core:top', trace: true}\n" % pkg)
    p.install()
    core = importlib.import_module(pkg + ".core")
    assert is_hook(p, vars(core)["top"])
    importlib.reload(core)
    assert is_hook(p, vars(core)["top"])
    assert core.top(2) == ("top", 2)


# ------------------------------------------- missing symbols: one INFO line each


def info_lines(caplog, text):
    return [r for r in caplog.records if text in r.getMessage()]


def test_missing_module_class_method_each_logged_once_at_info(pkg, make_patcher, caplog):
    """docs/reference/behaviour.md: a symbol that does not exist is skipped with a log line
    naming it and the reason: INFO, once per process, module included."""
    import logging

    caplog.set_level(logging.DEBUG, logger="mstrace")
    p = make_patcher("""
        - {symbol: '%(p)s.core:Nope.run', trace: true}
        - {symbol: '%(p)s.core:Engine.nope', trace: true}
        - {symbol: '%(p)s.nosuchmodule:f', trace: true}
        - {symbol: '%(p)s.models.nosuch:M.f', trace: true}
        - {symbol: '%(p)s.core:Engine.run', trace: {name: ok}}
    """ % {"p": pkg})
    p.install()
    missing = p.report_missing_modules()
    assert sorted(missing) == [pkg + ".models.nosuch", pkg + ".nosuchmodule"]
    assert pkg not in sys.modules  # nothing was imported to find out
    core = importlib.import_module(pkg + ".core")  # class/method found missing on import
    importlib.reload(core)                             # ...and again: no new lines
    p.report_missing_modules()
    for symbol, reason in [(pkg + ".core:Nope.run", "has no attribute 'Nope'"),
                           (pkg + ".core:Engine.nope", "has no attribute 'nope'"),
                           (pkg + ".nosuchmodule:f", "module %s.nosuchmodule does not exist" % pkg),
                           (pkg + ".models.nosuch:M.f", "module %s.models.nosuch does not exist" % pkg)]:
        lines = [r for r in caplog.records if symbol in r.getMessage() and "skipped" in r.getMessage()]
        assert len(lines) == 1, (symbol, [r.getMessage() for r in caplog.records])
        assert lines[0].levelname == "INFO" and reason in lines[0].getMessage()
    assert core.Engine().run(1) == ("engine", 1)


def test_not_installed_package_is_one_summary_line(pkg, make_patcher, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="mstrace")
    absent = "mst_absent_" + uuid.uuid4().hex[:8]
    p = make_patcher("""
        - {symbol: '%(a)s.worker.model_runner_v1:NPUModelRunner.execute_model', trace: true}
        - {symbol: '%(a)s.worker.worker_v1:NPUWorker.execute_model', trace: true}
        - {symbol: '%(a)s.models.*:*.forward', trace: true}
        - {symbol: '%(p)s.core:top', trace: true}
    """ % {"a": absent, "p": pkg})
    p.install()
    missing = p.report_missing_modules()
    p.report_missing_modules()
    assert sorted(missing) == [absent + ".worker.model_runner_v1", absent + ".worker.worker_v1"]
    lines = [r.getMessage() for r in caplog.records if absent in r.getMessage()]
    assert lines == ["mstrace: 3 %s symbol(s) skipped: %s not installed" % (absent, absent)], lines
    assert all(r.levelname == "INFO" for r in caplog.records if absent in r.getMessage())
    assert [r.reason for r in p.records if r.status == "skipped"] == ["package %s is not installed" % absent] * 3


def test_modules_that_exist_but_are_not_imported_are_not_reported(pkg, make_patcher, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="mstrace")
    p = make_patcher("""
        - {symbol: '%(p)s.models.llava:LlavaModel.forward', trace: true}
        - {symbol: 'json.decoder:JSONDecoder.decode', trace: true}
    """ % {"p": pkg})
    p.install()
    assert p.report_missing_modules() == {}
    assert "skipped" not in caplog.text
    assert pkg not in sys.modules and pkg + ".models" not in sys.modules
