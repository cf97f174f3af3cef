"""Tests of mstrace.symbols: the YAML rules of docs/reference/symbols-yaml.md, file selection
(PROFILING_SYMBOLS_PATH), the trace defaults, duplicate handling and version
gating. Pure Python: no extension, no vLLM."""

import logging
import os
import textwrap

import pytest

from mstrace import symbols
from mstrace.symbols import TraceSpec, Version, load_symbols, parse_entries, version_in_range


def write(tmp_path, text, name="symbols.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def load(tmp_path, text, version=None):
    return load_symbols(write(tmp_path, text), vllm_version=version, detect_version=False)


# ----------------------------------------------------------------- entries


def test_minimal_and_full_entries(tmp_path):
    res = load(tmp_path, """
        - symbol: pkg.mod:func
        - symbol: pkg.mod:Cls.meth
          handler: pkg.handlers:on_meth
          name: my.name
          domain: MyDomain
          min_version: "0.10.0"
          max_version: "0.40"
          caller_filter: pkg.caller
          attributes:
            - {name: batch, expr: "len(args)"}
          trace: true
    """)
    assert res.errors == []
    a, b = res.entries
    assert (a.module, a.qualname, a.trace, a.domain) == ("pkg.mod", "func", None, "Default")
    assert b.handler == "pkg.handlers:on_meth"
    assert b.attributes == [{"name": "batch", "expr": "len(args)"}]
    # trace: true = {}: name from the entry, domain from the entry
    assert b.trace == TraceSpec("my.name", "MyDomain", "INTERNAL", "call")


def test_trace_defaults_chain(tmp_path):
    res = load(tmp_path, """
        - symbol: a.b:C.m1
          trace: {}
        - symbol: a.b:C.m2
          name: entry.name
          trace: {domain: D}
        - symbol: a.b:C.m3
          name: entry.name
          domain: EntryDomain
          trace: {name: trace.name, kind: server, adapter: SCHEDULE}
        - symbol: a.b:C.m4
          trace: false
    """)
    assert res.errors == []
    t1, t2, t3, t4 = [e.trace for e in res.entries]
    # no names at all: the method name is used when the hook is built
    assert t1 == TraceSpec(None, "Tracing", "INTERNAL", "call") and t1.span_name("m1") == "m1"
    assert t2 == TraceSpec("entry.name", "D", "INTERNAL", "call")
    assert t3 == TraceSpec("trace.name", "EntryDomain", "SERVER", "schedule")
    assert t4 is None


@pytest.mark.parametrize("kind", ["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"])
def test_every_kind_accepted(tmp_path, kind):
    res = load(tmp_path, "- symbol: a:f\n  trace: {kind: %s}\n" % kind)
    assert res.errors == [] and res.entries[0].trace.kind == kind


@pytest.mark.parametrize("adapter", ["call", "request", "request_context", "schedule", "model", "output"])
def test_every_adapter_accepted(tmp_path, adapter):
    res = load(tmp_path, "- symbol: a:f\n  trace: {adapter: %s}\n" % adapter)
    assert res.errors == [] and res.entries[0].trace.adapter == adapter


BAD_ENTRIES = [
    ("- just a string", "expected a mapping"),
    ("- {name: x}", "missing or empty 'symbol'"),
    ("- {symbol: ''}", "missing or empty 'symbol'"),
    ("- {symbol: 42}", "missing or empty 'symbol'"),
    ("- {symbol: 'no_colon_here'}", "is not of the form"),
    ("- {symbol: 'a.b:'}", "is not of the form"),
    ("- {symbol: ':f'}", "is not of the form"),
    ("- {symbol: 'a b:f'}", "is not of the form"),
    ("- {symbol: 'a:f', handler: 'nocolon'}", "'handler'"),
    ("- {symbol: 'a:f', handler: 'a.b:*'}", "'handler'"),
    ("- {symbol: 'a:f', name: 3}", "'name' must be a non-empty string"),
    ("- {symbol: 'a:f', domain: ''}", "'domain' must be a non-empty string"),
    ("- {symbol: 'a:f', min_version: 0.10}", "quoted string"),
    ("- {symbol: 'a:f', max_version: 'latest'}", "not a version"),
    ("- {symbol: 'a:f', min_version: '0.30', max_version: '0.20'}", "above max_version"),
    ("- {symbol: 'a:f', caller_filter: 7}", "caller_filter"),
    ("- {symbol: 'a:f', attributes: {name: x}}", "'attributes' must be a list"),
    ("- {symbol: 'a:f', attributes: [{name: x}]}", "attributes[0].expr"),
    ("- {symbol: 'a:f', attributes: [{expr: x}]}", "attributes[0].name"),
    ("- {symbol: 'a:f', attributes: [7]}", "attributes[0] must be a mapping"),
    ("- {symbol: 'a:f', trace: 'yes please'}", "'trace' must be true, false or a mapping"),
    ("- {symbol: 'a:f', trace: [1]}", "'trace' must be true, false or a mapping"),
    ("- {symbol: 'a:f', trace: {kind: SIDEWAYS}}", "trace.kind"),
    ("- {symbol: 'a:f', trace: {adapter: magic}}", "trace.adapter"),
    ("- {symbol: 'a:f', trace: {adapter: 3}}", "trace.adapter"),
    ("- {symbol: 'a:f', trace: {colour: red}}", "unknown key(s) colour"),
    ("- {symbol: 'a:f', trace: {name: ''}}", "'name' must be a non-empty string"),
]


@pytest.mark.parametrize("bad,message", BAD_ENTRIES)
def test_bad_entry_skipped_others_applied(tmp_path, caplog, bad, message):
    text = "- {symbol: 'good.one:f', trace: true}\n" + bad + "\n- {symbol: 'good.two:C.m', trace: true}\n"
    with caplog.at_level(logging.ERROR, logger="mstrace.symbols"):
        res = load(tmp_path, text)
    assert [e.symbol for e in res.entries] == ["good.one:f", "good.two:C.m"]
    assert len(res.errors) == 1
    err = res.errors[0]
    assert "entry #1" in err and message in err and "skipped" in err, err
    assert res.source in err
    assert any("entry #1" in r.getMessage() for r in caplog.records)


def test_unknown_entry_key_warns_but_keeps(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="mstrace.symbols"):
        res = load(tmp_path, "- {symbol: 'a:f', trace: true, colour: red}\n")
    assert len(res.entries) == 1 and res.errors == []
    assert "colour" in caplog.text


def test_patterns_are_valid_symbols(tmp_path):
    res = load(tmp_path, """
        - {symbol: 'pkg.models.*:*.embed_multimodal', trace: true}
        - {symbol: 'pkg.mod:Cls.get_[ab]*', trace: true}
        - {symbol: 'pkg.mod?:fn_*', trace: true}
    """)
    assert res.errors == []
    assert [e.is_pattern for e in res.entries] == [True, True, True]


def test_duplicate_trace_first_wins(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="mstrace.symbols"):
        res = load(tmp_path, """
            - {symbol: 'a:C.m', trace: {name: first}}
            - {symbol: 'a:C.m', trace: {name: second}}
            - {symbol: 'a:C.m', handler: 'h:f'}
        """)
    assert res.errors == []
    first, second, third = res.entries
    assert first.trace.name == "first"
    assert second.trace is None  # ignored duplicate
    assert third.handler == "h:f" and third.trace is None
    assert "entry #1" in caplog.text and "already set by entry #0" in caplog.text


# ------------------------------------------------------------------- files


def test_empty_file_is_no_entries(tmp_path):
    res = load(tmp_path, "")
    assert res.entries == [] and res.errors == []


@pytest.mark.parametrize("text,what", [
    ("- symbol: a:f\n  trace: [unclosed\n", "not valid YAML at line"),
    ("symbol: a:f\n", "top level must be a list"),
    ("- symbol: a:f: g: h\n", "not valid YAML at line 1"),
])
def test_unusable_file_falls_back_to_default(tmp_path, text, what):
    res = load(tmp_path, text)
    assert res.source == symbols.DEFAULT_SYMBOLS_PATH
    assert any(what in e for e in res.errors), res.errors
    assert any("falling back to the packaged default" in e for e in res.errors)
    # ...and the default's hooks are all there: the bad file hurts nothing else
    default = load_symbols(symbols.DEFAULT_SYMBOLS_PATH, vllm_version=None, detect_version=False)
    assert [e.symbol for e in res.entries] == [e.symbol for e in default.entries]


def test_env_unset_uses_default():
    path, problems = symbols.resolve_symbols_path({})
    assert path == symbols.DEFAULT_SYMBOLS_PATH and problems == []


def test_env_missing_file_gets_default_copy(tmp_path):
    target = tmp_path / "sub" / "dir" / "my_symbols.yml"
    old_umask = os.umask(0o022)  # the common umask, which leaves 0750 as it is
    try:
        res = load_symbols(env={"PROFILING_SYMBOLS_PATH": str(target)}, detect_version=False)
    finally:
        os.umask(old_umask)
    assert target.is_file()
    assert target.read_bytes() == open(symbols.DEFAULT_SYMBOLS_PATH, "rb").read()
    assert (target.stat().st_mode & 0o777) == 0o640
    # every directory made for it, the intermediate one too, is 0750
    assert (tmp_path / "sub").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "sub" / "dir").stat().st_mode & 0o777 == 0o750
    assert res.source == str(target) and res.errors == []
    assert len(res.entries) > 5


