"""The device probes, timed once for every target: the FMA peak and the bandwidth triad a target supplies as
`Probe` records (Target.probes) run through its time primitive, the one its kernels are timed with, right before
each repeat of the kernel, so that a host shared with other work slows probe and kernel alike only when both run
at the same moment (a peak taken seconds apart from the kernel gave ratios from 0.28 to 0.48 for the same kernel).

Where a target offers several shapes of a probe (which one reaches the peak depends on the host: AVX-512 or AVX2
under PoCL and lavapipe), each is timed alone once per device, twice, the higher reading kept (a reading taken
while the host's other work ran is low, never high), and the fastest is the one run beside the kernels."""
from __future__ import annotations

import statistics
from dataclasses import replace

from ..cpuinfo import last_level_cache_bytes
from .primitives import BANDWIDTH, FMA, Executable, Job, Primitives, Probe
from .records import Timings

_CHOSEN: dict[tuple[str, str, str], str] = {}  # (target, device, kind) -> the fastest candidate's shape
TRIAD_MAX_ARRAY_BYTES = 512 << 20  # the three arrays (1.5 GiB at most) bound the memory a triad holds


def triad_array_bytes(minimum: int, llc_bytes: int | None = None) -> int:
    """Bytes of each array of a triad that runs on this host's CPU (the c target's, PoCL's, lavapipe's): at least
    half the last-level cache (whole MiB), so one run streams 1.5 times the cache past what a kernel left there, and
    at least `minimum`. A fixed 64 MiB did not evict on a host with a 480 MiB L3 (issue 50): a depthwise conv's
    9.6 MB stayed cached and its "cold" run read 0.95-1.3 of the triad; arrays of 128 MiB gave 0.79-0.85, of 256
    and 512 MiB 0.65-0.70 alike (alternating runs; the triad itself 15.4-16.6 GB/s at every size)."""
    llc = last_level_cache_bytes() if llc_bytes is None else llc_bytes
    half_mib = -(-llc // (2 << 20)) << 20
    return min(max(minimum, half_mib), TRIAD_MAX_ARRAY_BYTES)


def beside(target: Primitives, executable: Executable, job: Job) -> tuple[Probe, ...]:
    """The probes to run before each repeat of the job's kernel: the FMA peak, and for a memory-bound kernel
    (plan.memory_bound: depthwise) the bandwidth triad, each the target's fastest shape on this device."""
    kinds = (FMA, BANDWIDTH) if job.plan.memory_bound else (FMA,)
    return tuple(p for p in (chosen(target, executable, kind) for kind in kinds) if p is not None)


def chosen(target: Primitives, executable: Executable, kind: str) -> Probe | None:
    candidates = target.probes(executable, kind)
    if len(candidates) < 2:
        return candidates[0] if candidates else None
    key = (target.name, candidates[0].device, kind)
    if key not in _CHOSEN:
        rates = {p.shape: max(rate(target, executable, p, repeat=3) for _ in range(2)) for p in candidates}
        _CHOSEN[key] = max(rates, key=rates.__getitem__)
    return next(p for p in candidates if p.shape == _CHOSEN[key])


def rate(target: Primitives, executable: Executable, probe: Probe, *, repeat: int = 5) -> float:
    """The probe alone: GFLOP/s (FMA) or GB/s (BANDWIDTH), the median over `repeat` runs (the target's time
    primitive warms up first, as for a kernel)."""
    (timings,) = target.time(executable, None, repeat, (probe,))
    return probe.work / statistics.median(timings.probe_seconds[probe.kind]) / 1e9


def peaks(timings: Timings, probes: tuple[Probe, ...]) -> Timings:
    """A kernel's timings with each repeat's probe times turned into the peaks the bench row pairs it with."""
    if not timings.probe_seconds:
        return timings
    per_second = {p.kind: tuple(p.work / s / 1e9 for s in timings.probe_seconds[p.kind]) for p in probes}
    return replace(timings, peak_gflops=per_second.get(FMA, ()), peak_gbs=per_second.get(BANDWIDTH, ()),
                   probe_seconds={})
