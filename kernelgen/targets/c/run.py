"""The c target on this machine: gcc -O2 builds the emitted kernel into a shared library,
ctypes calls it on packed inputs (validate: NaN-poisoned output and workspace; bench: the
median of `repeat` timed calls)."""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...plan import Plan
from ...planner import plan as make_plan
from ...validate import Result, compare, make_inputs
from .toolchain import Library, build_shared

NAME = "c"
Render = Callable[[Config, Plan], dict[str, str]]  # the target's render: config, plan -> {file name: text}


def _library(config: Config, render: Render, workdir: Path) -> Library:
    """The rendered kernel, written to workdir and built."""
    plan = make_plan(config)
    for name, text in render(config, plan).items():
        (workdir / name).write_text(text)
    return Library(build_shared([workdir / f"{plan.name}.c"], workdir / f"lib{plan.name}.so"))


def validate_c(config: Config, seed: int, render: Render) -> Result:
    plan = make_plan(config)
    inputs = make_inputs(plan, np.random.default_rng(seed), config)
    output = np.full(plan.tensors[-1].layout.flat_shape, np.nan, dtype=np.float32)
    workspace = np.full(plan.workspace_elements, np.nan, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-{plan.name}-") as tmp:
        _library(config, render, Path(tmp)).call(plan.name, [*inputs.physical, output, workspace])
    return compare(config, plan, NAME, seed, inputs, output)


def bench_c(config: Config, options: BenchOptions, render: Render) -> list[BenchRow]:
    """Times the portable C kernel through ctypes (gcc -O2), median of `repeat` runs."""
    plan = make_plan(config)
    inputs = make_inputs(plan, np.random.default_rng(0))
    output = np.zeros(plan.tensors[-1].layout.flat_shape, dtype=np.float32)
    workspace = np.zeros(plan.workspace_elements, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-bench-{plan.name}-") as tmp:
        library = _library(config, render, Path(tmp))
        arrays = [*inputs.physical, output, workspace]
        library.call(plan.name, arrays)  # warm-up: page in the workspace
        times = []
        for _ in range(options.repeat):
            start = time.perf_counter()
            library.call(plan.name, arrays)
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return [BenchRow(config=config.name, target=NAME, label=f"{plan.name} (gcc -O2, 1 thread)",
                     seconds=seconds, flops=plan.flops, metrics={"executed_flops": plan.executed_flops},
                     spread=(min(times), max(times)))]