def test_env_existing_file_loaded(tmp_path):
    path = write(tmp_path, "- {symbol: 'x.y:z', trace: true}\n", name="mine.YAML")
    res = load_symbols(env={"PROFILING_SYMBOLS_PATH": path}, detect_version=False)
    assert res.source == path and [e.symbol for e in res.entries] == ["x.y:z"]


@pytest.mark.parametrize("name", ["symbols.json", "symbols.txt", "symbols"])
def test_env_bad_extension_falls_back(tmp_path, name):
    path = tmp_path / name
    res = load_symbols(env={"PROFILING_SYMBOLS_PATH": str(path)}, detect_version=False)
    assert not path.exists()  # nothing written under a wrong name
    assert res.source == symbols.DEFAULT_SYMBOLS_PATH
    assert any(".yaml or .yml" in e for e in res.errors)
    assert len(res.entries) > 5


def test_env_directory_falls_back(tmp_path):
    d = tmp_path / "dir.yaml"
    d.mkdir()
    res = load_symbols(env={"PROFILING_SYMBOLS_PATH": str(d)}, detect_version=False)
    assert res.source == symbols.DEFAULT_SYMBOLS_PATH and any("directory" in e for e in res.errors)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_env_unwritable_location_falls_back(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        res = load_symbols(env={"PROFILING_SYMBOLS_PATH": str(d / "s.yaml")}, detect_version=False)
    finally:
        d.chmod(0o700)
    assert res.source == symbols.DEFAULT_SYMBOLS_PATH and any("cannot create" in e for e in res.errors)


def test_unreadable_file_falls_back(tmp_path):
    res = load_symbols(str(tmp_path / "absent.yaml"), detect_version=False)
    assert res.source == symbols.DEFAULT_SYMBOLS_PATH
    assert any("cannot read symbols file" in e for e in res.errors)


def test_packaged_default_is_valid_and_traced():
    res = load_symbols(symbols.DEFAULT_SYMBOLS_PATH, vllm_version=None, detect_version=False)
    assert res.errors == []
    names = {e.trace.name for e in res.entries if e.trace}
    assert {"vllm.scheduler.schedule", "vllm.model.execute", "vllm.output.process",
            "vllm_ascend.model_runner.execute"} <= names
    by_symbol = {e.symbol: e.trace for e in res.entries}
    sched = by_symbol["vllm.v1.core.sched.scheduler:Scheduler.schedule"]
    assert (sched.name, sched.domain, sched.adapter) == ("vllm.scheduler.schedule", "Schedule", "schedule")
    out = by_symbol["vllm.v1.engine.output_processor:OutputProcessor.process_outputs"]
    assert (out.name, out.domain, out.adapter) == ("vllm.output.process", "Request", "output")
    npu = by_symbol["vllm_ascend.worker.model_runner_v1:NPUModelRunner.execute_model"]
    assert (npu.name, npu.domain, npu.adapter) == ("vllm_ascend.model_runner.execute", "Execute", "model")
    assert by_symbol["vllm.v1.engine.core:EngineCore.add_request"].adapter == "request_context"
    assert by_symbol["vllm.v1.core.sched.scheduler:Scheduler.add_request"].adapter == "request_context"
    assert "request" in {t.adapter for t in by_symbol.values()}


# ---------------------------------------------------------------- versions


def test_version_ordering():
    order = ["0.9", "0.10.0.dev3", "0.10.0a1", "0.10.0b2", "0.10.0rc1", "0.10.0", "0.10.0.post1", "0.10.1",
             "0.11", "1.0"]
    parsed = [Version(v) for v in order]
    assert parsed == sorted(parsed)
    assert Version("0.32") == Version("0.32.0") == Version("0.32.0+cpu")
    assert Version("v1.2") == Version("1.2")


@pytest.mark.parametrize("text", ["dev", "", "abc", "1..2", "1.2-foo"])
def test_unparseable_versions(text):
    assert symbols.parse_version(text) is None


@pytest.mark.parametrize("installed,lo,hi,expected", [
    ("0.32.0", None, None, True),
    ("0.32.0", "0.32.0", None, True),
    ("0.31.9", "0.32.0", None, False),
    ("0.33.0", None, "0.32", False),
    ("0.32.7", None, "0.32", True),          # a max covers the series it names
    ("0.32.7", None, "0.32.0", False),
    ("0.33.0rc1", "0.33.0", None, True),     # a pre-release of the min counts as it
    ("0.33.0.dev42+gabc", "0.33.0", None, True),
    ("0.33.0rc1", None, "0.32", False),
    ("0.33.0rc1", "0.33.0rc2", None, False),  # suffixed bound: full PEP 440 order
    ("0.33.0rc3", "0.33.0rc2", None, True),
    ("0.11.1", "0.11.1", "0.11.1", True),
    ("dev", "99.0", None, True),             # unknown version: not gated
    (None, "99.0", None, True),
])
def test_version_in_range(installed, lo, hi, expected):
    assert version_in_range(installed, lo, hi) is expected


def test_gating_in_entries(tmp_path):
    text = """
        - {symbol: 'a:old', max_version: '0.10', trace: true}
        - {symbol: 'a:new', min_version: '0.12.0', trace: true}
        - {symbol: 'a:always', trace: true}
        - {symbol: 'a:window', min_version: '0.11', max_version: '0.11.5', trace: true}
    """
    def syms(version):
        return [e.symbol.split(":")[1] for e in load(tmp_path, text, version).entries]
    assert syms("0.10.2") == ["old", "always"]
    assert syms("0.11.3") == ["always", "window"]
    assert syms("0.32.0") == ["new", "always"]
    res = load(tmp_path, text, "0.32.0")
    assert sorted(e.symbol for e in res.gated) == ["a:old", "a:window"]


def test_gated_duplicate_does_not_block_later_trace(tmp_path):
    res = load(tmp_path, """
        - {symbol: 'a:C.m', max_version: '0.10', trace: {name: old}}
        - {symbol: 'a:C.m', trace: {name: current}}
    """, "0.32.0")
    assert [e.trace.name for e in res.entries] == ["current"]


def test_installed_vllm_version_from_module(monkeypatch):
    import types
    fake = types.ModuleType("vllm")
    fake.__version__ = "0.33.0"
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake)
    assert symbols.installed_vllm_version() == "0.33.0"
    fake.__version__ = "dev"  # source checkout without metadata: fall through
    v = symbols.installed_vllm_version()
    assert v is None or symbols.parse_version(v) is not None


