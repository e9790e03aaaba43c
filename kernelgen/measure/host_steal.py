"""How much CPU time the hypervisor took from this machine while a benchmark ran.

CPU devices (lavapipe, PoCL) share the host's cores. On a virtual machine another guest can
take cycles from them ("steal", the 8th field of /proc/stat's cpu line), and the bench reports
that share next to each row. It is one kind of interference only: on this project's 2-vCPU
machine seed 002's Vulkan kernel ran in 132-140 ms (ratio 0.43-0.46 to the paired FMA probe,
probe 80 GFLOP/s) at steal under 0.1%, and on the same day in 210-310 ms (ratio 0.27-0.38,
probe 53-63 GFLOP/s) with steal still under 1.6%: a neighbour on the cores' other hardware
threads or caches slows the kernel more than the register-bound probe and shows up nowhere
in the guest. A steal of several percent means the row is not representative; a low one does
not prove the opposite.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
NOISY = 0.02  # steal above this fraction makes CPU-device timings unrepresentative


@dataclass(frozen=True, slots=True)
class CpuTimes:
    busy_and_idle: int  # every field of the cpu line, in clock ticks
    steal: int

    @staticmethod
    def read(stat: Path = PROC_STAT) -> CpuTimes | None:
        """None where there is no /proc/stat (not Linux) or it has no steal field."""
        try:
            first = stat.read_text().splitlines()[0].split()
        except (OSError, IndexError):
            return None
        if first[:1] != ["cpu"] or len(first) < 9:
            return None
        # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
        # already counted in user and nice.
        ticks = [int(v) for v in first[1:9]]
        return CpuTimes(busy_and_idle=sum(ticks), steal=ticks[7])


def steal_fraction(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """Share of all CPU ticks between the two readings that went to steal."""
    if before is None or after is None:
        return None
    total = after.busy_and_idle - before.busy_and_idle
    if total <= 0:
        return None
    return (after.steal - before.steal) / total


@contextmanager
def measure_steal() -> Iterator[dict[str, float]]:
    """Yields a metrics dict that holds {"steal": fraction} of the block once it ends, or
    stays empty where the fraction is unknown (no /proc/stat, no tick elapsed)."""
    metrics: dict[str, float] = {}
    before = CpuTimes.read()
    yield metrics
    fraction = steal_fraction(before, CpuTimes.read())
    if fraction is not None:
        metrics["steal"] = fraction
