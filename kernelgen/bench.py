"""What a benchmark is asked and what it answers: each target's `bench(config, options)`
returns rows, which cli prints; `--sweep` asks a target to try its tile and work-group
permutations and mark the best row."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BenchOptions:
    repeat: int = 5
    sweep: bool = False
    device: str | None = None


@dataclass(frozen=True, slots=True)
class BenchRow:
    config: str
    target: str
    label: str  # what was run, e.g. seed 002 style: Input[1x258x258x16]xFilter[3x3x16x256]/...
    seconds: float  # median kernel time
    flops: int  # useful FLOPs of one run
    metrics: dict[str, float] = field(default_factory=dict)  # target-specific: packets, peak_gflops, ratio...
    best: bool = False
    spread: tuple[float, float] = (float("nan"), float("nan"))  # fastest and slowest of the repeats

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else float("nan")
