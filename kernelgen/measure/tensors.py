"""The tensors a kernel runs on, made once for every target: fresh random values (or an imported model's weights,
or the user's own arrays), in the logical layouts the references read and packed by the plan's layouts for the
targets. Outputs and workspaces start from poison bytes, so an element the kernel forgets shows.

Poison is a byte: 0xFF fills a float32 or float16 buffer with NaN; uint8 runs twice, from 0xA5 and from 0x5A, so
an output taken from never-written memory differs between the runs (XNNPACK's sentinels, STYLE.md rule 11).
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ..config import Config
from ..errors import ConfigError, ConfigProblem
from ..files import FileRefused, display_path, read_regular
from ..onnx import oracle as onnx_oracle
from ..plan_types import Plan, Tensor

FLOAT_POISONS = (0xFF,)
UINT8_POISONS = (0xA5, 0x5A)
INPUT_PADDING_BYTE = 0xA5  # what packed quantized inputs hold in layout padding the kernel must never read


def poisons(dtype: str) -> tuple[int, ...]:
    return UINT8_POISONS if dtype == "uint8" else FLOAT_POISONS


def poisoned(elements: int, dtype: np.dtype, poison: int) -> np.ndarray:
    """A flat array of `elements` whose every byte is `poison`."""
    return np.full(elements * np.dtype(dtype).itemsize, poison, dtype=np.uint8).view(dtype)


@dataclass(frozen=True, slots=True)
class KernelArgs:
    """The kernel's inputs by the plan's tensor names (input, filter<j>, bias<j>), in argument order.

    logical: what the references read (float64-exact values: inputs of a float16 config are already rounded to
    half; quantized tensors as their integers); physical: flat and contiguous, packed by the plan's layouts (a
    quantized tensor as its bytes, int32 biases as they are) - what a kernel with the plan's layouts takes."""

    logical: Mapping[str, np.ndarray]
    physical: Mapping[str, np.ndarray]

    def physical_list(self) -> list[np.ndarray]:
        return list(self.physical.values())

    def filters(self, ops: int) -> list[np.ndarray | None]:
        """Op j's filter at j - 1; None for a pool, which has none."""
        return [self.logical.get(f"filter{j}") for j in range(1, ops + 1)]

    def biases(self, ops: int) -> list[np.ndarray | None]:
        return [self.logical.get(f"bias{j}") for j in range(1, ops + 1)]

    def sides(self) -> dict[str, np.ndarray]:
        """The side inputs by their config names (the kernel's side_<name> arguments), in float64."""
        return {name[len("side_"):]: a.astype(np.float64) for name, a in self.logical.items()
                if name.startswith("side_")}


def input_tensors(plan: Plan) -> tuple[Tensor, ...]:
    """Every tensor the kernel reads, in argument order (the output is the plan's last tensor)."""
    return plan.tensors[:-1]


def expected_dtype(config: Config, tensor: Tensor) -> np.dtype:
    """The numpy type a tensor's logical values have: float32 for float configs; quantized: uint8 activations,
    the weight type's filters, int32 biases."""
    if config.dtype != "uint8":
        return np.dtype(np.float32)
    if tensor.name.startswith("bias"):
        return np.dtype(np.int32)
    if tensor.name.startswith("filter"):
        return np.dtype(np.int8 if config.quant.weight_dtype == "int8" else np.uint8)
    return np.dtype(np.uint8)


def pack(config: Config, plan: Plan, logical: Mapping[str, np.ndarray]) -> KernelArgs:
    """KernelArgs from logical arrays of the right shapes and types (a float16 config's rounded to half)."""
    rounded, physical = {}, {}
    for tensor in input_tensors(plan):
        values = logical[tensor.name]
        if config.dtype == "float16":
            # exactly representable in half, so the reference sees what the device stores
            values = values.astype(np.float16).astype(np.float32)
        rounded[tensor.name] = values
        if config.dtype == "uint8" and tensor.name.startswith("bias"):
            packed = values  # int32, one per output channel: no layout
        elif config.dtype == "uint8":
            packed = tensor.layout.pack(values.view(np.uint8), sentinel=INPUT_PADDING_BYTE)
        else:
            packed = tensor.layout.pack(values)
        physical[tensor.name] = np.ascontiguousarray(packed).reshape(-1)
    return KernelArgs(logical=rounded, physical=physical)


