"""A job compiled for one GPU device, and the Target primitives both GPU targets implement alike on top of it.

Each API's program (opencl/runtime.py, vulkan/program.py) supplies four things: the output of one run, a run
with the intermediates read back, and the time of each item of one sequence (probes first, then the kernels),
`repeat` times after a warm-up; the probes for its device. Everything above that (which probes, what their
times mean, the Timings) is written here once, or in the core (measure/probes.py)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar

import numpy as np

from ...measure.primitives import Executable, Job, Probe, TargetPlan, Traced
from ...measure.records import Timings
from ...measure.tensors import KernelArgs
from ..base import Target
from .api import GpuApi
from .dispatch import GpuDispatch, GpuTensor
from .probes import ProbeKernels


class DeviceRunner(ABC):
    """What both APIs' runners share: one open device (an OpenCL context and queue, a Vulkan device and command
    pool), released by close(), usable as a context manager."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None: ...


Runner = TypeVar("Runner", bound=DeviceRunner)


def open_device(runner: Callable[[int | str | None], Runner], device: str | None,
                check: Callable[[Runner], None]) -> Runner:
    """The API's runner on `device` (an index, a name, or None: the first one), once `check` (the job against the
    device's own limits) passes; closed again when it raises, so a config the device cannot hold leaves none open."""
    opened = runner(int(device) if device is not None and device.isdigit() else device)
    try:
        check(opened)
    except BaseException:
        opened.close()
        raise
    return opened


class GpuProgram(Executable[TargetPlan], ABC):
    """The job's kernels on an open device."""

    def __init__(self, job: Job[TargetPlan], runner: DeviceRunner, *, label: str, **kwargs):
        super().__init__(job, **kwargs)
        self.runner = runner
        self.label = label  # what a bench row calls the kernel (its tiles and work-group sizes)

    def close(self) -> None:
        self.runner.close()

    @abstractmethod
    def output(self, args: KernelArgs, poison: int) -> np.ndarray: ...

    @abstractmethod
    def traced(self, args: KernelArgs, poison: int) -> Traced: ...

    probe_kernels: ClassVar[ProbeKernels]  # the API's (opencl/probes.py, vulkan/probes.py)

    def probes(self, kind: str) -> tuple[Probe, ...]:
        return self.probe_kernels.candidates(self.runner.info, kind)

    @abstractmethod
    def sequence_times(self, args: KernelArgs | None, probes: tuple[Probe, ...], repeat: int) -> list[tuple[float, ...]]:
        """Per repeat, the seconds of each probe, then of each of the job's kernels (none when args is None), all
        in one sequence on the device's queue: after one warm-up sequence (the drivers compile lazily)."""


Program = TypeVar("Program", bound=GpuProgram)  # the API's compiled job


class GpuTarget(Target[TargetPlan, Program], Generic[TargetPlan, Program]):
    """The primitives of a GPU target that are the same for every API: run, trace, time and probe through the
    program compile() opened. An API's target names its plan and program: GpuTarget[OpenCLPlan, OpenCLProgram]."""

    api: ClassVar[GpuApi]  # its differences from the other API, as data
    dtypes = ("float32", "float16")
    loop_orders = None  # a kernel per op over the whole tensor: no stripe loops, schedule.order does not apply

    @abstractmethod
    def launches(self, job: Job[TargetPlan]) -> tuple[tuple[GpuTensor, ...], tuple[GpuDispatch, ...]]:
        """The job's tensors and its kernels' launches in order, in API-neutral terms (dispatch.py)."""

    def run(self, executable: Program, args: KernelArgs, poison: int) -> np.ndarray:
        return executable.output(args, poison)

    def run_traced(self, executable: Program, args: KernelArgs, poison: int) -> Traced:
        return executable.traced(args, poison)  # intermediates are device tensors: read them back

    def probes(self, executable: Program, kind: str) -> tuple[Probe, ...]:
        return executable.probes(kind)

    def time(self, executable: Program, args: KernelArgs | None, repeat: int,
             probes: tuple[Probe, ...] = ()) -> tuple[Timings, ...]:
        rows = executable.sequence_times(args, probes, repeat)
        beside = {p.kind: tuple(row[i] for row in rows) for i, p in enumerate(probes)}
        if args is None:
            return (Timings(label="probes", probe_seconds=beside),)
        return (Timings(label=executable.label, seconds=tuple(sum(row[len(probes):]) for row in rows),
                        probe_seconds=beside),)
