"""The `resize` step: ONNX's Resize of an NCHW image's rows and columns, linear or nearest, which kernelgen computes
itself (network.c on the c target, a dispatch on the GPU targets: targets/gpu/resize_parts.py, numpy in the
step-by-step run) rather than leaving it to onnxruntime. Pure.

Each output row reads two input rows with a weight each, and each output column two input columns (nearest: one,
weight 1). `axis_taps` works them out once per axis as onnxruntime's CPU Resize does, in float32: the output index
mapped back by the coordinate transformation, clamped to the input, its floor and the index after it (the last row
twice at the edge, half and half), and each weight the distance to the other tap. A pixel is then the four taps'
weight products times their values, summed in onnxruntime's order (top-left, top-right, bottom-left,
bottom-right): numpy's step-by-step run computes what onnxruntime does bit for bit (tests/test_resize_steps.py).
network.c computes an NHWC output so too; into an NCHW output it blends the two rows first, at the input's width,
then two of those per output column (3 operations an output instead of 7), which differs by rounding alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .channel_checks import Tensor

MODES = ("linear", "nearest")
# How an output index maps back to the input (ONNX's coordinate_transformation_mode). tf_half_pixel_for_nn,
# tf_crop_and_resize (a region of interest) and half_pixel_symmetric are not taken.
COORDINATES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
# Which input index a nearest resize reads for a mapped-back coordinate (ONNX's nearest_mode)
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True, slots=True)
class Resize:
    mode: str  # MODES
    coordinates: str  # COORDINATES
    rounding: str  # ROUNDINGS (what a nearest resize reads; linear ignores it)
    scales: tuple[float, float]  # rows, columns: the model's scales, or output size over input size


@dataclass(frozen=True, slots=True)
class AxisTaps:
    """Per output index along one axis: the two input indices it reads and their float32 weights."""

    first: tuple[int, ...]
    second: tuple[int, ...]
    first_weight: tuple[float, ...]
    second_weight: tuple[float, ...]


def original(resize: Resize, x: int, scale: float, in_size: int, out_size: int) -> np.float32:
    """Output index x mapped back to an input coordinate, in float32 as onnxruntime computes it."""
    f32, xf, s = np.float32, np.float32(x), np.float32(scale)
    if resize.coordinates == "half_pixel":
        return f32((xf + f32(0.5)) / s - f32(0.5))
    if resize.coordinates == "pytorch_half_pixel":
        return f32((xf + f32(0.5)) / s - f32(0.5)) if out_size > 1 else f32(0.0)
    if resize.coordinates == "align_corners":
        return f32(0.0) if out_size == 1 else f32(xf * f32(in_size - 1) / f32(out_size - 1))
    return f32(xf / s)  # asymmetric


def _nearest(resize: Resize, coordinate: np.float32) -> int:
    value = float(coordinate)
    if resize.rounding == "floor":
        return math.floor(value)
    if resize.rounding == "ceil":
        return math.ceil(value)
    if value == math.floor(value) + 0.5:  # a tie: the mode says which way
        return math.floor(value) if resize.rounding == "round_prefer_floor" else math.ceil(value)
    return math.floor(value + 0.5)


def float_literal(value: float) -> str:
    """A float32 weight's shortest decimal that reads back as the same float, with its point ("1.0", not "1"): what
    C and GLSL initializers print (a C one adds its "f")."""
    return np.format_float_positional(np.float32(value), unique=True, trim="0")


def axis_taps(resize: Resize, axis: int, in_size: int, out_size: int) -> AxisTaps:
    """The taps of every output index along `axis` (0: rows, 1: columns)."""
    first, second, w_first, w_second = [], [], [], []
    for x in range(out_size):
        coordinate = original(resize, x, resize.scales[axis], in_size, out_size)
        if resize.mode == "nearest":
            index = min(max(_nearest(resize, coordinate), 0), in_size - 1)
            first.append(index), second.append(index), w_first.append(1.0), w_second.append(0.0)
            continue
        clamped = np.float32(min(max(coordinate, np.float32(0.0)), np.float32(in_size - 1)))
        low = min(int(clamped), in_size - 1)
        high = min(low + 1, in_size - 1)
        if low == high:  # at the last index both taps are it, half each
            w_low, w_high = np.float32(0.5), np.float32(0.5)
        else:  # each tap weighs the distance to the other
            w_low, w_high = np.float32(abs(clamped - np.float32(high))), np.float32(abs(clamped - np.float32(low)))
        first.append(low), second.append(high), w_first.append(float(w_low)), w_second.append(float(w_high))
    return AxisTaps(tuple(first), tuple(second), tuple(w_first), tuple(w_second))


def resized(resize: Resize, x: np.ndarray, out_shape: Sequence[int]) -> np.ndarray:
    """The step's output: NCHW float32 `x` resized to `out_shape`'s rows and columns."""
    x = np.asarray(x, np.float32)
    rows = axis_taps(resize, 0, x.shape[2], out_shape[2])
    cols = axis_taps(resize, 1, x.shape[3], out_shape[3])
    if resize.mode == "nearest":
        return np.ascontiguousarray(x[:, :, list(rows.first)][:, :, :, list(cols.first)])
    top, bottom = x[:, :, list(rows.first)], x[:, :, list(rows.second)]
    wy0 = np.asarray(rows.first_weight, np.float32)[:, None]
    wy1 = np.asarray(rows.second_weight, np.float32)[:, None]
    wx0 = np.asarray(cols.first_weight, np.float32)[None, :]
    wx1 = np.asarray(cols.second_weight, np.float32)[None, :]
    left, right = list(cols.first), list(cols.second)
    return np.ascontiguousarray((wx0 * wy0) * top[:, :, :, left] + (wx1 * wy0) * top[:, :, :, right]
                                + (wx0 * wy1) * bottom[:, :, :, left] + (wx1 * wy1) * bottom[:, :, :, right])


def quantized_resized(resize: Resize, q: np.ndarray, out_shape: Sequence[int], source: tuple[float, int],
                      result: tuple[float, int]) -> np.ndarray:
    """A quantized model's DequantizeLinear -> Resize -> QuantizeLinear of uint8 `q`, as onnxruntime runs it (it keeps
    the three nodes): each byte (q - z) * s in float32, the float resize, then saturate(rint(v / s_out) + z_out)."""
    (s_in, z_in), (s_out, z_out) = source, result
    real = (np.asarray(q).astype(np.int32) - z_in).astype(np.float32) * np.float32(s_in)
    with np.errstate(all="ignore"):
        v = np.rint(resized(resize, real, out_shape) / np.float32(s_out)) + np.float32(z_out)
    return np.clip(np.nan_to_num(v), 0, 255).astype(np.uint8)


def check_resize_step(k: int, resize: Resize, inputs: Sequence[Tensor], outputs: Sequence[Tensor],
                      fail: Callable[[tuple, str], None]) -> None:
    """One NCHW image in and one out, both float32 or both uint8 with a scale and zero point (a quantized model's
    DequantizeLinear -> Resize -> QuantizeLinear), the same batch and channels, and each output size within one of
    input size x scale (ONNX floors it; a scale worked out as output over input size may land just below)."""
    if len(inputs) != 1 or len(outputs) != 1:
        fail(("steps", k), f"expected one input and one output for resize, got {len(inputs)} and {len(outputs)}")
        return
    (source,), (result,) = inputs, outputs
    for where, tensor in ((("inputs", 0), source), (("outputs", 0), result)):
        if len(tensor.shape) != 4 or tensor.dtype not in ("float32", "uint8") or tensor.dtype != source.dtype:
            fail(("steps", k, *where), f"expected a float32 (or both uint8) NCHW image for resize, got "
                                       f"{tensor.name!r}: {tensor.dtype} of shape {list(tensor.shape)}")
            return
        if tensor.dtype == "uint8" and None in (tensor.scale, tensor.zero_point):
            fail(("steps", k, *where), f"expected a scale and zero point on {tensor.name!r} (a uint8 resize "
                                       f"dequantizes its input and quantizes its output)")
            return
    if source.shape[:2] != result.shape[:2]:
        fail(("steps", k, "outputs", 0), f"shape mismatch: a resize keeps batch and channels {list(source.shape[:2])}"
                                         f", the output {result.name!r} has {list(result.shape[:2])}")
    for axis, name in enumerate(("rows", "columns")):
        have, want, scale = source.shape[2 + axis], result.shape[2 + axis], resize.scales[axis]
        if not abs(have * scale - want) < 1:
            fail(("steps", k, "resize", "scales", axis), f"expected a scale near {want / have:.6g} ({have} {name} "
                                                         f"to {want}), got {scale!r}")
