#!/usr/bin/env python3
"""check_structure.py — keeps the source tree's map true to its territory.

Fails (exit 1, one line per finding) when:

  1. an #include cycle exists between files of src/, include/ or
     python/mstrace/_native (file level: a.h -> b.h -> a.h);
  2. an include cycle exists between *units* of src/ or of
     python/mstrace/_native: a unit is a header together with the .c files
     that define the functions it declares (a header that declares no
     function, only types/macros/inlines, is a unit of its own; so is a .c
     file that defines only public API). Example of what this catches: x.c
     includes y.h while y.c includes x.h;
  3. a function defined (not static) in src/<dir>/<name>.c or
     python/mstrace/_native/<name>.c is declared anywhere but its own
     header — <dir>/<name>.h, or <prefix>.h for a file named
     <prefix>_<part>.c (wire/otlp_encode_proto.c -> wire/otlp.h) — or a
     public header under include/; or it is declared nowhere (make it
     static, or declare it in its header). The extension's entry point
     PyInit_<module> is exempt: Python finds it by name;
  4. a .c file in src/ or python/mstrace/_native declares something with
     `extern` (a local declaration of another file's function or variable:
     it belongs in that file's header).

Declarations are read by the C compiler itself (gcc -aux-info), not by
pattern matching, so macros and multi-line prototypes are seen as the
compiler sees them. Needs gcc (clang has no -aux-info); the extension's
files also need Python.h (found through this interpreter's sysconfig).

Usage: check_structure.py [--cc gcc] [--root REPO]
"""
import argparse
import os
import re
import subprocess
import sys
import sysconfig
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
AUX_RE = re.compile(r"^/\* (.+?):(\d+):([NO])([CFI]) \*/ (.*)$")
NAME_RE = re.compile(r"(\w+)\s*\(")
EXTERN_RE = re.compile(r"^\s*extern\s+(?!\"C\")", re.M)


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def list_sources(root, folders):
    out = []
    for folder in folders:
        base = os.path.join(root, folder)
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def resolve_include(root, including, name, search):
    """The repo-relative path `#include "name"` in `including` resolves to,
    or None for a header outside the repository (system, Python)."""
    for d in [os.path.dirname(including)] + search:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def include_graph(root, files, search):
    graph = {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            text = strip_comments(fh.read())
        deps = set()
        for name in INCLUDE_RE.findall(text):
            p = resolve_include(root, f, name, search)
            if p is not None:
                deps.add(p)
        graph[f] = deps
    return graph


def find_cycles(graph):
    """Strongly connected components with more than one node (or a self
    loop), each as a list of nodes: Tarjan, iterative."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                if len(comp) > 1 or node in graph[node]:
                    out.append(sorted(comp))
    return out


def aux_info(root, cc, cfile, flags):
    """(kind, name, is_static, file) for every function declaration ('C')
    and definition ('F') the compiler sees in `cfile`."""
    with tempfile.NamedTemporaryFile(suffix=".aux", delete=False) as tmp:
        aux = tmp.name
    try:
        cmd = [cc, "-std=c11", "-D_GNU_SOURCE", '-DMSTRACE_VERSION_STRING="0"', "-fsyntax-only", "-aux-info", aux] + flags + [cfile]
        r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("check_structure: cannot compile %s:\n%s" % (cfile, r.stderr))
        with open(aux, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    finally:
        if os.path.exists(aux):
            os.unlink(aux)
    out = []
    for line in lines:
        m = AUX_RE.match(line)
        if not m:
            continue
        path, _, _, kind, decl = m.groups()
        path = os.path.normpath(path)
        if os.path.isabs(path) or path.startswith(".."):
            continue  # system headers
        head = decl.split("(", 1)[0] if kind == "C" else decl.split("/*", 1)[0]
        names = NAME_RE.findall(head + "(")
        if not names:
            continue
        out.append((kind, names[0], decl.startswith("static") or " static " in decl.split("(")[0], path))
    return out


def owner_headers(cfile, root):
    """Headers a .c file may declare its functions in: <name>.h, or
    <prefix>.h for <prefix>_<part>.c, in the same folder."""
    d, base = os.path.split(cfile)
    stem = base[:-2]
    parts = stem.split("_")
    out = []
    for i in range(len(parts), 0, -1):
        h = os.path.join(d, "_".join(parts[:i]) + ".h")
        if os.path.isfile(os.path.join(root, h)):
            out.append(h)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default="gcc")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    root = args.root
    problems = []

    # 1. File-level include cycles.
    lib_files = list_sources(root, ["src", "include"])
    native_files = list_sources(root, ["python/mstrace/_native"])
    graph = include_graph(root, lib_files, ["src", "include"])
    graph.update(include_graph(root, native_files, ["include", "src"]))
    for comp in find_cycles(graph):
        problems.append("include cycle between files: " + " <-> ".join(comp))

    # 4. Local extern declarations in .c files.
    for f in lib_files + native_files:
        if f.endswith(".c"):
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = strip_comments(fh.read())
            for m in EXTERN_RE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append("%s:%d: local extern declaration (declare it in the header of the file "
                                "that defines it)" % (f, line))

    # 3. Declarations in the header of the defining file.
    src_c = [f for f in lib_files if f.startswith("src" + os.sep) and f.endswith(".c")]
    native_c = [f for f in native_files if f.endswith(".c")]
    python_inc = sysconfig.get_paths().get("include") or ""
    defined = {}       # function -> defining .c
    declared = {}      # function -> set of files with a declaration
    trees = [(src_c, ["-Iinclude", "-Isrc"])]
    if native_c:
        if not os.path.isfile(os.path.join(python_inc, "Python.h")):
            raise SystemExit("check_structure: Python.h not found in %r (install python3-dev)" % python_inc)
        trees.append((native_c, ["-Iinclude", "-I" + python_inc]))
    n_src_defined = 0
    for files, flags in trees:
        for c in files:
            for kind, name, is_static, path in aux_info(root, args.cc, c, flags):
                if kind == "F" and path == c and not is_static and name != "main" \
                        and not name.startswith("PyInit_"):
                    defined[name] = c
                    n_src_defined += c.startswith("src" + os.sep)
                elif kind == "C" and not is_static:
                    declared.setdefault(name, set()).add(path)
    for name, c in sorted(defined.items()):
        allowed = set(owner_headers(c, root))
        where = declared.get(name, set())
        if not where:
            problems.append("%s: %s() is declared nowhere: make it static or declare it in %s"
                            % (c, name, (sorted(allowed) or [c[:-2] + ".h"])[0]))
        for path in sorted(where):
            if path in allowed or path.startswith("include" + os.sep):
                continue
            problems.append("%s: declares %s(), which is defined in %s (declare it in %s)"
                            % (path, name, c, " or ".join(sorted(allowed)) or c[:-2] + ".h (create it)"))

    # 2. Unit-level cycles: a header plus the .c files defining what it declares.
    unit = {f: f for f in lib_files + native_files}

    def find(x):
        while unit[x] != x:
            unit[x] = unit[unit[x]]
            x = unit[x]
        return x

    for name, c in defined.items():
        for path in declared.get(name, ()):
            if path in unit and not path.startswith("include" + os.sep):
                unit[find(c)] = find(path)
    unit_graph = {}
    members = {}
    for f, deps in graph.items():
        if f not in unit:
            continue
        u = find(f)
        members.setdefault(u, set()).add(f)
        unit_graph.setdefault(u, set())
        for d in deps:
            if d in unit and find(d) != u:
                unit_graph[u].add(find(d))
    for comp in find_cycles(unit_graph):
        names = ["{" + ", ".join(sorted(members[u])) + "}" for u in comp]
        problems.append("include cycle between units (a header and the files defining what it declares): "
                        + " <-> ".join(names))

    for p in problems:
        print(p)
    if problems:
        print("check_structure: %d problem(s)" % len(problems))
        return 1
    print("check_structure: %d files, %d functions defined in src/ and %d in python/mstrace/_native: no "
          "include cycle, every declaration in its owner's header"
          % (len(lib_files) + len(native_files), n_src_defined, len(defined) - n_src_defined))
    return 0


if __name__ == "__main__":
    sys.exit(main())
