#!/usr/bin/env python3
"""fuzz_symbols_spec.py — atheris (libFuzzer for Python) target for the symbols
YAML of docs/reference/symbols-yaml.md: mstrace.symbols (loader, entry validator, versions) and the
patcher's symbol/pattern resolution.

Owns the fuzz invariants of the Python side of "a user's YAML file goes in":
the YAML is outside input (PROFILING_SYMBOLS_PATH), so whatever bytes it holds,
  * load_symbols() returns a LoadResult and never raises (bad entries are
    reported in `errors` and skipped, an unusable file falls back to the
    packaged default);
  * parse_entries() raises nothing but SymbolsError (and only for a top level
    that is not a list);
  * every returned entry is well-formed: field types, kind/adapter in the
    allowed sets, versions that parse, min <= max, one trace per symbol,
    gating consistent with the vLLM version;
  * loading is deterministic (same input twice, same result);
  * versions: parse_version never raises, the order is a total order that
    agrees with PEP 440 (`packaging`, when installed, as the oracle; local
    tags ignored as documented), version ranges are convex;
  * patcher: any symbol the validator accepts builds a Patcher, and applying
    it to a module of random classes/functions never hits the "unexpected
    error" path, wraps only what it reports, and restores exactly.

Modes (first byte of the input): 0 YAML bytes -> load_symbols (via a temp
file, the API takes a path); 1 structured random entries -> parse_entries;
2 versions; 3 symbol strings -> patcher.

Run: python3 tests/fuzz/fuzz_symbols_spec.py [corpus dir] -max_total_time=60
(any libFuzzer flag works; `-runs=N` for a fixed budget).
"""

import os
import re
import reprlib
import sys
import tempfile
import types

import atheris

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))

with atheris.instrument_imports(include=["mstrace", "yaml"]):
    import yaml  # noqa: F401  (instrumented: coverage of YAML shapes guides the byte mode)
    from mstrace import patcher, symbols

try:
    from packaging.version import InvalidVersion
    from packaging.version import Version as PepVersion
except ImportError:  # the oracle is optional; the other version checks still run
    PepVersion = None

import logging

logging.disable(logging.CRITICAL)  # the loader logs every bad entry; keep the fuzzer's output readable

_TMPDIR = tempfile.mkdtemp(prefix="mst-fuzz-symbols-")
_YAML_PATH = os.path.join(_TMPDIR, "symbols.yaml")
# An unusable file makes load_symbols fall back to the packaged default; a
# one-entry stand-in keeps that path exercised without parsing the 5 KB
# default on most inputs (the default itself is in the seed corpus).
_SMALL_DEFAULT = os.path.join(_TMPDIR, "default_symbols.yaml")
with open(_SMALL_DEFAULT, "w") as _fh:
    _fh.write("- symbol: vllm.v1.core.sched.scheduler:Scheduler.schedule\n  trace: {adapter: schedule}\n")
symbols.DEFAULT_SYMBOLS_PATH = _SMALL_DEFAULT


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring, _SHORT.maxother = 3, 4, 4, 60, 60


class Violation(AssertionError):
    """An invariant failed: the fuzzer reports it as a crash with this text."""


def check(cond, what, *ctx):
    if not cond:
        raise Violation(what + "".join(" | %r" % (c,) for c in ctx))


# --------------------------------------------------------------------------
# Well-formedness of what the loader returns


def check_trace(trace, where):
    if trace is None:
        return
    check(isinstance(trace, symbols.TraceSpec), "trace is not a TraceSpec", where, trace)
    check(trace.kind in symbols.KINDS, "trace.kind outside KINDS", where, trace.kind)
    check(trace.adapter in symbols.ADAPTERS, "trace.adapter outside ADAPTERS", where, trace.adapter)
    check(isinstance(trace.domain, str) and trace.domain.strip() == trace.domain and trace.domain,
          "trace.domain not a stripped non-empty str", where, trace.domain)
    check(trace.name is None or (isinstance(trace.name, str) and trace.name and trace.name.strip() == trace.name),
          "trace.name not None or a stripped non-empty str", where, trace.name)
    check(isinstance(trace.span_name("meth"), str) and trace.span_name("meth"), "span_name empty", where)


