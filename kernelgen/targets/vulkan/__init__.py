"""Vulkan GLSL 450 compute (seed 002's uVkCompute kernel): one shader source per config,
one dispatch per conv2d (compiled with -DKG_OP=<op>), plus the SPIR-V digest of each op."""
from __future__ import annotations

from typing import Any

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...emit import OutputFile
from ...plan import Plan
from ...toolstatus import ToolStatus
from ...validate import Result
from ..base import Target
from .bench import bench_vulkan
from .code import COMP_TEMPLATE, SpirvDigest
from .options import NAME, VulkanModel
from .plan import VulkanPlan, plan_vulkan
from .toolchain import status
from .validate import validate_vulkan


class Vulkan(Target):
    name = NAME
    summary = "Vulkan GLSL 450 compute (glslangValidator -> SPIR-V, lavapipe): seed 002 tiles, vec4 channels"
    files = (OutputFile(pattern="{name}.comp", template=COMP_TEMPLATE),
             OutputFile(pattern="{name}.spirv.txt", template="vulkan/spirv.txt.j2"))
    dtypes = ("float32", "float16")
    options_model = VulkanModel

    def target_plan(self, config: Config, plan: Plan) -> VulkanPlan:
        return plan_vulkan(config, plan)

    def context(self, config: Config, plan: Plan) -> dict[str, Any]:
        vk = self.target_plan(config, plan)  # tiles, dispatch sizes, index text; the SPIR-V digest on demand
        return {"vk": vk, "spirv": SpirvDigest(plan, vk)}

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def validate(self, config: Config, seed: int) -> Result:
        return validate_vulkan(config, seed)

    def bench(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        return bench_vulkan(config, options)
