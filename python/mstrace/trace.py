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


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    binary = find_binary()
    if binary is None:
        sys.stderr.write(
            "mstrace.trace: the mstrace forwarder binary was not found. Looked at:\n%s\n"
            "Install the package with 'pip install .' (it ships mstrace/bin/mstrace), or point "
            "MSTRACE_BUILD_DIR at a CMake build directory that contains the 'mstrace' binary.\n"
            % "\n".join("  " + p for p in candidates())
        )
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(binary, [binary, "forward"] + args)
    except OSError as exc:
        sys.stderr.write("mstrace.trace: cannot run %s: %s\n" % (binary, exc.strerror or exc))
        return 126
    return 0  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main())
