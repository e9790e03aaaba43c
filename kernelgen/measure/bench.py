"""Benchmarks, once for every target: inputs -> the target compiles the job -> its time primitive -> one row per
timed kernel with the median, the spread of the repeats, GFLOP/s and, where the target has an FMA probe (timed
beside each repeat, measure/probes.py), the median of the paired ratios (a busy host slows probe and kernel alike
only when they run at the same moment); for a memory-bound kernel (plan.memory_bound: depthwise) also its GB/s against
the device's bandwidth probe run right before each repeat. `steal` says how much of the host a hypervisor took
meanwhile (host_steal).

torch's CPU conv2d is timed beside a target that asks for it (Primitives.torch_reference) when torch happens to be
installed; it is never required.
"""
from __future__ import annotations

import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ..config import Config
from ..ops import OPS
from .host_steal import measure_steal
from .primitives import Job, Primitives
from .probes import beside, peaks
from .records import BenchOptions, BenchRow, Timings
from .tensors import KernelArgs, random_inputs


def bench(target: Primitives, job: Job, options: BenchOptions) -> list[BenchRow]:
    """The job's kernels timed on this machine, or ranked by the target's static estimate when its device is not
    here (the first row is the kernel itself)."""
    estimate = target.estimate(job)
    if estimate is not None:
        return [row_of(job, target.name, estimate, {})]
    args = random_inputs(job.config, job.plan, np.random.default_rng(0))
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-bench-{target.name}-{job.config.name}-") as tmp, \
            target.compile(job, Path(tmp), options.device) as exe:
        probes = beside(target, exe, job)
        with measure_steal() as steal:
            # a target that runs no probes keeps the three-argument primitive (hvx, a plugin)
            timings = target.time(exe, args, options.repeat, probes) if probes else \
                target.time(exe, args, options.repeat)
    rows = [row_of(job, target.name, peaks(t, probes), steal if t.seconds else {}) for t in timings]
    if target.torch_reference:
        reference = _torch_row(job.config, args, options.repeat, job.plan.flops, target.name)
        rows += [reference] if reference else []
    return rows


def row_of(job: Job, target: str, timings: Timings, steal: dict[str, float]) -> BenchRow:
    flops = job.plan.flops
    seconds = timings.seconds
    nan = float("nan")
    ratio = peak = None
    if timings.peak_gflops:
        peak = statistics.median(timings.peak_gflops)
        ratio = statistics.median(flops / s / 1e9 / p for s, p in zip(seconds, timings.peak_gflops))
    bandwidth = bandwidth_ratio = None
    if timings.peak_gbs:  # a memory-bound kernel: its bytes (each tensor once) over the probe's, repeat by repeat
        moved = job.plan.compulsory_bytes
        bandwidth = statistics.median(timings.peak_gbs)
        bandwidth_ratio = statistics.median(moved / s / 1e9 / b for s, b in zip(seconds, timings.peak_gbs))
    return BenchRow(config=job.config.name, target=target, label=timings.label,
                    seconds=statistics.median(seconds) if seconds else nan, flops=flops,
                    spread=(min(seconds), max(seconds)) if seconds else (nan, nan), peak_gflops=peak, ratio=ratio,
                    peak_gbs=bandwidth, bandwidth_ratio=bandwidth_ratio, steal=dict(steal), rank=timings.rank, metrics=dict(timings.metrics),
                    when=timings.when, measured=timings.measured)


def _torch_row(config: Config, args: KernelArgs, repeat: int, flops: int, target: str) -> BenchRow | None:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    x = torch.from_numpy(np.ascontiguousarray(args.logical["input"].transpose(0, 3, 1, 2)))  # NHWC -> NCHW
    weights = [None if w is None else torch.from_numpy(w) for w in args.filters(len(config.ops))]

    def run() -> None:
        y = x
        for op, w in zip(config.ops, weights):
            top, left, bottom, right = op.pad
            if op.pool:
                maximum = OPS[op.kind].STEP == "max"  # (padding: never the maximum)
                y = F.pad(y, (left, right, top, bottom), value=-math.inf if maximum else 0.0)
                y = (F.max_pool2d if maximum else F.avg_pool2d)(y, op.kernel, op.stride)
            elif (top, left) == (bottom, right):
                y = F.conv2d(y, w, stride=op.stride, padding=(top, left), dilation=op.dilation, groups=op.groups)
            else:
                y = F.conv2d(F.pad(y, (left, right, top, bottom)), w, stride=op.stride, dilation=op.dilation,
                             groups=op.groups)

    with torch.no_grad():
        run()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return BenchRow(config=config.name, target=target, label=f"reference: torch {torch.__version__} CPU conv2d "
                                                            f"({torch.get_num_threads()} threads)",
                    seconds=statistics.median(times), flops=flops, spread=(min(times), max(times)))
