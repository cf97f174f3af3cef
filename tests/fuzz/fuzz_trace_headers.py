#!/usr/bin/env python3
"""fuzz_trace_headers.py — atheris target for the C extension's trace_headers
intake: `mstrace._native.register_request(request_id, trace_headers)` and the
`request` / `output` adapters that feed it from vLLM objects (docs/reference/spans.md,
python/mstrace/_native/CONTRACT.md "Context rules").

Owns the invariants of "headers from a client request reach C code":
  * never a crash (the extension is C: a segfault ends the run as a finding);
  * register_request raises nothing but TypeError / ValueError (a non-mapping
    headers object, a str with lone surrogates: UnicodeEncodeError), or the
    exception our own odd objects raise on purpose (passed through unchanged);
    a call that raised registered nothing;
  * it returns True exactly when the headers carry a str `traceparent` that is
    a valid W3C context; lookup_request then gives back that trace id, span id
    and sampled flag; a rejected or odd header leaves the table unchanged
    (MS_PROFILER_AUTO_TRACE is off here);
  * ids are exact byte strings (embedded NULs, non-ASCII, long ids) and the
    join rule is the documented one (exact, else "-<8 lowercase hex>"
    stripped) for lookup and finish; `requests_tracked` matches a model;
  * a hooked business function wrapped with adapter="request" / "output"
    returns its own result for any request object, whatever its
    trace_headers hold (the hook never raises into vLLM).

Input: a FuzzedDataProvider program of up to 48 operations over a request
table reset for every input. The extension is built and staged by the pytest
helper (tests/python/conftest.py: build_native, $MSTRACE_PY_BUILD, default
<repo>/build-py). The extension is not coverage-instrumented, so this target
relies on the structured generator rather than coverage feedback.

Run: python3 tests/fuzz/fuzz_trace_headers.py [corpus dir] -max_total_time=60
"""

import collections.abc
import os
import re
import sys

import atheris

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
for key in list(os.environ):
    if key.startswith(("MS_PROFILER", "MS_TRACE")):
        del os.environ[key]  # no auto-trace: a rejected header must register nothing


def load_native():
    sys.path.insert(0, os.path.join(REPO, "tests", "python"))
    import conftest  # the pytest helper: stages the package, builds and stages _native

    conftest._stage_python_files()
    sys.path.insert(0, conftest.STAGING)
    built = conftest.build_native()
    if built.native is None:
        sys.exit("fuzz_trace_headers: mstrace._native unavailable: %s" % built.reason)
    from mstrace import _native

    _native.init(otlp=False, perfetto=False, null_exporter=True)
    return _native


native = load_native()

TP_RE = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$", re.S)
SUFFIX_RE = re.compile(r"^(.+)-[0-9a-f]{8}$", re.S)
T_OK, S_OK = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


class Violation(AssertionError):
    pass


def check(cond, what, *ctx):
    if not cond:
        raise Violation(what + "".join(" | %r" % (c,) for c in ctx))


class Planted(Exception):
    """Raised by our own odd objects; the extension must pass it through unchanged."""


class RaisingStr(object):
    def __str__(self):
        raise Planted("__str__")


class StrSub(str):
    def __str__(self):
        return "not-the-key"


class OddMapping(collections.abc.Mapping):
    """A Mapping that is not a dict: lookup through __getitem__; may raise."""

    def __init__(self, data, mode):
        self.data, self.mode = data, mode

    def __getitem__(self, key):
        if self.mode == 1:
            raise Planted("__getitem__")
        if self.mode == 2:
            return self.data.get(key)  # never KeyError: None for a missing key
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)


class DictSub(dict):
    def __getitem__(self, key):  # bypassed by PyDict_GetItem; must not matter
        raise Planted("dict subclass __getitem__")


# ---------------------------------------------------------------- generators


_HEX = list("0123456789abcdef")


def gen_hex(fdp, n):
    return "".join(fdp.PickValueInList(_HEX) for _ in range(n))


def gen_traceparent(fdp):
    """(value, expected) — expected: True valid, False invalid, None unknown."""
    c = fdp.ConsumeIntInRange(0, 9)
    if c <= 3:
        trace = T_OK if fdp.ConsumeBool() else gen_hex(fdp, 32)
        span = S_OK if fdp.ConsumeBool() else gen_hex(fdp, 16)
        flags = fdp.PickValueInList(["00", "01", "02", "03", "ff", "80"])
        tp = "00-%s-%s-%s" % (trace, span, flags)
        return tp, (set(trace) != {"0"} and set(span) != {"0"})
    if c == 4:
        tp = "00-%s-%s-01" % (T_OK, S_OK)
        i = fdp.ConsumeIntInRange(0, len(tp) - 1)
        return tp[:i] + fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 3)) + tp[i + 1:], None
    if c == 5:
        return "00-%s-%s-01" % (T_OK.upper(), S_OK), None
    if c == 6:
        return fdp.PickValueInList(["ff-%s-%s-01" % (T_OK, S_OK), "01-%s-%s-01-extra" % (T_OK, S_OK),
                                    "00-%s-%s-01-extra" % (T_OK, S_OK), "00-%s-%s-01" % ("0" * 32, S_OK),
                                    "", " 00-%s-%s-01" % (T_OK, S_OK), "00-%s-%s-01\x00" % (T_OK, S_OK),
                                    "\ud800", "00-%s-%s-0\ud800" % (T_OK, S_OK)]), None
    if c == 7:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 70)), None
    if c == 8:
        return ("00-%s-%s-01" % (T_OK, S_OK)).encode(), False  # bytes: not a str, ignored
    return fdp.PickValueInList([None, 1, 1.5, [], {}, ("00",), b""]), False


