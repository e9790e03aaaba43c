"""How a quantized op's HVX kernel requantizes its int32 sums to bytes: the arithmetic is quant.py's (the
numpy reference computes the same integers); this picks the instruction sequence that computes it for one op
and the constants its tables hold."""
from __future__ import annotations

from dataclasses import dataclass

from ...quant import Requant, shift_only

# A saturating add near 2^31 still ends at byte 255 when (2^31 - 1) >> s > 255 + z: s <= 22 keeps that.
MAX_FOLDED_SHIFT = 22
# vasr(Vu.w, Vv.w, Rt):rnd:sat reads 4 bits of Rt.
MAX_NARROWING_SHIFT = 15


@dataclass(frozen=True, slots=True, kw_only=True)
class Requantizer:
    requant: Requant | None  # None for float32; with per-channel weight scales, output channel 0's
    requants: tuple[Requant, ...]  # one per output channel (padded to whole blocks), or () for one per tensor
    add: bool  # a residual add follows (its own zero point comes after a second multiply)
    zp_out: int

    @property
    def per_channel_table(self) -> list[tuple[int, int, int]]:
        """(multiplier, rounding, shift) of every output channel, for the kernel's tables; the rounding carries
        the output zero point when folds_zero_point."""
        return [(r.multiplier, self.rounding_of(r), self.shift_of(r)) for r in self.requants]

    @property
    def shift_only(self) -> bool:
        """Every multiplier a power of two: one rounding shift (half to even), no multiply (quant.shift_only)."""
        return self.requant is not None and shift_only(self.requants or (self.requant,))

    def shift_of(self, requant: Requant) -> int:
        """The right shift after the multiply; with shift_only, the whole of it (the multiply's 2^-1 included)."""
        return requant.shift + 1 if self.shift_only else requant.shift

    @property
    def folds_zero_point(self) -> bool:
        """The output zero point rides in the rounding constant, one vadd per output vector fewer:
        (x + r + z * 2^s) >> s == ((x + r) >> s) + z for every int32 x the add does not saturate, and where it
        saturates (x near 2^31) both forms end at byte 255 (MAX_FOLDED_SHIFT). Not with a residual add."""
        shifts = [self.shift_of(r) for r in self.requants or (self.requant,)]
        return not self.add and not self.narrows and max(shifts) <= MAX_FOLDED_SHIFT

    @property
    def narrows(self) -> bool:
        """One shift for all channels, of at most 15, and no residual add after it: round, shift and narrow two
        output vectors with one instruction (the zero point is added to the halfwords)."""
        return (not self.add and not self.requants and self.requant is not None and not self.shift_only
                and self.requant.shift <= MAX_NARROWING_SHIFT)

    def rounding_of(self, requant: Requant) -> int:
        """What is added before the shift: 2^(s-1) (half up), or 2^(t-1) - 1 before the quotient's low bit is
        added too (half to even, shift_only); plus the zero point << shift when folds_zero_point."""
        base = (1 << requant.shift) - 1 if self.shift_only else requant.rounding
        return base + (self.zp_out << self.shift_of(requant) if self.folds_zero_point else 0)
