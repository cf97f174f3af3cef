"""The checks of a symbols YAML and of the adapter fields against one vLLM release's source.

This module owns the rules of "would this hook silently not take on that
release?", applied to a static SourceTree (vllm_source.py):
  * every traced entry inside its version gate names a module, class and
    method that exist (a method inherited from a base class counts, as it does
    for the patcher);
  * an entry gated off for that release must not hide a method that exists
    and that no entry inside its gate already hooks (a gate drawn too tight
    loses the hook as silently as a renamed class);
  * every field of mstrace.adapter_fields.FIELDS inside its gate exists on
    its class.
Entries of other packages (vllm_ascend) are not part of a vLLM wheel: they
are reported as such, never as a problem. Version gating is
mstrace.symbols' own (load_symbols with the release's version), so the check
and the plugin cannot disagree about which entries apply.
"""

from mstrace import adapter_fields, symbols


class SymbolCheck(object):
    """Per-entry outcome lines and the problems found (each names the symbol and release)."""

    def __init__(self):
        self.lines = []  # (status, entry index, symbol, detail)
        self.problems = []


def _resolve(tree, entry):
    """(defining "module:Class.method", None) or (None, why it does not resolve)."""
    parts = entry.qualname.split(".")
    if len(parts) == 1:
        mod = tree.module(entry.module)
        if mod is None:
            return None, "module %s does not exist" % entry.module
        if parts[0] in mod.functions:
            return "%s:%s" % (entry.module, parts[0]), None
        return None, "module %s has no function %s" % (entry.module, parts[0])
    klass, why = tree.find_class(entry.module, ".".join(parts[:-1]))
    if klass is None:
        return None, why
    owner = klass.method_owner(parts[-1])
    if owner is None:
        searched = ", ".join(k.where for k in klass.mro())
        return None, "class %s has no method %s (searched %s)" % (klass.where, parts[-1], searched)
    return "%s.%s" % (owner.where, parts[-1]), None


def check_symbols(tree, version, yaml_path=symbols.DEFAULT_SYMBOLS_PATH):
    """A SymbolCheck of the YAML at `yaml_path` against `tree`, a vLLM `version`."""
    out = SymbolCheck()
    result = symbols.load_symbols(yaml_path, vllm_version=version, detect_version=False)
    out.problems.extend("%s: %s" % (yaml_path, e) for e in result.errors)
    hooked = set()
    for entry in result.entries:
        if entry.trace is None:
            continue
        if entry.module.partition(".")[0] != "vllm":
            out.lines.append(("external", entry.index, entry.symbol, "not part of vLLM"))
            continue
        if entry.is_pattern:
            out.lines.append(("pattern", entry.index, entry.symbol, "resolved when modules are imported"))
            continue
        where, why = _resolve(tree, entry)
        if where is None:
            out.lines.append(("missing", entry.index, entry.symbol, why))
            out.problems.append("entry #%d %s would not hook on vLLM %s (%s): %s"
                                % (entry.index, entry.symbol, version, tree.label, why))
        else:
            hooked.add(where)
            out.lines.append(("hooked", entry.index, entry.symbol, "defined in " + where))
    for entry in result.gated:
        if entry.module.partition(".")[0] != "vllm" or entry.is_pattern:
            continue
        where, _ = _resolve(tree, entry)
        gate = "[%s, %s]" % (entry.min_version or "-", entry.max_version or "-")
        if where is not None and where not in hooked:
            out.lines.append(("lost", entry.index, entry.symbol, "gated off %s, exists in %s" % (gate, where)))
            out.problems.append("entry #%d %s is gated off for vLLM %s by %s, but %s exists there and "
                                "no other entry hooks it" % (entry.index, entry.symbol, version, gate, where))
        else:
            detail = "gated off %s%s" % (gate, "; hooked through " + where if where else "")
            out.lines.append(("gated", entry.index, entry.symbol, detail))
    return out


def reaches_hook(tree, version, symbol, yaml_path=symbols.DEFAULT_SYMBOLS_PATH):
    """(True, where) when `symbol` ("module:Class.method", not itself in the YAML) resolves to a
    definition that an entry of the YAML hooks on vLLM `version`; else (False, why)."""
    entry = symbols.SymbolEntry(-1, symbol)
    where, why = _resolve(tree, entry)
    if where is None:
        return False, why
    hooked = {line[3][len("defined in "):] for line in check_symbols(tree, version, yaml_path).lines
              if line[0] == "hooked"}
    return (where in hooked), where


def check_fields(tree, version, fields=adapter_fields.FIELDS):
    """Problems: fields an adapter reads that `tree` (vLLM `version`) does not have."""
    problems = []
    for f in fields:
        if not symbols.version_in_range(version, f.min_version, f.max_version):
            continue
        module, _, qual = f.cls.partition(":")
        klass, why = tree.find_class(module, qual)
        if klass is None:
            problems.append("%s.%s (read by %s): %s in vLLM %s" % (f.cls, f.field, "/".join(f.adapters), why,
                                                                     version))
        elif not klass.has_field(f.field):
            problems.append("%s.%s (read by %s for %s): no such field in vLLM %s (%s)"
                            % (f.cls, f.field, "/".join(f.adapters), f.feeds, version, tree.label))
    return problems
