"""How a quantized op's HVX kernel requantizes its int32 sums to bytes: the arithmetic is quant.py's (the
numpy reference computes the same integers); this picks the instruction sequence that computes it for one op
and the constants its tables hold."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...quant import Requant, shift_only
from ...quant_float import FloatRequant
from .float_screen import FloatScreen

# A saturating add near 2^31 still ends at byte 255 when (2^31 - 1) >> s > 255 + z: s <= 22 keeps that.
MAX_FOLDED_SHIFT = 22
# vasr(Vu.w, Vv.w, Rt):rnd:sat reads 4 bits of Rt.
MAX_NARROWING_SHIFT = 15


# The float split's window 2^(s + 7 + k) must stay below 2^31 for results up to 511 (k <= 8): s <= 15.
MAX_SPLIT_SHIFT = 15
# Results past 511 in magnitude saturate whatever their rounding: n is capped there (k <= 8).
RESULT_CAP = 511


@dataclass(frozen=True, slots=True, kw_only=True)
class FloatSplit:
    """onnxruntime's rint(f32(acc * S)) (quant_float.py) in integers, for the hvx kernel: S = M * 2^-E per channel.

    The kernel multiplies |acc| by m = M << (31 - split), a 31-bit constant, and takes the exact 63-bit product
    apart: high = floor(|acc| * m / 2^31) (vmpye + vmpyo, no rounding) and low = (|acc| * m) mod 2^31 (the
    32-bit product, vmpyieo + vmpyie). With s = E - split, n = high >> s is the integer part of |acc| * S and
    frac = high mod 2^s with low the fraction, so the distance to n + 1/2 is D = (frac - 2^(s-1)) * 2^31 + low
    (in units of 2^-(31 + s)). Rounding half to even would add 1 when D > 0 (or D == 0 and n odd). float32 first
    rounds the product to 24 bits: within half an ulp of n + 1/2, |D| <= w = 2^(s + 7 + k) with k = floor(log2 n)
    (k = -1 for n = 0), the product becomes n + 1/2 exactly and rint gives the even neighbour. So:
    up = D > w, or |D| <= w and n odd: D > T with T = w for an even n and ~w = -w - 1 for an odd one, compared in
    a signed word (D only matters at frac = 2^(s-1) or one below, where it is low or low - 2^31); result = n + up,
    negated back for a negative acc."""

    split: int  # the bit where high and low meet, in units of the product |acc| * M: 24..31
    mults: tuple[int, ...]  # m = M << (31 - split) per output channel (one, or one per channel padded)
    shifts: tuple[int, ...]  # s = E - split, 1..MAX_SPLIT_SHIFT
    scales: tuple[float, ...]  # S per channel, for the kernel's comments
    # the fast form (float_screen.py): one product, the lanes near a half screened and those tiles done again by
    # this exact form; None: this form alone
    screen: FloatScreen | None = None

    @classmethod
    def padded(cls, floats: tuple[FloatRequant, ...], out_k: int, per_channel: bool) -> "FloatSplit | str | None":
        """One op's split (None in the fixed-point form): per channel, padded to whole 32-channel blocks."""
        if not floats:
            return None
        return cls.of(floats + (floats[-1],) * (-out_k % 32) if per_channel else floats[:1])

    @classmethod
    def of(cls, floats: tuple[FloatRequant, ...]) -> "FloatSplit | str":
        """The split for these channels' scales, or why none fits (scales more than 2^14 apart)."""
        exponents = [f.exponent for f in floats]
        split = min(31, min(exponents) - 1)
        shifts = tuple(e - split for e in exponents)
        if split < 24 or max(shifts) > MAX_SPLIT_SHIFT:
            scales = [f.scale for f in floats]
            return (f"the float32 requantization's scales of one op span {min(scales):.3g} to {max(scales):.3g}: "
                    f"the hvx kernel takes at most a factor of "
                    f"2^{MAX_SPLIT_SHIFT - 1} between them")
        return cls(split=split, mults=tuple(f.mantissa << (31 - split) for f in floats), shifts=shifts,
                   scales=tuple(f.scale for f in floats), screen=FloatScreen.of(tuple(floats)))

    @property
    def table(self) -> list[tuple[int, int, int]]:
        """(m, s, 2^(s-1)) per channel: the kernel's tables (its mask and window base follow from 2^(s-1))."""
        return [(m, s, 1 << (s - 1)) for m, s in zip(self.mults, self.shifts)]

    def emulate(self, acc: np.ndarray) -> np.ndarray:
        """The kernel's integer steps in numpy, per channel on the last axis: what tests hold against
        quant_float.requantize_float on every accumulator of a range."""
        acc = np.asarray(acc, dtype=np.int64)
        m = np.array(self.mults, dtype=np.int64)
        s = np.array(self.shifts, dtype=np.int64)
        a = np.minimum(np.abs(acc), 2 ** 31 - 1)
        product = a * m  # < 2^62: exact in int64
        high, low = product >> 31, product & (2 ** 31 - 1)
        n = np.minimum(high >> s, RESULT_CAP)
        frac, half = high & ((1 << s) - 1), 1 << (s - 1)
        k = np.where(n > 0, np.floor(np.log2(np.maximum(n, 1))), -1).astype(np.int64)
        window = np.left_shift(np.int64(1), s + 7 + k)
        # up when D > w (n even) or D >= -w (n odd): D > T with T = w or ~w; D as the kernel's signed word, low
        # at frac == half and low - 2^31 at frac == half - 1 (the low bit of frac - half at bit 31, wrapped)
        threshold = window ^ -(n & 1)
        d = (low + ((frac - half) << 31) + 2 ** 31) % 2 ** 32 - 2 ** 31
        up = (frac > half) | ((frac > half - 2) & (d > threshold))
        return np.where(acc < 0, -(n + up), n + up)


