"""Per-vendor tuning of the GPU targets, as tables: the tile x work-group spaces `bench --sweep` tries on each kind
of device, and the FMA probe's candidate shapes on each API's device here. Each number's measurement is said beside
it; the device limits themselves are kernelgen/devices.py's profiles."""
from __future__ import annotations

from dataclasses import dataclass

from .probes import FmaShape


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSizes:
    """The probes' grids on one API's device: the FMA probe's work-groups (a fixed count, or so many per compute
    unit) and the triad's work-group size."""

    fma_work_group: int
    fma_groups: int
    per_compute_unit: bool  # fma_groups per compute unit (OpenCL reports them), else in all
    triad_work_group: int

    def fma_items(self, compute_units: int = 1) -> int:
        return self.fma_work_group * self.fma_groups * (compute_units if self.per_compute_unit else 1)


@dataclass(frozen=True, slots=True)
class SweepSpace:
    tiles: tuple[tuple[int, int, int], ...]  # per-work-item tiles
    sizes: tuple[tuple[int, int, int], ...]  # work-group sizes


# OpenCL on PoCL, by kind of loads (opencl/plan.py variant_of): tile [oh, ow, oc4] x local size. Vector tiles hold
# 2-4 float16 accumulators per pixel (an AVX-512 core has 32 x 16-float registers); with activations in images,
# wider channel blocks spare PoCL's slow texel reads; filter texels cap every tile.
_OPENCL_LOCAL = ((8, 1, 1), (16, 1, 1), (4, 2, 1))
OPENCL_SWEEPS = {"vectors": SweepSpace(((1, 4, 8), (1, 4, 16), (2, 4, 8), (1, 8, 8), (2, 2, 16), (1, 2, 16)),
                                       _OPENCL_LOCAL),
                 "vectors+images": SweepSpace(((1, 4, 16), (2, 2, 16), (2, 2, 32), (1, 1, 64)), _OPENCL_LOCAL),
                 "texels": SweepSpace(((1, 4, 2), (2, 2, 4), (2, 4, 2), (4, 4, 1)), _OPENCL_LOCAL)}

# Vulkan on lavapipe: invocation tiles [oh, ow, oc] x workgroup sizes [x, y, z] (seed 002's table tried 1x16x16,
# 2x8x16, 4x4x16, 8x2x16 with WGSize 4x4x1 and 4x2x2), plus the shapes that fetch least per multiply-add with every
# tap unrolled (4x16x8, 8x8x8, 4x8x16, 8x16x4: 64-128 pixels, 4,608 unrolled FMAs per channel chunk) and two whose
# body keeps kh as a loop. lavapipe vectorizes x only (8 lanes): 4x2x2 fills half a subgroup and runs at half
# speed; 8x1x1 and 8x4x1 are within noise of each other on seed 002 (8x1x1 ahead with wide_store). The sweep keeps
# the config's wide_store: with it, tiles whose oc is not a multiple of 8 are skipped like any permutation the
# problem cannot take.
LAVAPIPE_SWEEP = SweepSpace(((1, 16, 16), (2, 8, 16), (4, 4, 16), (8, 2, 16), (1, 32, 16), (4, 8, 16), (4, 16, 8),
                             (8, 8, 8), (8, 16, 4), (4, 8, 32)),
                            ((8, 1, 1), (8, 4, 1), (4, 2, 2)))
# A GPU (rdna2, Adreno, Mali) sweeps the tiles its register file holds (rdna2: up to 2x4 pixels x 8 channels stay
# under 128 VGPRs, see devices.py) in wave-sized workgroups; lavapipe's tiles above spill thousands of VGPRs there.
GPU_SWEEP = SweepSpace(((1, 2, 4), (2, 2, 4), (2, 4, 4), (1, 4, 8), (2, 4, 8), (4, 4, 4)),
                       ((16, 4, 1), (64, 1, 1), (8, 8, 1)))
VULKAN_SWEEPS = {"lavapipe": LAVAPIPE_SWEEP}  # every other Vulkan profile: GPU_SWEEP


# The FMA probe's candidate shapes on each API's device here (gpu/probes.py FmaShape: lanes, accumulators, unroll,
# steps); the core times each once per device and keeps the fastest (measure/probes.py).
# PoCL: 128 lanes of independent chains each: 8 x float16 (AVX-512's 16 lanes), 16 x float8 (AVX2's 8). On an
# AVX-512 CPU float16 chains run at twice the rate of float8 ones (424 against 226 GFLOP/s on 2 cores here), on an
# AVX2 CPU a float16 is two registers.
OPENCL_FMA_SHAPES = (FmaShape(16, 8, 1, 4096), FmaShape(8, 16, 1, 4096))
# lavapipe runs 8 (AVX2) or 16 (AVX-512) invocations per vector register, so a vec4 accumulator takes 4 registers
# and a float one 1:
# - AVX-512 (32 registers, Mesa with FMA): 3 vec4 accumulators ran at 152 GFLOP/s against 121 for 2 (72 for 1;
#   4 spilled: 66).
# - AVX2 Zen2 with Mesa 22.3 / LLVM 15: lavapipe lowers fma() to vmulps + vaddps (no vfmadd in the JIT's code),
#   and LLVM emits each accumulator's chain back to back, so the core overlaps only the chains its reorder window
#   holds: one vec4 (4 chains of 64 steps) read 67 GFLOP/s where 2 and 3 vec4 read 23, and 12 float chains of 4
#   steps per trip 33-41.
# 16,384 steps per accumulator for every shape: far below lavapipe's 65,535 back-edges a loop.
VULKAN_FMA_SHAPES = (FmaShape(4, 1, 64, 16384), FmaShape(4, 2, 64, 16384), FmaShape(4, 3, 64, 16384),
                     FmaShape(1, 8, 8, 16384), FmaShape(1, 12, 4, 16384))

# PoCL: many more groups than compute units, so every core stays busy.
OPENCL_PROBE_SIZES = ProbeSizes(fma_work_group=64, fma_groups=16, per_compute_unit=True, triad_work_group=256)
# lavapipe: 0.5-3.2 GFLOP per FMA dispatch: 20-50 ms here.
VULKAN_PROBE_SIZES = ProbeSizes(fma_work_group=64, fma_groups=128, per_compute_unit=False, triad_work_group=64)
