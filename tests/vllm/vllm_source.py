"""What a vLLM release defines, read from its source without importing it.

This module owns the static view of a vLLM package that the release check
(test_vllm_release_source.py) needs when the release cannot be imported here
(the CUDA wheel of `vllm` wants a CUDA torch): modules, classes, the methods a
class has through its bases, and the fields an instance has. The source is a
wheel (read from the zip, nothing extracted) or a directory holding `vllm/`
(a site-packages). Everything is parsed with Python's `ast`.

What counts, deliberately close to what the patcher and the adapters see:
  * a class `C` of module `m`: defined in m, or imported into m (`from x
    import C [as D]`, module level, also inside if/try blocks), or a module
    level alias `D = C`;
  * a method of `C`: a def in C's body or in a base class's body, bases
    searched depth first left to right (existence only, so this is enough);
    bases outside the source tree (ABC, msgspec.Struct, Generic[...]) end
    the search;
  * a field of `C`: a class-level annotation or assignment (dataclass and
    msgspec.Struct fields), a `self.<name> = ...` in any method, a
    `__slots__` entry, or a method (properties are methods), in C or a base.
"""

import ast
import os
import zipfile


class SourceTree(object):
    """Python source files of one vLLM installation, parsed on demand."""

    def __init__(self, path, label=None):
        self.path = path
        self.label = label or os.path.basename(path)
        self._zip = zipfile.ZipFile(path) if os.path.isfile(path) else None
        self._modules = {}

    def close(self):
        if self._zip is not None:
            self._zip.close()

    def _read(self, relpath):
        if self._zip is not None:
            try:
                return self._zip.read(relpath).decode("utf-8")
            except KeyError:
                return None
        full = os.path.join(self.path, relpath)
        if not os.path.isfile(full):
            return None
        with open(full, encoding="utf-8") as fh:
            return fh.read()

    def module(self, name):
        """The ModuleInfo of dotted module `name`, or None when it does not exist."""
        if name not in self._modules:
            base = name.replace(".", "/")
            info = None
            for relpath, is_pkg in ((base + ".py", False), (base + "/__init__.py", True)):
                text = self._read(relpath)
                if text is not None:
                    info = ModuleInfo(name, ast.parse(text, filename=relpath), is_pkg)
                    break
            self._modules[name] = info
        return self._modules[name]

    def find_class(self, module_name, qualname, _seen=None):
        """(ClassInfo, None) for `module:Outer.Inner`, or (None, why not)."""
        mod = self.module(module_name)
        if mod is None:
            return None, "module %s does not exist" % module_name
        parts = qualname.split(".")
        _seen = set() if _seen is None else _seen
        if (module_name, parts[0]) in _seen:
            return None, "import cycle at %s:%s" % (module_name, parts[0])
        _seen.add((module_name, parts[0]))
        node = mod.classes.get(parts[0])
        if node is None:
            target = mod.imported.get(parts[0]) or mod.aliases.get(parts[0])
            if target is None:
                return None, "module %s has no class %s" % (module_name, parts[0])
            src_mod, src_name = target
            if src_name is None or self.module(src_mod) is None:
                return None, "%s.%s comes from %s, outside this vLLM" % (module_name, parts[0], src_mod)
            found, why = self.find_class(src_mod, ".".join([src_name] + parts[1:]), _seen)
            return found, why
        klass = ClassInfo(self, mod, node)
        for part in parts[1:]:
            inner = klass.nested.get(part)
            if inner is None:
                return None, "class %s has no nested class %s" % (klass.qualname, part)
            klass = ClassInfo(self, mod, inner, klass.qualname)
        return klass, None


