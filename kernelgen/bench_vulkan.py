"""Benchmark of the `vulkan` target: GPU time from timestamp queries (median, the first
dispatch of each pipeline dropped: lavapipe compiles it lazily), GFLOP/s, and the ratio to
the device's FMA peak measured by the harness's FMA-chain shader in the same process.

Rows are labelled in seed 002's style:
Input[1x258x258x16]xFilter[3x3x16x256]/Stride[1x1]/Tile[2x8x16]/WGSize[4x2x2]/f32.
`--sweep` times ivc tile x workgroup permutations and marks the fastest.
"""
from __future__ import annotations

import statistics

import numpy as np

from .bench import BenchOptions, BenchRow
from .config import Config
from .errors import ConfigError
from .planner import plan as make_plan
from .validate import make_inputs
from .validate_vulkan import buffers, check_device, stages
from .vulkan_code import compile_ops, glsl_source
from .vulkan_plan import plan_vulkan

# Sweep space: invocation tiles [oh, ow, oc] x workgroup sizes [x, y, z] (seed 002's table
# tried 1x16x16, 2x8x16, 4x4x16, 8x2x16 with WGSize 4x4x1 and 4x2x2), plus the shapes that
# fetch least per multiply-add with every tap unrolled (4x16x8, 8x8x8, 4x8x16, 8x16x4: 64-128
# pixels, 4,608 unrolled FMAs per channel chunk) and two whose body keeps kh as a loop.
SWEEP_TILES = ((1, 16, 16), (2, 8, 16), (4, 4, 16), (8, 2, 16), (1, 32, 16), (4, 8, 16), (4, 16, 8),
               (8, 8, 8), (8, 16, 4), (4, 8, 32))
SWEEP_WG = ((8, 1, 1), (4, 2, 2))


def _device(options: BenchOptions) -> int | str | None:
    if options.device is None:
        return None
    return int(options.device) if options.device.isdigit() else options.device


def bench_vulkan(config: Config, options: BenchOptions) -> list[BenchRow]:
    from .toolchains.vulkan import VulkanRunner, fma_peak_gflops

    the_plan = make_plan(config)
    inputs = make_inputs(the_plan, np.random.default_rng(0))
    variants = [(None, None)]
    if options.sweep:
        variants = [(t, w) for t in SWEEP_TILES for w in SWEEP_WG]
    timed: list[tuple[str, float]] = []
    with VulkanRunner(_device(options)) as runner:
        peaks = [fma_peak_gflops(runner) * 1e9]
        for tile, wg in variants:
            try:
                vk = plan_vulkan(config, the_plan, ivc_tile=tile, wg_size=wg)
            except ConfigError:
                continue  # a permutation this problem cannot take (too many workgroups)
            check_device(vk, runner.info)
            spirv = compile_ops(glsl_source(the_plan, vk), vk)
            result = runner.run_sequence(stages(vk, spirv), buffers(the_plan, vk, inputs.physical),
                                         repeat=options.repeat + 1)
            seconds = statistics.median(result.gpu_times_ns[1:]) * 1e-9
            label = " -> ".join(op.label for op in vk.ops) + f"/{vk.short}"
            timed.append((label, seconds))
        # The peak probe runs before and after the kernels and the higher rate counts: a CPU
        # device shares its cores with whatever else runs, and the ratio should not flatter.
        peaks.append(fma_peak_gflops(runner) * 1e9)
    peak = max(peaks)
    rows = [BenchRow(config=config.name, target="vulkan", label=label, seconds=seconds, flops=the_plan.flops,
                     metrics={"peak_gflops": peak / 1e9, "ratio": the_plan.flops / seconds / peak})
            for label, seconds in timed]
    if options.sweep and rows:
        best = min(range(len(rows)), key=lambda i: rows[i].seconds)
        r = rows[best]
        rows[best] = BenchRow(config=r.config, target=r.target, label=r.label, seconds=r.seconds, flops=r.flops,
                              metrics=r.metrics, best=True)
    return rows
