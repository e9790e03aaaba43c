"""A target that lives outside kernelgen: plain C with another calling convention.

The kernel takes one argument, a struct of the tensor pointers, and its entry point's name
comes from the target's own option block (`c_args: {entry: run}`). It shows what adding a
target takes: a Target class, an options model and a template folder; nothing in the core
changes. tests/test_target_plugin.py registers it and builds, validates and benches configs.
"""
from __future__ import annotations

import ctypes
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from kernelgen.config import Config
from kernelgen.config.model import StrictModel
from kernelgen.emit import OutputFile
from kernelgen.measure.records import Timings
from kernelgen.measure.tensors import KernelArgs, poisoned
from kernelgen.plan_types import Plan
from kernelgen.targets.base import Executable, Job, Target
from kernelgen.targets.c.toolchain import build_shared, status
from kernelgen.toolstatus import ToolStatus


class CArgsOptions(StrictModel):
    entry: str = Field(default="run", pattern=r"^[a-z][a-z0-9_]*$",
                       description="a C identifier suffix: the entry point is <name>_<entry>")


class CArgs(Target):
    name = "c_args"
    summary = "C99 whose kernel takes one struct of tensor pointers (a test of the target interface)"
    files = (OutputFile(pattern="{name}_args.c", template="c_args/kernel.c.j2"),)
    options_model = CArgsOptions
    template_root = Path(__file__).parent / "templates"

    def context(self, config: Config, plan: Plan, target_plan: Any) -> dict[str, Any]:
        return {"entry": f"{plan.name}_{self.options(config).entry}"}

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    # ---- its run code: build, call through the struct, time. Inputs, poisoning, comparison and statistics are
    # the core's.

    def compile(self, job: Job, workdir: Path, device: str | None = None) -> Executable:
        (workdir / f"{job.plan.name}_args.c").write_text(job.files[f"{job.plan.name}_args.c"])
        exe = Executable(job)
        library = ctypes.CDLL(str(build_shared([workdir / f"{job.plan.name}_args.c"], workdir / "libargs.so")))
        exe.struct = type("Args", (ctypes.Structure,), {"_fields_": [(p.name, ctypes.c_void_p)
                                                                      for p in job.plan.kernel.params]})
        exe.entry = getattr(library, f"{job.plan.name}_{self.options(job.config).entry}")
        exe.entry.restype, exe.entry.argtypes = None, [ctypes.POINTER(exe.struct)]
        return exe

    def _arrays(self, exe: Executable, args: KernelArgs, poison: int) -> list[np.ndarray]:
        plan = exe.job.plan
        return [*args.physical_list(), poisoned(plan.tensors[-1].elements, np.dtype(np.float32), poison),
                poisoned(plan.workspace_elements, np.dtype(np.float32), poison)]

    def _call(self, exe: Executable, arrays: list[np.ndarray]) -> None:
        exe.entry(ctypes.byref(exe.struct(*(a.ctypes.data for a in arrays))))

    def run(self, exe: Executable, args: KernelArgs, poison: int) -> np.ndarray:
        arrays = self._arrays(exe, args, poison)
        self._call(exe, arrays)
        return arrays[-2]

    def time(self, exe: Executable, args: KernelArgs, repeat: int) -> tuple[Timings, ...]:
        arrays, times = self._arrays(exe, args, 0), []
        for _ in range(repeat):
            start = time.perf_counter()
            self._call(exe, arrays)
            times.append(time.perf_counter() - start)
        return (Timings(label=f"{exe.job.plan.name} (struct of pointers)", seconds=tuple(times)),)
