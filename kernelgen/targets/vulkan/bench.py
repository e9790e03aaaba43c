"""Benchmark of the `vulkan` target: GPU time from timestamp queries (median, the first
repeat dropped: lavapipe compiles each pipeline lazily), GFLOP/s, and the ratio to the
device's FMA peak measured by the harness's FMA-chain shader in the same run.

Each repeat dispatches the FMA probe right before the kernel in one command buffer, and the
ratio is the median of the per-repeat ratios: on a CPU device (lavapipe) another process on
a shared core slows probe and kernel alike only when both run at the same moment, and a
peak taken seconds apart from the kernel gave ratios from 0.28 to 0.48 for
the same kernel. The reported peak is the median of the paired probes. `steal` is the share
of the host's CPU ticks a hypervisor took during the run (host_steal). A contended host lowers
the ratio even at zero steal: seed 002 measured 0.43-0.46 with the probe at ~80 GFLOP/s and
0.27-0.38 with it at 53-63 GFLOP/s, so read the ratio together with the peak beside it.

Rows are labelled in seed 002's style:
Input[1x258x258x16]xFilter[3x3x16x256]/Stride[1x1]/Tile[2x8x16]/WGSize[4x2x2]/f32.
`--sweep` times ivc tile x workgroup permutations (sweep_variants; sweep.py runs them), or, for a device profile
whose GPU is not here (rdna2), ranks them by ACO's static estimate (static_estimate).
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from ...bench import BenchOptions, BenchRow
from ...config import Config, with_options
from ...devices import PROFILES
from ...errors import ToolchainError
from ...host_steal import measure_steal
from ...planner import plan as make_plan
from ...validate import make_inputs
from .code import compile_ops, glsl_source
from .options import NAME, vulkan_options
from .plan import plan_vulkan
from .probe import best_accumulators, fma_probe
from .runtime import VulkanRunner
from .validate import buffers, check_device, stages

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


def _device(options: BenchOptions) -> int | str | None:
    if options.device is None:
        return None
    return int(options.device) if options.device.isdigit() else options.device


def bench_vulkan(config: Config, options: BenchOptions) -> list[BenchRow]:
    the_plan = make_plan(config)
    inputs = make_inputs(the_plan, np.random.default_rng(0))
    with VulkanRunner(_device(options)) as runner:
        if not runner.info.timestamps:
            raise ToolchainError(f"{runner.info.name} cannot write timestamps; nothing to time")
        vk = plan_vulkan(config, the_plan)  # a permutation this problem cannot take: ConfigError
        check_device(vk, runner.info)
        spirv = compile_ops(glsl_source(the_plan, vk), vk)
        arrays = buffers(the_plan, vk, inputs.physical)
        probe = fma_probe(binding=len(arrays), accumulators=best_accumulators(runner))
        with measure_steal() as steal:
            result = runner.run_sequence([probe.stage, *stages(vk, spirv)], [*arrays, probe.buffer],
                                         repeat=options.repeat + 1)
        if not np.isfinite(result.outputs[-1]).all():
            raise ToolchainError("the FMA probe produced non-finite values")
    kernel = [sum(t[1:]) * 1e-9 for t in result.stage_times_ns[1:]]
    peak = [probe.flops / (t[0] * 1e-9) for t in result.stage_times_ns[1:]]
    ratio = statistics.median([the_plan.flops / k / p for k, p in zip(kernel, peak)])
    return [BenchRow(config=config.name, target=NAME, label=_label(vk), seconds=statistics.median(kernel),
                     flops=the_plan.flops, metrics={"peak_gflops": statistics.median(peak) / 1e9, "ratio": ratio,
                                                    **steal}, spread=(min(kernel), max(kernel)))]


def _label(vk) -> str:
    return " -> ".join(op.label for op in vk.ops) + f"/{vk.short}"


def sweep_variants(config: Config) -> list[tuple[str, Config]]:
    """Invocation tiles x workgroup sizes (bench --sweep), keeping the config's device and wide_store."""
    options = vulkan_options(config)
    tiles, sizes = (SWEEP_TILES, SWEEP_WG) if options.device == "lavapipe" else (GPU_SWEEP_TILES, GPU_SWEEP_WG)
    return [(f"ivc_tile={list(tile)} wg_size={list(wg)}",
             with_options(config, NAME, options.model_copy(update={"ivc_tile": list(tile), "wg_size": list(wg)})))
            for tile in tiles for wg in sizes]


def static_estimate(config: Config, stats: list[dict]) -> BenchRow:
    """A variant judged by ACO instead of a clock (a profile whose GPU is not here): the dispatch's cost as ACO's
    inverse throughput (cycles per wave, latency hidden by occupancy) times the waves each op launches, summed
    over the ops; a variant that spills ranks after every one that does not."""
    the_plan = make_plan(config)
    vk = plan_vulkan(config, the_plan)
    cycles = 0.0
    for op, s in zip(vk.ops, stats):
        invocations = math.prod(op.groups) * math.prod(op.wg_size)
        cycles += s["inverse_throughput"] * math.ceil(invocations / SUBGROUP[vulkan_options(config).device])
    spills = sum(s["spilled_vgprs"] + s["spilled_sgprs"] for s in stats)
    metrics = {"aco_cycles": round(cycles), "vgprs": max(s["vgprs"] for s in stats),
               "spilled_vgprs": sum(s["spilled_vgprs"] for s in stats), "waves": min(s["waves"] for s in stats),
               "rank": cycles + (1e18 if spills else 0.0)}
    return BenchRow(config=config.name, target=NAME, label=_label(vk) + " (ACO estimate)", seconds=float("nan"),
                    flops=the_plan.flops, metrics=metrics)
