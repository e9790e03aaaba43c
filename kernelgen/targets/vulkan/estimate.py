"""A Vulkan kernel's estimated time on a phone's GPU, from what its own compiler says of each op's shader
(`kernelgen stats`, mobilestats.py) and the part's public figures (gpu/parts.py). The bound model, stated:

- Compute. Both compilers count one pass over the shader's code, loops once. An op's invocation runs its
  innermost kept loop `passes` times (the plan's multiply-adds per invocation over those one trip holds), and the
  model charges the whole shader's count for every pass: prologue, index arithmetic and store are counted per pass,
  so the compute side is an upper bound, tightest where the loop body dominates (large channel counts).
  - Valhall: the shaderdb line's cycles per thread on each unit (fma, cvt, sfu, v, t, ls), Mesa's normalisation of
    a core's throughput (gpu/parts.py VALHALL_STATS); a unit's time = cycles x passes x invocations / cores / clock,
    and the busiest unit bounds the op. Mesa counts every load or store instruction as one cycle of its thread, but
    the load/store unit serves a whole 16-thread warp's instruction at once, one 64-byte cache line per cycle (Arm,
    "The Valhall shader core"): the kernels' vec4 accesses, 16 bytes a thread, take 4 lines per warp, a quarter of
    a cycle per thread (VALHALL_LS_CYCLES); a warp reading one address (a filter value) takes less.
  - Adreno (ir3): instructions issued per fiber, one per ALU lane and cycle: instructions x passes x invocations
    / (cores x lanes per core) / clock. The sync-stall estimates are left out: at the target occupancy other waves
    hide them.
- Memory: every tensor the op reads or writes (input, filter, bias, residual or scale, output) moved once between
  DRAM and the GPU, over the part's DRAM bandwidth: a lower bound, caches assumed to catch the reuse.
- An op's time is the larger of the two; a kernel's the sum of its ops' (dispatch overhead and barriers left out);
  a network's the sum of its kernels'.
"""
from __future__ import annotations

import math

from ...measure.records import DeviceStats, OpEstimate
from ..gpu.parts import PartSpec
from .mobilestats import VALHALL_LS_CYCLES
from .plan import VulkanOp, VulkanPlan
from .pool import VulkanPool

ELEMENT_BYTES = {"float32": 4, "float16": 2}
VALHALL_LANES = 64  # the FMA and CVT lanes per core Mesa's Valhall cycle counts are normalised to
ADRENO_UNIT = "alu"  # ir3's instructions issued


def passes(op: VulkanOp | VulkanPool) -> int:
    """Runs of the innermost kept loop's body per invocation: a conv's vec4 multiply-adds per invocation over the
    ones one trip holds (`body`); a pool's window positions."""
    kh, kw = op.geo.kernel
    if op.is_pool:
        return kh * kw
    oh, ow, k4 = op.ivc_tile
    per_group = op.geo.in_channels // op.geo.groups
    return max(1, math.ceil(oh * ow * k4 * kh * kw * per_group / op.body))


def invocations(op: VulkanOp | VulkanPool) -> int:
    return math.prod(op.groups) * math.prod(op.wg_size)


def traffic_bytes(vk: VulkanPlan, op: VulkanOp | VulkanPool) -> int:
    """The bytes of every buffer the op binds, each moved once."""
    if op.is_pool:
        used = (op.src, op.dst, op.scale)
    else:
        used = (op.src, op.filter, op.dst, op.bias, op.res_buffer)
    size = ELEMENT_BYTES[vk.dtype]
    return sum(vk.buffers[b].elements * size for b in dict.fromkeys(used) if b >= 0)


def unit_cycles(stats: DeviceStats, part: PartSpec) -> tuple[tuple[str, float], ...]:
    """Per unit, one invocation's cycles on one core for one pass over the shader."""
    pipes = dict(stats.pipes)
    if "issued" in pipes:  # ir3: one instruction per lane and cycle, the core's lanes shared by its fibers
        return ((ADRENO_UNIT, pipes["issued"] / part.lanes_per_core),)
    if not pipes:
        raise ValueError(f"op {stats.op}: the compiler reported no per-unit counts to estimate from")
    lanes = VALHALL_LANES / part.lanes_per_core  # the arithmetic units' cycles, on this part's lanes
    scale = {"fma": lanes, "cvt": lanes, "ls": VALHALL_LS_CYCLES}
    return tuple((unit, cycles * scale.get(unit, 1.0)) for unit, cycles in pipes.items())


def estimate_op(vk: VulkanPlan, op: VulkanOp | VulkanPool, stats: DeviceStats, part: PartSpec) -> OpEstimate:
    count, runs = invocations(op), passes(op)
    per_core = count * runs / part.cores
    units = tuple((unit, cycles * per_core / part.clock_hz) for unit, cycles in unit_cycles(stats, part))
    moved = traffic_bytes(vk, op)
    return OpEstimate(op=op.index, label=op.label, invocations=count, passes=runs, unit_seconds=units,
                      traffic_bytes=moved, memory_seconds=moved / (part.dram_gbps * 1e9))


def estimate_kernel(vk: VulkanPlan, stats: tuple[DeviceStats, ...], part: PartSpec) -> tuple[OpEstimate, ...]:
    return tuple(estimate_op(vk, op, s, part) for op, s in zip(vk.ops, stats, strict=True))
