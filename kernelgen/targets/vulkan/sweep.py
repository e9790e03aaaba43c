"""What `bench --sweep` tries for the vulkan target: invocation tile x workgroup permutations, and, for a device
profile whose GPU is not here (rdna2), the static estimate that ranks them instead of a clock."""
from __future__ import annotations

import math

from ...config import Config, with_options
from ...devices import PROFILES
from ...measure.records import DeviceStats, Timings
from .options import NAME, vulkan_options
from .plan import VulkanPlan
from .program import label

# Sweep space: invocation tiles [oh, ow, oc] x workgroup sizes [x, y, z] (seed 002's table
# tried 1x16x16, 2x8x16, 4x4x16, 8x2x16 with WGSize 4x4x1 and 4x2x2), plus the shapes that
# fetch least per multiply-add with every tap unrolled (4x16x8, 8x8x8, 4x8x16, 8x16x4: 64-128
# pixels, 4,608 unrolled FMAs per channel chunk) and two whose body keeps kh as a loop.
# lavapipe vectorizes x only (8 lanes): 4x2x2 fills half a subgroup and runs at half speed;
# 8x1x1 and 8x4x1 are within noise of each other on seed 002 (8x1x1 ahead with wide_store).
# The sweep keeps the config's wide_store: with it, tiles whose oc is not a multiple of 8
# are skipped like any permutation the problem cannot take.
SWEEP_TILES = ((1, 16, 16), (2, 8, 16), (4, 4, 16), (8, 2, 16), (1, 32, 16), (4, 8, 16), (4, 16, 8),
               (8, 8, 8), (8, 16, 4), (4, 8, 32))
SWEEP_WG = ((8, 1, 1), (8, 4, 1), (4, 2, 2))
# A GPU profile sweeps the tiles a GPU's register file holds (rdna2: up to 2x4 pixels x 8 channels stay under
# 128 VGPRs, see devices.py) in wave-sized workgroups; lavapipe's tiles above spill thousands of VGPRs there.
GPU_SWEEP_TILES = ((1, 2, 4), (2, 2, 4), (2, 4, 4), (1, 4, 8), (2, 4, 8), (4, 4, 4))
GPU_SWEEP_WG = ((16, 4, 1), (64, 1, 1), (8, 8, 1))
SUBGROUP = {name: p.subgroup for name, p in PROFILES.items()}
# Whose static estimate ranks a profile's variants (the compiler behind kernelgen stats --device).
ESTIMATORS = {"rdna2": "ACO", "adreno-7xx": "ir3", "adreno-6xx": "ir3", "mali-valhall": "Valhall"}
SPILLS_LAST = 1e18  # added to a spilling variant's estimate: it ranks after every one that does not spill


def sweep_variants(config: Config) -> list[tuple[str, Config]]:
    """Invocation tiles x workgroup sizes (bench --sweep), keeping the config's device and wide_store."""
    options = vulkan_options(config)
    tiles, sizes = (SWEEP_TILES, SWEEP_WG) if options.device == "lavapipe" else (GPU_SWEEP_TILES, GPU_SWEEP_WG)
    return [(f"ivc_tile={list(tile)} wg_size={list(wg)}",
             with_options(config, NAME, options.model_copy(update={"ivc_tile": list(tile), "wg_size": list(wg)})))
            for tile in tiles for wg in sizes]


def static_estimate(vk: VulkanPlan, device: str, stats: tuple[DeviceStats, ...]) -> Timings:
    """A variant judged by the profile's compiler instead of a clock (its GPU is not here): the dispatch's cost as
    the compiler's per-wave estimate (ACO's inverse throughput; ir3's instructions issued; the Valhall compiler's
    cycles of its busiest unit) times the waves each op launches, summed over the ops; a variant that spills
    ranks after every one that does not."""
    cycles = 0.0
    for op, s in zip(vk.ops, stats):
        invocations = math.prod(op.groups) * math.prod(op.wg_size)
        cycles += s.inverse_throughput * math.ceil(invocations / SUBGROUP[device])
    spills = sum(s.spills for s in stats)
    estimator = ESTIMATORS[device]
    metrics = {f"{estimator.lower()}_cycles": round(cycles), "vgprs": max(s.vgprs for s in stats),
               "spilled_vgprs": sum(s.spilled_vgprs for s in stats), "waves": min(s.waves for s in stats)}
    return Timings(label=label(vk) + f" ({estimator} estimate)", rank=cycles + (SPILLS_LAST if spills else 0.0),
                   metrics=metrics)
