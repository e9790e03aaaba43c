"""What the core's loops need of a target, defined by the core: a `Job` (a config planned and rendered once), the
`Executable` a target compiles it into, and the primitives (`Primitives`) every registered target supplies
(kernelgen/targets/base.py's Target implements them). The loops know targets only through this interface.

A Job and an Executable are generic in the target plan they carry: a target declares its plan type once
(`class Vulkan(Target[VulkanPlan])`), and its primitives, which take a `Job[VulkanPlan]` or a subclass of
`Executable[VulkanPlan]`, read `job.target_plan` as that type. The loops hold them as `Job[Any]`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Mapping, Protocol, TypeVar

import numpy as np

from ..config import Config
from ..plan_types import Plan
from ..toolstatus import ToolStatus
from .compare import Roundoff
from .records import DeviceStats, Timings
from .tensors import KernelArgs


TargetPlan = TypeVar("TargetPlan")  # a target's own plan on top of the core plan (None: it needs none)


@dataclass(frozen=True, slots=True)
class Job(Generic[TargetPlan]):
    """One config's kernels for one target, planned and rendered once and handed down to every stage."""

    config: Config
    plan: Plan
    target_plan: TargetPlan  # the target's tiling, of the type its Target declares
    files: Mapping[str, str]  # file name -> text, as `kernelgen build` writes them
    # where the files were read from instead of rendered, and which of them differ from the rendered ones
    # (`validate --sources DIR`, measure/sources.py); said beside the verdict. "": rendered from the config
    origin: str = ""


@dataclass(frozen=True, slots=True)
class Traced:
    """One run with each op's output kept: what the op-by-op check holds every op of a chain to."""

    output: np.ndarray  # flat, in the plan's output layout (as run returns it)
    intermediates: tuple[np.ndarray, ...]  # ops 1 .. n-1's outputs, logical NHWC, as the next op read them


FMA = "fma"  # a probe kind: the device's multiply-add peak, `work` FLOPs a run
BANDWIDTH = "bandwidth"  # the device's memory bandwidth (STREAM's triad), `work` bytes a run


@dataclass(frozen=True, slots=True, eq=False)
class Probe:
    """A kernel that measures the device rather than a config (kind FMA or BANDWIDTH): the target says what to run
    (`kernel`, its own record: a launch and its buffers, a compiled function); the core times it with the target's
    time primitive, the kernels' own, right before each repeat (measure/probes.py)."""

    kind: str
    work: int  # FLOPs (FMA) or bytes moved (BANDWIDTH) per run
    device: str  # the device it measures: a target's candidates are chosen among once per device
    shape: str  # which of the target's candidates
    kernel: Any


class Executable(Generic[TargetPlan]):
    """A compiled job on this machine's device. Targets subclass it with what their run needs (a library, a
    binary, an open device); the core closes it when done (`with target.compile(...) as exe:`)."""

    def __init__(self, job: Job[TargetPlan], *, notes: tuple[str, ...] = (), cannot_run: str = "", compile_only: str = ""):
        self.job = job
        self.notes = notes  # said beside a pass (the fp16 kernels this device could not run)
        self.cannot_run = cannot_run  # why this device cannot run the kernel at all: a 'not run' row
        self.compile_only = compile_only  # built for a device nothing here runs: a 'compiled' row saying what

    def close(self) -> None:
        """Release the device (a queue, a context); nothing by default."""

    def __enter__(self) -> Executable[TargetPlan]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Primitives(Protocol):
    """A target as the loops call it."""

    name: str
    torch_reference: bool

    def build(self, config: Config, plan: Plan) -> Job: ...

    def toolchain(self) -> tuple[ToolStatus, ...]: ...

    def compile(self, job: Job, workdir: Path, device: str | None = None) -> Executable: ...

    def run(self, executable: Executable, args: KernelArgs, poison: int) -> np.ndarray: ...

    def run_poisoned(self, executable: Executable, args: KernelArgs,
                     poisons: tuple[int, ...]) -> dict[int, np.ndarray]: ...

    def run_traced(self, executable: Executable, args: KernelArgs, poison: int) -> Traced | None: ...

    def time(self, executable: Executable, args: KernelArgs | None, repeat: int,
             probes: tuple[Probe, ...] = ()) -> tuple[Timings, ...]: ...

    def probes(self, executable: Executable, kind: str) -> tuple[Probe, ...]: ...

    def roundoff(self, job: Job) -> Roundoff: ...

    def stats(self, job: Job, device: str, gpu: str | None = None) -> tuple[DeviceStats, ...]: ...

    def estimate(self, job: Job) -> Timings | None: ...
