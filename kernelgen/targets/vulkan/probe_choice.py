"""Which FMA probe shape lavapipe's ratios are taken against on this host: chosen once, kept in the user's cache.

The core picks the fastest of a device's probe shapes in every process, from two short readings of each
(measure/probes.py). lavapipe runs on the host's cores, so on a host shared with other work one reading of the
fastest shape can land at a busy moment: on a 2-core AVX-512 Xeon (Mesa 22.3.6, LLVM 15) the shapes read 3x4x64
136, 2x4x64 100, 8x1x8 87 and 1x4x64 55 GFLOP/s quiet, but busy rounds read 3x4x64 as low as 77 against 2x4x64's
100. A process that settled on a slower shape doubled every ratio it printed (in one run, repeat by repeat paired,
the 3x3 64x64x128 conv read 0.48 of 3x4x64 and 1.10 of 1x4x64; main's `kernelgen bench` read the 1x1 at 0.28 in one
process and 0.53 in the next), and `kernelgen bench` and a benchmark script (each workload in its own process)
disagreed by as much. So on llvmpipe the shapes are timed once per host in
ROUNDS interleaved rounds, each shape's best round kept (a busy moment reads low, never high), and the winner is
stored under the host's key (lavapipe_host.LavapipeHost.key: CPU model, driver, width, flags); every later process on
the same host runs that shape beside its kernels. Another CPU, Mesa or vector width is another key, so it chooses
again. Delete the file (or set KERNELGEN_CACHE_DIR elsewhere) to choose again on the same host."""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from ...measure.primitives import Probe
from .lavapipe_host import LavapipeHost
from .mesa_pin import cache_root

FORMAT = 1
ROUNDS = 5  # interleaved rounds of every shape (3 runs each, their median) when a host has no choice yet
RUNS = 3


def cache_path(host: LavapipeHost) -> Path:
    digest = hashlib.sha256(host.key().encode()).hexdigest()[:16]
    return cache_root() / "lavapipe" / f"fma-probe-{digest}.json"


def load(host: LavapipeHost) -> str | None:
    """The probe shape chosen on this host (FmaShape.name), or None: none yet, another format or another host."""
    try:
        data = json.loads(cache_path(host).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != host.key():
        return None
    shape = data.get("shape")
    return shape if isinstance(shape, str) else None


def store(host: LavapipeHost, shape: str, rates: dict[str, float]) -> Path:
    """Write the choice atomically (temp file, rename) under the host's key."""
    path = cache_path(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": FORMAT, "host": host.describe(), "key": host.key(), "shape": shape,
                       "gflops": {name: round(rate, 2) for name, rate in rates.items()}}, indent=1, sort_keys=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        out.write(text + "\n")
    os.replace(out.name, path)
    return path


def probe_note(host: LavapipeHost) -> str:
    """The line a lavapipe benchmark prints under its rows: which probe its ratios are against, and where it is kept."""
    shape = load(host)
    if shape is None:
        return "lavapipe: no FMA probe shape chosen on this host yet (the first run with a probe chooses one)"
    return (f"lavapipe: ratios against the FMA probe {shape}, this host's fastest shape, chosen once and kept in "
            f"{cache_path(host)} (delete it to choose again)")


def best_rates(candidates: Sequence[Probe], seconds: Callable[[Probe], Sequence[float]],
               rounds: int = ROUNDS) -> dict[str, float]:
    """Each shape's best round (GFLOP/s of the median of its runs), the shapes interleaved round by round, so a
    busy stretch of the host slows every shape rather than the ones timed during it."""
    rates: dict[str, float] = {}
    for _ in range(rounds):
        for probe in candidates:
            rate = probe.work / statistics.median(seconds(probe)) / 1e9
            rates[probe.shape] = max(rate, rates.get(probe.shape, 0.0))
    return rates


def fastest(host: LavapipeHost, candidates: Sequence[Probe], seconds: Callable[[Probe], Sequence[float]]) -> Probe:
    """The candidate this host's cache names, else the fastest of best_rates (then kept in the cache; a cache
    that cannot be written still gives this process its choice)."""
    by_shape = {p.shape: p for p in candidates}
    kept = load(host)
    if kept in by_shape:
        return by_shape[kept]
    rates = best_rates(candidates, seconds)
    shape = max(rates, key=rates.__getitem__)
    try:
        store(host, shape, rates)
    except OSError:
        pass
    return by_shape[shape]
