"""Resolving YAML symbols and wrapping them with hooks (docs/reference/symbols-yaml.md).

This module owns *where* hooks go and *when*: it turns validated
`SymbolEntry` objects into attribute replacements on modules and classes,
applies them to modules already imported, and installs a `sys.meta_path`
finder that patches every later-imported target module right after its code
ran (the loader's `exec_module` is wrapped). The hook object itself comes
from a factory, normally the C extension's `mstrace._native.Hook`; the
patcher never looks inside it, it only recognises it (no double wrapping).

Symbol forms:
  pkg.mod:function            module-level function
  pkg.mod:Class.method        method (also staticmethod/classmethod, nested
                              classes, methods inherited from a base class:
                              the subclass then gets its own wrapper)
  pkg.models.*:*.embed_mm     fnmatch patterns on both sides; matched against
                              modules as they are imported (nothing is
                              imported on a pattern's behalf), classes and
                              functions *defined* in the module, and methods
                              in the class's own __dict__.

Failure rules: a missing module, class or method skips that hook with one
INFO line per symbol and process (docs/reference/behaviour.md) and nothing else. A class or
method is found missing when its module is imported; a module is found
missing by `report_missing_modules()` (the plugin calls it after install),
which asks the import system's finders without importing anything. Symbols
of a top-level package that is not installed at all (vllm_ascend on a
non-Ascend host) get one summary line per package instead. Other skips (not
a function, not a class, errors) are warnings, also once. An exception while
patching never fails the import that triggered it. A resolved symbol gets
one trace: the first entry wins, later ones are ignored with a log line.
"""

import fnmatch
import importlib
import logging
import re
import sys
import threading
import types

logger = logging.getLogger("mstrace.patcher")

_MISSING = object()
_UNKNOWN = object()


def _has_wildcard(text):
    return any(c in text for c in "*?[")


class PatchRecord(object):
    """What happened to one (entry, resolved target): for logs and tests."""

    __slots__ = ("status", "entry_index", "symbol", "target", "reason")

    def __init__(self, status, entry_index, symbol, target, reason=""):
        self.status = status  # "applied", "skipped", "duplicate", "present"
        self.entry_index = entry_index
        self.symbol = symbol
        self.target = target
        self.reason = reason

    @property
    def missing(self):
        """A skip because the module, class or method does not exist."""
        return self.status == "skipped" and (
            " has no attribute " in self.reason or self.reason.startswith(("module ", "package ")))

    def __repr__(self):
        return "PatchRecord(%s #%d %s -> %s%s)" % (
            self.status, self.entry_index, self.symbol, self.target, (": " + self.reason) if self.reason else "")


class _ModulePattern(object):
    __slots__ = ("prefix", "regex")

    def __init__(self, pattern):
        cut = min([i for i, c in enumerate(pattern) if c in "*?["] or [len(pattern)])
        self.prefix = pattern[:cut]
        self.regex = re.compile(fnmatch.translate(pattern))

    def match(self, name):
        return name.startswith(self.prefix) and self.regex.match(name) is not None


