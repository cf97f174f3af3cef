"""`mstrace analyze`'s numeric options: the N ones (--top, --jaeger-limit,
--jaeger-max-requests) and the DURATION ones (--since, --jaeger-deadline,
--jaeger-min-window), parsed from one table in src/cli/analyze_cmd.c.

Owns: each rejects a value that is not a number or a duration, or is out of
its bounds, with exit 2 and an error line naming the option and the value (the
usage before it); a value in bounds is taken (the run then fails later, at the
Jaeger nobody listens on, exit 2 with that error instead); every one of them
is in --help with its value name.
"""

import subprocess

import pytest

from conftest import mstrace_binary

NOBODY = "http://127.0.0.1:1"  # nothing listens on port 1


def _analyze(*args):
    return subprocess.run([str(mstrace_binary()), "analyze", "--jaeger", NOBODY, "--service", "x", *args],
                          capture_output=True, text=True, timeout=60)


DURATION = "expected a duration such as "
COUNT = "expected an integer "


@pytest.mark.parametrize("flag, bad, expected", [
    ("--since", "soon", DURATION + "90s, 30m, 1h or 2d"),
    ("--jaeger-deadline", "500us", DURATION + "90s, 30m or 1h"),     # under 1 ms
    ("--jaeger-deadline", "30d", DURATION + "90s, 30m or 1h"),       # its milliseconds overflow deadline_ms
    ("--jaeger-min-window", "0s", DURATION + "1ms or 1us"),          # under 1 us
    ("--jaeger-min-window", "1parsec", DURATION + "1ms or 1us"),
    ("--top", "ten", COUNT + "0..100000"),
    ("--top", "-1", COUNT + "0..100000"),
    ("--jaeger-limit", "0", COUNT + "1..100000"),
    ("--jaeger-limit", "99999999999999999999999", COUNT + "1..100000"),  # beyond 64 bits
    ("--jaeger-max-requests", "100000001", COUNT + "1..100000000"),
    ("--jaeger-max-requests", "12x", COUNT + "1..100000000"),
])
def test_a_bad_value_exits_2_naming_the_option(flag, bad, expected):
    p = _analyze(flag, bad)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last == f"mstrace analyze: error: argument {flag}: {expected}, got '{bad}'"
    assert p.stderr.startswith("usage: mstrace analyze")


@pytest.mark.parametrize("flag, good", [("--since", "0s"), ("--jaeger-deadline", "24d"),
                                        ("--jaeger-min-window", "1us"), ("--top", "0"),
                                        ("--jaeger-limit", "100000"), ("--jaeger-max-requests", "1")])
def test_a_value_in_bounds_is_taken(flag, good):
    p = _analyze(flag, good)
    assert p.returncode == 2 and "cannot reach Jaeger at " + NOBODY in p.stderr, p.stderr
    assert "expected a" not in p.stderr


def test_help_lists_every_numeric_option():
    p = subprocess.run([str(mstrace_binary()), "analyze", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    for flag, meta in (("--since", "DURATION"), ("--jaeger-deadline", "DURATION"),
                       ("--jaeger-min-window", "DURATION"), ("--top", "N"), ("--jaeger-limit", "N"),
                       ("--jaeger-max-requests", "N")):
        assert any(line.split()[:2] == [flag, meta] for line in p.stdout.splitlines()), flag
