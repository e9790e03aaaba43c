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
`--sweep` times ivc tile x workgroup permutations and marks the fastest.
"""
from __future__ import annotations

import statistics

import numpy as np

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...errors import ConfigError, ToolchainError
from ...host_steal import measure_steal
from ...planner import plan as make_plan
from ...validate import make_inputs
from .code import compile_ops, glsl_source
from .options import NAME
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


def _device(options: BenchOptions) -> int | str | None:
    if options.device is None:
        return None
    return int(options.device) if options.device.isdigit() else options.device


def bench_vulkan(config: Config, options: BenchOptions) -> list[BenchRow]:
    the_plan = make_plan(config)
    inputs = make_inputs(the_plan, np.random.default_rng(0))
    variants = [(None, None)]
    if options.sweep:
        variants = [(t, w) for t in SWEEP_TILES for w in SWEEP_WG]
    timed: list[tuple] = []  # label, median seconds, metrics, (fastest, slowest)
    with VulkanRunner(_device(options)) as runner:
        if not runner.info.timestamps:
            raise ToolchainError(f"{runner.info.name} cannot write timestamps; nothing to time")
        for tile, wg in variants:
            try:
                vk = plan_vulkan(config, the_plan, ivc_tile=tile, wg_size=wg)
            except ConfigError:
                continue  # a permutation this problem cannot take (too many workgroups)
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
            label = " -> ".join(op.label for op in vk.ops) + f"/{vk.short}"
            timed.append((label, statistics.median(kernel),
                          {"peak_gflops": statistics.median(peak) / 1e9, "ratio": ratio, **steal},
                          (min(kernel), max(kernel))))
    rows = [BenchRow(config=config.name, target=NAME, label=label, seconds=seconds, flops=the_plan.flops,
                     metrics=metrics, spread=spread)
            for label, seconds, metrics, spread in timed]
    if options.sweep and rows:
        best = min(range(len(rows)), key=lambda i: rows[i].seconds)
        r = rows[best]
        rows[best] = BenchRow(config=r.config, target=r.target, label=r.label, seconds=r.seconds, flops=r.flops,
                              metrics=r.metrics, best=True, spread=r.spread)
    return rows
