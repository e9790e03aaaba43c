"""Vulkan GLSL 450 compute (seed 002's uVkCompute kernel): one shader source per config,
one dispatch per conv2d (compiled with -DKG_OP=<op>), plus each op's dispatch (a text file) and, when glslang
is installed, its SPIR-V module (written by build, never a golden: it depends on the glslang version)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ...config import Config
from ...emit import OutputFile
from ...errors import KernelgenError
from ...measure.compare import Roundoff
from ...measure.records import DeviceStats, OpEstimate, Timings
from ...plan_types import Plan
from ...reference import HALF_UNIT_ROUNDOFF
from ...toolstatus import ToolStatus
from ..base import Job
from ..gpu.api import VULKAN
from ..gpu.dispatch import GpuDispatch, GpuTensor
from ..gpu.parts import PARTS, PartSpec
from ..gpu.program import GpuTarget
from .code import COMP_TEMPLATE, compile_ops
from .network import FILES as NETWORK_FILES, memory_note, network_files as network_driver, network_program, \
    pack_weights, refusal
from .options import NAME, VulkanModel, vulkan_options
from .plan import VulkanPlan, plan_vulkan
from .program import VulkanProgram, compile_program, launches, stages
from .sweep import static_estimate, sweep_variants, tile_variants
from .toolchain import TARGET_ENV, status

if TYPE_CHECKING:
    from ...network.manifest import Network
    from ...network.program import ProgramBuild
    from ...network.weights import WeightsPlan


class Vulkan(GpuTarget[VulkanPlan, VulkanProgram]):
    name = NAME
    api = VULKAN
    summary = "Vulkan GLSL 450 compute (glslangValidator -> SPIR-V, lavapipe): seed 002 tiles, vec4 channels"
    files = (OutputFile(pattern="{name}.comp", template=COMP_TEMPLATE),
             OutputFile(pattern="{name}.dispatch.txt", template="vulkan/dispatch.txt.j2"))
    source_suffix = ".comp"

    def source_note(self, config: Config) -> str:
        return f"Compile each op with glslangValidator -V --target-env {TARGET_ENV} -DKG_OP=<op> (as validated)."
    options_model = VulkanModel
    stats_devices = ("rdna2", "adreno-7xx", "adreno-6xx", "mali-valhall")

    def target_plan(self, config: Config, plan: Plan) -> VulkanPlan:
        return plan_vulkan(config, plan)

    def context(self, config: Config, plan: Plan, target_plan: VulkanPlan) -> dict[str, Any]:
        return {"vk": target_plan}  # tiles, dispatch sizes, index text

    network_file_names = NETWORK_FILES

    def network_files(self, network: Network, jobs: Mapping[str, Job[VulkanPlan]], weights: WeightsPlan
                      ) -> dict[str, str]:
        """network.c/.h: every dispatch of the network in one command buffer over four device memories, the
        SPIR-V embedded (network.py)."""
        return network_driver(network, self, jobs, weights)

    def network_refusal(self, network: Network) -> str:
        return refusal(network)

    def network_note(self, network: Network, jobs: Mapping[str, Job[VulkanPlan]]) -> str:
        return memory_note(network, self, jobs)

    def network_program(self, network: Network, jobs: Mapping[str, Job[VulkanPlan]]) -> ProgramBuild:
        return network_program(network, jobs)  # gcc over the Vulkan loader; a pipeline cache beside it

    def pack_weights(self, job: Job[VulkanPlan], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return pack_weights(job, logical)  # as each binding holds them (the target's own filter packing)

    def toolchain(self) -> tuple[ToolStatus, ...]:
        from .mobilestats import compiler_status

        return status() + compiler_status()

    def compile(self, job: Job[VulkanPlan], workdir: Path, device: str | None = None) -> VulkanProgram:
        return compile_program(job, device)

    def launches(self, job: Job[VulkanPlan]) -> tuple[tuple[GpuTensor, ...], tuple[GpuDispatch, ...]]:
        return launches(job)

    def roundoff(self, job: Job[VulkanPlan]) -> Roundoff:
        """float16 kernels store every tensor in half and accumulate in f16vec4 arithmetic: both round by at
        most 2^-11; float32 kernels: 2^-24 arithmetic, exact storage."""
        half = HALF_UNIT_ROUNDOFF if job.config.dtype == "float16" else None
        return Roundoff(accumulate=half, storage=half) if half else Roundoff()

    def sweep_variants(self, config: Config) -> list[tuple[str, Config]]:
        return sweep_variants(config)

    def bench_notes(self, jobs: list[Job[VulkanPlan]]) -> list[str]:
        """On lavapipe, the FMA probe shape the ratios were taken against (chosen once on this host), and each
        default tile whose multiply-add spills overflow this host's L1d, with what fits."""
        from .lavapipe_host import current, plan_tile_notes
        from .probe_choice import probe_note

        tiles = [op.ivc_tile for job in jobs for op in job.target_plan.ops if not op.is_pool]
        host = current() if tiles else None
        return [probe_note(host), *plan_tile_notes(host, tiles)] if host is not None else []

    def estimate(self, job: Job[VulkanPlan]) -> Timings | None:
        """For a profile whose compiler is here and GPU is not (rdna2), that compiler's static estimate."""
        device = vulkan_options(job.config).device
        return static_estimate(job.target_plan, device, self.stats(job, device)) if device in self.stats_devices \
            else None

    def binaries(self, job: Job[VulkanPlan]) -> tuple[dict[str, bytes], str]:
        """One SPIR-V module per op (<name>.op<j>.spv, entry point main), what a Vulkan application loads."""
        if shutil.which("glslangValidator") is None:
            return {}, "vulkan: glslangValidator not found, wrote the GLSL sources only (apt-get install glslang-tools)"
        vk = job.target_plan
        spirv = compile_ops(job.files[f"{job.config.name}.comp"], vk)
        return {f"{job.config.name}.op{op.index}.spv": code for op, code in zip(vk.ops, spirv)}, \
            self._spill_note(job, spirv)

    def binary_names(self, config: Config) -> tuple[str, ...]:
        """binaries()'s names: one module per op of the config (plan_vulkan plans a dispatch per op, pools too)."""
        if shutil.which("glslangValidator") is None:
            return ()
        return tuple(f"{config.name}.op{j}.spv" for j in range(1, len(config.ops) + 1))

    def _spill_note(self, job: Job[VulkanPlan], spirv: tuple[bytes, ...]) -> str:
        """For a profile whose compiler is here (rdna2, the Adreno and Mali profiles), a warning naming each op
        that spills: an explicit tile still builds, but it would crawl on that GPU."""
        options = vulkan_options(job.config)
        device = options.device
        explicit = options.ivc_tile is not None or options.wg_tile is not None
        # the mobile profiles' defaults are spill-free (tests/test_mobile_stats.py), and PanVK takes seconds a kernel
        if device not in self.stats_devices or device != "rdna2" and not explicit:
            return ""
        try:
            stats = self._compiled_stats(job, spirv, device)
        except KernelgenError as error:  # no driver here: the sources and SPIR-V are still right
            return f"vulkan: {job.config.name}: no {device} compiler statistics ({error})"
        spills = [_spills(s, device) for s in stats if s.spills]
        return (f"warning: {job.config.name}: on {device} ({short_compiler(device)}) {'; '.join(spills)}: "
                f"{_SMALLER_TILE}" if spills else "")

    def spill_warning(self, row: DeviceStats, device: str, compiler: str) -> str:
        if not row.spills:
            return ""
        if device == "rdna2":
            return (f"op {row.op} spills {row.spilled_vgprs} VGPRs and {row.spilled_sgprs} SGPRs ({row.scratch_bytes} "
                    f"bytes of scratch) on {device}: {_SMALLER_TILE}")
        return (f"op {row.op} spills {row.spilled_vgprs} registers and fills {row.fills} at {row.vgprs} registers, "
                f"occupancy {row.waves}, on {device} ({compiler}): {_SMALLER_TILE}")

    def stats_parts(self) -> dict[str, str]:
        from .mobilestats import GPUS

        return {name: gpu.profile for name, gpu in GPUS.items()}

    def stats_compiler(self, device: str, gpu: str | None = None) -> str:
        return stats_compiler(device, gpu)

    def time_estimate(self, job: Job[VulkanPlan], rows: tuple[DeviceStats, ...], device: str,
                      gpu: str | None = None) -> tuple[OpEstimate, ...]:
        from .estimate import estimate_kernel

        part = _part(device, gpu)
        return estimate_kernel(job.target_plan, rows, part) if part is not None else ()

    def stats_target_occupancy(self, device: str, gpu: str | None = None) -> tuple[int, str] | None:
        part = _part(device, gpu)
        return (part.target_occupancy, part.occupancy_unit) if part is not None else None

    def stats_assumptions(self, device: str, gpu: str | None = None) -> str:
        part = _part(device, gpu)
        return part.assumptions() if part is not None else ""

    def tile_variants(self, config: Config) -> list[tuple[str, Config]]:
        return tile_variants(config)

    def stats(self, job: Job[VulkanPlan], device: str, gpu: str | None = None) -> tuple[DeviceStats, ...]:
        """Each op compiled by the device's own compiler without the GPU: RADV's ACO for a null RDNA2 device;
        Turnip's ir3 (Adreno) or PanVK's Valhall compiler (Mali) over Mesa's noop DRM shims, as `gpu` (one
        part of the profile; default its first)."""
        return self._compiled_stats(job, compile_ops(job.files[f"{job.config.name}.comp"], job.target_plan),
                                    device, gpu)

    def _compiled_stats(self, job: Job[VulkanPlan], spirv: tuple[bytes, ...], device: str,
                        gpu: str | None = None) -> tuple[DeviceStats, ...]:
        from .mobilestats import gpu_for, mobile_stats
        from .shaderstats import rdna2_stats

        vk = job.target_plan
        kinds = [stage.kinds for stage in stages(vk, spirv)]
        stats = rdna2_stats(list(spirv), kinds) if device == "rdna2" else \
            mobile_stats(gpu_for(device, gpu), list(spirv), kinds)
        return tuple(DeviceStats(op=op.index, label=op.label, **s) for op, s in zip(vk.ops, stats))


