#!/usr/bin/env python3
"""check_link.py — the library split holds at link level
(docs/architecture.md, "Libraries"):

  * libmstrace.so needs no HTTP stack: no libcurl or zlib among its
    dependencies (ldd) and no curl_*/deflate*/inflate* symbol undefined in it
    (nm -D);
  * the Perfetto forwarder's library (libmstrace_forward.a) refers to no
    curl_*/deflate* symbol either (nm -u): only the OTLP relay does;
  * each program given with --no-http (an engine using only libmstrace)
    loads no libcurl or zlib (ldd);
  * libmstrace_otlp.so does load libcurl and libmstrace.so (so this check
    can tell the two apart).

Usage: check_link.py --lib LIBMSTRACE_SO --otlp LIBMSTRACE_OTLP_SO
                     --forward LIBMSTRACE_FORWARD_A [--no-http PROGRAM ...]
"""
import argparse
import re
import subprocess
import sys

HTTP_LIBS = re.compile(r"\b(libcurl[\w.-]*\.so|libz\.so|libnghttp2|libssl)")
HTTP_SYMS = re.compile(r"\b(curl_\w+|deflate\w*|inflate\w*)\b")


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("check_link: %s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--otlp", required=True)
    ap.add_argument("--forward", required=True)
    ap.add_argument("--no-http", nargs="*", default=[])
    a = ap.parse_args()
    problems = []

    deps = run("ldd", a.lib)
    for m in sorted(set(HTTP_LIBS.findall(deps))):
        problems.append("%s loads %s" % (a.lib, m))
    undef = run("nm", "-D", "--undefined-only", a.lib)
    for m in sorted(set(HTTP_SYMS.findall(undef))):
        problems.append("%s needs %s" % (a.lib, m))

    undef = run("nm", "-u", a.forward)
    for m in sorted(set(HTTP_SYMS.findall(undef))):
        problems.append("%s (the Perfetto forwarder) needs %s" % (a.forward, m))

    for prog in a.no_http:
        for m in sorted(set(HTTP_LIBS.findall(run("ldd", prog)))):
            problems.append("%s (uses only libmstrace) loads %s" % (prog, m))

    otlp_deps = run("ldd", a.otlp)
    if "libcurl" not in otlp_deps or "libmstrace.so" not in otlp_deps:
        problems.append("%s should load libcurl and libmstrace.so:\n%s" % (a.otlp, otlp_deps))

    for p in problems:
        print(p)
    if problems:
        print("check_link: %d problem(s)" % len(problems))
        return 1
    print("check_link: libmstrace.so, the Perfetto forwarder and %d libmstrace-only program(s) link no "
          "HTTP stack; libmstrace_otlp.so does" % len(a.no_http))
    return 0


if __name__ == "__main__":
    sys.exit(main())
