"""The records the measuring loops hand back: one validation result per (config, target), one benchmark row per
timed kernel, what a target's timing primitive measured, and what a device compiler said of a kernel.

Every field is typed; the command line prints and serializes these, never a dict a target filled in."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields
from typing import Mapping

from ..errors import ToolchainError


class Status(enum.Enum):
    """How a validation ended. The values are what the table and --json print."""

    PASS = "pass"
    FAIL = "FAIL"
    NOT_RUN = "not run"  # built, but this device lacks a feature the kernel needs (fp16 arithmetic)
    SKIPPED = "skipped"  # the target's toolchain is missing here (validate --skip-missing)
    COMPILED = "compiled"  # built by the real compiler, but nothing here can run it (HVX float under QEMU 7.2)

    @property
    def counts_as_failure(self) -> bool:
        """Only a mismatch or a failed build fails the command: the other statuses say what could not be done."""
        return self is Status.FAIL


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationResult:
    config: str
    target: str
    status: Status
    max_abs_error: float
    max_rel_error: float
    bound_ratio: float  # worst |error| / allowed bound; <= 1 passes
    seed: int
    detail: str = ""
    oracles: tuple[str, ...] = ("numpy",)  # what the output was checked against
    # float: the largest error allowed, over the output's largest magnitude (NaN: bit-exact or not measured)
    threshold: float = math.nan
    checked: str = ""  # float chains: "op-by-op" (each op on the kernel's own input to it) or "chain" (end to end)
    # What failed, in short, one per finding of a FAIL (the detail says more): FAILURES' words, or "conv2d #j" for
    # an intermediate op's output. Where err/bound cannot say it (bit-exact uint8, a padding byte, an unwritten
    # element, a build), the table prints these instead.
    failure: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS


FAILURES = {"output": "the output differs from the reference (beyond the bound; uint8: not bit-exact)",
            "unwritten": "output elements never written, or computed from an intermediate the kernel never stored",
            "padding": "layout padding not holding pad_value, or written where the layout declares none",
            "onnxruntime": "the output differs from onnxruntime running the same nodes",
            "toolchain": "compiling or running failed (a compiler, runtime or device error)",
            "error": "the kernel could not be built or run (a kernelgen error)"}


def unmeasured(config: str, target: str, seed: int, status: Status, detail: str,
               failure: tuple[str, ...] = ()) -> ValidationResult:
    """A row with no measurement: a FAIL before the comparison, 'not run', 'skipped', 'compiled'."""
    nan = math.nan
    return ValidationResult(config=config, target=target, status=status, max_abs_error=nan, max_rel_error=nan,
                            bound_ratio=nan, seed=seed, detail=detail, failure=failure)


def not_built(config: str, target: str, seed: int, error: Exception) -> ValidationResult:
    """A FAIL row for a kernel that a library error stopped before any comparison (a ToolchainError: "toolchain")."""
    kind = "toolchain" if isinstance(error, ToolchainError) else "error"
    return unmeasured(config, target, seed, Status.FAIL, str(error), (kind,))


@dataclass(frozen=True, slots=True)
class BenchOptions:
    repeat: int = 5
    sweep: bool = False
    device: str | None = None  # the runtime device to time on (--run-on), for targets with several


@dataclass(frozen=True, slots=True, kw_only=True)
class Timings:
    """What a target's time primitive measured for one kernel (or one row beside it: a compile-only variant).

    seconds: one wall time per repeat ((): no wall time, counters or an estimate instead);
    peak_gflops: the device's FMA peak measured beside each repeat, paired with it (() when the target has none);
    peak_gbs: the device's bandwidth (a STREAM-like probe) right before each repeat of a memory-bound kernel;
    probe_seconds: what the target's time primitive returns for the probes the core gave it (measure/probes.py):
    each probe's kind -> its time per repeat, which the core turns into peak_gflops and peak_gbs;
    rank: a static estimate that orders sweep variants when the device is not here (lower is better);
    metrics: what only this target measures (QEMU's packet counters, spilled vector registers);
    when: "cold" (right after a probe evicted the caches) or "warm" (run again at once), where the target times
    both ("": one kind only); measured: what the time is and where the tensors were (clock, pages, threads)."""

    label: str
    seconds: tuple[float, ...] = ()
    peak_gflops: tuple[float, ...] = ()
    peak_gbs: tuple[float, ...] = ()
    probe_seconds: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    rank: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    when: str = ""
    measured: str = ""

    def __post_init__(self) -> None:
        assert not self.peak_gflops or len(self.peak_gflops) == len(self.seconds), "peaks pair with repeats"
        assert not self.peak_gbs or len(self.peak_gbs) == len(self.seconds), "bandwidths pair with repeats"
        assert not self.seconds or all(len(t) == len(self.seconds) for t in self.probe_seconds.values()), \
            "probe times pair with repeats"


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRow:
    config: str
    target: str
    label: str  # what was run, e.g. seed 002 style: Input[1x258x258x16]xFilter[3x3x16x256]/...
    seconds: float  # median kernel time (NaN: no wall time)
    flops: int  # useful FLOPs of one run
    spread: tuple[float, float] = (math.nan, math.nan)  # fastest and slowest of the repeats
    peak_gflops: float | None = None  # the device's FMA peak, measured in the same run
    ratio: float | None = None  # GFLOP/s over that peak (median of the paired per-repeat ratios)
    peak_gbs: float | None = None  # the device's bandwidth probe, measured in the same run (memory-bound kernels)
    bandwidth_ratio: float | None = None  # GB/s (each tensor once) over that bandwidth, median of the paired ratios
    steal: Mapping[str, float] = field(default_factory=dict)  # host_steal's share of the run the hypervisor took
    rank: float | None = None  # a compiler's static estimate (sweeps on a device that is not here)
    metrics: Mapping[str, float] = field(default_factory=dict)  # target-specific counters
    best: bool = False
    when: str = ""  # "cold" or "warm" where the target times both (Timings.when)
    measured: str = ""  # the clock, the pages and the threads of the time (Timings.measured)

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else math.nan

    @property
    def sort_key(self) -> float:
        """Lower is better: the static estimate when there is one, else the time."""
        return self.rank if self.rank is not None else self.seconds

    def measurements(self) -> dict[str, float]:
        """Every number beside the time, by the name the text, JSON and CSV reports give it."""
        out: dict[str, float] = {}
        if self.peak_gflops is not None:
            out["peak_gflops"] = self.peak_gflops
        if self.ratio is not None:
            out["ratio"] = self.ratio
        if self.peak_gbs is not None:
            out["peak_gbs"] = self.peak_gbs
        if self.bandwidth_ratio is not None:
            out["bandwidth_ratio"] = self.bandwidth_ratio
        if self.rank is not None:
            out["rank"] = self.rank
        return {**out, **self.steal, **self.metrics}


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceStats:
    """What a real GPU compiler made of one op's kernel, each number in that compiler's own unit:
    - rdna2 (RADV's ACO): VGPRs and SGPRs, spilled VGPRs/SGPRs, scratch bytes, waves per SIMD, code bytes,
      static latency and inverse throughput in cycles, instructions;
    - Adreno (Turnip's ir3): vgprs = vec4 full registers, waves = max waves per core, spilled_vgprs = spill
      stores (STP) and fills = spill loads (LDP), latency = estimated sync-stall cycles, inverse_throughput =
      instructions issued per wave;
    - Mali Valhall (PanVK): vgprs = work registers (32 or 64, the only two the allocator gives), waves = threads
      per slot (2: full occupancy, 1: half), spills and fills, inverse_throughput = the compiler's cycle
      estimate of its busiest unit.
    A number the compiler does not report is 0. `pipes`: the compiler's own per-unit counts for one pass over
    the shader, which the time estimate reads (Valhall: cycles per thread on fma, cvt, sfu, v, t, ls; ir3:
    instructions issued, nops, sync-stall cycles)."""

    op: int
    label: str
    vgprs: int
    sgprs: int
    spilled_vgprs: int
    spilled_sgprs: int
    scratch_bytes: int
    waves: int
    code_bytes: int
    latency: int
    inverse_throughput: float
    instructions: int = 0
    fills: int = 0
    pipes: tuple[tuple[str, float], ...] = ()

    @property
    def spills(self) -> int:
        return self.spilled_vgprs + self.spilled_sgprs

    @staticmethod
    def statistics() -> tuple[str, ...]:
        """The compiler's numbers, in the order the table prints them."""
        return tuple(f.name for f in fields(DeviceStats) if f.name not in ("op", "label", "pipes"))

    def as_dict(self) -> dict[str, int | str]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "pipes"}
        return out | ({"pipes": dict(self.pipes)} if self.pipes else {})


@dataclass(frozen=True, slots=True, kw_only=True)
class OpEstimate:
    """One op's estimated time on a GPU that is not here: its compiler's per-unit counts for one pass over the
    shader, times the passes of its innermost kept loop and the invocations of its dispatch, over the part's cores
    and clock (the busiest unit bounds it), against its compulsory DRAM traffic over the part's bandwidth."""

    op: int
    label: str
    invocations: int  # of the dispatch
    passes: int  # runs of the innermost kept loop's body per invocation
    unit_seconds: tuple[tuple[str, float], ...]  # per unit the compiler counts: the dispatch's time on it
    traffic_bytes: int  # every tensor the op reads or writes, moved once
    memory_seconds: float

    @property
    def compute_seconds(self) -> float:
        return max((s for _, s in self.unit_seconds), default=0.0)

    @property
    def seconds(self) -> float:
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def bound(self) -> str:
        """What bounds the estimate: the busiest unit, or dram."""
        if self.memory_seconds >= self.compute_seconds:
            return "dram"
        return max(self.unit_seconds, key=lambda unit: unit[1])[0]

    def as_dict(self) -> dict[str, object]:
        return {"op": self.op, "label": self.label, "invocations": self.invocations, "passes": self.passes,
                "unit_seconds": dict(self.unit_seconds), "traffic_bytes": self.traffic_bytes,
                "memory_seconds": self.memory_seconds, "compute_seconds": self.compute_seconds,
                "seconds": self.seconds, "bound": self.bound}


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelStats:
    """One kernel (a config, or one step of a network) judged by a device's compiler: per op its statistics and,
    where the part's figures are known, its estimated time; the tile variants tried instead of the default, each
    with its estimated time (None: it spills, or the problem cannot take that tile)."""

    name: str
    rows: tuple[DeviceStats, ...]
    estimates: tuple[OpEstimate, ...] = ()
    target_occupancy: int | None = None  # Adreno waves per core, Mali threads per slot; None: no target here
    occupancy_unit: str = "waves"
    variants: tuple[tuple[str, tuple[float | None, ...]], ...] = ()  # label, per op its seconds

    @property
    def seconds(self) -> float:
        return sum(e.seconds for e in self.estimates)

    def flags(self, row: DeviceStats) -> tuple[str, ...]:
        """What is wrong with one op: it spills, or it holds fewer waves (threads) than the target."""
        below = self.target_occupancy is not None and row.waves < self.target_occupancy
        return (("SPILLS",) if row.spills or row.fills else ()) + (("BELOW-TARGET",) if below else ())

    @property
    def flagged(self) -> bool:
        return any(self.flags(row) for row in self.rows)

    def faster_tiles(self) -> tuple[tuple[OpEstimate, str, float], ...]:
        """Per op whose default tile some variant beats: its default estimate, the fastest variant, its time."""
        out = []
        for index, default in enumerate(self.estimates):
            timed = [(times[index], label) for label, times in self.variants if times[index] is not None]
            if timed and min(timed)[0] < default.seconds:
                seconds, label = min(timed)
                out.append((default, label, seconds))
        return tuple(out)

    @property
    def best_tiles_seconds(self) -> float:
        """The kernel's estimate with each op at its fastest tile (the default's or a variant's)."""
        faster = {default.op: seconds for default, _, seconds in self.faster_tiles()}
        return sum(faster.get(e.op, e.seconds) for e in self.estimates)