class Patcher(object):
    """Applies traced symbol entries; one per process (see plugin.register).

    hook_factory(original, *, name, domain, kind, adapter, handler) -> hook
    hook_types: the class(es) of the hooks it returns, used to recognise an
    existing wrapper. Both default to `mstrace._native.Hook`.
    """

    def __init__(self, entries, hook_factory=None, hook_types=None):
        if hook_factory is None:
            from mstrace import _native  # lazy: callers without tracing never load it

            hook_factory = _native.Hook
            hook_types = hook_types or native_hook_types(_native)
        if hook_types is None:
            hook_types = (hook_factory,) if isinstance(hook_factory, type) else ()
        self._factory = hook_factory
        self._hook_types = tuple(hook_types) if isinstance(hook_types, (tuple, list)) else (hook_types,)
        self._lock = threading.RLock()
        self._exact = {}  # module name -> [entry]
        self._patterns = []  # [(_ModulePattern, entry)]
        self._applied = {}  # (id(owner), attr) -> (owner, entry index)
        self._undo = []  # [(owner, attr, previous value in owner.__dict__ or _MISSING)]
        self._handlers = {}  # handler path -> callable or None
        self._callbacks = {}  # module name -> [callback(module)], see on_import
        self.records = []
        self._logged = set()  # (entry index, target, reason) already logged
        self._finder = None
        handler_by_symbol = {}
        for entry in entries:
            if entry.handler and entry.symbol not in handler_by_symbol:
                handler_by_symbol[entry.symbol] = entry.handler
        for entry in entries:
            if entry.trace is None:
                # Profiling-only entries (handler, no trace) belong to a
                # profiler; mstrace applies a handler only under a trace.
                continue
            handler = entry.handler or handler_by_symbol.get(entry.symbol)
            item = (entry, handler)
            if _has_wildcard(entry.module):
                self._patterns.append((_ModulePattern(entry.module), item))
            else:
                self._exact.setdefault(entry.module, []).append(item)

    # ------------------------------------------------------------------ setup

    def install(self):
        """Install the import finder, then patch what is already imported."""
        with self._lock:
            if self._finder is None:
                self._finder = _PostImportFinder(self)
                sys.meta_path.insert(0, self._finder)
            for name, module in list(sys.modules.items()):
                if module is not None and self.wants(name):
                    self.apply_module(module)
        return self

    def uninstall(self, restore=False):
        """Remove the finder; with restore=True also put the originals back (tests)."""
        with self._lock:
            if self._finder is not None:
                try:
                    sys.meta_path.remove(self._finder)
                except ValueError:
                    pass
                self._finder = None
            if restore:
                for owner, attr, previous in reversed(self._undo):
                    try:
                        if previous is _MISSING:
                            delattr(owner, attr)
                        else:
                            setattr(owner, attr, previous)
                    except (AttributeError, TypeError):
                        pass
                self._undo = []
                self._applied = {}

    def on_import(self, module_name, callback):
        """Call callback(module) once `module_name` is imported (now if it is).

        For the plugin's own small adjustments; the callback must be
        idempotent (it may run again on reload) and its errors are logged.
        """
        with self._lock:
            self._callbacks.setdefault(module_name, []).append(callback)
            module = sys.modules.get(module_name)
        if module is not None:
            self._run_callbacks(module, [callback])

    def _run_callbacks(self, module, callbacks):
        for callback in callbacks:
            try:
                callback(module)
            except Exception as exc:
                logger.warning("mstrace: import callback for %s failed: %s: %s", module.__name__,
                               type(exc).__name__, exc)

    def wants(self, module_name):
        if module_name in self._exact or module_name in self._callbacks:
            return True
        return any(p.match(module_name) for p, _ in self._patterns)

    @property
    def pending_modules(self):
        """Exact target modules not imported yet (their hooks wait for the import)."""
        return sorted(m for m in self._exact if m not in sys.modules)

    def report_missing_modules(self):
        """Record and log (INFO, once) the target modules that do not exist.

        Nothing is imported: each module's finder is asked with its parent
        package's path (packages already imported use their __path__), the
        way the import system would search, minus executing any module. A
        module that exists but is not imported yet is not reported (its
        hooks wait for the import). Patterns count only when their fixed
        top-level package is missing. Returns {module: reason}.
        """
        with self._lock:
            exact = sorted(self._exact.items())
            patterns = list(self._patterns)
        missing = {}
        absent_pkgs = {}  # top-level package -> [symbols]
        for name, items in exact:
            if name in sys.modules:
                continue
            found, reason = _module_status(name, self._finder)
            if found is not False:
                continue
            missing[name] = reason
            if ("module", name) in self._logged:
                continue  # recorded and logged by an earlier call
            self._logged.add(("module", name))
            top = name.partition(".")[0]
            for entry, _ in items:
                if reason.startswith("package"):
                    absent_pkgs.setdefault(top, []).append(entry)
                    self._record("skipped", entry, name, reason, log=False)
                else:
                    self._record("skipped", entry, name, reason)
        for pat, (entry, _) in patterns:
            top = pat.prefix.partition(".")[0]
            if not top or _has_wildcard(top) or "." not in pat.prefix:
                continue
            found, reason = _module_status(top, self._finder)
            if found is False and ("pattern", entry.index) not in self._logged:
                self._logged.add(("pattern", entry.index))
                absent_pkgs.setdefault(top, []).append(entry)
                self._record("skipped", entry, pat.prefix + "*", reason, log=False)
        for top, entries in sorted(absent_pkgs.items()):
            key = ("package", top)
            if key in self._logged:
                continue
            self._logged.add(key)
            logger.info("mstrace: %d %s symbol(s) skipped: %s not installed", len(entries), top, top)
            logger.debug("mstrace: skipped (%s not installed): %s", top, ", ".join(e.symbol for e in entries))
        return missing

    def import_and_apply(self):
        """Import every exact target module now and report the ones missing.

        Not used by the plugin (it never imports on the user's behalf); for
        diagnostics and the real-vLLM test. Returns {module: error text}.
        """
        missing = {}
        for name in sorted(self._exact):
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)  # the finder patches it
            except Exception as exc:  # ImportError and whatever a module raises on import
                missing[name] = "%s: %s" % (type(exc).__name__, exc)
                for entry, _ in self._exact[name]:
                    self._record("skipped", entry, name, "module cannot be imported (%s)" % missing[name])
        return missing

    # --------------------------------------------------------------- applying

    def apply_module(self, module):
        """Apply every entry that targets `module` (idempotent)."""
        name = getattr(module, "__name__", None)
        if not isinstance(name, str):
            return
        with self._lock:
            items = list(self._exact.get(name, ()))
            items += [item for pat, item in self._patterns if pat.match(name)]
            items.sort(key=lambda item: item[0].index)  # file order decides who traces a symbol
            for entry, handler in items:
                try:
                    self._apply_entry(module, entry, handler)
                except Exception as exc:  # never let a hook break the import
                    self._record("skipped", entry, name, "unexpected error: %s: %s" % (type(exc).__name__, exc))
            callbacks = list(self._callbacks.get(name, ()))
        self._run_callbacks(module, callbacks)

    def _apply_entry(self, module, entry, handler_path):
        parts = entry.qualname.split(".")
        pattern = _has_wildcard(entry.qualname) or _has_wildcard(entry.module)
        targets = list(self._resolve(module, module, parts, module.__name__, pattern, entry))
        if not targets and pattern:
            logger.debug("mstrace: pattern %s matched nothing in %s", entry.symbol, module.__name__)
        for owner, owner_qual, attr in targets:
            self._wrap(entry, handler_path, module, owner, owner_qual, attr)

    def _resolve(self, module, obj, parts, qual, pattern, entry):
        """Yield (owner, owner qualname, attribute) for `parts` under `obj`."""
        part, rest = parts[0], parts[1:]
        if _has_wildcard(part):
            names = [n for n in sorted(vars(obj)) if fnmatch.fnmatchcase(n, part)]
            if isinstance(obj, types.ModuleType):
                # Only what the module defines: re-exported names belong to
                # (and are hooked in) their own module.
                names = [n for n in names if getattr(vars(obj)[n], "__module__", None) == module.__name__]
        else:
            names = [part]
        for name in names:
            if rest:
                child = _lookup(obj, name)
                if child is _MISSING:
                    if not pattern:
                        self._record("skipped", entry, "%s.%s" % (qual, name),
                                     "%s has no attribute %r" % (_describe(obj, qual), name))
                    continue
                if not isinstance(child, type):
                    if not pattern:
                        self._record("skipped", entry, "%s.%s" % (qual, name), "%r is not a class" % name)
                    continue
                for found in self._resolve(module, child, rest, "%s.%s" % (qual, name), pattern, entry):
                    yield found
            else:
                yield obj, qual, name

    def _wrap(self, entry, handler_path, module, owner, owner_qual, attr):
        target = "%s.%s" % (owner_qual, attr)
        raw, defining = _raw_attribute(owner, attr)
        if raw is _MISSING:
            self._record("skipped", entry, target, "%s has no attribute %r" % (_describe(owner, owner_qual), attr))
            return
        key = (id(owner), attr)
        done = self._applied.get(key)
        if done is not None and done[1] != entry.index:
            self._record("duplicate", entry, target,
                         "already traced by entry #%d; only one trace per symbol, this one is ignored" % done[1])
            return
        if self._is_hook(raw):
            if defining is owner:
                self._record("present", entry, target, "already wrapped")
            else:
                self._record("present", entry, target, "already traced through %s" % _qualname(defining))
            self._applied.setdefault(key, (owner, entry.index))
            return
        if not _wrappable(raw):
            self._record("skipped", entry, target, "is a %s, not a function or method" % type(raw).__name__)
            return
        trace = entry.trace
        hook = self._factory(
            raw,
            name=trace.span_name(attr),
            domain=trace.domain,
            kind=trace.kind,
            adapter=trace.adapter,
            handler=self._handler(handler_path, entry),
        )
        previous = vars(owner).get(attr, _MISSING)
        setattr(owner, attr, hook)
        self._undo.append((owner, attr, previous))
        self._applied[key] = (owner, entry.index)
        self._record("applied", entry, target,
                     "span %s (%s, %s)" % (trace.span_name(attr), trace.domain, trace.adapter))

    def _is_hook(self, obj):
        return bool(self._hook_types) and isinstance(obj, self._hook_types)

    def _handler(self, path, entry):
        if not path:
            return None
        if path not in self._handlers:
            fn = None
            try:
                mod_name, _, qual = path.partition(":")
                fn = importlib.import_module(mod_name)
                for part in qual.split("."):
                    fn = getattr(fn, part)
                if not callable(fn):
                    raise TypeError("%r is not callable" % qual)
            except Exception as exc:
                logger.warning("mstrace: entry #%d (%s): handler %s unusable (%s: %s); tracing without it",
                               entry.index, entry.symbol, path, type(exc).__name__, exc)
                fn = None
            self._handlers[path] = fn
        return self._handlers[path]

    def _record(self, status, entry, target, reason="", log=True):
        rec = PatchRecord(status, entry.index, entry.symbol, target, reason)
        self.records.append(rec)
        if status == "applied":
            logger.debug("mstrace: hooked %s (entry #%d): %s", target, entry.index, reason)
        elif status == "present":
            logger.debug("mstrace: %s (entry #%d): %s", target, entry.index, reason)
        elif not log:
            return
        else:
            # Once per process: a reload, or apply_module for a module seen
            # again, says nothing new.
            key = (entry.index, target, reason)
            if key in self._logged:
                return
            self._logged.add(key)
            if status == "duplicate":
                logger.info("mstrace: %s (entry #%d %s): %s", target, entry.index, entry.symbol, reason)
            elif rec.missing:
                # A symbol this vLLM does not have (version drift): expected, INFO.
                logger.info("mstrace: hook skipped for entry #%d %s (%s): %s", entry.index, entry.symbol,
                            target, reason)
            else:
                logger.warning("mstrace: hook skipped for entry #%d %s (%s): %s", entry.index, entry.symbol,
                               target, reason)


