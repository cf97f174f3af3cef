"""`python -m mstrace.analyze TRACE.json [...]` — `mstrace analyze` from the Python package.

This module owns only the Python spelling of the analysis command (docs/analyze.md): it
replaces itself (exec) with the C binary `mstrace analyze`, passing every argument through
unchanged, so options, help text, outputs and exit codes are the binary's own. The binary is
found exactly as `python -m mstrace.trace` finds it (mstrace.trace.candidates): the copy inside
the package, then $MSTRACE_BUILD_DIR, then PATH; if none exists it says where it looked and
exits with status 127.
"""

import os
import sys

from mstrace.trace import candidates, find_binary


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    binary = find_binary()
    if binary is None:
        sys.stderr.write(
            "mstrace.analyze: the mstrace binary was not found. Looked at:\n%s\n"
            "Install the package with 'pip install .' (it ships mstrace/bin/mstrace), or point "
            "MSTRACE_BUILD_DIR at a CMake build directory that contains the 'mstrace' binary.\n"
            % "\n".join("  " + p for p in candidates())
        )
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(binary, [binary, "analyze"] + args)
    except OSError as exc:
        sys.stderr.write("mstrace.analyze: cannot run %s: %s\n" % (binary, exc.strerror or exc))
        return 126
    return 0  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main())
