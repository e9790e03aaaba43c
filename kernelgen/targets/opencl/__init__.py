"""OpenCL C for pyopencl (PoCL here): one kernel per conv2d, tensors in image2d textures
(layouts with an axis separator) or in flat buffers with float8/float16 vector math."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...config import Config
from ...emit import OutputFile
from ...measure.compare import Roundoff
from ...measure.records import DeviceStats, OpEstimate
from ...network.manifest import Network
from ...network.program import ProgramBuild
from ...network.weights import WeightsPlan
from ...plan_types import Plan
from ...reference import FLOAT32_UNIT_ROUNDOFF, HALF_UNIT_ROUNDOFF
from ...toolstatus import ToolStatus
from ..base import Job
from ..gpu.api import OPENCL
from ..gpu.dispatch import GpuDispatch, GpuTensor
from ..gpu.program import GpuTarget
from .network import BUILD_OPTIONS, FILES as NETWORK_FILES, TEMPLATES as NETWORK_TEMPLATES, network_files, network_note, network_program, pack_weights, \
    refusal as network_refusal
from .options import NAME, OpenCLModel, half_arithmetic
from .plan import OpenCLPlan, plan_opencl
from .runtime import OpenCLProgram, launches, open_program
from .sweep import sweep_variants
from .toolchain import status


class OpenCL(GpuTarget[OpenCLPlan, OpenCLProgram]):
    name = NAME
    api = OPENCL
    summary = "OpenCL C (pyopencl/PoCL): image2d textures or float8/16 buffers, one kernel per conv2d"
    files = (OutputFile(pattern="{name}.cl", template="opencl/kernels.cl.j2"),
             OutputFile(pattern="{name}.launch.json", template="opencl/launch.json.j2"))
    source_suffix = ".cl"

    def source_note(self, config: Config) -> str:
        # the kernels' float results are held to numpy with IEEE rounding: a fast-math option would void that
        return f'Build with clBuildProgram options "{BUILD_OPTIONS}" (as validated: IEEE float, no fast-math options).'
    # the kernels' statements (imported by kernels.cl.j2), and what `kernelgen build network.yaml` renders beside the
    # kernels (depfiles)
    includes = ("opencl/conv.cl.j2", *NETWORK_TEMPLATES)
    options_model = OpenCLModel
    torch_reference = True

    def target_plan(self, config: Config, plan: Plan) -> OpenCLPlan:
        return plan_opencl(config, plan)

    def context(self, config: Config, plan: Plan, target_plan: OpenCLPlan) -> dict[str, Any]:
        return {"ocl": target_plan}  # tiles, NDRange, the values each kernel is written from

    def toolchain(self) -> tuple[ToolStatus, ...]:
        from .rusticl_stats import compiler_status

        return status() + compiler_status()

    # compiler statistics: rusticl's freedreno (ir3) and panfrost (Valhall) compilers over noop DRM shims (mobile.py)
    stats_devices = ("adreno-7xx", "adreno-6xx", "mali-valhall")

    def stats(self, job: Job[OpenCLPlan], device: str, gpu: str | None = None) -> tuple[DeviceStats, ...]:
        from .mobile import kernel_stats

        return kernel_stats(job, device, gpu)

    def stats_compiler(self, device: str, gpu: str | None = None) -> str:
        from .mobile import stats_compiler

        return stats_compiler(device, gpu)

    def stats_parts(self) -> dict[str, str]:
        from .mobile import stats_parts

        return stats_parts()

    def time_estimate(self, job: Job[OpenCLPlan], rows: tuple[DeviceStats, ...], device: str,
                      gpu: str | None = None) -> tuple[OpEstimate, ...]:
        from .mobile import estimate, part

        spec = part(device, gpu)
        return estimate(job.target_plan, rows, spec) if spec is not None else ()

    def stats_target_occupancy(self, device: str, gpu: str | None = None) -> tuple[int, str] | None:
        from .mobile import part

        spec = part(device, gpu)
        return (spec.target_occupancy, spec.occupancy_unit) if spec is not None else None

    def stats_assumptions(self, device: str, gpu: str | None = None) -> str:
        from .mobile import part

        spec = part(device, gpu)
        return spec.assumptions() if spec is not None else ""

    def spill_warning(self, row: DeviceStats, device: str, compiler: str) -> str:
        from .mobile import spill_warning

        return spill_warning(row, device, compiler)

    def compile(self, job: Job[OpenCLPlan], workdir: Path, device: str | None = None) -> OpenCLProgram:
        return open_program(job, device)  # PoCL compiles each program on its first launch

    def launches(self, job: Job[OpenCLPlan]) -> tuple[tuple[GpuTensor, ...], tuple[GpuDispatch, ...]]:
        return launches(job.target_plan)

    def roundoff(self, job: Job[OpenCLPlan]) -> Roundoff:
        """float16 stores in half; with half arithmetic (the profile's or opencl.half_arithmetic) it also
        computes in it."""
        half_math = half_arithmetic(job.config)
        return Roundoff(accumulate=HALF_UNIT_ROUNDOFF if half_math else FLOAT32_UNIT_ROUNDOFF,
                        storage=HALF_UNIT_ROUNDOFF if job.config.dtype == "float16" else 0.0)

    def sweep_variants(self, config: Config) -> list[tuple[str, Config]]:
        return sweep_variants(config)

    # network.h / network.c over the OpenCL ICD loader, and <network>_run around them (network.py)
    network_file_names = NETWORK_FILES

    def pack_weights(self, job: Job[OpenCLPlan], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return pack_weights(job, logical)

    def network_refusal(self, network: Network) -> str:
        return network_refusal(network)

    def network_files(self, network: Network, jobs: Mapping[str, Job[OpenCLPlan]], weights: WeightsPlan
                      ) -> dict[str, str]:
        return network_files(network, self, jobs, weights)

    def network_note(self, network: Network, jobs: Mapping[str, Job[OpenCLPlan]]) -> str:
        return network_note(network, self, jobs)

    def network_program(self, network: Network, jobs: Mapping[str, Job[OpenCLPlan]]) -> ProgramBuild:
        return network_program(network, jobs)