def native_hook_types(native):
    """Every wrapper type the C extension hands out (function and descriptor hooks)."""
    found = []
    for name in dir(native):
        obj = getattr(native, name, None)
        if isinstance(obj, type) and name.endswith("Hook"):
            found.append(obj)
    return tuple(found) or (native.Hook,)


def _module_status(name, skip_finder=None):
    """(True | False | None, reason): does module `name` exist? None = cannot tell.

    Asks the meta path finders (not ours) with the parent package's search
    path, which is what the import system does before loading; no module
    code runs. Parents already imported answer through their __path__.
    """
    spec = _find_spec_quietly(name, skip_finder)
    if spec is _UNKNOWN:
        return None, ""
    if spec is not None:
        return True, ""
    top = name.partition(".")[0]
    if top != name and _find_spec_quietly(top, skip_finder) is None:
        return False, "package %s is not installed" % top
    if top == name:
        return False, "package %s is not installed" % top
    return False, "module %s does not exist in this installation" % name


def _find_spec_quietly(name, skip_finder):
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None) or True
    parent = name.rpartition(".")[0]
    path = None
    if parent:
        pmod = sys.modules.get(parent)
        if pmod is not None:
            path = getattr(pmod, "__path__", None)
        else:
            pspec = _find_spec_quietly(parent, skip_finder)
            if pspec is None or pspec is _UNKNOWN:
                return pspec
            path = getattr(pspec, "submodule_search_locations", None)
        if path is None:
            return None  # the parent is a plain module: no submodules
    for finder in list(sys.meta_path):
        if finder is skip_finder or isinstance(finder, _PostImportFinder):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except Exception:
            return _UNKNOWN
        if spec is not None:
            return spec
    return None


