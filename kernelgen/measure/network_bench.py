"""A network timed on one target. A target whose program runs here with clocks inside it (c: program_timers) is
timed end to end, the program against onnxruntime round by round (program_bench.py), each step by the program's
own clocks. Otherwise step by step, beside the kernel bench loop (bench.py): each kernel by the target's own timer
or counters (hvx under QEMU: packets), each host step in onnxruntime (median of the repeats), the whole model in
onnxruntime on this host's CPU for scale. Each step's share either way. Nothing here prints."""
from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import numpy as np

from ..network import execute
from ..network.manifest import Network
from ..network.program import why_no_program
from .bench import bench
from .primitives import Job, Primitives
from .program_bench import ProgramBench, bench_program
from .records import BenchOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    step: int
    kind: str  # kernel, host, convert, concat, slice, shuffle (Step.kind)
    name: str
    seconds: float  # NaN: measured by counters, not a clock (hvx under QEMU: packets)
    flops: int
    executed_flops: int
    bytes: int
    packets: float | None
    share: float | None = None  # of the timed steps' seconds, or of the counted kernels' packets

    @property
    def counted(self) -> bool:
        return self.seconds != self.seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkTimes:
    network: str
    target: str
    steps: tuple[StepTime, ...]
    seconds: float  # the clocked steps together (the host steps alone when the kernels are counted)
    packets: float  # the counted kernels' packets together (0: every step had a clock)
    onnxruntime_seconds: float  # the whole model in onnxruntime, one thread
    onnxruntime: str  # its version and where it ran
    program: ProgramBench | None = None  # the program end to end against onnxruntime (then `steps` are its clocks)


def bench_network(target: Primitives, network: Network, jobs: Mapping[str, Job], repeat: int, *, threads: int = 1,
                  rounds: int = 5) -> NetworkTimes:
    """The program end to end when there is one (a network with host steps has none: step by step then). Each step timed (a kernel by the target's own timer, a host step in onnxruntime), its share of the whole.
    A kernel measured by counters instead of a clock (hvx under QEMU: packets) is shown by them, its share among
    the counted kernels; the network's time is then the host steps' alone. `jobs`: each kernel step's job, by its
    config's name (api plans and builds them, for `threads` where the target takes threads)."""
    feeds = execute.network_input(network, 0)
    if getattr(target, "program_timers", False) and not why_no_program(network):
        return _program_times(target, network, jobs, feeds, repeat=repeat, threads=threads, rounds=rounds)
    expected = execute.reference(network, feeds)  # each host step timed on the model's own tensors
    rows: list[StepTime] = []
    for step in network.steps:
        if step.config is not None:
            job = jobs[step.config.name]
            row = bench(target, job, BenchOptions(repeat=repeat))[0]
            rows.append(StepTime(step=step.index, kind="kernel", name=step.label, seconds=row.seconds, flops=row.flops,
                                 executed_flops=job.plan.executed_flops, bytes=job.plan.traffic.total,
                                 packets=row.metrics.get("packets")))
        else:
            host = execute.host_runner(network, step)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                host(expected | feeds)
                times.append(time.perf_counter() - start)
            rows.append(StepTime(step=step.index, kind=step.kind, name=step.label,
                                 seconds=statistics.median(times), flops=0, executed_flops=0, bytes=0, packets=None))
    total = sum(r.seconds for r in rows if not r.counted)
    packets = sum(r.packets or 0 for r in rows if r.counted)
    reference, version = _onnxruntime_time(network, feeds, repeat)  # this host's CPU, beside the kernels' device
    shared = tuple(replace(r, share=(r.packets or 0) / packets if r.counted and packets else
                           r.seconds / total if total and not r.counted else None) for r in rows)
    return NetworkTimes(network=network.name, target=target.name, steps=shared, seconds=total, packets=packets,
                        onnxruntime_seconds=reference, onnxruntime=version)


def _onnxruntime_time(network: Network, feeds: dict[str, np.ndarray], repeat: int) -> tuple[float, str]:
    """The whole model in onnxruntime on one thread (the c kernels run on one), median of `repeat` runs."""
    import onnxruntime

    from ..onnx import subgraph

    try:
        session = subgraph.session(network.model.read_bytes(), threads=1)
        subgraph.run(session, feeds)  # warm-up
    except subgraph.OnnxError as error:  # the manifest's model: check_against_model read it, onnxruntime may not
        raise network.problem("model", str(error)) from None
    times = []
    for _ in range(max(repeat, 3)):
        start = time.perf_counter()
        subgraph.run(session, feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times), f"{onnxruntime.__version__} (CPU, 1 thread)"


def _program_times(target: Primitives, network: Network, jobs: Mapping[str, Job], feeds: dict[str, np.ndarray], *,
                   repeat: int, threads: int, rounds: int) -> NetworkTimes:
    with tempfile.TemporaryDirectory(prefix="kernelgen-bench-") as workdir:
        timed = bench_program(network, target, jobs, feeds, Path(workdir), threads=threads, rounds=rounds,
                              repeat=repeat)
    seconds = timed.step_seconds()
    total = sum(seconds) or 1.0
    rows = []
    for step, spent in zip(network.steps, seconds):
        job = jobs[step.config.name] if step.config is not None else None
        rows.append(StepTime(step=step.index, kind="kernel" if job else "host", name=step.label, seconds=spent,
                             flops=job.plan.flops if job else 0, executed_flops=job.plan.executed_flops if job else 0,
                             bytes=job.plan.traffic.total if job else 0, packets=None, share=spent / total))
    return NetworkTimes(network=network.name, target=target.name, steps=tuple(rows), seconds=timed.median("program_wall"),
                        packets=0.0, onnxruntime_seconds=timed.median("onnxruntime_wall"), onnxruntime=timed.onnxruntime,
                        program=timed)
