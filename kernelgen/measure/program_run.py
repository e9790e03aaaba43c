"""The end-to-end verdict of a network validation: the program `kernelgen build` ships (network/program.py) built
with its own Makefile, run with `make run` on the validation's input, its output held to the whole model's in
onnxruntime. What a user runs is what is checked, beside the step-by-step run (network_run.py)."""
from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..network.manifest import Network
from ..network.program import build_network
from .primitives import Job

# float32: the program runs the same kernels as the step-by-step check, in one process and over one arena; against
# onnxruntime each output differs by a few units of roundoff per product summed, about 1e-6 through ResNet18 or
# MobileNetV2 (issue 46). 1e-4 leaves a margin of 100 while a wrong offset, layout or weight moves values by order 1.
PROGRAM_AGREEMENT = 1e-4
SECONDS = 600  # make and one run of a large network on a loaded host


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramRun:
    """The shipped program on the validation's input."""

    program: str  # <network>_run
    ran: bool  # False: no program for this network or target, or no make here (`why`)
    passed: bool
    max_abs: float  # the largest difference from the reference (uint8: in output steps)
    relative: float  # float: over the reference's largest magnitude; uint8: the share of bytes that differ
    seconds: float  # make and the run
    why: str  # why it did not run, or why it failed
    against: str = ""  # what its output was held to ("": the whole model in onnxruntime)

    def text(self) -> str:
        return self.result() if not self.ran else f"program {self.program} (make run): {self.result()}"

    def result(self) -> str:
        """What the run found, without the program's name."""
        if not self.ran:
            return f"program: not run ({self.why})"
        if not self.passed:
            return f"FAIL: {self.why}"
        if not self.max_abs:
            return f"output bit-exact{' with ' + self.against if self.against else ''}"
        return f"output within {self.relative:.2e} of the largest magnitude (limit {PROGRAM_AGREEMENT:g})"


def run_program(network: Network, target: Any, jobs: Mapping[str, Job], feeds: Mapping[str, np.ndarray],
                expected: Mapping[str, np.ndarray], workdir: Path, against: str = "") -> ProgramRun | None:
    """Write what `kernelgen build network.yaml -o workdir` writes for `target`, `make run` it on `feeds` and compare
    its output with `expected` (the whole model in onnxruntime; with `against`, what it names, bit for bit: a
    quantized network's step-by-step run, whose float output is its last uint8 tensor dequantized). None when the
    build writes no program (the target writes none, or the network has host steps: build says why)."""
    name = f"{network.name}_run"
    made = build_network(network, target, jobs)
    if not made.program:
        return None
    if shutil.which("make") is None:
        return ProgramRun(program=name, ran=False, passed=True, max_abs=0.0, relative=0.0, seconds=0.0,
                          why="make not found (apt-get install make)")
    folder = write_program_tree(network, target, jobs, made.files, workdir)
    (source,), (sink,) = network.inputs, network.outputs
    np.save(workdir / "input.npy", np.ascontiguousarray(feeds[source], network.tensors[source].dtype))
    start = time.perf_counter()
    try:
        done = subprocess.run(["make", "-s", "-C", str(folder), "run", f"INPUT={workdir / 'input.npy'}",
                               f"OUTPUT={workdir / 'output.npy'}"], capture_output=True, text=True, timeout=SECONDS)
    except subprocess.TimeoutExpired:
        return _failed(name, time.perf_counter() - start, f"make run took more than {SECONDS} s")
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return _failed(name, seconds, f"make run exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
    got, want = np.load(workdir / "output.npy"), np.asarray(expected[sink])
    if got.shape != want.shape:
        return _failed(name, seconds, f"output of shape {list(got.shape)}, expected {list(want.shape)}")
    if network.tensors[sink].dtype == "uint8":
        apart = np.abs(got.astype(np.int64) - want.astype(np.int64))
        worst = float(apart.max(initial=0))
        return ProgramRun(program=name, ran=True, passed=not worst, max_abs=worst,
                          relative=float(np.mean(apart > 0)), seconds=seconds,
                          why="" if not worst else f"uint8 output differs by up to {worst:.0f} steps")
    if against:
        same = got.dtype == want.dtype and np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
        worst = 0.0 if same else float(np.nan_to_num(np.abs(got.astype(np.float64) - want), nan=np.inf).max())
        return ProgramRun(program=name, ran=True, passed=same, max_abs=worst, relative=0.0, seconds=seconds,
                          why="" if same else f"output differs from {against}'s by up to {worst:.3g}", against=against)
    apart = np.nan_to_num(np.abs(got.astype(np.float64) - want.astype(np.float64)), nan=np.inf)
    worst = float(apart.max(initial=0.0))
    relative = worst / max(float(np.abs(want).max(initial=0.0)), 1e-30)
    passed = relative <= PROGRAM_AGREEMENT
    return ProgramRun(program=name, ran=True, passed=passed, max_abs=worst, relative=relative, seconds=seconds,
                      why="" if passed else f"output off by {relative:.2e} of its largest magnitude (limit "
                                            f"{PROGRAM_AGREEMENT:g})")


def _failed(name: str, seconds: float, why: str) -> ProgramRun:
    return ProgramRun(program=name, ran=True, passed=False, max_abs=float("inf"), relative=float("inf"),
                      seconds=seconds, why=why)


def write_program_tree(network: Network, target: Any, jobs: Mapping[str, Job], files: Mapping[str, str | bytes],
                       workdir: Path) -> Path:
    """The tree `kernelgen build network.yaml -o workdir` writes for `target`: each kernel's files in
    <config>/<target>/, the network's (`files`: driver, program, Makefile, weights) in <network>/<target>/, which
    is returned."""
    for config_name, job in jobs.items():
        for file, text in job.files.items():
            _write(workdir / config_name / target.name / file, text)
    folder = workdir / network.name / target.name
    for file, text in files.items():
        _write(folder / file, text)
    return folder


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
