"""Benchmark of the `opencl` target: kernel time from profiling events, against the device's
FMA peak measured in the same process between the kernel's runs (fma_peak_gflops), so the
ratio survives a busy machine better than either number alone; `steal` (host_steal) says how
much of the machine a hypervisor took meanwhile.

`--sweep` tries tile x work-group permutations of the config's variant (sweep_variants; sweep.py runs them).
torch's CPU conv2d is timed beside it when torch happens to be installed (never required).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from ...bench import BenchOptions, BenchRow
from ...config import Config, with_options
from ...host_steal import measure_steal
from ...planner import plan as make_plan
from ...validate import make_inputs
from .options import NAME, opencl_options
from .plan import variant_of
from .probe import fma_peak_gflops
from .toolchain import OpenCLRunner
from .validate import Render, host_arrays, launches, prepare

# Sweeps: tile [oh, ow, oc4] x work-group size, per kind of filter load. Vector tiles hold 2-4
# float16 accumulators per pixel (an AVX-512 core has 32 x 16-float registers); with activations
# in images, wider channel blocks spare PoCL's slow texel reads; filter texels cap every tile.
SWEEP_TILES = {"vectors": ((1, 4, 8), (1, 4, 16), (2, 4, 8), (1, 8, 8), (2, 2, 16), (1, 2, 16)),
               "vectors+images": ((1, 4, 16), (2, 2, 16), (2, 2, 32), (1, 1, 64)),
               "texels": ((1, 4, 2), (2, 2, 4), (2, 4, 2), (4, 4, 1))}
SWEEP_LOCAL = ((8, 1, 1), (16, 1, 1), (4, 2, 1))


def bench_opencl(config: Config, options: BenchOptions, render: Render) -> list[BenchRow]:
    the_plan = make_plan(config)
    logical = make_inputs(the_plan, np.random.default_rng(0)).logical
    rows = []
    with OpenCLRunner(options.device) as runner:
        cplan, source = prepare(config, runner, render)  # a config the device cannot hold: ConfigError
        steps, arrays = launches(cplan, source), host_arrays(cplan, logical)
        runner.run_sequence(steps, arrays)  # warms PoCL's JIT and caches
        times, peaks = [], []
        with measure_steal() as steal:
            for _ in range(options.repeat):
                # Kernel runs interleaved with peak runs: with other jobs on the 2 cores, both
                # medians are taken over the same stretch of load.
                times.append(runner.run_sequence(steps, arrays).kernel_times_ns[0])
                peaks.append(fma_peak_gflops(runner, runs=2))
        seconds, peak = statistics.median(times) * 1e-9, statistics.median(peaks)
        rows.append(BenchRow(config=config.name, target=NAME,
                             label=f"{cplan.variant} tile={list(cplan.tile)} local={list(cplan.local_size)}",
                             seconds=seconds, flops=the_plan.flops,
                             metrics={"peak_gflops": round(peak, 1),
                                      "ratio": round(the_plan.flops / seconds / 1e9 / peak, 3),
                                      **steal}, spread=(min(times) * 1e-9, max(times) * 1e-9)))
    torch_row = _torch_row(config, logical, options.repeat)
    return rows + ([torch_row] if torch_row else [])


def sweep_variants(config: Config) -> list[tuple[str, Config]]:
    """Tiles x work-group sizes for the config's variant and kind of filter loads (bench --sweep)."""
    variant, kind = variant_of(config)
    return [(f"tile={list(tile)} local={list(local)}",
             with_options(config, NAME, opencl_options(config).model_copy(
                 update={"tile": list(tile), "local_size": list(local), "variant": variant})))
            for tile in SWEEP_TILES[kind] for local in SWEEP_LOCAL]


def _torch_row(config: Config, logical: tuple[np.ndarray, ...], repeat: int) -> BenchRow | None:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    x = torch.from_numpy(np.ascontiguousarray(logical[0].transpose(0, 3, 1, 2)))  # NHWC -> NCHW
    weights = [torch.from_numpy(w) for w in logical[1:]]

    def run() -> None:
        y = x
        for op, w in zip(config.ops, weights):
            top, left, bottom, right = op.pad
            if (top, left) == (bottom, right):
                y = F.conv2d(y, w, stride=op.stride, padding=(top, left), dilation=op.dilation)
            else:
                y = F.conv2d(F.pad(y, (left, right, top, bottom)), w, stride=op.stride, dilation=op.dilation)

    with torch.no_grad():
        run()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    flops = make_plan(config).flops
    return BenchRow(config=config.name, target=NAME, label=f"reference: torch {torch.__version__} CPU conv2d "
                                                               f"({torch.get_num_threads()} threads)",
                    seconds=statistics.median(times), flops=flops)