class ModuleInfo(object):
    """Top-level names of one module: its classes, functions, imports, aliases."""

    def __init__(self, name, tree, is_pkg):
        self.name = name
        self.classes, self.functions = {}, set()
        self.imported = {}  # local name -> (module, name or None for `import x`)
        self.aliases = {}  # local name -> (module, name): `D = C` with C known here
        package = name if is_pkg else name.rpartition(".")[0]
        for stmt in _flat(tree.body):
            if isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.add(stmt.name)
            elif isinstance(stmt, ast.ImportFrom):
                src = _absolute(package, stmt.module, stmt.level)
                for alias in stmt.names:
                    self.imported.setdefault(alias.asname or alias.name, (src, alias.name))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        self.imported.setdefault(alias.asname, (alias.name, None))
                    else:  # `import a.b.c` binds `a`
                        top = alias.name.partition(".")[0]
                        self.imported.setdefault(top, (top, None))
        for stmt in _flat(tree.body):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        ref = stmt.value.id
                        if ref in self.classes:
                            self.aliases[target.id] = (name, ref)
                        elif ref in self.imported:
                            self.aliases[target.id] = self.imported[ref]


class ClassInfo(object):
    """One class: its own methods and fields, its bases resolved in the tree."""

    def __init__(self, tree, module, node, outer=None):
        self.tree, self.module, self.node = tree, module, node
        self.qualname = "%s.%s" % (outer, node.name) if outer else node.name
        self.methods, self.fields, self.nested = set(), set(), {}
        for stmt in _flat(node.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.methods.add(stmt.name)
                self.fields.update(_self_assignments(stmt))
            elif isinstance(stmt, ast.ClassDef):
                self.nested[stmt.name] = stmt
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                self.fields.add(stmt.target.id)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        self.fields.add(target.id)
                        if target.id == "__slots__":
                            self.fields.update(_string_items(stmt.value))

    @property
    def where(self):
        return "%s:%s" % (self.module.name, self.qualname)

    def bases(self):
        """The base classes found in the tree, in order (others are skipped)."""
        out = []
        for expr in self.node.bases:
            name = _dotted(expr.value if isinstance(expr, ast.Subscript) else expr)
            if not name:
                continue
            head, _, rest = name.partition(".")
            if rest:  # module.Class through `import module [as m]`
                target = self.module.imported.get(head)
                if target is None or target[1] is not None:
                    continue
                mod_path, _, cls_name = name.rpartition(".")
                mod_name = target[0] + mod_path[len(head):]
            elif head in self.module.classes:
                mod_name, cls_name = self.module.name, head
            elif head in self.module.imported or head in self.module.aliases:
                mod_name, cls_name = self.module.imported.get(head) or self.module.aliases[head]
                if cls_name is None:
                    continue
            else:
                continue
            found, _ = self.tree.find_class(mod_name, cls_name)
            if found is not None:
                out.append(found)
        return out

    def mro(self):
        """This class, then its bases depth first (each once)."""
        seen, out, stack = set(), [], [self]
        while stack:
            klass = stack.pop(0)
            if klass.where in seen:
                continue
            seen.add(klass.where)
            out.append(klass)
            stack[0:0] = klass.bases()
        return out

    def method_owner(self, name):
        """The ClassInfo that defines method `name` for this class, or None."""
        for klass in self.mro():
            if name in klass.methods:
                return klass
        return None

    def has_field(self, name):
        return any(name in k.fields or name in k.methods for k in self.mro())


def _flat(body):
    """Statements of a body, with those inside if/try/with blocks."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            for inner in _flat(stmt.body + stmt.orelse):
                yield inner
        elif isinstance(stmt, ast.Try):
            blocks = stmt.body + stmt.orelse + stmt.finalbody
            for handler in stmt.handlers:
                blocks = blocks + handler.body
            for inner in _flat(blocks):
                yield inner
        elif isinstance(stmt, ast.With):
            for inner in _flat(stmt.body):
                yield inner
        else:
            yield stmt


def _self_assignments(func):
    """Names assigned as `self.<name>` anywhere in a method."""
    if not func.args.args:
        return set()
    me = func.args.args[0].arg
    out = set()
    for node in ast.walk(func):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == me):
            out.add(node.attr)
    return out


def _string_items(expr):
    if isinstance(expr, (ast.Tuple, ast.List)):
        return {e.value for e in expr.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    return set()


def _dotted(expr):
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        head = _dotted(expr.value)
        return head + "." + expr.attr if head else None
    return None


def _absolute(package, module, level):
    if not level:
        return module or ""
    parts = package.split(".") if package else []
    if level > 1:
        parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))