_SMALLER_TILE = "a smaller vulkan.ivc_tile (or the profile's default) keeps the accumulators in registers"


def _spills(row: DeviceStats, device: str) -> str:
    """One op's spills as a build warning names them, in the units of `device`'s compiler."""
    if device == "rdna2":
        return f"op {row.op} spills {row.spilled_vgprs} VGPRs and {row.spilled_sgprs} SGPRs"
    return (f"op {row.op} spills {row.spilled_vgprs} registers ({row.fills} fills, {row.vgprs} registers, "
            f"occupancy {row.waves})")


def short_compiler(device: str) -> str:
    """The compiler behind a statistics profile in a few words (warnings)."""
    from .mobilestats import gpu_for

    if device == "rdna2":
        return "RADV's ACO"
    gpu = gpu_for(device, None)
    return f"{gpu.driver.compiler} as {gpu.name}"


def _part(device: str, gpu: str | None) -> PartSpec | None:
    """The figures of the part `stats` compiles for (gpu/parts.py), when they are known (not rdna2's)."""
    from .mobilestats import gpu_for

    return None if device == "rdna2" else PARTS.get(gpu_for(device, gpu).name)


def stats_compiler(device: str, gpu: str | None = None) -> str:
    """The compiler behind a statistics profile, as reports name it."""
    from .mobilestats import compiler_name, gpu_for
    from .shaderstats import RDNA2_FAMILY

    if device == "rdna2":
        return f"Mesa RADV/ACO, null {RDNA2_FAMILY} device (RADV_FORCE_FAMILY={RDNA2_FAMILY})"
    return compiler_name(gpu_for(device, gpu))
