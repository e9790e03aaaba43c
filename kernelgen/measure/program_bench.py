"""A network's shipped program timed end to end against onnxruntime, round by round in one run.

What a user runs is what is timed: the program `kernelgen build network.yaml` writes (network/program.py), built
once with its own Makefile and the kernels' validated flags, plus -DKG_TIMERS, which makes it print each step's
median time from clocks inside the same process (off in the user's build). Each round runs the program once
(`--repeat` inferences after loading the weights) and then onnxruntime's session on the same input for as many
inferences, with the same threads (two or more: onnxruntime's spinning off, as the program's OpenMP waits
passively; and the same program run first with one thread, which is what two threads must beat); the rounds
interleave so that a host whose load changes slows both alike. Per inference: the wall time and the CPU time of
every thread of the process (the program's CLOCK_PROCESS_CPUTIME_ID, Python's process_time).
The output of the last round is held to onnxruntime's within PROGRAM_AGREEMENT of its largest magnitude.
Nothing here prints.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import KernelgenError
from ..network.manifest import Network
from ..network.program import build_network
from .primitives import Job
from .program_run import PROGRAM_AGREEMENT, write_program_tree

MAKE_SECONDS = 900  # compiling a network's kernels on a loaded host
_STEP = re.compile(r"^step (\d+) (.*): ([0-9.]+) ms$")
_CPU = re.compile(r": ([0-9.]+) ms CPU per run")
_WALL = re.compile(r": ([0-9.]+) ms per run")


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """One round: each side's medians over its inferences, in seconds per inference."""

    program_cpu: float
    program_wall: float
    onnxruntime_cpu: float
    onnxruntime_wall: float
    steps: tuple[float, ...]  # the program's own clocks, step by step (medians)
    single_cpu: float | None = None  # with threads > 1: the same program run with --threads 1 in the same round
    single_wall: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramBench:
    network: str
    threads: int
    repeat: int  # inferences per side per round
    rounds: tuple[Round, ...]
    step_names: tuple[str, ...]
    max_abs: float  # the program's output against onnxruntime's, last round
    relative: float  # over onnxruntime's largest magnitude
    onnxruntime: str  # its version and settings
    waiting: str = ""  # how the program's waiting threads wait (program_waiting), with threads > 1

    @property
    def agrees(self) -> bool:
        return self.relative <= PROGRAM_AGREEMENT

    def median(self, field: str) -> float:
        return statistics.median(getattr(r, field) for r in self.rounds)

    def step_seconds(self) -> tuple[float, ...]:
        return tuple(statistics.median(r.steps[k] for r in self.rounds) for k in range(len(self.step_names)))


def bench_program(network: Network, target: Any, jobs: Mapping[str, Job], feeds: Mapping[str, np.ndarray],
                  workdir: Path, *, threads: int, rounds: int, repeat: int) -> ProgramBench:
    """The program built in `workdir` and timed `rounds` times against onnxruntime (see the module's text). `jobs`
    are built for `threads` already (their configs' c: {threads}), so the program's default is that."""
    program = build_timed_program(network, target, jobs, workdir)
    (source,), (sink,) = network.inputs, network.outputs
    given = np.ascontiguousarray(feeds[source], network.tensors[source].dtype)
    np.save(workdir / "input.npy", given)
    session, version = onnxruntime_session(network, threads)
    command = [str(program), "--threads", str(threads), "--repeat", str(repeat), str(workdir / "input.npy"),
               str(workdir / "output.npy")]
    single = [*command[:2], "1", *command[3:-1], str(workdir / "output_1_thread.npy")]
    results, names, expected = [], (), None
    for _ in range(rounds):
        alone = program_round(single, network.name) if threads > 1 else None
        steps, cpu, wall, names = program_round(command, network.name)
        outputs, ort_cpu, ort_wall = onnxruntime_round(session, {source: given}, repeat)
        expected = outputs[sink]
        results.append(Round(program_cpu=cpu, program_wall=wall, onnxruntime_cpu=ort_cpu, onnxruntime_wall=ort_wall,
                             steps=steps, single_cpu=alone[1] if alone else None,
                             single_wall=alone[2] if alone else None))
    got = np.load(workdir / "output.npy").astype(np.float64)
    reference = np.asarray(expected, np.float64).reshape(got.shape)
    max_abs = float(np.max(np.abs(got - reference)))
    largest = float(np.max(np.abs(reference))) or 1.0
    spins = target.network_program(network, jobs).main_values.get("spin_count")
    return ProgramBench(network=network.name, threads=threads, repeat=repeat, rounds=tuple(results), step_names=names,
                        max_abs=max_abs, relative=max_abs / largest, onnxruntime=version,
                        waiting=program_waiting(spins, os.environ) if threads > 1 else "")


