"""A target that lives outside kernelgen: plain C with another calling convention.

The kernel takes one argument, a struct of the tensor pointers, and its entry point's name
comes from the target's own option block (`c_args: {entry: run}`). It shows what adding a
target takes: a Target class, an options model and a template folder; nothing in the core
changes. tests/test_target_plugin.py registers it and builds, validates and benches configs.
"""
from __future__ import annotations

import ctypes
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from kernelgen.measure.records import BenchOptions, BenchRow
from kernelgen.config import Config
from kernelgen.config_model import StrictModel
from kernelgen.emit import OutputFile
from kernelgen.plan import Plan
from kernelgen.planner import plan as make_plan
from kernelgen.targets.base import Target
from kernelgen.targets.c.toolchain import build_shared, status
from kernelgen.toolstatus import ToolStatus
from kernelgen.measure.validate import Result, compare, make_inputs


class CArgsOptions(StrictModel):
    entry: str = Field(default="run", pattern=r"^[a-z][a-z0-9_]*$",
                       description="a C identifier suffix: the entry point is <name>_<entry>")


class CArgs(Target):
    name = "c_args"
    summary = "C99 whose kernel takes one struct of tensor pointers (a test of the target interface)"
    files = (OutputFile(pattern="{name}_args.c", template="c_args/kernel.c.j2"),)
    options_model = CArgsOptions
    template_root = Path(__file__).parent / "templates"

    def context(self, config: Config, plan: Plan) -> dict[str, Any]:
        return {"entry": f"{plan.name}_{self.options(config).entry}"}

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def validate(self, config: Config, seed: int) -> Result:
        plan = make_plan(config)
        inputs = make_inputs(plan, np.random.default_rng(seed))
        output = np.full(plan.tensors[-1].layout.flat_shape, np.nan, dtype=np.float32)
        workspace = np.full(plan.workspace_elements, np.nan, dtype=np.float32)
        with tempfile.TemporaryDirectory(prefix="kernelgen-c-args-") as tmp:
            run = self._build(config, plan, Path(tmp))
            run([*inputs.physical, output, workspace])
        return compare(config, plan, self.name, seed, inputs, output)

    def bench(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        plan = make_plan(config)
        arrays = [*make_inputs(plan, np.random.default_rng(0)).physical,
                  np.zeros(plan.tensors[-1].layout.flat_shape, np.float32), np.zeros(plan.workspace_elements, np.float32)]
        with tempfile.TemporaryDirectory(prefix="kernelgen-c-args-") as tmp:
            run = self._build(config, plan, Path(tmp))
            times = []
            for _ in range(options.repeat):
                start = time.perf_counter()
                run(arrays)
                times.append(time.perf_counter() - start)
        return [BenchRow(config=config.name, target=self.name, label=f"{plan.name} (struct of pointers)",
                         seconds=statistics.median(times), flops=plan.flops)]

    def _build(self, config: Config, plan: Plan, workdir: Path):
        """Write and build the kernel; returns run(arrays), which packs the pointers into the struct."""
        for name, text in self.render(config, plan).items():
            (workdir / name).write_text(text)
        library = ctypes.CDLL(str(build_shared([workdir / f"{plan.name}_args.c"], workdir / "libargs.so")))
        names = [p.name for p in plan.kernel.params]
        fields = type("Args", (ctypes.Structure,), {"_fields_": [(n, ctypes.c_void_p) for n in names]})
        entry = getattr(library, f"{plan.name}_{self.options(config).entry}")
        entry.restype, entry.argtypes = None, [ctypes.POINTER(fields)]

        def run(arrays: list[np.ndarray]) -> None:
            args = fields(*(a.ctypes.data for a in arrays))
            entry(ctypes.byref(args))
        return run