def _lookup(obj, name):
    try:
        return getattr(obj, name)
    except Exception:
        return _MISSING


def _raw_attribute(owner, attr):
    """(raw attribute as stored in a __dict__, the class or module holding it).

    Raw, not via getattr: a staticmethod/classmethod must be wrapped as the
    descriptor object, and getattr on a class would hand back a bound or
    plain function instead.
    """
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in vars(klass):
                return vars(klass)[attr], klass
        return _MISSING, None
    value = vars(owner).get(attr, _MISSING)
    return value, (owner if value is not _MISSING else None)


def _wrappable(raw):
    if isinstance(raw, (staticmethod, classmethod)):
        return True
    if isinstance(raw, (type, property)):
        return False
    return callable(raw)


def _qualname(obj):
    return "%s.%s" % (getattr(obj, "__module__", "?"), getattr(obj, "__qualname__", getattr(obj, "__name__", "?")))


def _describe(obj, qual):
    return ("module %s" % qual) if isinstance(obj, types.ModuleType) else ("class %s" % qual)


class _PostImportFinder(object):
    """A meta path finder that never loads anything itself.

    For a module the patcher wants, it asks the other finders for the spec and
    wraps the loader's exec_module, so the hooks go in right after the
    module's code ran and before anyone else can copy the originals out
    (`from mod import fn`). Every other import costs one dict lookup.
    """

    def __init__(self, patcher):
        self._patcher = patcher
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if not self._patcher.wants(fullname):
            return None
        busy = getattr(self._busy, "names", None)
        if busy is None:
            busy = self._busy.names = set()
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        _wrap_loader(spec, self._patcher)
        return spec

    def invalidate_caches(self):
        pass