def random_inputs(config: Config, plan: Plan, rng: np.random.Generator) -> KernelArgs:
    """Fresh random tensors; an imported config (config.source) takes its filters and biases from the model."""
    model = onnx_oracle.weights(config) if config.source is not None else {}
    logical = {}
    for tensor in input_tensors(plan):
        make = _random_quantized if config.dtype == "uint8" else _random_float
        values = make(config, tensor, rng)
        if tensor.name in model:
            values = model[tensor.name].reshape(tensor.logical_shape).astype(values.dtype)
        logical[tensor.name] = values
    return pack(config, plan, logical)


def _random_float(config: Config, tensor: Tensor, rng: np.random.Generator) -> np.ndarray:
    shape = tensor.logical_shape
    # Filters scaled by 1/sqrt(fan-in) keep chain activations near unit size; biases of half that
    # size move outputs across a relu's or clamp's bounds without swamping the conv.
    if tensor.name.startswith("filter"):
        scale = float(np.sqrt(3.0 / (shape[1] * shape[2] * shape[3])))
    else:
        scale = 0.5 if tensor.name.startswith("bias") else 1.0
    return (rng.uniform(-1.0, 1.0, size=shape) * scale).astype(np.float32)


def _random_quantized(config: Config, tensor: Tensor, rng: np.random.Generator) -> np.ndarray:
    """Full-range bytes; int32 biases at scale s_in * s_w[k] span a few hundred output steps."""
    shape = tensor.logical_shape
    if tensor.name.startswith("bias"):
        return rng.integers(-(2 ** 12), 2 ** 12, size=shape).astype(np.int32)
    if tensor.name == "input":
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    weight = expected_dtype(config, tensor)
    info = np.iinfo(weight)
    return rng.integers(info.min, info.max + 1, size=shape).astype(weight)


# `kernelgen run --input NAME=FILE.npy`: a file is read only when it is a regular file no larger than the tensor it
# gives could need: its elements at the widest type run takes (float64 values to convert or quantize) plus a
# header (numpy writes 128 bytes; its own reader allows 10,000). A FIFO, a device or a folder is refused before a
# byte is read (a FIFO nobody writes blocks forever); a pickle never loads.
NPY_MAGIC = b"\x93NUMPY"
NPY_HEADER_BYTES = 10_000
WIDEST_ITEMSIZE = 8


def read_npy(key: str, path: Path, elements: int) -> np.ndarray:
    """The array in a .npy file the user named for a tensor of `elements` values; ConfigError at the file (key:
    `--input NAME`) when it is not a regular file, too large for that tensor, or not a .npy of numbers."""
    def refuse(message: str) -> ConfigError:
        return ConfigError([ConfigProblem(display_path(path), 1, 1, key, message)])

    if path.suffix != ".npy":
        raise refuse(f"expected a .npy file (numpy.save), got {display_path(path.name)!r}")
    limit = elements * WIDEST_ITEMSIZE + NPY_HEADER_BYTES
    try:
        data = read_regular(path, limit, "a .npy file", f"a .npy of the {elements:,} values this tensor takes can be")
    except FileRefused as error:
        raise refuse(str(error)) from None
    return _parse_npy(data, refuse)


def _parse_npy(data: bytes, refuse) -> np.ndarray:
    if not data:
        raise refuse("an empty file (expected a .npy file written by numpy.save)")
    if not data.startswith(NPY_MAGIC):
        raise refuse("the file is not a readable .npy file: it does not start with numpy's magic string \\x93NUMPY (numpy.save writes "
                     "one)")
    buffer = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buffer)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(buffer, max_header_size=NPY_HEADER_BYTES)
    except (ValueError, EOFError, OSError) as error:
        raise refuse(f"the file is not a readable .npy file: {' '.join(str(error).split())[:200]}") from None
    if dtype.hasobject:
        raise refuse(f"it holds Python objects (dtype {dtype}, loaded by unpickling, which kernelgen never does): "
                     f"expected numbers")
    count = 1
    for extent in shape:
        count *= extent
    start = buffer.tell()
    if len(data) - start != count * dtype.itemsize:
        raise refuse(f"its header says {list(shape)} {dtype} ({count * dtype.itemsize:,} bytes), but "
                     f"{len(data) - start:,} bytes follow it")
    values = np.frombuffer(data, dtype=dtype, count=count, offset=start)
    return values.reshape(shape, order="F" if fortran else "C").copy()