def check_entry(e, n_input):
    where = getattr(e, "index", "?")
    check(isinstance(e, symbols.SymbolEntry), "entry is not a SymbolEntry", e)
    check(isinstance(e.index, int) and 0 <= e.index < n_input, "index out of range", where, e.index)
    check(isinstance(e.symbol, str) and symbols._SYMBOL_RE.match(e.symbol) is not None,
          "symbol does not match the symbol form", where, e.symbol)
    check(e.symbol == e.symbol.strip(), "symbol not stripped", where, e.symbol)
    check(e.module + ":" + e.qualname == e.symbol and e.module and e.qualname, "module/qualname split", where)
    check(e.handler is None or (isinstance(e.handler, str) and symbols._HANDLER_RE.match(e.handler)),
          "handler malformed", where, e.handler)
    check(e.name is None or (isinstance(e.name, str) and e.name and e.name == e.name.strip()),
          "name malformed", where, e.name)
    check(isinstance(e.domain, str) and e.domain and e.domain == e.domain.strip(), "domain malformed", where)
    for key in ("min_version", "max_version"):
        v = getattr(e, key)
        check(v is None or (isinstance(v, str) and symbols.parse_version(v) is not None),
              key + " does not parse", where, v)
    if e.min_version and e.max_version:
        check(symbols.version_in_range(e.min_version, None, e.max_version), "min_version above max_version", where)
    cf = e.caller_filter
    check(cf is None or isinstance(cf, str) or (isinstance(cf, list) and all(isinstance(x, str) for x in cf)),
          "caller_filter not a str or list of str", where, type(cf).__name__)
    check(isinstance(e.attributes, list), "attributes not a list", where)
    for a in e.attributes:
        check(isinstance(a, dict) and set(a) == {"name", "expr"} and all(isinstance(a[k], str) and a[k] for k in a),
              "attribute malformed", where, a)
    check_trace(e.trace, where)
    check(isinstance(repr(e), str), "repr")


def check_result(res, n_input, vllm_version):
    check(isinstance(res, symbols.LoadResult), "not a LoadResult", res)
    check(isinstance(res.errors, list) and all(isinstance(x, str) for x in res.errors), "errors not a list of str")
    for e in res.entries:
        check_entry(e, n_input)
        check(symbols.version_in_range(vllm_version, e.min_version, e.max_version), "applied entry outside its gate",
              e.index, vllm_version, e.min_version, e.max_version)
    for e in res.gated:
        check_entry(e, n_input)
        check(not symbols.version_in_range(vllm_version, e.min_version, e.max_version), "gated entry inside its gate",
              e.index, vllm_version, e.min_version, e.max_version)
    idx = [e.index for e in res.entries] + [e.index for e in res.gated]
    check(len(idx) == len(set(idx)), "an entry returned twice")
    check([e.index for e in res.entries] == sorted(e.index for e in res.entries), "entries out of file order")
    traced = [e.symbol for e in res.entries if e.trace is not None]
    check(len(traced) == len(set(traced)), "two traces for one symbol")


def snapshot(res):
    def ent(e):
        # caller_filter through a bounded repr: it may alias a huge structure
        return (e.index, e.symbol, e.handler, e.name, e.domain, e.min_version, e.max_version,
                _SHORT.repr(e.caller_filter), repr(e.attributes), repr(e.trace))
    return ([ent(e) for e in res.entries], [ent(e) for e in res.gated], list(res.errors), res.source)


# --------------------------------------------------------------------------
# Mode 0: bytes as a YAML file


_VLLM_VERSIONS = [None, "0.11.0", "0.33.0", "0.33.0rc1", "0.10.2+cpu", "dev", "0.12.0.dev3+g1"]


def pick_vllm_version(fdp):
    return fdp.PickValueInList(_VLLM_VERSIONS)


