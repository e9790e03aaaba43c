"""Kernel arguments of the OpenCL harness and the check that they match a kernel's declaration.

Frozen records wrap numpy arrays; the harness uploads them before each run and reads back
the ones marked `output`.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ...errors import ToolchainError

if TYPE_CHECKING:
    import pyopencl as cl


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: numpy arrays have no truth value
class BufferArg:
    """A __global buffer holding `array`; read back into RunResult.outputs when `output`."""

    array: np.ndarray
    output: bool = False

    def __post_init__(self) -> None:
        if self.array.size == 0:
            raise ToolchainError("BufferArg: OpenCL buffers cannot be empty")
        object.__setattr__(self, "array", np.ascontiguousarray(self.array))


_IMAGE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


@dataclass(frozen=True, slots=True, eq=False)
class ImageArg:
    """An RGBA image2d of height x width texels from an array of shape [height, width*4].

    float32 arrays become CL_FLOAT images, float16 arrays CL_HALF_FLOAT images; kernels see
    both through read_imagef/write_imagef, so half storage needs no cl_khr_fp16.
    """

    array: np.ndarray
    output: bool = False

    def __post_init__(self) -> None:
        a = self.array
        if a.ndim != 2 or a.shape[1] % 4 or a.size == 0 or a.dtype not in _IMAGE_DTYPES:
            raise ToolchainError(
                f"ImageArg: expected a non-empty float32 or float16 array of shape "
                f"[height, width*4], got {a.dtype} {a.shape}"
            )
        object.__setattr__(self, "array", np.ascontiguousarray(a))

    @property
    def width(self) -> int:
        return int(self.array.shape[1] // 4)

    @property
    def height(self) -> int:
        return int(self.array.shape[0])


@dataclass(frozen=True, slots=True)
class ScalarArg:
    """A by-value kernel argument; `dtype` is the numpy name of the kernel's type."""

    value: int | float
    dtype: str = "float32"

    def __post_init__(self) -> None:
        np.dtype(self.dtype)  # raises TypeError on a misspelt name, before any launch

    def numpy_value(self) -> np.generic:
        return np.dtype(self.dtype).type(self.value)


@dataclass(frozen=True, slots=True)
class LocalArg:
    """A __local pointer argument of `nbytes` bytes per work-group."""

    nbytes: int


Arg = BufferArg | ImageArg | ScalarArg | LocalArg
Key = str | int  # run() keys tensors by position, run_sequence() by name


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel of a sequence; `args` names shared tensors or gives values inline."""

    source: str
    kernel: str
    args: tuple[Key | ScalarArg | LocalArg, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None = None
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.global_size) <= 3:
            raise ToolchainError(f"{self.kernel}: global_size needs 1 to 3 dimensions")
        if self.local_size is not None and len(self.local_size) != len(self.global_size):
            raise ToolchainError(f"{self.kernel}: local_size and global_size differ in rank")


@dataclass(frozen=True, slots=True, eq=False)
class RunResult:
    outputs: Mapping[Key, np.ndarray]  # images come back as [height, width*4] of their dtype
    kernel_times_ns: tuple[float, ...]  # one per repeat, summed over the kernels of a sequence
    # per repeat, one time per launch of the sequence: a probe launched first is timed apart from the kernels
    launch_times_ns: tuple[tuple[float, ...], ...] = ()

    @property
    def median_ns(self) -> float:
        return statistics.median(self.kernel_times_ns)


def resolve(item: Key | ScalarArg | LocalArg, tensors: dict[Key, Arg]) -> Arg:
    return item if isinstance(item, (ScalarArg, LocalArg)) else tensors[item]


# OpenCL C scalar type -> numpy dtype, for the element type of a pointer or a by-value scalar
_CL_TYPES = {
    "char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16", "int": "int32",
    "uint": "uint32", "long": "int64", "ulong": "uint64", "half": "float16",
    "float": "float32", "double": "float64",
}
_CL_TYPE_NAME = re.compile(r"(?P<base>[a-z]+)(?:2|3|4|8|16)?(?P<pointer>\*?)")


def check_args(
    cl: ModuleType, kernel: cl.Kernel, launch: Launch, tensors: dict[Key, Arg]
) -> None:
    """Refuse arguments whose kind or element type differs from the kernel's declaration."""
    problems = []
    for index, item in enumerate(launch.args):
        arg = resolve(item, tensors)
        try:
            name = kernel.get_arg_info(index, cl.kernel_arg_info.NAME)
            type_name = kernel.get_arg_info(index, cl.kernel_arg_info.TYPE_NAME).split()[-1]
            space = kernel.get_arg_info(index, cl.kernel_arg_info.ADDRESS_QUALIFIER)
        except cl.Error:  # a driver may withhold argument info despite -cl-kernel-arg-info
            return
        match = _CL_TYPE_NAME.fullmatch(type_name)
        pointer = bool(match and match["pointer"])
        base = _CL_TYPES.get(match["base"]) if match else None
        if type_name.startswith("image"):
            expected: type = ImageArg
        elif pointer:
            expected = LocalArg if space == cl.kernel_arg_address_qualifier.LOCAL else BufferArg
        else:
            expected = ScalarArg
        what = f"{name} ({type_name})"
        if not isinstance(arg, expected):
            problems.append(f"{what} needs a {expected.__name__}, got {type(arg).__name__}")
        elif isinstance(arg, BufferArg) and base and arg.array.dtype != base:
            problems.append(f"{what} needs {base} data, got {arg.array.dtype}")
        elif isinstance(arg, ScalarArg) and base and not pointer and np.dtype(arg.dtype) != base:
            problems.append(f"{what} needs dtype {base}, got {arg.dtype}")
    if problems:
        raise ToolchainError(f"{launch.kernel}: " + "; ".join(problems))