def test_parse_entries_rejects_non_list():
    with pytest.raises(symbols.SymbolsError):
        parse_entries({"symbol": "a:f"})


# ------------------------------------------- fuzz findings (tests/fuzz/fuzz_symbols_spec.py)


@pytest.mark.parametrize("body,what", [
    (b"- symbol: a.\xa8.:c\n  trace: true\n", "not UTF-8 text: byte 12 (line 1)"),
    (b"- symbol: a.b:c\n  min_version: 2024-02-30\n", "ValueError"),  # PyYAML: date out of range
    (b"- symbol: a.b:c\n  name: !!int ''\n", "IndexError"),
    (b"- symbol: a.b:c\n  name: !!timestamp 'abc'\n", "AttributeError"),
    (b"- symbol: a.b:c\n  name: !!bool ''\n", "KeyError"),
    (b"- symbol: a.b:c\n  name: " + b"1" * 5000 + b"\n", "ValueError"),  # over the int->str digit limit
    (b"[" * 2000 + b"]" * 2000, "nested too deeply"),
])
def test_yaml_errors_outside_yamlerror_fall_back(tmp_path, body, what):
    # Each of these escaped load_symbols as a plain Python exception.
    path = tmp_path / "s.yaml"
    path.write_bytes(body)
    res = load_symbols(str(path), vllm_version=None, detect_version=False)
    assert res.source == symbols.DEFAULT_SYMBOLS_PATH
    assert any(what in e for e in res.errors), res.errors
    assert any("falling back to the packaged default" in e for e in res.errors)