def fuzz_yaml(selector, data):
    """The input after the mode byte is the file, verbatim (seed corpora are YAML files behind one byte)."""
    vllm_version = _VLLM_VERSIONS[selector % len(_VLLM_VERSIONS)]
    with open(_YAML_PATH, "wb") as fh:
        fh.write(data)
    results = []
    for _ in range(2):
        try:
            res = symbols.load_symbols(_YAML_PATH, vllm_version=vllm_version, detect_version=False)
        except RecursionError:
            raise Violation("load_symbols raised RecursionError (deep nesting must be a file error)")
        check_result(res, 1 << 30, vllm_version)
        results.append(snapshot(res))
    check(results[0] == results[1], "load_symbols is not deterministic")


# --------------------------------------------------------------------------
# Mode 1: structured entries straight into the validator

_SYMBOLS = ["pkg.mod:func", "pkg.mod:Cls.meth", "vllm.v1.core.sched.scheduler:Scheduler.schedule",
            "pkg.models.*:*.embed_multimodal", "a.b:C.D.e", "a.[bc]:?x", "*:*", "a:b", "a.b", ":b", "a:",
            "a..b:c", "a:b.", " a.b:c ", "a-b:c", "1a:b", "a:b:c", "pkg.mod:Cls.meth\n", "\u00e9.x:y", "a.b:[!x]*"]
_HANDLERS = ["pkg.h:fn", "pkg.h:Cls.fn", "pkg:h:fn", "pkg.h", "pkg.h:", "_h:_f", "p\u00e9.h:f", "a.b:c\u00b2"]
_VERSIONS = ["0.11.0", "0.33", "0.33.0rc1", "1.0.dev1", "1.0.post1", "v1.2", " 1.2 ", "1.0+cpu", "dev", "", "1.x",
             "0.10", "1.0a", "1.0.0.0.0", "\u0661.\u0662", "1.0preview2", "1.0-r-1"]
_KINDS = list(symbols.KINDS) + ["internal", "Server", "BOGUS", "", " INTERNAL"]
_ADAPTERS = list(symbols.ADAPTERS) + ["CALL", "Request", "bogus", "", "call "]
_WORDS = ["symbol", "handler", "name", "domain", "min_version", "max_version", "caller_filter", "attributes",
          "trace", "kind", "adapter", "expr", "x", ""]


def rand_scalar(fdp):
    c = fdp.ConsumeIntInRange(0, 11)
    if c == 0:
        return None
    if c == 1:
        return fdp.ConsumeBool()
    if c == 2:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 8))
    if c == 3:
        return fdp.ConsumeRegularFloat()
    if c == 4:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 24))
    if c == 5:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 8))
    if c == 6:
        return fdp.PickValueInList(_WORDS)
    if c == 7:
        return fdp.PickValueInList(_SYMBOLS)
    if c == 8:
        return fdp.PickValueInList(_VERSIONS)
    if c == 9:
        return fdp.PickValueInList(_KINDS + _ADAPTERS)
    if c == 10:
        return float("nan")
    return 10 ** fdp.ConsumeIntInRange(0, 40)


def rand_value(fdp, depth=0, pool=None):
    """A random YAML-like value; `pool` holds earlier values to alias (YAML anchors)."""
    c = fdp.ConsumeIntInRange(0, 9 if depth < 3 else 5)
    if pool and c == 0:
        return fdp.PickValueInList(pool)
    if c <= 5:
        v = rand_scalar(fdp)
    elif c <= 7:
        v = [rand_value(fdp, depth + 1, pool) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    elif c == 8:
        v = {rand_key(fdp): rand_value(fdp, depth + 1, pool) for _ in range(fdp.ConsumeIntInRange(0, 4))}
    else:
        v = alias_bomb(fdp)
    if pool is not None and isinstance(v, (list, dict)):
        pool.append(v)
    return v


def alias_bomb(fdp):
    """k copies of the previous level, d levels deep: tiny in memory, k**d when walked (billion laughs)."""
    v = [fdp.PickValueInList(_WORDS)]
    for _ in range(fdp.ConsumeIntInRange(1, 12)):
        v = [v] * fdp.ConsumeIntInRange(2, 10)
    if fdp.ConsumeBool():
        v = {"name": v, "kind": v}
    return v


def rand_key(fdp):
    c = fdp.ConsumeIntInRange(0, 5)
    if c <= 2:
        return fdp.PickValueInList(_WORDS)
    if c == 3:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 8))
    if c == 4:
        return fdp.ConsumeInt(2)
    return fdp.PickValueInList([None, True, 1.5, b"symbol", ("t",)])


