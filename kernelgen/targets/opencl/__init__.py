"""OpenCL C for pyopencl (PoCL here): one kernel per conv2d, tensors in image2d textures
(layouts with an axis separator) or in flat buffers with float8/float16 vector math."""
from __future__ import annotations

from typing import Any

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...emit import OutputFile
from ...plan import Plan
from ...toolstatus import ToolStatus
from ...validate import Result
from ..base import Target
from .bench import bench_opencl, sweep_variants
from .options import NAME, OpenCLModel
from .plan import OpenCLPlan, plan_opencl
from .toolchain import status
from .validate import validate_opencl


class OpenCL(Target):
    name = NAME
    summary = "OpenCL C (pyopencl/PoCL): image2d textures or float8/16 buffers, one kernel per conv2d"
    files = (OutputFile(pattern="{name}.cl", template="opencl/kernels.cl.j2"),
             OutputFile(pattern="{name}.launch.json", template="opencl/launch.json.j2"))
    dtypes = ("float32", "float16")
    includes = ("opencl/conv.cl.j2",)  # the kernels' statements, imported by kernels.cl.j2
    options_model = OpenCLModel

    def target_plan(self, config: Config, plan: Plan) -> OpenCLPlan:
        return plan_opencl(config, plan)

    def context(self, config: Config, plan: Plan) -> dict[str, Any]:
        return {"ocl": self.target_plan(config, plan)}  # tiles, NDRange, the values each kernel is written from

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def validate(self, config: Config, seed: int) -> Result:
        return validate_opencl(config, seed, self.render)

    def bench(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        return bench_opencl(config, options, self.render)

    def sweep_variants(self, config: Config) -> list[tuple[str, Config]]:
        return sweep_variants(config)
