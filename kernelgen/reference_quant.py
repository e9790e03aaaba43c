"""The quantized numpy reference: a uint8 conv2d chain in logical NHWC / OIHW, bit-exact.

Per op: int64 accumulation of (a - za) * (w - zw) over the taps (spatial padding holds the
input zero point, so it adds 0), plus an optional int32 bias, then the HVX target's
fixed-point requantization (quant.py; one multiplier and shift per output channel with
per-channel weight scales), saturating to uint8, then the activation's clamp of the bytes. The HVX kernel
computes the same integers in a different order (vrmpy over unsigned bytes with zero-point
corrections); integer arithmetic makes the orders agree exactly.
"""
from __future__ import annotations

import numpy as np

from .config import Config
from .quant import Requant, op_quants
from .reference import conv2d

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def _sat32(x: np.ndarray) -> np.ndarray:
    return np.clip(x, INT32_MIN, INT32_MAX)


def requantize(acc: np.ndarray, rq: Requant | tuple[Requant, ...], zero_point: int, q_min: int = 0,
               q_max: int = 255) -> np.ndarray:
    """int32 accumulators -> uint8, exactly as vmpye + vmpyo:<<1:rnd:sat:shift + vasr + vpack:sat (then the
    activation's vmax / vmin on bytes). rq: one requantization, or one per output channel (the last axis)."""
    acc = acc.astype(np.int64)
    per = (rq,) if isinstance(rq, Requant) else rq
    m_lo, m_hi, rounding, shift = (np.array([getattr(r, f) for r in per], dtype=np.int64)
                                   for f in ("m_lo", "m_hi", "rounding", "shift"))
    t = (acc * m_lo) >> 16  # vmpye(Vu.w, Vv.uh): the low half of the multiplier, unsigned
    r = _sat32((((t + acc * m_hi) >> 14) + 1) >> 1)  # vmpyo(Vu.w, Vv.h):<<1:rnd:sat:shift
    r = _sat32(r + rounding) >> shift  # vadd(...):sat, vasr
    r = _sat32(r + zero_point)  # vadd(...):sat
    return np.clip(np.clip(r, 0, 255), q_min, q_max).astype(np.uint8)  # vpack w->h:sat, h->ub:sat; vmax, vmin


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
    for op, w, b, oq in zip(config.ops, filters, biases, op_quants(config)):
        x = requantize(conv2d_acc(x, w, oq.z_in, oq.z_w, op, b), oq.requants, oq.z_out, oq.q_min, oq.q_max)
    return x