def rand_trace(fdp, pool):
    c = fdp.ConsumeIntInRange(0, 4)
    if c == 0:
        return fdp.PickValueInList([None, True, False, {}, 0, 1, "yes", []])
    if c == 1:
        return rand_value(fdp, 1, pool)
    t = {}
    for key in ("name", "domain", "kind", "adapter"):
        if fdp.ConsumeBool():
            if key == "kind" and fdp.ConsumeBool():
                t[key] = fdp.PickValueInList(_KINDS)
            elif key == "adapter" and fdp.ConsumeBool():
                t[key] = fdp.PickValueInList(_ADAPTERS)
            else:
                t[key] = rand_value(fdp, 1, pool)
    if c == 4:
        t[rand_key(fdp)] = rand_value(fdp, 1, pool)
    return t


def rand_entry(fdp, pool):
    if fdp.ConsumeIntInRange(0, 9) == 0:
        return rand_value(fdp, 0, pool)
    e = {}
    if fdp.ConsumeIntInRange(0, 7):
        e["symbol"] = fdp.PickValueInList(_SYMBOLS) if fdp.ConsumeBool() else rand_value(fdp, 1, pool)
    if fdp.ConsumeIntInRange(0, 3) == 0:
        e["handler"] = fdp.PickValueInList(_HANDLERS) if fdp.ConsumeBool() else rand_value(fdp, 1, pool)
    for key in ("name", "domain", "caller_filter"):
        if fdp.ConsumeIntInRange(0, 3) == 0:
            e[key] = rand_value(fdp, 1, pool)
    for key in ("min_version", "max_version"):
        if fdp.ConsumeIntInRange(0, 2) == 0:
            e[key] = fdp.PickValueInList(_VERSIONS) if fdp.ConsumeBool() else rand_value(fdp, 1, pool)
    if fdp.ConsumeIntInRange(0, 3) == 0:
        if fdp.ConsumeBool():
            e["attributes"] = [{"name": rand_value(fdp, 2, pool), "expr": rand_value(fdp, 2, pool)}
                               for _ in range(fdp.ConsumeIntInRange(0, 3))]
        else:
            e["attributes"] = rand_value(fdp, 1, pool)
    if fdp.ConsumeIntInRange(0, 4):
        e["trace"] = rand_trace(fdp, pool)
    if fdp.ConsumeIntInRange(0, 5) == 0:
        e[rand_key(fdp)] = rand_value(fdp, 1, pool)
    return e


def fuzz_structured(fdp):
    vllm_version = pick_vllm_version(fdp) if fdp.ConsumeBool() else fdp.ConsumeUnicode(8)
    pool = []
    data = [rand_entry(fdp, pool) for _ in range(fdp.ConsumeIntInRange(0, 8))]
    if fdp.ConsumeIntInRange(0, 15) == 0:
        data = rand_value(fdp, 0, pool)  # a top level that may not be a list
    results = []
    for _ in range(2):
        try:
            res = symbols.parse_entries(data, vllm_version, source="<fuzz>")
        except symbols.SymbolsError:
            check(data is not None and not isinstance(data, list), "SymbolsError for a list top level")
            results.append("SymbolsError")
            continue
        check_result(res, len(data or []), vllm_version)
        results.append(snapshot(res))
    check(results[0] == results[1], "parse_entries is not deterministic")


# --------------------------------------------------------------------------
# Mode 2: versions


