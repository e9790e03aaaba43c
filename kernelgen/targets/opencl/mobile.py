"""`kernelgen stats --target opencl --device adreno-7xx|adreno-6xx|mali-valhall` (issue 47): each launched kernel
of the plan compiled by rusticl for the part (rusticl_stats.py), and its estimated time there, by the Vulkan
target's bound model (vulkan/estimate.py: the compiler's counts per pass x passes x work-items over the part's
cores and clock, against every tensor the kernel binds moved once over its DRAM bandwidth), with two OpenCL
readings of "a pass":

- The kernels' loops (a conv's kh x kw x 4-channel groups, a pool's window) have constant trip counts, which the
  compiler may unroll. A shader reported with 0 loops was unrolled whole: its count is every trip, one pass. One
  that kept loops is charged its whole count for every trip of the kernel's loop nest, an upper bound (tightest
  where the loop body dominates), as the Vulkan model charges its shaders.
- Work-items are the global size, rounded up to whole work-groups as launched.
"""
from __future__ import annotations

import math
from dataclasses import replace

from ...errors import ToolchainError
from ...measure.records import DeviceStats, OpEstimate
from ..base import Job
from ..gpu.parts import PARTS, PartSpec
from ..vulkan.estimate import unit_cycles
from ..vulkan.mobilestats import GPUS, gpu_for
from .model import ConvBody, Kernel, PoolBody
from .network import BUILD_OPTIONS
from .plan import OpenCLPlan
from .rusticl_stats import compiler_name, program_stats

DEVICES = ("adreno-7xx", "adreno-6xx", "mali-valhall")
ELEMENT_BYTES = {"float32": 4, "float16": 2}
SMALLER_TILE = "a smaller opencl.tile (or the profile's default) keeps the accumulators in registers"


def kernel_stats(job: Job[OpenCLPlan], device: str, gpu: str | None) -> tuple[DeviceStats, ...]:
    """Each launched kernel (launch order) as the part's compiler reports it; op = its place in the launch."""
    plan = job.target_plan
    found = program_stats(gpu_for(device, gpu), job.files[f"{job.config.name}.cl"], BUILD_OPTIONS,
                          len(plan.kernels) + len(plan.half_kernels))
    missing = [k.name for k in plan.kernels if k.name not in found]
    if missing:
        raise ToolchainError(f"rusticl compiled no kernel {', '.join(missing)}")
    return tuple(DeviceStats(op=i, label=k.name, **found[k.name]) for i, k in enumerate(plan.kernels, 1))


def stats_compiler(device: str, gpu: str | None) -> str:
    return compiler_name(gpu_for(device, gpu))


def stats_parts() -> dict[str, str]:
    return {name: g.profile for name, g in GPUS.items()}


def part(device: str, gpu: str | None) -> PartSpec | None:
    return PARTS.get(gpu_for(device, gpu).name)


def loop_trips(kernel: Kernel) -> int:
    """Runs of the innermost loop's body per work-item, as the kernel's source loops."""
    body = kernel.body
    if isinstance(body, ConvBody):
        return body.taps[0] * body.taps[1] * max(1, body.groups)
    if isinstance(body, PoolBody):
        return body.kernel[0] * body.kernel[1]
    return 1


def traffic_bytes(plan: OpenCLPlan, kernel: Kernel) -> int:
    size = ELEMENT_BYTES[plan.dtype]
    return sum(plan.storage(name).elements * size for name in dict.fromkeys(kernel.args))


def estimate(plan: OpenCLPlan, rows: tuple[DeviceStats, ...], spec: PartSpec) -> tuple[OpEstimate, ...]:
    out = []
    for kernel, row in zip(plan.kernels, rows, strict=True):
        pipes = dict(row.pipes)
        passes = 1 if pipes.get("loops", 0) == 0 else loop_trips(kernel)
        counted = replace(row, pipes=tuple((k, v) for k, v in row.pipes if k != "loops"))
        items = math.prod(kernel.global_size)
        per_core = items * passes / spec.cores
        units = tuple((unit, cycles * per_core / spec.clock_hz) for unit, cycles in unit_cycles(counted, spec))
        moved = traffic_bytes(plan, kernel)
        out.append(OpEstimate(op=row.op, label=row.label, invocations=items, passes=passes, unit_seconds=units,
                              traffic_bytes=moved, memory_seconds=moved / (spec.dram_gbps * 1e9)))
    return tuple(out)


def spill_warning(row: DeviceStats, device: str, compiler: str) -> str:
    if not row.spills:
        return ""
    return (f"kernel {row.label} spills {row.spilled_vgprs} registers and fills {row.fills} at {row.vgprs} "
            f"registers, occupancy {row.waves}, on {device} ({compiler}): {SMALLER_TILE}")
