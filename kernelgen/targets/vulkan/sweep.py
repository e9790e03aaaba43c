"""What `bench --sweep` tries for the vulkan target: invocation tile x workgroup permutations, and, for a device
profile whose GPU is not here (rdna2); the spaces are gpu/profiles.py's, the static estimate that ranks them instead of a clock."""
from __future__ import annotations

import math

from ...config import Config
from ...devices import PROFILES
from ...measure.records import DeviceStats, Timings
from ..gpu.api import VULKAN
from ..gpu.profiles import GPU_SWEEP, VULKAN_DEFAULTS, VULKAN_SWEEPS, SweepSpace
from ..gpu.sweep import permutations
from .options import vulkan_options
from .plan import VulkanPlan
from .program import label

SUBGROUP = {name: p.subgroup for name, p in PROFILES.items()}
# Whose static estimate ranks a profile's variants (the compiler behind kernelgen stats --device).
ESTIMATORS = {"rdna2": "ACO", "adreno-7xx": "ir3", "adreno-6xx": "ir3", "mali-valhall": "Valhall"}
SPILLS_LAST = 1e18  # added to a spilling variant's estimate: it ranks after every one that does not spill


def sweep_variants(config: Config) -> list[tuple[str, Config]]:
    """Invocation tiles x workgroup sizes (bench --sweep), keeping the config's device and wide_store."""
    options = vulkan_options(config)
    return permutations(VULKAN, config, options, VULKAN_SWEEPS.get(options.device, GPU_SWEEP))


def tile_variants(config: Config) -> list[tuple[str, Config]]:
    """The sweep's invocation tiles at one workgroup size, the config's own (else its profile's default):
    what `stats --compare-tiles` estimates beside the default tile, a compile per tile rather than per
    permutation."""
    options = vulkan_options(config)
    size = tuple(options.wg_size) if options.wg_size is not None else VULKAN_DEFAULTS[options.device].wg_size
    space = VULKAN_SWEEPS.get(options.device, GPU_SWEEP)
    return permutations(VULKAN, config, options, SweepSpace(space.tiles, (size,)))


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
