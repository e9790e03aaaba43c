"""The opencl target on this machine: pyopencl on PoCL (or any OpenCL device). The source that runs is the one
`kernelgen build` writes, its kernels launched in the plan's order with the plan's NDRange on tensors that stay on
the device between launches; intermediates and the output start from the poison byte.

Timing: each repeat's kernel time from profiling events, interleaved with the device's FMA peak (probe.py), so
both are taken over the same stretch of a busy host's load; a memory-bound (depthwise) kernel's also right after
the bandwidth triad (bandwidth.py) in the same sequence.
"""
from __future__ import annotations

import numpy as np

from ...measure.records import Timings
from ...measure.tensors import KernelArgs, poisoned
from ..base import Executable, Job, Traced
from .args import Arg, BufferArg, ImageArg, Launch
from .model import Role, StorageKind
from .options import half_arithmetic
from .plan import OpenCLPlan, check_device_limit
from .bandwidth import bandwidth_probe
from .probe import fma_peak_gflops
from .toolchain import OpenCLRunner


class OpenCLProgram(Executable[OpenCLPlan]):
    """The job's kernels on an open device (its context and queue), launched in order."""

    def __init__(self, job: Job[OpenCLPlan], runner: OpenCLRunner, *, notes: tuple[str, ...] = (), cannot_run: str = ""):
        super().__init__(job, notes=notes, cannot_run=cannot_run)
        self.runner = runner
        cplan = job.target_plan
        half = half_arithmetic(job.config)
        source = job.files[f"{job.config.name}.cl"]
        # fp16: the half convs and, in their places, the pools (fp32 math on half storage either way), then padding
        kernels = cplan.half_kernels + tuple(k for k in cplan.kernels if not k.is_conv and not k.is_pool) if half \
            else cplan.kernels
        self.launches = [Launch(source, k.name, k.args, k.global_size, k.local_size) for k in kernels]
        # a device without cl_khr_fp16 times the float-arithmetic kernels on the same half storage
        self.timed_launches = self.launches if not cannot_run else [
            Launch(source, k.name, k.args, k.global_size, k.local_size) for k in cplan.kernels]

    def close(self) -> None:
        self.runner.close()

    def tensors(self, args: KernelArgs, poison: int, keep_temps: bool = False) -> dict[str, Arg]:
        return host_arrays(self.job.target_plan, args, poison, keep_temps)


def open_program(job: Job[OpenCLPlan], device: str | None) -> OpenCLProgram:
    runner = OpenCLRunner(int(device) if device is not None and device.isdigit() else device)
    cplan = job.target_plan
    info = runner.info
    try:
        check_device_limit(job.config, cplan, info.image2d_max, info.name, info.max_work_group_size)
    except Exception:  # a config this device cannot hold: no device left open
        runner.close()
        raise
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
        wrap = ImageArg if s.kind is StorageKind.IMAGE else BufferArg
        kept = s.role is Role.OUTPUT or keep_temps and s.role is Role.TEMP
        tensors[s.name] = wrap(np.ascontiguousarray(array), output=kept)
    return tensors


def run(program: OpenCLProgram, args: KernelArgs, poison: int) -> np.ndarray:
    result = program.runner.run_sequence(program.launches, program.tensors(args, poison))
    return result.outputs["output"].reshape(-1)


def run_traced(program: OpenCLProgram, args: KernelArgs, poison: int) -> Traced:
    """One run with every intermediate read back, each unpacked by its storage's layout (image or buffer)."""
    result = program.runner.run_sequence(program.launches, program.tensors(args, poison, keep_temps=True))
    cplan = program.job.target_plan
    temps = {s.name: s for s in cplan.storages if s.role is Role.TEMP}
    inter = tuple(temps[f"temp{j}"].layout.unpack(result.outputs[f"temp{j}"]).astype(np.float32)
                  for j in range(1, len(program.job.config.ops)))
    return Traced(output=result.outputs["output"].reshape(-1), intermediates=inter)


def timings(program: OpenCLProgram, args: KernelArgs, repeat: int) -> tuple[Timings, ...]:
    runner, tensors = program.runner, program.tensors(args, 0)
    launches = program.timed_launches
    runner.run_sequence(launches, tensors)  # warms PoCL's JIT and caches
    # a memory-bound kernel runs right after the bandwidth triad, in the same sequence on the same queue
    probe = bandwidth_probe() if program.job.plan.memory_bound else None
    if probe is not None:
        launches, tensors = [probe.launch, *launches], {**tensors, **probe.tensors}
        runner.run_sequence(launches, tensors)  # the triad's JIT
    times, peaks, bandwidths = [], [], []
    for _ in range(repeat):
        # Kernel runs interleaved with peak runs: with other jobs on the 2 cores, both are taken over the same
        # stretch of load.
        launch_ns = runner.run_sequence(launches, tensors).launch_times_ns[0]
        if probe is not None:
            bandwidths.append(probe.gbs(launch_ns[0]))
            launch_ns = launch_ns[1:]
        times.append(sum(launch_ns) * 1e-9)
        peaks.append(fma_peak_gflops(runner, runs=2))
    cplan = program.job.target_plan
    return (Timings(label=f"{cplan.variant} tile={list(cplan.tile)} local={list(cplan.local_size)}",
                    seconds=tuple(times), peak_gflops=tuple(peaks), peak_gbs=tuple(bandwidths)),)
