"""Hostile configs through the real command line: exit 0 or a clean exit 2, never a traceback,
in bounded time and memory, and nothing written by a build that fails.

Each example breaks a valid config (tests/strategies.py): an extreme number, a dropped or
unknown key, a broken layout, a reserved or oversized name, a bad target list, YAML
anchors, merge keys, recursion and deep nesting, NUL and non-UTF-8 bytes.
"""
from __future__ import annotations

import re
import resource
import signal
from contextlib import contextmanager

from click.testing import CliRunner
from hypothesis import given
from strategies import fuzz_settings, hostile_texts

from kernelgen.cli import main

SECONDS_PER_COMMAND = 20  # plan and build of a small config take well under a second
MAX_RSS_BYTES = 3 << 30  # the whole test process; numpy arrays sized by a huge dimension blow past it
POSITION = re.compile(r"^\S.*:\d+:\d+: ", re.MULTILINE)


@contextmanager
def time_limit(seconds: int):
    def expired(signum, frame):
        raise TimeoutError(f"a command ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _run(args: list[str]):
    with time_limit(SECONDS_PER_COMMAND):
        result = CliRunner().invoke(main, args)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{args[0]}: {type(result.exception).__name__}: {result.exception}\n{result.output}"
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), f"{args[0]} exited {result.exit_code}:\n{result.output}"
    if result.exit_code == 2:
        assert POSITION.search(result.output), f"{args[0]}: exit 2 without file:line:col:\n{result.output}"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 < MAX_RSS_BYTES
    return result


@fuzz_settings(ci_examples=250)
@given(raw=hostile_texts())
def test_hostile_configs_end_in_exit_0_or_a_clean_exit_2(raw, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    path = folder / "hostile.yaml"
    path.write_bytes(raw)
    planned = _run(["plan", str(path)])
    out = folder / "out"
    built = _run(["build", str(path), "-o", str(out)])
    if built.exit_code == 2:
        assert not out.exists() or not any(out.rglob("*")), "a failed build left files behind"
    assert (planned.exit_code == 2) <= (built.exit_code == 2), "build accepted what plan rejected"
