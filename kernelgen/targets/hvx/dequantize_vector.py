"""The integer form of a network output's DequantizeLinear on HVX: onnxruntime's float32 (q - z) * s, its bits built
lane by lane from integers. Pure.

d = q - z is an integer of at most 8 bits and s = M * 2^(e - 150) (M its 24-bit significand, e its exponent field),
so |d| * M is exact in 32 bits and the float product is that integer rounded half to even to 24 bits at its bit
length: with k = bit length - 24 (1..8 for |d| >= 2), r = (P + 2^(k-1) - 1 + bit k of P) >> k, and the bits are
((e + k - 1) << 23) + r (a carry out of r's 24 bits moves into the exponent, as the float's does), the sign d's.
|d| = 1 is s itself and d = 0 is +0. Every result is a normal float while s is normal and e <= 246.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_EXPONENT = 246  # e + 8 <= 254: no product of a byte's 255 overflows


@dataclass(frozen=True, slots=True)
class DequantizeVector:
    m_high: int  # M >> 12
    m_low: int  # M & 0xfff
    exponent: int  # e, s's exponent field
    bits: int  # s's float32 bits


def dequantize_plan(scale: float) -> DequantizeVector | None:
    """The integer form of q -> (q - z) * scale in float32, or None for a scale it does not hold."""
    bits = int(np.float32(scale).view(np.uint32))
    exponent, significand = bits >> 23 & 0xFF, bits & 0x7FFFFF | 0x800000
    if bits >> 31 or not 1 <= exponent <= MAX_EXPONENT:
        return None
    return DequantizeVector(m_high=significand >> 12, m_low=significand & 0xFFF, exponent=exponent, bits=bits)


def model(plan: DequantizeVector, q: np.ndarray, zero_point: int) -> np.ndarray:
    """What the HVX code computes of uint8 `q`: the float32 bits (uint32), in numpy's integers. For tests: it must
    equal numpy's float32 (q - z) * s bit for bit."""
    d = np.asarray(q, np.int64) - zero_point
    a = np.abs(d)
    p = ((a * plan.m_high) << 12) + a * plan.m_low  # < 2^32
    length = np.where(p > 0, np.floor(np.log2(np.maximum(p, 1))).astype(np.int64) + 1, 0)
    k = np.maximum(length - 24, 1)
    r = (p + (1 << (k - 1)) - 1 + ((p >> k) & 1)) >> k
    bits = ((plan.exponent + k - 1) << 23) + r
    bits = np.where(a == 1, plan.bits, np.where(a == 0, 0, bits))
    return (bits | np.where(d < 0, 1 << 31, 0)).astype(np.uint32)
