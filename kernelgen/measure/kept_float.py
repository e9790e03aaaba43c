"""How far onnxruntime's bytes may lie from a kernel's for an op its optimizer kept in float32.

A QDQ conv onnxruntime does not fuse into QLinearConv (oracle.OpRun.in_float: on x86 every int8 x int8 one, as
quantize_static's defaults make them, its QDQIsInt8Allowed() being ARM only; a hand-built one with a float bias
and a Clip) runs as DequantizeLinear -> Conv -> QuantizeLinear: every byte dequantized in float32, a float32 sum
of the products, one rounding to the conv's step. The kernel sums the same products exactly in integers. Rounded
once each, the two part by one step where the real value lies within a rounding of a half. Three things widen
that:
- the float32 sum strays from the exact one by at most gamma_n * sum |x_i * w_i| (Higham, eq. 3.5, with or
  without FMA) over n = K + 4 roundings for K products (the dequantizations of x and w, the bias, the division of
  QuantizeLinear); where that bound reaches whole steps, so may the bytes (on ResNet50 it stays under a step);
- a residual add after it (ResNet's last conv of a block): onnxruntime's QLinearAdd reads the conv's bytes at
  s_conv, which move the output by s_conv / s_out per step, and rounds once more. ResNet50 under quantize_static's
  defaults parts by two there: in 1-2 of 200,000-800,000 outputs, at 3 of its 16 blocks' ends, in each of two runs;
- a table activation after it (a hard gate, a sigmoid, a SiLU): the conv's bytes move the output as far as the
  table moves within those steps.
"""
from __future__ import annotations

import numpy as np

from ..config import Conv2d
from ..ops.conv2d import conv2d
from ..quant import OpQuant
from ..reference import FLOAT32_UNIT_ROUNDOFF


def kept_float_allowance(op: Conv2d, oq: OpQuant, x: np.ndarray, w: np.ndarray | None, bias: np.ndarray | None
                         ) -> np.ndarray | None:
    """Per output element (NHWC), how many steps onnxruntime's bytes may lie from the kernel's for a conv it kept
    in float32, on the op's uint8 input x, its integer weights w and its int32 bias; None for an op without
    weights (a pool: no sum to stray). The conv's own bytes: one rounding, plus the whole steps of its float32
    sum's bound (float32_steps). With a residual add (onnxruntime's QLinearAdd after the float conv's
    QuantizeLinear at s_conv) those conv bytes reach the output scaled by s_conv / s_out, and the add rounds once
    more: ResNet's last conv of a block, whose bytes at s_conv step as far as 1-2 of the output's."""
    steps = float32_steps(op, oq, x, w, bias)
    if steps is None:
        return None
    conv = 1 + steps
    if oq.table:  # the conv's bytes through the activation's table: as far as it moves within that many steps
        table = np.asarray(oq.table, dtype=np.int64)
        reach = int(conv.max())
        jump = max(int(np.abs(table[np.clip(np.arange(256) + d, 0, 255)] - table).max())
                   for d in range(-reach, reach + 1))
        return np.full_like(conv, max(jump + oq.table_slack, 1))
    if oq.add is None:
        return conv
    # the add's pre-rounding values part by conv * s_conv / s_out, and its own rounding by one more step (a
    # margin of 2^-20 for its fixed-point multipliers, which err by less)
    return np.floor(conv * (oq.s_conv / oq.s_out) * (1 + 2.0 ** -20)).astype(np.int64) + 1


def float32_steps(op: Conv2d, oq: OpQuant, x: np.ndarray, w: np.ndarray | None, bias: np.ndarray | None
                  ) -> np.ndarray | None:
    """Per output element (NHWC), the whole steps (of the conv's own scale, s_conv: before a residual add or a
    table, else the output's) by which onnxruntime's float32 sum of op's dequantized products may stray from the exact sum, on the
    op's uint8 input x, its integer weights w and its int32 bias; None for an op without weights."""
    if op.kind != "conv2d" or w is None:
        return None
    magnitude = conv2d(np.abs(x.astype(np.int64) - oq.z_in), np.abs(w.astype(np.int64) - oq.z_w), op)
    if bias is not None:
        magnitude = magnitude + np.abs(bias.astype(np.float64))
    products = w.shape[1] * w.shape[2] * w.shape[3]
    roundings = products + 4
    gamma = roundings * FLOAT32_UNIT_ROUNDOFF / (1 - roundings * FLOAT32_UNIT_ROUNDOFF)
    real = magnitude * (oq.s_in * np.asarray(oq.s_w, dtype=np.float64))  # s_w: one scale per output channel
    return np.floor(gamma * real / oq.s_conv).astype(np.int64)
