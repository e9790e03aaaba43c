"""OpenCL C for pyopencl (PoCL here): one kernel per conv2d, tensors in image2d textures
(layouts with an axis separator) or in flat buffers with float8/float16 vector math."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...config import Config
from ...emit import OutputFile
from ...measure.compare import Roundoff
from ...measure.records import Timings
from ...measure.tensors import KernelArgs
from ...plan import Plan
from ...reference import FLOAT32_UNIT_ROUNDOFF, HALF_UNIT_ROUNDOFF
from ...toolstatus import ToolStatus
from ..base import Job, Target, Traced
from .options import NAME, OpenCLModel, half_arithmetic
from .plan import OpenCLPlan, plan_opencl
from .runtime import OpenCLProgram, open_program, run, run_traced, timings
from .sweep import sweep_variants
from .toolchain import status


class OpenCL(Target[OpenCLPlan, OpenCLProgram]):
    name = NAME
    summary = "OpenCL C (pyopencl/PoCL): image2d textures or float8/16 buffers, one kernel per conv2d"
    files = (OutputFile(pattern="{name}.cl", template="opencl/kernels.cl.j2"),
             OutputFile(pattern="{name}.launch.json", template="opencl/launch.json.j2"))
    dtypes = ("float32", "float16")
    includes = ("opencl/conv.cl.j2",)  # the kernels' statements, imported by kernels.cl.j2
    options_model = OpenCLModel
    torch_reference = True
    loop_orders = None  # a kernel per conv2d over the whole tensor: no stripe loops, schedule.order does not apply

    def target_plan(self, config: Config, plan: Plan) -> OpenCLPlan:
        return plan_opencl(config, plan)

    def context(self, config: Config, plan: Plan, target_plan: OpenCLPlan) -> dict[str, Any]:
        return {"ocl": target_plan}  # tiles, NDRange, the values each kernel is written from

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def compile(self, job: Job[OpenCLPlan], workdir: Path, device: str | None = None) -> OpenCLProgram:
        return open_program(job, device)  # PoCL compiles each program on its first launch

    def run(self, executable: OpenCLProgram, args: KernelArgs, poison: int) -> np.ndarray:
        return run(executable, args, poison)

    def run_traced(self, executable: OpenCLProgram, args: KernelArgs, poison: int) -> Traced:
        return run_traced(executable, args, poison)  # intermediates are device tensors: read them back

    def time(self, executable: OpenCLProgram, args: KernelArgs, repeat: int) -> tuple[Timings, ...]:
        return timings(executable, args, repeat)

    def roundoff(self, job: Job[OpenCLPlan]) -> Roundoff:
        """float16 stores in half; with half arithmetic (the profile's or opencl.half_arithmetic) it also
        computes in it."""
        half_math = half_arithmetic(job.config)
        return Roundoff(accumulate=HALF_UNIT_ROUNDOFF if half_math else FLOAT32_UNIT_ROUNDOFF,
                        storage=HALF_UNIT_ROUNDOFF if job.config.dtype == "float16" else 0.0)

    def sweep_variants(self, config: Config) -> list[tuple[str, Config]]:
        return sweep_variants(config)