def gen_id(fdp):
    c = fdp.ConsumeIntInRange(0, 10)
    if c <= 2:
        return fdp.PickValueInList(["req-1", "cmpl-a", "r", "", "x" * 40])
    if c == 3:
        return fdp.PickValueInList(["req-1", "cmpl-a", "r"]) + "-" + gen_hex(fdp, 8)
    if c == 4:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 40))
    if c == 5:
        return "a\x00" + fdp.ConsumeUnicode(3)
    if c == 6:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 12))
    if c == 7:
        return fdp.PickValueInList([None, 0, 12345678901234567890, -1.5, (1, 2), True])
    if c == 8:
        return StrSub(fdp.PickValueInList(["req-1", "sub"]))
    if c == 9:
        return "req-1-" + gen_hex(fdp, 7) + fdp.PickValueInList(["A", "g", "0", "00"])
    return RaisingStr()


def gen_key(fdp):
    return fdp.PickValueInList(["traceparent", "tracestate", "Traceparent", "TRACEPARENT", b"traceparent", 1, None,
                                ("traceparent",), "traceparent\x00", "", frozenset()])


def gen_headers(fdp):
    """(headers object, expected): expected as gen_traceparent's, for what register must return."""
    c = fdp.ConsumeIntInRange(0, 9)
    if c <= 4:
        d, exp = {}, False
        if fdp.ConsumeIntInRange(0, 4):
            tp, exp = gen_traceparent(fdp)
            d["traceparent"] = tp
            if exp and not isinstance(tp, str):
                exp = False
        for _ in range(fdp.ConsumeIntInRange(0, 3)):
            k = gen_key(fdp)
            if k == "traceparent":
                continue
            d[k] = fdp.PickValueInList(["x", b"y", None, 3, {"traceparent": "00"}, "k=v", "\ud800"])
        if c == 4:
            return OddMapping(d, fdp.ConsumeIntInRange(0, 2)), None
        if c == 3:
            return DictSub(d), exp
        return d, exp
    if c == 5:
        return None, False
    if c == 6:
        return fdp.PickValueInList(["traceparent", "00-%s-%s-01" % (T_OK, S_OK), "", b"traceparent"]), None
    if c == 7:
        return fdp.PickValueInList([[("traceparent", "00-%s-%s-01" % (T_OK, S_OK))], (), [], 0, 3.5]), None
    if c == 8:
        return frozenset(["traceparent"]), None
    return OddMapping({}, 1), None


# ---------------------------------------------------------------- model


def key_of(rid):
    # The extension keys a str (or str subclass) by its characters, anything
    # else by str(obj).
    return str.__str__(rid) if isinstance(rid, str) else str(rid)


def model_find(model, key):
    if key in model:
        return key
    m = SUFFIX_RE.match(key)
    if m and m.group(1) in model:
        return m.group(1)
    return None


def expected_ctx(tp):
    """Reference W3C traceparent parser: (trace, span, sampled) or None.

    As the C parser (src/core/context.c): optional spaces/tabs around,
    lowercase hex only, version ff invalid, version 00 exactly 55 chars, a
    later version may append "-..."; all-zero trace or span ids invalid.
    """
    m = TP_RE.match(tp.strip(" \t"))
    if not m or m.group(1) == "ff" or (m.group(1) == "00" and m.group(5) is not None):
        return None
    if set(m.group(2)) == {"0"} or set(m.group(3)) == {"0"}:
        return None
    return (m.group(2), m.group(3), bool(int(m.group(4), 16) & 1))


def call(fn, *args):
    """(result, exception); only the allowed exception types are returned."""
    try:
        return fn(*args), None
    except (TypeError, ValueError, Planted) as exc:
        return None, exc
    except Exception as exc:
        raise Violation("%s raised %s: %s" % (fn.__name__, type(exc).__name__, exc))


