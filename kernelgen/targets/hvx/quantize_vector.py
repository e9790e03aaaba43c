"""The integer form of a network input's QuantizeLinear on HVX, and when it gives onnxruntime's bytes. Pure.

onnxruntime quantizes a float x to saturate(rint(x / s) + z): a float32 division rounded half to even. QEMU runs no
HVX float, but x's bits are integers: x = m * 2^(e - 150) with m the 24-bit significand, so

    Y = x / s = m * R * 2^(e - 150),   R = 1/s ~ R_m * 2^-k  (R_m a 24-bit integer)

and HVX computes Y to 14 fractional bits from m and R_m in 12-bit halves (no product passes 25 bits) and one shift
per lane by 112 + k - e. fl(x / s) lies within 2^-24 of Y relatively, R_m within 2^-24 of R, the halves' products
lose under 2 units and the shift under 1: below 256 (past it the byte saturates whichever way it rounds) Y * 2^14 is
within `tie` of onnxruntime's quotient, so a lane whose Y + 1/2 lies within `tie` / 2^14 of an integer (a few in a
thousand, or a quotient that is a half exactly) and a NaN or infinity go to the scalar float code, which is
onnxruntime's arithmetic. Zeros and subnormals are Y = 0 (their quotients are far below 1/2 for any scale over
2^-100).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

FRACTION_BITS = 14
M_BITS = 24
HALF_BITS = 12
TIE = 5  # 0.25 (the division) + 0.25 (R_m) + 2 (the halves' products) + 1 (the shift), rounded up, + 1
MIN_SCALE = 2.0 ** -100


@dataclass(frozen=True, slots=True)
class QuantizeVector:
    r_high: int  # R_m >> 12
    r_low: int  # R_m & 0xfff
    shift_base: int  # a lane of exponent field e shifts its product right by shift_base - e
    tie: int


def quantize_plan(scale: float) -> QuantizeVector | None:
    """The integer form of x -> rint(x / scale), or None for a scale it does not hold."""
    s = float(np.float32(scale))
    if not (MIN_SCALE <= s < 2.0 ** 100):
        return None
    reciprocal = 1 / Fraction(s)
    k = M_BITS - 1 - math.floor(math.log2(reciprocal))
    while reciprocal * 2 ** k >= 2 ** M_BITS - Fraction(1, 2):
        k -= 1
    while reciprocal * 2 ** k < 2 ** (M_BITS - 1):
        k += 1
    r = round(reciprocal * 2 ** k)
    # Y * 2^14 = (m * R_m >> 24) * 2^(e - 150 - k + 14 + 24): the shift right is 112 + k - e
    return QuantizeVector(r_high=r >> HALF_BITS, r_low=r & (2 ** HALF_BITS - 1), shift_base=112 + k, tie=TIE)


def model(plan: QuantizeVector, x: np.ndarray, zero_point: int) -> tuple[np.ndarray, np.ndarray]:
    """What the HVX code computes of float32 `x`, in numpy's integers: (bytes, the lanes flagged for the scalar code).
    For tests: the vector code must equal it lane for lane."""
    bits = np.asarray(x, np.float32).view(np.int32).astype(np.int64)
    e = (bits >> 23) & 0xFF
    m = np.where(e == 0, 0, (bits & 0x7FFFFF) | 0x800000)
    high, low = m >> HALF_BITS, m & (2 ** HALF_BITS - 1)
    product = high * plan.r_high + ((high * plan.r_low + low * plan.r_high) >> HALF_BITS)
    shift = plan.shift_base - e
    big = shift < 1
    y = product >> np.clip(shift, 0, 31)
    y = np.where(bits < 0, -y, y) + 2 ** (FRACTION_BITS - 1)
    fraction = y & (2 ** FRACTION_BITS - 1)
    byte = np.where(big, np.where(bits < 0, -1, 256), (y >> FRACTION_BITS) + zero_point)
    near_tie = (fraction <= plan.tie) | (fraction >= 2 ** FRACTION_BITS - plan.tie)
    flagged = (near_tie & (byte >= 0) & (byte <= 255) & ~big) | (e == 0xFF)
    return np.clip(byte, 0, 255).astype(np.uint8), flagged
