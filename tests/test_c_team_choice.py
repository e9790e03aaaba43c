"""A threaded c kernel times its calls and runs each on its team or on one thread, whichever was faster lately
(kernel.c.j2's kg_team_begin / kg_team_end): the policy driven with made-up call times through the generated code,
and a whole call's outputs the same whichever way it ran."""
from __future__ import annotations

import subprocess

import pytest
from builders import toolchain
from conftest import requires_tool
from test_c_microkernel import _job

from kernelgen.targets.c import team

NAME = "inverted_residual_hardswish_chain"

# Calls 0-59 on a quiet host (the team 1 ms, one thread 2 ms), 60-299 beside a busy core (the team 2.1 ms: both
# threads on one core in turn; one thread 2 ms), 300-699 quiet again. Prints 1 for a call the team ran, 0 for one
# thread.
HARNESS = """
#include "%s.c"
#include <stdio.h>

static double seconds(int call, int team)
{
  const int busy = call >= 60 && call < 300;
  return team ? (busy ? 2.1e-3 : 1.0e-3) : 2.0e-3;
}

int main(void)
{
  for (int call = 0; call < 700; ++call) {
    double start;
    const int threads = kg_team_begin(&start);
    putchar(threads > 1 ? '1' : '0');
    kg_team_end(threads, omp_get_wtime() - seconds(call, threads > 1));
  }
  putchar('\\n');
  return 0;
}
"""


@pytest.fixture()
def threaded(monkeypatch):
    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)  # a small kernel: a team whatever it costs
    return _job(NAME, "{threads: 2}")


def _choices(job, tmp_path, *flags: str) -> str:
    """The harness's line: which way each of its 700 calls ran."""
    for name, text in job.files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "harness.c").write_text(HARNESS % NAME)
    subprocess.run(["gcc", "-O1", "-fopenmp", *flags, "-o", "harness", "harness.c", "-lm"], cwd=tmp_path, check=True)
    return subprocess.run(["./harness"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()


@requires_tool(*toolchain("c"))
def test_the_team_runs_while_it_is_faster_and_one_thread_while_a_busy_core_makes_it_slower(threaded, tmp_path):
    runs = _choices(threaded[1], tmp_path)
    assert len(runs) == 700
    # the team first, one thread second (each timed once), then the team (faster); one thread again as the 16th
    # call after that (a probe: the choice held, so the next is 32 calls on)
    assert runs[:20] == "10" + "1" * 15 + "0" + "11"
    assert runs[:60].count("0") == 3  # calls 1, 17 and 50
    # beside the busy core: the team's average (a quarter of each call's news) passes one thread's 2 ms within 10
    # calls; then one thread, the team probed 8, 16, 32, 64, 64 calls on (each probe 2.1 ms against 2.0)
    busy = runs[60:300]
    assert "0" in busy[:10] and busy[10:].count("1") <= 6
    # quiet again: the next probe finds the team faster and it stays, its probes of one thread ever rarer
    back = runs.index("1", 300)
    assert back - 300 <= 64 and runs[back + 8:].count("0") <= 8


@requires_tool(*toolchain("c"))
def test_fixed_team_builds_keep_every_call_on_the_team(threaded, tmp_path):
    assert _choices(threaded[1], tmp_path, "-DKG_FIXED_TEAM") == "1" * 700
