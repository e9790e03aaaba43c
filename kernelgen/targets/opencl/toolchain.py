"""OpenCL toolchain harness: build, run and time kernels through pyopencl (PoCL on the CPU here).

pyopencl is imported inside functions only, so `import kernelgen` works without it; every
failure is a ToolchainError that names what to install or carries the build log.
Tensors are numpy arrays wrapped in frozen Arg records; outputs are pre-filled by the caller
(a NaN sentinel, say) and uploaded before each run, so elements a kernel misses keep it.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ...errors import ToolchainError

from .args import (Arg, BufferArg, ImageArg, Key, Launch, LocalArg, RunResult, ScalarArg,  # noqa: F401
                          check_args as _check_args, resolve as _resolve)
from ...toolstatus import ToolStatus
from ..gpu.binding import import_binding
from ..gpu.program import DeviceRunner

if TYPE_CHECKING:
    import pyopencl as cl

PYOPENCL_HINT = "pip install 'kernelgen[opencl]'"
ICD_HINT = (
    "install an OpenCL driver (ICD): apt-get install pocl-opencl-icd ocl-icd-opencl-dev "
    "for the CPU, or your GPU vendor's ICD"
)
# Argument names and types let _check_args refuse a mismatched argument: PoCL takes a scalar
# for a pointer argument without complaint and the kernel then segfaults the whole process.
# -w: on a CPU without AVX-512 (most hosts), PoCL's clang notes "-Wpsabi" on every call of a float16 builtin
# (vload16, fma) and prints "N warnings generated." to the terminal; PoCL rejects -Wno-psabi, so all warnings
# are off here. The kernels' own warnings are caught where they can be read: tests/test_opencl_warnings.py
# compiles every generated kernel with clang -Wall -Wextra for an AVX2 CPU and requires none.
ALWAYS_BUILD_OPTIONS = ("-cl-kernel-arg-info", "-w")


def _import_cl() -> ModuleType:
    return import_binding("pyopencl", f"OpenCL needs the Python package pyopencl: {PYOPENCL_HINT}")


def _devices(cl: ModuleType) -> list[cl.Device]:
    """Every device of every platform, in platform order: the order `device=<int>` indexes."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # the ICD loader raises PLATFORM_NOT_FOUND_KHR without a driver
        raise ToolchainError(f"no OpenCL platform found ({exc}); {ICD_HINT}") from exc
    devices = []
    for platform in platforms:
        try:
            devices.extend(platform.get_devices())
        except cl.Error:  # a platform without devices raises DEVICE_NOT_FOUND; others count
            continue
    if not devices:
        raise ToolchainError(f"no OpenCL device found; {ICD_HINT}")
    return devices


def _describe(device: cl.Device) -> str:
    return f"{device.platform.name.strip()} / {device.name.strip()} ({device.version.strip()})"


# ---------------------------------------------------------------- availability


def status() -> tuple[ToolStatus, ...]:
    """pyopencl, then one entry per OpenCL device (or one not-found entry). Never raises."""
    missing_device = ToolStatus("opencl-device", False, "", ICD_HINT)
    try:
        cl = _import_cl()
    except ToolchainError:  # the drivers may well be there: the Python package is what is missing
        return (ToolStatus("pyopencl", False, "", PYOPENCL_HINT),
                ToolStatus("opencl-device", False, "not checked: the Python package 'pyopencl' is missing",
                           PYOPENCL_HINT))
    found = ToolStatus("pyopencl", True, cl.VERSION_TEXT, PYOPENCL_HINT)
    try:
        devices = _devices(cl)
    except Exception:  # a diagnostic must not raise; OpenCLRunner() reports the detail
        return (found, missing_device)
    return (found, *(ToolStatus("opencl-device", True, _describe(d), ICD_HINT) for d in devices))


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    name: str
    platform: str
    version: str
    image2d_max: tuple[int, int]  # (width, height) in texels
    image_support: bool
    has_fp16: bool  # cl_khr_fp16: `half` arithmetic in kernels; half images do not need it
    half_images: bool  # RGBA CL_HALF_FLOAT read-write images
    max_work_group_size: int
    compute_units: int
    local_mem_bytes: int
    cpu: bool = False  # CL_DEVICE_TYPE_CPU (PoCL): its memory is the host's, behind the host's caches


# ---------------------------------------------------------------- runner