WAITING = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # a user who sets either keeps their own (the program sets neither)


def program_waiting(spin_count: int | None, environ: Mapping[str, str]) -> str:
    """How the program's waiting OpenMP threads wait when run in `environ`: what a benchmark says it measured.
    `spin_count`: the rounds the program spins them for unless the environment says otherwise (its main's)."""
    given = [f"{name}={environ[name]}" for name in WAITING if name in environ]
    if given:
        return f"its threads wait as the environment says ({', '.join(given)})"
    if spin_count is None:
        return "its threads wait as its OpenMP runtime's default"
    return f"its threads spin {spin_count} rounds, then sleep (GOMP_SPINCOUNT={spin_count}, OMP_WAIT_POLICY=passive)"


def build_timed_program(network: Network, target: Any, jobs: Mapping[str, Job], workdir: Path) -> Path:
    """The program `kernelgen build` writes, made in `workdir` with its Makefile, the kernels' flags and
    -DKG_TIMERS: its path."""
    made = build_network(network, target, jobs)
    if not made.program:
        raise KernelgenError(f"{network.name}: no program to time on {target.name} ({made.why})")
    if shutil.which("make") is None:
        raise KernelgenError("make not found (apt-get install make): the program is built with its Makefile")
    build = target.network_program(network, jobs)
    folder = write_program_tree(network, target, jobs, made.files, workdir)
    flags = " ".join((*build.flags, "-DKG_TIMERS"))
    done = subprocess.run(["make", "-s", "-j2", "-C", str(folder), f"CFLAGS={flags}"], capture_output=True,
                          text=True, timeout=MAKE_SECONDS)
    if done.returncode != 0:
        raise KernelgenError(f"{network.name}: make failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return folder / f"{network.name}_run"


def program_round(command: list[str], net: str) -> tuple[tuple[float, ...], float, float, tuple[str, ...]]:
    """One run of the program: each step's median time, the CPU and wall medians per inference, the step names."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=MAKE_SECONDS)
    if done.returncode != 0:
        raise KernelgenError(f"{net}_run failed ({done.returncode}): {done.stderr.strip()[-1000:]}")
    steps, names, cpu, wall = [], [], None, None
    for line in done.stdout.splitlines():
        if (step := _STEP.match(line)) is not None:
            names.append(step.group(2))
            steps.append(float(step.group(3)) / 1e3)
        elif (match := _CPU.search(line)) is not None:
            cpu = float(match.group(1)) / 1e3
        elif (match := _WALL.search(line)) is not None:
            wall = float(match.group(1)) / 1e3
    if cpu is None or wall is None or not steps:
        raise KernelgenError(f"{net}_run printed no times (built without -DKG_TIMERS?): {done.stdout[-500:]}")
    return tuple(steps), cpu, wall, tuple(names)


def onnxruntime_session(network: Network, threads: int):
    import onnxruntime

    from ..onnx import subgraph

    # more than one thread: its pool waits without spinning, as the program's team does (OMP_WAIT_POLICY=passive)
    entries = (("session.intra_op.allow_spinning", "0"),) if threads > 1 else ()
    try:
        session = subgraph.session(network.model.read_bytes(), threads=threads, entries=entries)
    except subgraph.OnnxError as error:
        raise network.problem("model", str(error)) from None
    spinning = ", spinning off" if entries else ""
    return session, f"onnxruntime {onnxruntime.__version__} (CPU, {threads} thread{'s' if threads > 1 else ''}{spinning})"


def onnxruntime_round(session, feeds: dict[str, np.ndarray], repeat: int
                       ) -> tuple[dict[str, np.ndarray], float, float]:
    from ..onnx import subgraph

    output = subgraph.run(session, feeds)  # warm, as the program's first run is not its median
    cpu, wall = [], []
    for _ in range(repeat):
        start, cpu_start = time.perf_counter(), time.process_time()
        output = subgraph.run(session, feeds)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    return output, statistics.median(cpu), statistics.median(wall)
