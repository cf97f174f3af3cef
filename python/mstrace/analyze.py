"""`python -m mstrace.analyze TRACE.json [...]` — `mstrace analyze` from the Python package.

This module owns only the Python spelling of the analysis command (docs/analyze.md): it
replaces itself (exec) with the C binary `mstrace analyze`, passing every argument through
unchanged, so options, help text, outputs and exit codes are the binary's own. The binary is
found exactly as `python -m mstrace.trace` finds it (mstrace.trace.candidates): the copy inside
the package, then $MSTRACE_BUILD_DIR, then PATH; if none exists it says where it looked and
exits with status 127.
"""

import sys

from mstrace.trace import exec_command


def main(argv=None):
    return exec_command("mstrace.analyze", "analyze", "mstrace binary", argv)


if __name__ == "__main__":
    sys.exit(main())
