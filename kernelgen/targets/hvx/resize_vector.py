"""The integer form of a uint8 linear resize step on HVX, and when it gives onnxruntime's bytes. Pure.

onnxruntime resizes a quantized tensor in float32 (resize_step.py: each byte dequantized, four products, three sums,
a division by the output's scale, rounded half to even). HVX has no float unit that QEMU runs, and a table per output
cannot hold four bytes' worth of inputs; but where each axis's weights are multiples of 1/2^a with few bits (an
upsampling by 2, 4, 8 or 16 with half_pixel, the edges' 1/0 and 1/2 included), the four weights' products are exact
in float32 and the ideal result is a rational of integers:

    Y = (s_in / s_out) * S / 2^(a_rows + a_cols),   S = sum of alpha_row * beta_col * (q - z_in)   (an exact integer)

HVX sums S in 16- and 32-bit lanes, multiplies it by M = (s_in / s_out) / 2^(a_rows + a_cols) * 2^P (24 bits, in two
12-bit halves so that no product passes 31 bits) and keeps Y to 14 fractional bits. The float pipeline differs from Y
by its roundings alone (8 units in the last place of its largest term bounds them, `float_error`), so the rounded
result is onnxruntime's unless Y + 1/2 lies within `tie` (float error plus the fixed point's own) of an integer: those
lanes, about 2 * tie / 2^14 of them (more where the scales' ratio puts Y on halves exactly), are flagged and computed
again by the scalar float code, which is onnxruntime's arithmetic; not those whose byte clamps to 0 or 255 whichever
way they round. Everything else is clamp(floor(Y + 1/2) + z_out, 0, 255).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ...network.resize import AxisTaps

FRACTION_BITS = 14  # of Y in its 32-bit lanes
MAX_WEIGHT_BITS = 5  # per axis: alpha * (q - z) stays in a 16-bit lane and S under 2^18
M_BITS = 24
HALF_BITS = 12  # M's low half; S * either half stays under 2^30
UNIT = 2.0 ** -24  # float32's unit roundoff
MAX_TIE = 64  # in units of 2^-14: past it too many lanes would go to the scalar code


@dataclass(frozen=True, slots=True)
class ResizeVector:
    """What network.c's HVX resize takes: per output row and column the integer weights of its two taps, and the
    constants of Y = S * M / 2^(P - 14)."""

    row_first: tuple[int, ...]  # alpha of each output row's first tap, in units of 2^-row_bits
    row_second: tuple[int, ...]
    col_first: tuple[int, ...]  # beta of each output column's first tap, in units of 2^-col_bits
    col_second: tuple[int, ...]
    row_bits: int
    col_bits: int
    zero_in: int
    m_high: int  # M >> 12
    m_low: int  # M & 0xfff
    shift_high: int  # S * m_high >> shift_high  +  S * m_low >> shift_low  =  Y * 2^14 (truncated twice)
    shift_low: int
    tie: int  # a lane whose (Y + 1/2) * 2^14 mod 2^14 is within this of 0 goes to the scalar code
    zero_out: int


def _axis(taps: AxisTaps) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """An axis's weights as integers in units of 2^-bits, the fewest bits that hold them all, or None."""
    weights = taps.first_weight + taps.second_weight
    for bits in range(MAX_WEIGHT_BITS + 1):
        scaled = [w * 2 ** bits for w in weights]
        if all(s == int(s) and 0 <= s <= 2 ** bits for s in scaled):
            n = len(taps.first_weight)
            return tuple(int(s) for s in scaled[:n]), tuple(int(s) for s in scaled[n:]), bits
    return None


