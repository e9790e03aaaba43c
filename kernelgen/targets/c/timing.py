"""How the c target times a kernel, and benchmarks/c_speed.py the baselines beside it: the probes the core hands
over (measure/probes.py: the FMA chains, and the triad for a memory-bound kernel), then the kernel twice, cold and
warm, every repeat, so each time pairs with the probes run right before it.

- cold: right after the triad, whose three arrays (each half the last-level cache, 64 MiB at least:
  roofline.triad_array_bytes) evicted every cache, the tensors come from memory (a layer whose input another
  kernel wrote long before); a kernel the core gave no triad (a dense conv) runs the triad untimed first, so cold
  means the same for every kernel;
- warm: again at once, the tensors where the cold run left them (a layer right after the one that wrote its input).
A one-thread kernel is timed by the CPU time of the calling thread, so time the host gave other work meanwhile is
not counted (seven jobs shared two cores where this was written); OpenMP threads run on other threads' clocks, so
they are timed by the wall clock."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ...measure.primitives import BANDWIDTH, Probe
from .placement import pages
from .roofline import triad_array_bytes

COLD, WARM = "cold", "warm"


@dataclass(frozen=True, slots=True)
class ColdWarm:
    cold: tuple[float, ...]  # seconds per repeat
    warm: tuple[float, ...]
    probes: dict[str, tuple[float, ...]]  # probe kind -> seconds per repeat


def clock(threads: int) -> Callable[[], float]:
    return time.thread_time if threads == 1 else time.perf_counter


def clock_text(threads: int) -> str:
    return "CPU time of the calling thread" if threads == 1 else f"wall time ({threads} OpenMP threads)"


def cold_and_warm(call: Callable[[], None] | None, probes: tuple[Probe, ...], flush: Callable[[], None] | None,
                  repeat: int, threads: int = 1) -> ColdWarm:
    """Each repeat: the probes in order, the flush when no probe was the triad, the call cold, the call warm. `call`
    None: the probes alone (a probe's own rate); `flush` None: no flush (the caller has none)."""
    now = clock(threads)
    if call is not None:
        call()  # warm-up: page in the workspace
    flush = None if any(p.kind == BANDWIDTH for p in probes) or call is None else flush
    cold: list[float] = []
    warm: list[float] = []
    beside: dict[str, list[float]] = {p.kind: [] for p in probes}
    for _ in range(repeat):
        for p in probes:
            start = now()
            p.kernel()
            beside[p.kind].append(now() - start)
        if call is None:
            continue
        if flush is not None:
            flush()
        for seconds in (cold, warm):
            start = now()
            call()
            seconds.append(now() - start)
    return ColdWarm(cold=tuple(cold), warm=tuple(warm), probes={kind: tuple(t) for kind, t in beside.items()})


def measured(when: str, threads: int) -> str:
    """What a time of `when` is, in words a report prints beside it."""
    what = (f"cold: right after the triad's {3 * triad_array_bytes() >> 20} MiB evicted the caches" if when == COLD else
            "warm: run again at once, the tensors where the cold run left them")
    return f"{what}; {clock_text(threads)}; {pages()}"
