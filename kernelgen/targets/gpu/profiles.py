"""Per-vendor tuning of the GPU targets, as tables: the tile x work-group spaces `bench --sweep` tries on each kind
of device, and the FMA probe's candidate shapes on each API's device here. Each number's measurement is said beside
it; the device limits themselves are kernelgen/devices.py's profiles."""
from __future__ import annotations

from dataclasses import dataclass


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