def op_register(fdp, model):
    rid, (headers, exp) = gen_id(fdp), gen_headers(fdp)
    ok, exc = call(native.register_request, rid, headers)
    if exc is not None:
        check(exp is None or isinstance(exc, (Planted, ValueError)) or isinstance(rid, RaisingStr),
              "register_request raised for headers that should be accepted or ignored", rid, headers, exc)
        return
    check(ok in (True, False), "register_request returned a non-bool", ok)
    ctx = None
    if isinstance(headers, dict):  # dict subclasses too: read as a dict, never through __getitem__
        tp = dict.get(headers, "traceparent")
        ctx = expected_ctx(tp) if isinstance(tp, str) else None
        exp = ctx is not None
    if exp is not None:
        check(ok == exp, "register_request result differs from the reference traceparent parser", rid, headers, ok)
    if ok:  # (a rejected header returns before the id is even converted)
        key = key_of(rid)
        if ctx is None:
            ctx = expected_ctx(headers.data["traceparent"])  # an OddMapping
        check(ctx is not None, "accepted a traceparent the reference parser rejects", headers)
        model[key] = ctx
        got, _ = call(native.lookup_request, key)
        check(got == ctx, "lookup after register differs", key, got, ctx)


def op_lookup(fdp, model):
    rid = gen_id(fdp)
    got, exc = call(native.lookup_request, rid)
    if not isinstance(rid, str):
        check(exc is not None and isinstance(exc, TypeError), "lookup_request took a non-str id", rid)
        return
    if exc is not None:
        check(isinstance(exc, UnicodeEncodeError), "lookup_request raised", rid, exc)
        return
    found = model_find(model, key_of(rid))
    check(got == (model[found] if found is not None else None), "lookup differs from the model", rid, got)


def op_finish(fdp, model):
    rid = gen_id(fdp)
    got, exc = call(native.finish_request, rid)
    if exc is not None:
        check(isinstance(exc, (ValueError, Planted)), "finish_request raised", rid, exc)
        return
    found = model_find(model, key_of(rid))
    check(got == (found is not None), "finish_request result differs from the model", rid, got)
    if found is not None:
        del model[found]


class Obj(object):
    pass


def _business(*args, **kwargs):
    return "business-result"


_HOOKS = {}


def hook(adapter):
    """The Hook for `adapter`, made again once 5 internal failures switched it to pass-through.

    Header shapes that are no mapping (a str, a list) count as internal
    failures in the adapters today, so a long-lived hook would soon stop
    exercising the intake at all.
    """
    h = _HOOKS.get(adapter)
    if h is None or h._mstrace_hook["disabled"]:
        h = _HOOKS[adapter] = native.Hook(_business, name="fuzz." + adapter, domain="Fuzz", adapter=adapter)
    return h


def op_hook(fdp, model):
    """A hooked business call: the hook may register (model updated from the table), never raises."""
    req = Obj()
    rid = gen_id(fdp)
    if isinstance(rid, str) and SUFFIX_RE.match(rid):
        rid += "x"  # joins are checked by the register/lookup ops; here every touched key must be exact
    if fdp.ConsumeIntInRange(0, 5):
        req.request_id = rid
    headers, _ = gen_headers(fdp)
    if fdp.ConsumeIntInRange(0, 5):
        req.trace_headers = headers
    c = fdp.ConsumeIntInRange(0, 3)
    try:
        if c == 0:
            out = hook("request")(req)
        elif c == 1:
            out = hook("request")(None, request_id=rid, trace_headers=headers)
        elif c == 2:
            out = hook("request_context")(req)
        else:
            req.finish_reason = fdp.PickValueInList([None, "stop", "", 0])
            out = hook("output")([req] if fdp.ConsumeBool() else req)
    except Exception as exc:
        raise Violation("a hook raised into the business caller: %s: %s" % (type(exc).__name__, exc))
    check(out == "business-result", "a hook changed the business result", out)
    # The hook may have registered or finished a request: resync the model
    # for the ids it could have touched. A request_id of None names no
    # request (CONTRACT.md, output adapter), so it touches nothing; the table
    # once finished the request registered as "None" for it
    # (corpus/fuzz_trace_headers/regression-output-request-id-none).
    if rid is not None and not isinstance(rid, RaisingStr):
        try:
            key = key_of(rid)
            got = native.lookup_request(key)
        except (TypeError, ValueError):
            got = key = None
        if key is not None:
            if got is None:
                model.pop(key, None)
            else:
                model[key] = got
    model_sync_count(model)


def model_sync_count(model):
    check(native.stats()["requests_tracked"] == len(model), "requests_tracked differs from the model",
          native.stats()["requests_tracked"], len(model))


OPS = [op_register, op_register, op_register, op_lookup, op_finish, op_hook]

# The extension has no Python coverage; instrumenting the harness's own
# generators and checks gives libFuzzer feedback on which shapes and outcomes
# (accepted, rejected, raised, joined) an input reaches.
for _fn in (gen_traceparent, gen_id, gen_headers, op_register, op_lookup, op_finish, op_hook, call, model_find):
    globals()[_fn.__name__] = atheris.instrument_func(_fn)
OPS = [globals()[f.__name__] for f in OPS]


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    native._reset_requests()
    model = {}
    for _ in range(fdp.ConsumeIntInRange(1, 48)):
        if fdp.remaining_bytes() == 0:
            break
        fdp.PickValueInList(OPS)(fdp, model)
        if fdp.ConsumeIntInRange(0, 7) == 0:
            model_sync_count(model)
    model_sync_count(model)


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
