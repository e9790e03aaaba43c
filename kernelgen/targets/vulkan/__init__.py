"""Vulkan GLSL 450 compute (seed 002's uVkCompute kernel): one shader source per config,
one dispatch per conv2d (compiled with -DKG_OP=<op>), plus each op's dispatch (a text file) and, when glslang
is installed, its SPIR-V module (written by build, never a golden: it depends on the glslang version)."""
from __future__ import annotations

from typing import Any

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...emit import OutputFile
from ...errors import KernelgenError
from ...plan import Plan
from ...toolstatus import ToolStatus
from ...validate import Result
from ..base import Target
from .bench import bench_vulkan, static_estimate, sweep_variants
from .code import COMP_TEMPLATE
from .options import NAME, VulkanModel, vulkan_options
from .plan import VulkanPlan, plan_vulkan
from .toolchain import status
from .validate import validate_vulkan


class Vulkan(Target):
    name = NAME
    summary = "Vulkan GLSL 450 compute (glslangValidator -> SPIR-V, lavapipe): seed 002 tiles, vec4 channels"
    files = (OutputFile(pattern="{name}.comp", template=COMP_TEMPLATE),
             OutputFile(pattern="{name}.dispatch.txt", template="vulkan/dispatch.txt.j2"))
    dtypes = ("float32", "float16")
    options_model = VulkanModel

    def target_plan(self, config: Config, plan: Plan) -> VulkanPlan:
        return plan_vulkan(config, plan)

    def context(self, config: Config, plan: Plan) -> dict[str, Any]:
        return {"vk": self.target_plan(config, plan)}  # tiles, dispatch sizes, index text

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def validate(self, config: Config, seed: int) -> Result:
        return validate_vulkan(config, seed)

    def bench(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        return bench_vulkan(config, options)

    def sweep_variants(self, config: Config) -> list[tuple[str, Config]]:
        return sweep_variants(config)

    def sweep_measure(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        """Timed on this machine's device, or, for a profile whose compiler is here and GPU is not (rdna2),
        ranked by that compiler's static estimate."""
        device = vulkan_options(config).device
        if device in self.stats_devices:
            return [static_estimate(config, self.stats(config, device))]
        return bench_vulkan(config, options)

    def binaries(self, config: Config, plan: Plan) -> tuple[dict[str, bytes], str]:
        """One SPIR-V module per op (<name>.op<j>.spv, entry point main), what a Vulkan application loads."""
        import shutil

        from .code import compile_ops, glsl_source

        if shutil.which("glslangValidator") is None:
            return {}, "vulkan: glslangValidator not found, wrote the GLSL sources only (apt-get install glslang-tools)"
        vk = plan_vulkan(config, plan)
        spirv = compile_ops(glsl_source(plan, vk), vk)
        return {f"{config.name}.op{op.index}.spv": code for op, code in zip(vk.ops, spirv)}, self._spill_note(
            config, vk, spirv)

    def _spill_note(self, config: Config, vk: VulkanPlan, spirv: tuple[bytes, ...]) -> str:
        """For a profile whose compiler is here (rdna2), a warning naming each op that spills: an explicit tile
        still builds, but it would crawl on that GPU."""
        device = vulkan_options(config).device
        if device not in self.stats_devices:
            return ""
        from .shaderstats import rdna2_stats
        from .validate import stages

        try:
            stats = rdna2_stats(list(spirv), [stage.kinds for stage in stages(vk, spirv)])
        except KernelgenError as error:  # no radeon driver here: the sources and SPIR-V are still right
            return f"vulkan: {config.name}: no {device} compiler statistics ({error})"
        spills = [f"op {op.index} spills {s.spilled_vgprs} VGPRs and {s.spilled_sgprs} SGPRs"
                  for op, s in zip(vk.ops, stats) if s.spilled_vgprs or s.spilled_sgprs]
        return (f"warning: {config.name}: on {device} (RADV's ACO) {'; '.join(spills)}: a smaller vulkan.ivc_tile "
                f"(or the profile's default) keeps the accumulators in registers" if spills else "")

    stats_devices = ("rdna2",)

    def stats(self, config: Config, device: str) -> list[dict[str, Any]]:
        """Each op compiled by RADV's ACO for a null RDNA2 device (registers, spills, waves per SIMD, code
        size, ACO's static latency and inverse throughput)."""
        from ...planner import plan as make_plan
        from .code import compile_ops, glsl_source
        from .shaderstats import rdna2_stats
        from .validate import stages

        the_plan = make_plan(config)
        vk = plan_vulkan(config, the_plan)
        spirv = compile_ops(glsl_source(the_plan, vk), vk)
        stats = rdna2_stats(list(spirv), [stage.kinds for stage in stages(vk, spirv)])
        return [{"op": op.index, "label": op.label, **s.as_dict()} for op, s in zip(vk.ops, stats)]