def _finer(axis: tuple[tuple[int, ...], tuple[int, ...], int]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The same weights in units half as large."""
    first, second, bits = axis
    return tuple(2 * a for a in first), tuple(2 * b for b in second), bits + 1


def float_error(s_in: float, s_out: float, zero_in: int, weight_sum: float) -> float:
    """A bound on |onnxruntime's v / s_out - Y| in output units: the table's rounding of (q - z) * s_in, four products
    and three sums (each within one unit roundoff of the sum of the terms' magnitudes, at most weight_sum times the
    largest dequantized byte) and the division; 8 units where 6 suffice, for the terms' own growth."""
    largest = max(zero_in, 255 - zero_in) * s_in * (1 + UNIT)
    return 8 * UNIT * weight_sum * largest / s_out


def vector_plan(rows: AxisTaps, cols: AxisTaps, source: tuple[float, int], result: tuple[float, int]
                ) -> ResizeVector | None:
    """The integer form of a linear resize, or None where it does not hold (weights of more bits, scales whose
    ratio leaves too few bits, a tie zone too wide): such a step stays on the scalar code. Weights of few bits
    (a 1-pixel axis's halves) are taken in finer units until M's 24 bits land where the shifts can place them."""
    row, col = _axis(rows), _axis(cols)
    if row is None or col is None:
        return None
    while True:
        plan = _plan(row, col, source, result)
        if plan is not None or (row[2] == MAX_WEIGHT_BITS and col[2] == MAX_WEIGHT_BITS):
            return plan
        row, col = (_finer(row), col) if row[2] <= col[2] else (row, _finer(col))


def _plan(row: tuple[tuple[int, ...], tuple[int, ...], int], col: tuple[tuple[int, ...], tuple[int, ...], int],
          source: tuple[float, int], result: tuple[float, int]) -> ResizeVector | None:
    (row_first, row_second, row_bits), (col_first, col_second, col_bits) = row, col
    s_in, s_out = float(np.float32(source[0])), float(np.float32(result[0]))
    if not (s_in > 0 and s_out > 0):
        return None
    zero_in = int(source[1])
    ratio = Fraction(s_in) / (Fraction(s_out) * 2 ** (row_bits + col_bits))  # Y per unit of S
    p = M_BITS - 1 - math.floor(math.log2(ratio))
    while ratio * 2 ** p >= 2 ** M_BITS:
        p -= 1
    while ratio * 2 ** p < 2 ** (M_BITS - 1):
        p += 1
    m = round(ratio * 2 ** p)
    shift_low = p - FRACTION_BITS
    shift_high = shift_low - HALF_BITS
    if shift_high < 0 or shift_low > 31:
        return None
    row_sum = max(a + b for a, b in zip(row_first, row_second))
    col_sum = max(a + b for a, b in zip(col_first, col_second))
    s_max = max(zero_in, 255 - zero_in) * row_sum * col_sum
    y_max = (Fraction(s_max) * ratio + 1) * 2 ** FRACTION_BITS
    if y_max >= 2 ** 30 or s_max * (m >> HALF_BITS) >= 2 ** 31 or s_max * (2 ** HALF_BITS) >= 2 ** 31:
        return None
    # Y * 2^14 from S * M, within 2 (the two truncations) + what M's rounding adds at the largest S
    fixed_error = 2 + float(Fraction(s_max) * abs(m - ratio * 2 ** p) / 2 ** shift_low)
    weight_sum = row_sum / 2 ** row_bits * col_sum / 2 ** col_bits
    tie = math.ceil(float_error(s_in, s_out, zero_in, weight_sum) * 2 ** FRACTION_BITS + fixed_error) + 1
    if tie > MAX_TIE:
        return None
    return ResizeVector(row_first=row_first, row_second=row_second, col_first=col_first, col_second=col_second,
                        row_bits=row_bits, col_bits=col_bits, zero_in=zero_in, m_high=m >> HALF_BITS,
                        m_low=m & (2 ** HALF_BITS - 1), shift_high=shift_high, shift_low=shift_low, tie=tie,
                        zero_out=int(result[1]))


def model(plan: ResizeVector, rows: AxisTaps, cols: AxisTaps, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the HVX code computes of NCHW uint8 `q`, in numpy's integers: (bytes, the lanes flagged for the scalar
    code). For tests: the vector code must equal it lane for lane."""
    x = q.astype(np.int64) - plan.zero_in
    top, bottom = np.array(rows.first), np.array(rows.second)
    left, right = np.array(cols.first), np.array(cols.second)
    a_t, a_b = np.array(plan.row_first)[:, None], np.array(plan.row_second)[:, None]
    b_l, b_r = np.array(plan.col_first)[None, :], np.array(plan.col_second)[None, :]
    rows_left = a_t * x[..., top, :][..., left] + a_b * x[..., bottom, :][..., left]
    rows_right = a_t * x[..., top, :][..., right] + a_b * x[..., bottom, :][..., right]
    s = b_l * rows_left + b_r * rows_right
    y = ((s * plan.m_high) >> plan.shift_high) + ((s * plan.m_low) >> plan.shift_low) + 2 ** (FRACTION_BITS - 1)
    fraction = y & (2 ** FRACTION_BITS - 1)
    byte = (y >> FRACTION_BITS) + plan.zero_out
    near_tie = (fraction <= plan.tie) | (fraction >= 2 ** FRACTION_BITS - plan.tie)
    flagged = near_tie & (byte <= 255) & (byte >= 0)  # past the byte's range either neighbour clamps alike
    return np.clip(byte, 0, 255).astype(np.uint8), flagged
