"""The opencl target on this machine: pyopencl on PoCL (or any OpenCL device). The source that runs is the one
`kernelgen build` writes, its kernels launched in the plan's order with the plan's NDRange on tensors that stay on
the device between launches; intermediates and the output start from the poison byte.

Timing: each repeat's kernel time from profiling events, the probes the core asks for (probes.py: the FMA peak,
and the bandwidth triad for a memory-bound kernel) launched first in the same sequence, so both are taken over
the same stretch of a busy host's load.
"""
from __future__ import annotations

import numpy as np

from ...measure.primitives import Probe
from ...measure.tensors import KernelArgs, poisoned
from ..base import Job, Traced
from ..gpu.dispatch import GpuDispatch, GpuTensor, Role, TensorKind, three
from ..gpu.program import GpuProgram, open_device
from .args import Arg, BufferArg, ImageArg, Launch
from .options import half_arithmetic
from .plan import OpenCLPlan, check_device_limit
from .probes import PROBES
from .toolchain import OpenCLRunner


class OpenCLProgram(GpuProgram[OpenCLPlan]):
    """The job's kernels on an open device (its context and queue), launched in order."""

    runner: OpenCLRunner
    probe_kernels = PROBES

    def __init__(self, job: Job[OpenCLPlan], runner: OpenCLRunner, *, notes: tuple[str, ...] = (),
                 cannot_run: str = ""):
        cplan = job.target_plan
        super().__init__(job, runner, label=f"{cplan.variant} tile={list(cplan.tile)} local={list(cplan.local_size)}",
                         notes=notes, cannot_run=cannot_run)
        half = half_arithmetic(job.config)
        source = job.files[f"{job.config.name}.cl"]
        # fp16: the half convs and, in their places, the pools (fp32 math on half storage either way), then padding
        kernels = cplan.half_kernels + tuple(k for k in cplan.kernels if not k.is_conv and not k.is_pool) if half \
            else cplan.kernels
        self.launches = [Launch(source, k.name, k.args, k.global_size, k.local_size) for k in kernels]
        # a device without cl_khr_fp16 times the float-arithmetic kernels on the same half storage
        self.timed_launches = self.launches if not cannot_run else [
            Launch(source, k.name, k.args, k.global_size, k.local_size) for k in cplan.kernels]

    def tensors(self, args: KernelArgs, poison: int, keep_temps: bool = False) -> dict[str, Arg]:
        return host_arrays(self.job.target_plan, args, poison, keep_temps)

    def output(self, args: KernelArgs, poison: int) -> np.ndarray:
        return self.runner.run_sequence(self.launches, self.tensors(args, poison)).outputs["output"].reshape(-1)

    def traced(self, args: KernelArgs, poison: int) -> Traced:
        """One run with every intermediate read back, each unpacked by its storage's layout (image or buffer)."""
        result = self.runner.run_sequence(self.launches, self.tensors(args, poison, keep_temps=True))
        cplan = self.job.target_plan
        temps = {s.name: s for s in cplan.storages if s.role is Role.TEMP}
        inter = tuple(temps[f"temp{j}"].layout.unpack(result.outputs[f"temp{j}"]).astype(np.float32)
                      for j in range(1, len(self.job.config.ops)))
        return Traced(output=result.outputs["output"].reshape(-1), intermediates=inter)

    def sequence_times(self, args: KernelArgs | None, probes: tuple[Probe, ...], repeat: int) -> list[tuple[float, ...]]:
        # a device without cl_khr_fp16 times the float-arithmetic kernels on the same half storage
        launches, tensors = ([*self.timed_launches], self.tensors(args, 0)) if args is not None else ([], {})
        launches = [p.kernel.launch for p in probes] + launches
        for p in probes:
            tensors |= p.kernel.tensors
        self.runner.run_sequence(launches, tensors)  # warms PoCL's JIT and caches
        return [tuple(ns * 1e-9 for ns in self.runner.run_sequence(launches, tensors).launch_times_ns[0])
                for _ in range(repeat)]


def open_program(job: Job[OpenCLPlan], device: str | None) -> OpenCLProgram:
    cplan = job.target_plan
    runner = open_device(OpenCLRunner, device, lambda opened: check_device_limit(
        job.config, cplan, opened.info.image2d_max, opened.info.name, opened.info.max_work_group_size))
    info = runner.info
    notes: tuple[str, ...] = ()
    cannot_run = ""
    if cplan.half_kernels and not info.has_fp16:
        note = f"full-fp16 kernels not run: {info.name} lacks cl_khr_fp16"
        cannot_run, notes = (note, ()) if half_arithmetic(job.config) else ("", (note,))
    return OpenCLProgram(job, runner, notes=notes, cannot_run=cannot_run)


def host_arrays(cplan: OpenCLPlan, args: KernelArgs, poison: int, keep_temps: bool = False) -> dict[str, Arg]:
    """Every tensor of the launch plan as a harness argument, packed by the opencl plan's own storages (images
    or buffers, which may differ from the core plan's layouts); the others filled with the poison byte. With
    keep_temps the intermediates are read back too."""
    dtype = np.dtype(np.float16 if cplan.dtype == "float16" else np.float32)
    filters = iter(a for name, a in args.logical.items() if name.startswith("filter"))
    biases = iter(a for name, a in args.logical.items() if name.startswith("bias"))
    tensors: dict[str, Arg] = {}
    for s in cplan.storages:
        if s.role is Role.INPUT:
            array = s.layout.pack(args.logical["input"]).astype(dtype)
        elif s.role is Role.FILTER:
            array = s.layout.pack(next(filters)).astype(dtype)
        elif s.role is Role.BIAS:
            array = s.layout.pack(next(biases)).astype(dtype)
        elif s.role is Role.SIDE:
            array = s.layout.pack(args.logical[s.name]).astype(dtype)
        else:
            array = poisoned(int(np.prod(s.shape)), dtype, poison).reshape(s.shape)
        wrap = ImageArg if s.kind is TensorKind.IMAGE else BufferArg
        kept = s.role is Role.OUTPUT or keep_temps and s.role is Role.TEMP
        tensors[s.name] = wrap(np.ascontiguousarray(array), output=kept)
    return tensors


def launches(cplan: OpenCLPlan) -> tuple[tuple[GpuTensor, ...], tuple[GpuDispatch, ...]]:
    """The storages (images or buffers) and the fp32-arithmetic kernels' NDRanges, API-neutral."""
    return cplan.storages, tuple(GpuDispatch(kernel=k.name, tensors=k.args, work_group=k.work_group_3d,
                                             groups=three(tuple(g // w for g, w in zip(k.global_size, k.local_size))))
                                 for k in cplan.kernels)