def _alias_bomb(levels, width):
    lines = ['- &l0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append("- &l%d [%s]" % (i, ", ".join(["*l%d" % (i - 1)] * width)))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("field", ["name: *l6", "domain: *l6", "trace: *l6", "trace: {kind: *l6}",
                                   "trace: {adapter: *l6}", "min_version: *l6", "handler: *l6"])
def test_alias_bomb_in_a_field_gives_a_short_message(tmp_path, field):
    # YAML anchors make a value tiny in memory but width**levels long when
    # walked; a %r of it in the error message hung the loader (at 9**9).
    # 6**6 leaves keep the test quick even if this regresses; the bound is
    # on the message, never on time.
    res = load(tmp_path, _alias_bomb(6, 6) + "- symbol: a.b:c\n  %s\n" % field)
    bad = [e for e in res.errors if "entry #7" in e]
    assert len(bad) == 1 and len(bad[0]) < 2000, [len(e) for e in res.errors]
    assert res.entries == []


@pytest.mark.parametrize("text", ["1.0prev\u0131ew1", "1.0PREV\u0130EW", "1.0.po\u017ft1", "1.0\u212a",
                                  "\u0661.\u0662", "1.0\u2003"])
def test_version_is_ascii_only(text):
    # Unicode case folding let "prevıew" (dotless i) match the suffix words,
    # then _PRE_RANK raised KeyError; Unicode digits and spaces are no
    # version characters either.
    assert symbols.parse_version(text) is None
    assert version_in_range(text, "0.1", "9") is True  # an unparseable installed version is admitted