def rand_version_text(fdp):
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 20))
    parts = [str(fdp.ConsumeIntInRange(0, 12)) for _ in range(fdp.ConsumeIntInRange(1, 4))]
    s = fdp.PickValueInList(["", "v", " "]) + ".".join(parts)
    sep = lambda: fdp.PickValueInList(["", ".", "-", "_"])  # noqa: E731
    num = lambda: fdp.PickValueInList(["", "0", "1", "2", "10"])  # noqa: E731
    if fdp.ConsumeBool():
        s += sep() + fdp.PickValueInList(["a", "alpha", "b", "beta", "c", "rc", "pre", "preview", "RC"]) + sep() + num()
    if fdp.ConsumeBool():
        s += sep() + fdp.PickValueInList(["post", "rev", "r", "POST"]) + sep() + num()
    if fdp.ConsumeBool():
        s += sep() + fdp.PickValueInList(["dev", "DEV"]) + sep() + num()
    if fdp.ConsumeIntInRange(0, 3) == 0:
        s += "+" + fdp.PickValueInList(["cpu", "g1234", "a.b", "1"])
    if fdp.ConsumeIntInRange(0, 7) == 0:
        s += fdp.ConsumeUnicode(2)
    return s


def parse(text):
    try:
        return symbols.parse_version(text)
    except Exception as exc:
        raise Violation("parse_version(%r) raised %s: %s" % (text, type(exc).__name__, exc))


def pep(text):
    if PepVersion is None:
        return None
    try:
        v = PepVersion(text)
    except InvalidVersion:
        return None
    return PepVersion(v.public)  # symbols.Version ignores local tags by design


def cmp(a, b):
    return (a > b) - (a < b)


def fuzz_versions(fdp):
    texts = [rand_version_text(fdp) for _ in range(3)]
    vs = [parse(t) for t in texts]
    for t, v in zip(texts, vs):
        check(parse(t) == v, "parse_version not deterministic", t)
        if v is not None:
            check(v == v and v <= v and not v < v, "reflexivity", t)
            if re.match(r"^\s*v?\d+(\.\d+)*\s*$", t):
                check(parse(t.strip() + ".0") == v, "trailing .0 changes the version", t)
            ok = symbols.version_in_range(v, v, v)
            check(ok, "a version is outside [itself, itself]", t)
        for bound in (t, None):
            try:
                symbols.version_in_range(t, bound if v is not None else None, None)
            except Exception as exc:
                raise Violation("version_in_range(%r) raised %s: %s" % (t, type(exc).__name__, exc))
    good = [(t, v) for t, v in zip(texts, vs) if v is not None]
    for ta, a in good:
        for tb, b in good:
            check(sum((a < b, a == b, b < a)) == 1, "not a total order", ta, tb)
            check((a == b) == (hash(a) == hash(b)) or a != b, "hash/eq disagree", ta, tb)
            pa, pb = pep(ta), pep(tb)
            if pa is not None and pb is not None:
                check(cmp(a, b) == cmp(pa, pb), "order differs from PEP 440 (packaging)", ta, tb)
    if len(good) == 3:
        (ta, a), (tb, b), (tc, c) = sorted(good, key=lambda p: p[1].key)
        for lo, hi in ((ta, tc), (ta, None), (None, tc), (tb, tc), (ta, tb)):
            if (lo and hi and not symbols.version_in_range(lo, None, hi)):
                continue
            ina = symbols.version_in_range(a, lo, hi)
            inb = symbols.version_in_range(b, lo, hi)
            inc = symbols.version_in_range(c, lo, hi)
            check(not (ina and inc) or inb, "version range is not convex", ta, tb, tc, lo, hi)


# --------------------------------------------------------------------------
# Mode 3: symbol strings -> patcher resolution


class StubHook(object):
    def __init__(self, wrapped, **kw):
        self.wrapped = wrapped
        self.kw = kw