class OpenCLRunner(DeviceRunner):
    """One device, its context and an in-order profiling queue; programs cached by source."""

    def __init__(self, device: int | str | None = None) -> None:
        cl = self._cl = _import_cl()
        self._device = _select_device(_devices(cl), device)
        try:
            self._context = cl.Context([self._device])
            self._queue = cl.CommandQueue(
                self._context, properties=cl.command_queue_properties.PROFILING_ENABLE
            )
        except cl.Error as exc:
            raise ToolchainError(f"cannot open {_describe(self._device)}: {exc}") from exc
        self.info = _device_info(cl, self._device, self._context)
        self._programs: dict[tuple[str, tuple[str, ...]], cl.Program] = {}

    def close(self) -> None:
        self._queue.finish()
        self._programs.clear()

    def compile(self, source: str, options: Sequence[str] = ()) -> cl.Program:
        key = (source, tuple(options))
        if key not in self._programs:
            cl = self._cl
            with warnings.catch_warnings():
                # pyopencl only warns that a log exists (set an env var); build_log() returns it
                warnings.simplefilter("ignore", cl.CompilerWarning)
                try:
                    program = cl.Program(self._context, source).build(
                        options=[*options, *ALWAYS_BUILD_OPTIONS]
                    )
                except cl.Error as exc:  # str(exc) carries the compiler's build log
                    raise ToolchainError(
                        f"OpenCL build failed on {self.info.name}:\n{exc}"
                    ) from exc
            self._programs[key] = program
        return self._programs[key]

    def build_log(self, program: cl.Program) -> str:
        return program.get_build_info(self._device, self._cl.program_build_info.LOG)

    def run(
        self,
        source: str,
        kernel: str,
        args: Sequence[Arg],
        global_size: tuple[int, ...],
        local_size: tuple[int, ...] | None = None,
        *,
        repeat: int = 1,
        options: Sequence[str] = (),
    ) -> RunResult:
        """Launch one kernel; outputs are keyed by the argument's position."""
        local = None if local_size is None else tuple(local_size)
        launch = Launch(source, kernel, tuple(range(len(args))), tuple(global_size), local,
                        tuple(options))
        return self._execute((launch,), dict(enumerate(args)), repeat)

    def run_sequence(
        self, launches: Sequence[Launch], args: Mapping[str, Arg], *, repeat: int = 1
    ) -> RunResult:
        """Launch kernels in order on shared named tensors, which stay on the device between.

        An intermediate is an ImageArg or BufferArg with output=False: uploaded (its sentinel)
        and never read back.
        """
        for launch in launches:
            unknown = [a for a in launch.args if isinstance(a, (str, int)) and a not in args]
            if unknown:
                raise ToolchainError(f"{launch.kernel}: no tensor named {unknown}")
        return self._execute(tuple(launches), dict(args), repeat)

    # -------------------------------------------------------- internals

    def _execute(
        self, launches: tuple[Launch, ...], tensors: dict[Key, Arg], repeat: int
    ) -> RunResult:
        cl = self._cl
        if repeat < 1:
            raise ToolchainError(f"repeat must be at least 1, got {repeat}")
        kernels = [self._kernel(launch) for launch in launches]
        for kernel, launch in zip(kernels, launches):
            _check_args(cl, kernel, launch, tensors)
        memory: dict[Key, cl.MemoryObject] = {}
        try:
            for key, arg in tensors.items():
                if isinstance(arg, (BufferArg, ImageArg)):
                    memory[key] = self._allocate(key, arg)
            times, per_launch = [], []
            for _ in range(repeat):
                # Every repeat starts from the caller's arrays, so sentinels and accumulators
                # are the same on each run and the outputs read back come from one clean run.
                for key, mem in memory.items():
                    self._copy(mem, tensors[key].array, to_device=True)
                events = [self._enqueue(k, l, tensors, memory) for k, l in zip(kernels, launches)]
                cl.wait_for_events(events)
                per_launch.append(tuple(float(e.profile.end - e.profile.start) for e in events))
                times.append(sum(per_launch[-1]))
            outputs = {}
            for key, arg in tensors.items():
                if isinstance(arg, (BufferArg, ImageArg)) and arg.output:
                    outputs[key] = np.empty_like(arg.array)
                    self._copy(memory[key], outputs[key], to_device=False)
        except cl.Error as exc:
            names = ", ".join(launch.kernel for launch in launches)
            raise ToolchainError(f"OpenCL run of {names} failed: {exc}") from exc
        finally:
            for mem in memory.values():
                mem.release()  # free device memory now rather than at garbage collection
        return RunResult(outputs, tuple(times), tuple(per_launch))

    def _kernel(self, launch: Launch) -> cl.Kernel:
        program = self.compile(launch.source, launch.options)
        try:
            kernel = self._cl.Kernel(program, launch.kernel)
        except self._cl.Error as exc:
            raise ToolchainError(
                f"no kernel {launch.kernel!r} in the program; it defines {program.kernel_names!r}"
            ) from exc
        if kernel.num_args != len(launch.args):
            raise ToolchainError(
                f"{launch.kernel} takes {kernel.num_args} arguments, {len(launch.args)} given"
            )
        return kernel

    def _allocate(self, key: Key, arg: BufferArg | ImageArg) -> cl.MemoryObject:
        cl, info = self._cl, self.info
        flags = cl.mem_flags.READ_WRITE  # one kernel of a sequence writes what the next reads
        if isinstance(arg, BufferArg):
            return cl.Buffer(self._context, flags, arg.array.nbytes)
        max_w, max_h = info.image2d_max
        if not info.image_support:
            raise ToolchainError(f"image {key!r}: {info.name} has no image support")
        if arg.width > max_w or arg.height > max_h:
            raise ToolchainError(
                f"image {key!r} is {arg.width}x{arg.height} texels (array {arg.array.shape}), "
                f"over the image2d limit {max_w}x{max_h} (CL_DEVICE_IMAGE2D_MAX_WIDTH x HEIGHT) "
                f"of {info.name}"
            )
        half = arg.array.dtype == np.float16
        if half and not info.half_images:
            raise ToolchainError(f"image {key!r}: {info.name} has no RGBA CL_HALF_FLOAT images")
        channel = cl.channel_type.HALF_FLOAT if half else cl.channel_type.FLOAT
        fmt = cl.ImageFormat(cl.channel_order.RGBA, channel)
        # pyopencl 2026 deprecates the Image constructor for create_image; older releases lack it
        create = getattr(cl, "create_image", cl.Image)
        return create(self._context, flags, fmt, shape=(arg.width, arg.height))

    def _copy(self, mem: cl.MemoryObject, host: np.ndarray, *, to_device: bool) -> None:
        cl = self._cl
        src, dst = (host, mem) if to_device else (mem, host)
        if isinstance(mem, cl.Image):
            region = (host.shape[1] // 4, host.shape[0])
            cl.enqueue_copy(self._queue, dst, src, origin=(0, 0), region=region, is_blocking=True)
        else:
            cl.enqueue_copy(self._queue, dst, src, is_blocking=True)

    def _enqueue(
        self,
        kernel: cl.Kernel,
        launch: Launch,
        tensors: dict[Key, Arg],
        memory: dict[Key, cl.MemoryObject],
    ) -> cl.Event:
        cl = self._cl
        for index, item in enumerate(launch.args):
            arg = _resolve(item, tensors)
            if isinstance(arg, ScalarArg):
                value = arg.numpy_value()
            elif isinstance(arg, LocalArg):
                value = cl.LocalMemory(arg.nbytes)
            else:
                value = memory[item]
            try:
                kernel.set_arg(index, value)
            except cl.Error as exc:
                raise ToolchainError(
                    f"{launch.kernel}: argument {index} ({item!r}): {exc}"
                ) from exc
        return cl.enqueue_nd_range_kernel(
            self._queue, kernel, launch.global_size, launch.local_size
        )


def _select_device(devices: list[cl.Device], device: int | str | None) -> cl.Device:
    listing = "; ".join(f"{i}: {_describe(d)}" for i, d in enumerate(devices))
    if device is None:
        return devices[0]
    if isinstance(device, int):
        if 0 <= device < len(devices):
            return devices[device]
        raise ToolchainError(f"no OpenCL device {device}; devices are {listing}")
    for d in devices:
        if device.lower() in f"{d.platform.name} {d.name}".lower():
            return d
    raise ToolchainError(f"no OpenCL device matches {device!r}; devices are {listing}")


def _device_info(cl: ModuleType, device: cl.Device, context: cl.Context) -> DeviceInfo:
    half_images = False
    if device.image_support:
        rw, image2d = cl.mem_flags.READ_WRITE, cl.mem_object_type.IMAGE2D
        half_images = any(
            (f.channel_order, f.channel_data_type)
            == (cl.channel_order.RGBA, cl.channel_type.HALF_FLOAT)
            for f in cl.get_supported_image_formats(context, rw, image2d)
        )
    return DeviceInfo(
        name=device.name.strip(),
        platform=device.platform.name.strip(),
        version=device.version.strip(),
        image2d_max=(int(device.image2d_max_width), int(device.image2d_max_height)),
        image_support=bool(device.image_support),
        has_fp16="cl_khr_fp16" in device.extensions.split(),
        half_images=half_images,
        max_work_group_size=int(device.max_work_group_size),
        compute_units=int(device.max_compute_units),
        local_mem_bytes=int(device.local_mem_size),
        cpu=bool(device.type & cl.device_type.CPU),
    )
