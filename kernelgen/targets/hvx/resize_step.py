"""The hvx driver's resize step: a quantized model's DequantizeLinear -> Resize -> QuantizeLinear between packed uint8
tensors, as network.c computes it on the DSP's scalar unit, bit for bit what onnxruntime computes (it keeps the three
nodes and runs the float resize): each byte dequantized through a table of 256 floats ((q - z) * s, as
DequantizeLinear), the four taps weighted and summed in network/resize.py's order, then saturate(rint(v / s_out) +
z_out) as QuantizeLinear. Every product and sum is a statement of its own, so no multiply-add is fused (clang
contracts within an expression only). Pure.

The taps' rows, columns and weights come from network/resize.axis_taps; the bytes' offsets in nhwc-8h8w32c from the
layout engine, as a function of (n, c, h, w) for each tensor. A linear resize whose weights are few-bit binary
fractions (upsampling by 2, 4, 8, 16) runs on HVX in integers instead, 4 pixels x 32 channels a vector, and hands the
lanes near a rounding tie back to the scalar arithmetic (resize_vector.py says why that is onnxruntime's bytes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...expr import Var
from ...layout import ACTIVATION_DIMS, parse_layout
from ...network.manifest import Network, Step, Tensor
from ...network.resize import axis_taps
from .resize_vector import ResizeVector, vector_plan


@dataclass(frozen=True, slots=True, kw_only=True)
class ResizeStep:
    """One resize step: network.c's function `function`(in, out) and its tables."""

    function: str
    what: str  # for the comment: "linear, half_pixel, scales 8 x 8"
    linear: bool
    extents: tuple[int, int, int, int]  # the output's n, c, h, w
    top: str  # C initializers: per output row the input rows read, per output column the columns, their weights
    bottom: str
    left: str
    right: str
    top_weight: str
    bottom_weight: str
    left_weight: str
    right_weight: str
    dequantized: str  # the 256 floats (q - z_in) * s_in, exact hex literals
    scale: str  # the output's scale, a hex literal
    scale_text: str
    zero_point: int
    in_offset: str  # C: the input byte of (n, c, h, w) in its packed layout
    out_offset: str  # C: the output byte of (n, c, h, w)
    vector: ResizeVector | None = None  # the HVX form (resize_vector.py); None: the scalar loop alone


def resize_step(network: Network, step: Step) -> ResizeStep:
    """The function network.c makes of a uint8 resize step; both tensors packed as the kernels hold them (the driver
    checked)."""
    source, result = network.tensors[step.inputs[0]], network.tensors[step.outputs[0]]
    resize = step.resize
    n, c, out_h, out_w = result.shape
    rows = axis_taps(resize, 0, source.shape[2], out_h)
    cols = axis_taps(resize, 1, source.shape[3], out_w)
    real = (np.arange(256, dtype=np.int32) - source.zero_point).astype(np.float32) * np.float32(source.scale)
    scales = " x ".join(f"{x:g}" for x in resize.scales)
    rounding = f", {resize.rounding}" if resize.mode == "nearest" else ""
    return ResizeStep(function=f"{network.name}_step{step.index}_resize",
                      what=f"{resize.mode}, {resize.coordinates}{rounding}, scales {scales}",
                      linear=resize.mode == "linear", extents=(n, c, out_h, out_w),
                      top=_ints(rows.first), bottom=_ints(rows.second), left=_ints(cols.first),
                      right=_ints(cols.second), top_weight=_floats(rows.first_weight),
                      bottom_weight=_floats(rows.second_weight), left_weight=_floats(cols.first_weight),
                      right_weight=_floats(cols.second_weight), dequantized=_floats(real),
                      scale=f"{float(np.float32(result.scale)).hex()}f",
                      scale_text=f"{float(np.float32(result.scale)):.9g}", zero_point=int(result.zero_point),
                      in_offset=_offset(source), out_offset=_offset(result),
                      vector=vector_plan(rows, cols, (source.scale, source.zero_point),
                                         (result.scale, result.zero_point)) if resize.mode == "linear" else None)


def _offset(tensor: Tensor) -> str:
    n, c, h, w = tensor.shape
    bound = parse_layout(tensor.layout, ACTIVATION_DIMS).bind((n, h, w, c))
    return bound.offset_c({d: Var(d) for d in ACTIVATION_DIMS}, bound.bounds)


def _ints(values) -> str:
    return ",\n  ".join(", ".join(str(v) for v in values[k:k + 16]) for k in range(0, len(values), 16))


def _floats(values) -> str:
    """Exact float32 values as C hex literals, 8 to a line."""
    items = [f"{float(np.float32(v)).hex()}f" for v in values]
    return ",\n  ".join(", ".join(items[k:k + 8]) for k in range(0, len(items), 8))