def concrete(pattern, fdp):
    """A name that a module/qualname pattern could match (wildcards filled in)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(fdp.PickValueInList(["", "x", "models", "a.b"]))
        elif ch == "?":
            out.append("q")
        elif ch == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append("[")
            else:
                body = pattern[i + 1:j].lstrip("!")
                out.append(body[:1] or "z")
                i = j
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def make_module(name, qual_parts, fdp):
    """A module with functions/classes named after the qualname parts plus noise."""
    mod = types.ModuleType(name)
    names = [concrete(p, fdp) for p in qual_parts] + [fdp.ConsumeUnicode(4) for _ in range(2)]
    names = [n for n in names if n] or ["f"]

    def fn(*a, **k):
        return None

    def make_class(depth):
        ns = {"__module__": name}
        for n in names:
            c = fdp.ConsumeIntInRange(0, 7)
            if c == 0:
                ns[n] = fn
            elif c == 1:
                ns[n] = staticmethod(fn)
            elif c == 2:
                ns[n] = classmethod(fn)
            elif c == 3:
                ns[n] = property(fn)
            elif c == 4 and depth < 2:
                ns[n] = make_class(depth + 1)
            elif c == 5:
                ns[n] = 42
        bases = (object,)
        try:
            return type(fdp.PickValueInList(names) or "C", bases, ns)
        except (TypeError, ValueError):  # e.g. a __slots__/__dict__ name type() refuses: not our problem
            return type("C", bases, {"__module__": name})

    for n in names:
        c = fdp.ConsumeIntInRange(0, 4)
        if c == 0:
            f = types.FunctionType(fn.__code__, {}, n)
            f.__module__ = name if fdp.ConsumeIntInRange(0, 3) else "elsewhere"
            setattr(mod, n, f)
        elif c <= 2:
            setattr(mod, n, make_class(0))
        elif c == 3:
            setattr(mod, n, 7)
    return mod


def fuzz_patcher(fdp):
    sym = fdp.PickValueInList(_SYMBOLS) if fdp.ConsumeIntInRange(0, 2) == 0 else fdp.ConsumeUnicode(
        fdp.ConsumeIntInRange(0, 30))
    if fdp.ConsumeBool():
        sym = sym.encode("ascii", "ignore").decode()
    try:
        entry = symbols.parse_entry(0, {"symbol": sym, "trace": True})
    except ValueError:
        return
    check_entry(entry, 1)
    p = patcher.Patcher([entry], hook_factory=StubHook, hook_types=(StubHook,))
    name = concrete(entry.module, fdp)
    for probe in (name, fdp.ConsumeUnicode(6), entry.module):
        p.wants(probe)  # must not raise on any module name
    if not p.wants(name):
        check(symbols.has_wildcard(entry.module) or name != entry.module, "exact module not wanted", entry.module)
        return
    mod = make_module(name, entry.qualname.split("."), fdp)
    before = {k: dict(vars(v)) if isinstance(v, type) else v for k, v in vars(mod).items()}
    p.apply_module(mod)
    for rec in p.records:
        check(rec.status in ("applied", "skipped", "duplicate", "present"), "unknown record status", rec)
        check("unexpected error" not in rec.reason, "patcher hit an unexpected error", sym, rec.reason)
    applied = [r for r in p.records if r.status == "applied"]
    check(len(applied) == len(p._undo), "applied records and undo log disagree", sym)
    for owner, attr, _ in p._undo:
        check(isinstance(vars(owner)[attr], StubHook), "an applied target is not wrapped", sym, attr)
    p.apply_module(mod)  # idempotent: nothing wrapped twice
    for owner, attr, _ in p._undo:
        check(not isinstance(vars(owner)[attr].wrapped, StubHook), "double wrapping", sym, attr)
    p.uninstall(restore=True)
    after = {k: dict(vars(v)) if isinstance(v, type) else v for k, v in vars(mod).items()}
    check(before.keys() == after.keys(), "restore changed the module's names", sym)


# --------------------------------------------------------------------------

MODES = (fuzz_yaml, fuzz_structured, fuzz_versions, fuzz_patcher)


def TestOneInput(data):
    """First byte: mode (byte % 4) and, for the YAML mode, the vLLM version (byte // 4)."""
    if not data:
        return
    mode = MODES[data[0] % len(MODES)]
    if mode is fuzz_yaml:
        fuzz_yaml(data[0] // len(MODES), data[1:])
    else:
        mode(atheris.FuzzedDataProvider(data[1:]))


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
