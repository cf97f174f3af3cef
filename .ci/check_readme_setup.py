#!/usr/bin/env python3
"""check_readme_setup.py — fails when the README's "Set up" commands drift
from the scripts they name.

The README promises a newcomer two commands. This checks, against the
scripts themselves (no network, no build, a second of work):

  1. the section's one code block holds exactly the two commands
     `bash scripts/demo.sh` and `bash scripts/test.sh`, and both scripts exist
     and parse (`bash -n`);
  2. both run scripts/deps.sh first (the section says they install what is
     missing), demo.sh with `demo`;
  3. demo.sh's default output path is the one the README's comment names;
  4. the kinds of test named in test.sh's README comment and the stages
     test.sh runs match both ways (a stage added or dropped shows up);
  5. every environment variable the section names is read by a script, and
     every file or directory it names under the repository exists;
  6. the Jaeger version it names is the one tests/harness/jaeger.sh builds.

Prints one line per check and "N passed, N failed"; exit 1 on any failure.
Usage: check_readme_setup.py [REPO]
"""

import os
import re
import subprocess
import sys

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))

# A kind of test in the README comment of `bash scripts/test.sh` -> how the
# matching stage names of test.sh begin or what they contain.
TEST_KINDS = {
    "C": ("ctest ", "build "),
    "ASan": ("(asan",),
    "pytest": ("pytest ",),
    "Jaeger": ("pytest integration",),  # the integration suite starts the real Jaeger
    "vLLM": ("vllm",),
    "Chromium": ("chromium",),
    "fuzzing": ("fuzz",),
    "valgrind": ("valgrind",),
}


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as fh:
        return fh.read()


def setup_section(readme):
    m = re.search(r"^## Set up\s*$(.*?)(?=^## )", readme, re.M | re.S)
    return m.group(1) if m else None


def main():
    results = []

    def check(name, ok, why=""):
        results.append(ok)
        print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else ": " + why))

    section = setup_section(read("README.md"))
    if section is None:
        check("README has a '## Set up' section", False, "not found")
        return summary(results)
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", section, re.S)
    commands = []
    if blocks:
        for line in blocks[0].splitlines():
            cmd, _, comment = line.partition("#")
            if cmd.strip():
                commands.append((cmd.strip(), comment.strip()))
    names = [c for c, _ in commands]
    check("the set-up block is `bash scripts/demo.sh` and `bash scripts/test.sh`",
          len(blocks) == 1 and names == ["bash scripts/demo.sh", "bash scripts/test.sh"],
          "found %d block(s) with %r" % (len(blocks), names))
    comments = dict(commands)

    scripts = {}
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        path = os.path.join(REPO, script)
        exists = os.path.isfile(path)
        parses = exists and subprocess.run(["bash", "-n", path]).returncode == 0
        check("%s exists and parses" % script, parses, "missing" if not exists else "bash -n failed")
        scripts[script] = read(script) if exists else ""

    demo, test = scripts["scripts/demo.sh"], scripts["scripts/test.sh"]
    check("demo.sh installs what the demo needs first (deps.sh demo)",
          re.search(r"^\s*bash scripts/deps\.sh demo\b", demo, re.M) is not None, "no `bash scripts/deps.sh demo`")
    check("test.sh installs what the tests need first (deps.sh)",
          re.search(r"^\s*bash scripts/deps\.sh\b", test, re.M) is not None, "no `bash scripts/deps.sh`")

    said = re.search(r"(out/[\w./-]+\.json)", comments.get("bash scripts/demo.sh", ""))
    default = re.search(r"^OUT=\$\{1:-([^}]+)\}", demo, re.M)
    check("demo.sh writes the file the README names",
          bool(said and default and said.group(1) == default.group(1)),
          "README %s, demo.sh %s" % (said and said.group(1), default and default.group(1)))

    stages = [s.lower() for s in re.findall(r'run_stage "([^"]+)"', test)]
    comment = comments.get("bash scripts/test.sh", "")
    named = [k for k in TEST_KINDS if re.search(r"\b%s" % re.escape(k), comment)]
    in_stages = [k for k in TEST_KINDS if any(p.lower() in s for s in stages for p in TEST_KINDS[k])]
    stray = [k for k in named if k not in in_stages]
    check("every kind of test the README names is a test.sh stage", not stray, "no stage for %s" % stray)
    unnamed = [k for k in in_stages if k not in named]
    unknown = [s for s in stages if not any(p.lower() in s for ps in TEST_KINDS.values() for p in ps)]
    check("every kind of test.sh stage is named in the README", not unnamed and not unknown,
          "README comment %r lacks %s%s" % (comment, unnamed,
          "; stages of no known kind (add them to TEST_KINDS here and to the README): %s" % unknown
          if unknown else ""))

    all_scripts = "".join(read(os.path.join(d, f))
                          for d in ("scripts", "tests/harness", ".ci")
                          for f in sorted(os.listdir(os.path.join(REPO, d)))
                          if f.endswith((".sh", ".py")) or f == "run")
    env_vars = sorted(set(re.findall(r"`([A-Z][A-Z0-9_]{3,})=?[^`]*`", section)))
    unread = [v for v in env_vars if v not in all_scripts and not v.startswith("OTEL_")]
    otel_unread = [v for v in env_vars if v.startswith("OTEL_") and v not in demo
                   and v not in read("examples/request_pipeline.c")]
    check("every variable the section names is read", not unread and not otel_unread,
          "%s" % (unread + otel_unread))
    paths = sorted(set(re.findall(r"`((?:scripts|tests|docs|\.ci)/[\w./-]+)`", section)))
    missing = [p for p in paths if not os.path.exists(os.path.join(REPO, p))]
    check("every repository path the section names exists", not missing, "%s" % missing)

    said_jaeger = set(re.findall(r"Jaeger (v\d+\.\d+\.\d+)", section))
    built = re.search(r"^VERSION=(v[\d.]+)", read("tests/harness/jaeger.sh"), re.M)
    check("the Jaeger version named is the one jaeger.sh builds",
          bool(built) and said_jaeger <= {built.group(1)},
          "README %s, jaeger.sh %s" % (sorted(said_jaeger), built and built.group(1)))
    return summary(results)


def summary(results):
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
