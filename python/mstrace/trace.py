"""`python -m mstrace.trace [--log-level L] [--perfetto-output PATH]`.

This module owns only the Python spelling of the forwarder command (docs/forwarder.md "Command line"):
it replaces itself (exec) with the C binary `mstrace forward`, passing every
argument through unchanged, so flags, help text, exit codes, signals and the
root-user security warning are the binary's own. Where the binary is looked
for, in order:
  1. the copy installed inside this package: mstrace/bin/mstrace (wheel);
  2. $MSTRACE_BUILD_DIR/mstrace (development: a CMake build directory;
     also $MSTRACE_BUILD_DIR/src/cli/mstrace and bin/mstrace under it);
  3. an `mstrace` executable on PATH.
If none exists it prints what it looked at and exits with status 127.
"""

import os
import shutil
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def candidates(env=None):
    """The paths tried, in order (existing or not)."""
    env = os.environ if env is None else env
    out = [os.path.join(PACKAGE_DIR, "bin", "mstrace")]
    build = env.get("MSTRACE_BUILD_DIR")
    if build:
        build = os.path.abspath(os.path.expanduser(build))
        out += [os.path.join(build, "mstrace"), os.path.join(build, "src", "cli", "mstrace"),
                os.path.join(build, "bin", "mstrace")]
    on_path = shutil.which("mstrace", path=env.get("PATH"))
    if on_path:
        out.append(on_path)
    return out


def find_binary(env=None):
    for path in candidates(env):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def exec_command(prog, command, what, argv=None):
    """Replaces this process with `mstrace COMMAND ARGV...` (the binary found by find_binary).
    Returns only on failure: 127 when no binary exists (saying where it looked, naming the
    binary as `what`), 126 when it cannot be run. `prog` is the module name for messages."""
    args = list(sys.argv[1:] if argv is None else argv)
    binary = find_binary()
    if binary is None:
        sys.stderr.write(
            "%s: the %s was not found. Looked at:\n%s\n"
            "Install the package with 'pip install .' (it ships mstrace/bin/mstrace), or point "
            "MSTRACE_BUILD_DIR at a CMake build directory that contains the 'mstrace' binary.\n"
            % (prog, what, "\n".join("  " + p for p in candidates()))
        )
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(binary, [binary, command] + args)
    except OSError as exc:
        sys.stderr.write("%s: cannot run %s: %s\n" % (prog, binary, exc.strerror or exc))
        return 126
    return 0  # pragma: no cover - execv does not return


def main(argv=None):
    return exec_command("mstrace.trace", "forward", "mstrace forwarder binary", argv)

if __name__ == "__main__":
    sys.exit(main())