def test_non_ascii_min_version_is_an_entry_error(tmp_path):
    res = load(tmp_path, """
        - symbol: a.b:c
          min_version: "1.0prev\u0131ew1"
        - symbol: a.b:d
    """)
    assert [e.symbol for e in res.entries] == ["a.b:d"]
    assert any("entry #0" in e and "not a version" in e for e in res.errors)


def test_caller_filter_list_must_hold_strings(tmp_path):
    res = load(tmp_path, """
        - symbol: a.b:c
          caller_filter: [pkg.a, 3]
        - symbol: a.b:d
          caller_filter: [pkg.a, pkg.b]
    """)
    assert [e.symbol for e in res.entries] == ["a.b:d"]
    assert res.entries[0].caller_filter == ["pkg.a", "pkg.b"]
    assert any("entry #0" in e and "caller_filter" in e for e in res.errors)


def test_huge_hex_int_version_and_key(tmp_path, caplog):
    # Hex ints are not bound by Python's 4300-digit str limit at parse time,
    # but str()/repr() of them raise ValueError.
    big = "0x" + "f" * 4000
    with caplog.at_level(logging.WARNING, logger="mstrace.symbols"):
        res = load(tmp_path, """
            - symbol: a.b:c
              min_version: %s
            - symbol: a.b:d
              ? %s
              : 1
        """ % (big, big))  # "? key" form: a plain key is limited to 1024 characters
    assert [e.symbol for e in res.entries] == ["a.b:d"]  # an unknown key only warns
    assert any("entry #0" in e and "too large" in e for e in res.errors)
    assert "<int>" in caplog.text