@dataclass(frozen=True, slots=True, kw_only=True)
class Requantizer:
    requant: Requant | None  # None for float32; with per-channel weight scales, output channel 0's
    requants: tuple[Requant, ...]  # one per output channel (padded to whole blocks), or () for one per tensor
    add: bool  # a residual add follows (its own zero point comes after a second multiply)
    zp_out: int
    floats: FloatSplit | None = None  # quant.requantization float32: onnxruntime's rounding, in integers

    @property
    def per_channel_floats(self) -> bool:
        return self.floats is not None and len(set(zip(self.floats.mults, self.floats.shifts))) > 1

    @property
    def per_channel_table(self) -> list[tuple[int, int, int]]:
        """(multiplier, rounding, shift) of every output channel, for the kernel's tables; the rounding carries
        the output zero point when folds_zero_point."""
        return [(r.multiplier, self.rounding_of(r), self.shift_of(r)) for r in self.requants]

    @property
    def shift_only(self) -> bool:
        """Every multiplier a power of two: one rounding shift (half to even), no multiply (quant.shift_only)."""
        return self.requant is not None and self.floats is None and shift_only(self.requants or (self.requant,))

    def shift_of(self, requant: Requant) -> int:
        """The right shift after the multiply; with shift_only, the whole of it (the multiply's 2^-1 included)."""
        return requant.shift + 1 if self.shift_only else requant.shift

    @property
    def folds_zero_point(self) -> bool:
        """The output zero point rides in the rounding constant, one vadd per output vector fewer:
        (x + r + z * 2^s) >> s == ((x + r) >> s) + z for every int32 x the add does not saturate, and where it
        saturates (x near 2^31) both forms end at byte 255 (MAX_FOLDED_SHIFT). Not with a residual add."""
        shifts = [self.shift_of(r) for r in self.requants or (self.requant,)]
        return self.floats is None and not self.add and not self.narrows and max(shifts) <= MAX_FOLDED_SHIFT

    @property
    def narrows(self) -> bool:
        """One shift for all channels, of at most 15, and no residual add after it: round, shift and narrow two
        output vectors with one instruction (the zero point is added to the halfwords)."""
        return (self.floats is None and not self.add and not self.requants and self.requant is not None
                and not self.shift_only and self.requant.shift <= MAX_NARROWING_SHIFT)

    def rounding_of(self, requant: Requant) -> int:
        """What is added before the shift: 2^(s-1) (half up), or 2^(t-1) - 1 before the quotient's low bit is
        added too (half to even, shift_only); plus the zero point << shift when folds_zero_point."""
        base = (1 << requant.shift) - 1 if self.shift_only else requant.rounding
        return base + (self.zp_out << self.shift_of(requant) if self.folds_zero_point else 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolRequant:
    """A uint8 global average pool's requantization of its 32 channel sums per block, in scalar C (a pool is a
    sliver of a network's time): float32 (rint(f32(f32(acc) * S)), the literal S as C spells it), a rounding shift
    (half to even) for a power-of-two scale, or the fixed-point multiply; mirrors reference_quant bit for bit."""

    form: str  # "float", "shift" or "fixed"
    zero_inside: bool = False  # float: the zero point added in float32 before the rounding (QLinearMul's order)
    scale: str = ""  # float: S as a C hexadecimal float literal
    m_lo: int = 0
    m_hi: int = 0
    rounding: int = 0
    shift: int = 0

    @classmethod
    def of(cls, requant: Requant | None, floats: tuple[FloatRequant, ...], zero_inside: bool = False
           ) -> "PoolRequant":
        if floats:
            return cls(form="float", scale=float(np.float32(floats[0].scale)).hex() + "f", zero_inside=zero_inside)
        assert requant is not None
        if shift_only((requant,)):
            return cls(form="shift", shift=requant.shift + 1)
        return cls(form="fixed", m_lo=requant.m_lo, m_hi=requant.m_hi, rounding=requant.rounding,
                   shift=requant.shift)