def _wrap_loader(spec, patcher):
    loader = spec.loader
    original = loader.exec_module

    def exec_module(module):
        original(module)
        try:
            patcher.apply_module(module)
        except Exception as exc:  # pragma: no cover - apply_module already guards
            logger.warning("mstrace: patching %s failed: %s", getattr(module, "__name__", "?"), exc)
        finally:
            if proxy is None and vars(loader).get("exec_module") is exec_module:
                try:
                    del loader.exec_module
                except AttributeError:
                    pass

    proxy = None
    # Loaders shared between modules (classes such as BuiltinImporter, or
    # objects without an instance dict) get a per-spec proxy; per-module
    # loaders (SourceFileLoader, ExtensionFileLoader) keep their type, which
    # code inspecting module.__loader__ may rely on.
    if isinstance(loader, type) or not hasattr(loader, "__dict__"):
        proxy = _LoaderProxy(loader, exec_module)
        spec.loader = proxy
    else:
        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            proxy = _LoaderProxy(loader, exec_module)
            spec.loader = proxy


class _LoaderProxy(object):
    def __init__(self, loader, exec_module):
        self._mstrace_loader = loader
        self.exec_module = exec_module

    def create_module(self, spec):
        create = getattr(self._mstrace_loader, "create_module", None)
        return create(spec) if create is not None else None

    def __getattr__(self, name):
        return getattr(self._mstrace_loader, name)
