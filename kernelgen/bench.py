"""Benchmarks of generated kernels: one entry per target in BENCHES, rows printed by cli.

A bench function takes (config, options) and returns rows; `--sweep` asks a target to try
its tile and work-group permutations and mark the best row.
"""
from __future__ import annotations

import importlib
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .config import Config
from .emit import render
from .planner import plan as make_plan
from .targets import TARGETS
from .toolchains import gcc
from .validate import make_inputs


@dataclass(frozen=True, slots=True)
class BenchOptions:
    repeat: int = 5
    sweep: bool = False
    device: str | None = None


@dataclass(frozen=True, slots=True)
class BenchRow:
    config: str
    target: str
    label: str  # what was run, e.g. seed 002 style: Input[1x258x258x16]xFilter[3x3x16x256]/...
    seconds: float  # median kernel time
    flops: int  # useful FLOPs of one run
    metrics: dict[str, float] = field(default_factory=dict)  # target-specific: packets, peak_gflops, ratio...
    best: bool = False

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else float("nan")


def bench_c(config: Config, options: BenchOptions) -> list[BenchRow]:
    """Times the portable C kernel through ctypes (gcc -O2), median of `repeat` runs."""
    plan = make_plan(config)
    inputs = make_inputs(plan, np.random.default_rng(0))
    output = np.zeros(plan.tensors[-1].layout.flat_shape, dtype=np.float32)
    workspace = np.zeros(plan.workspace_elements, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-bench-{plan.name}-") as tmp:
        for name, text in render(plan, TARGETS["c"]).items():
            (Path(tmp) / name).write_text(text)
        library = gcc.Library(gcc.build_shared([Path(tmp) / f"{plan.name}.c"], Path(tmp) / f"lib{plan.name}.so"))
        arrays = [*inputs.physical, output, workspace]
        library.call(plan.name, arrays)  # warm-up: page in the workspace
        times = []
        for _ in range(options.repeat):
            start = time.perf_counter()
            library.call(plan.name, arrays)
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return [BenchRow(config=config.name, target="c", label=f"{plan.name} (gcc -O2, 1 thread)", seconds=seconds,
                     flops=plan.flops, metrics={"executed_flops": plan.executed_flops})]


def _lazy(module: str, function: str) -> Callable[[Config, BenchOptions], list[BenchRow]]:
    """A bench imported on first use: target modules import this one, so no import cycle."""
    def run(config: Config, options: BenchOptions) -> list[BenchRow]:
        return getattr(importlib.import_module(module), function)(config, options)
    return run


# One entry per target. Targets register here, nowhere else.
BENCHES: dict[str, Callable[[Config, BenchOptions], list[BenchRow]]] = {
    "c": bench_c,
    "opencl": _lazy("kernelgen.bench_opencl", "bench_opencl"),
    "hvx": _lazy("kernelgen.bench_hvx", "bench_hvx"),
    "vulkan": _lazy("kernelgen.bench_vulkan", "bench_vulkan"),
}
