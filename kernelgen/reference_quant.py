"""The quantized numpy reference: a uint8 conv2d chain in logical NHWC / OIHW, bit-exact.

Per op: int64 accumulation of (a - za) * (w - zw) over the taps (spatial padding holds the
input zero point, so it adds 0), plus an optional int32 bias, then the HVX target's
fixed-point requantization (quant.py), saturating to uint8. The HVX kernel
computes the same integers in a different order (vrmpy over unsigned bytes with zero-point
corrections); integer arithmetic makes the orders agree exactly.
"""
from __future__ import annotations

import numpy as np

from .config import Config
from .quant import Requant, quant_params, requantization
from .reference import conv2d

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def _sat32(x: np.ndarray) -> np.ndarray:
    return np.clip(x, INT32_MIN, INT32_MAX)


def requantize(acc: np.ndarray, rq: Requant, zero_point: int) -> np.ndarray:
    """int32 accumulators -> uint8, exactly as vmpye + vmpyo:<<1:rnd:sat:shift + vasr + vpack:sat."""
    acc = acc.astype(np.int64)
    t = (acc * rq.m_lo) >> 16  # vmpye(Vu.w, Vv.uh): the low half of the multiplier, unsigned
    r = _sat32((((t + acc * rq.m_hi) >> 14) + 1) >> 1)  # vmpyo(Vu.w, Vv.h):<<1:rnd:sat:shift
    r = _sat32(r + rq.rounding) >> rq.shift  # vadd(...):sat, vasr
    r = _sat32(r + zero_point)  # vadd(...):sat
    return np.clip(r, 0, 255).astype(np.uint8)  # vpack w->h:sat, h->ub:sat


def conv2d_acc(x: np.ndarray, w: np.ndarray, zx: int, zw: int, op, bias: np.ndarray | None) -> np.ndarray:
    """int64 sum((x - zx) * (w - zw)) (+ bias); padding is zx, i.e. 0 after centering."""
    centered = x.astype(np.int64) - zx
    acc = conv2d(centered.astype(np.float64), (w.astype(np.int64) - zw).astype(np.float64), op)
    # float64 sums of integers below 2^53 are exact.
    acc = np.rint(acc).astype(np.int64)
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    if acc.min() < INT32_MIN or acc.max() > INT32_MAX:
        raise ValueError("accumulator exceeds int32")
    return acc


def chain(config: Config, x: np.ndarray, filters: list[np.ndarray],
          biases: list[np.ndarray | None]) -> np.ndarray:
    q = config.quant
    for op, w, b, (s_in, z_in, s_out, z_out) in zip(config.ops, filters, biases, quant_params(config)):
        rq = requantization(s_in * q.weight_scale / s_out, "quant.output_scale", config)
        x = requantize(conv2d_acc(x, w, z_in, q.weight_zero_point, op, b), rq, z_out)
    return x
