"""The float32 requantization's fast form on hvx: one 32-bit product and a screen for the lanes near a half.

onnxruntime computes rint(f32(acc * S)): the product is first rounded to 24 bits, then to an integer. The two
roundings give round(X), X = acc * S exactly, except where X lies within half a float32 ulp of a half-integer:
there float32 lands on the half and rint takes the even neighbour. Below 256 in magnitude (past it every byte
saturates whichever way X rounds) half an ulp is at most 2^-17.

So the kernel computes h = floor(X * 2^F) from one product (vmpye + vmpyoacc: the exact floor for signed words,
checked under qemu-hexagon) and takes r = floor(X + 1/2) = (h + 2^(F-1)) >> F: one rounding, shift and narrowing
of two vectors (vasr:rnd:sat, which reads 4 bits of the shift: F <= 15). With F <= 15, half an ulp is under a
quarter of h's step, so X + 1/2 lies within it of an integer only when d = (h + 2^(F-1)) mod 2^F is 0 or 2^F - 1:
those lanes are screened, two vectors at a time in the words' low halfwords, and a tile with a screened lane is
requantized again by the exact form (requantizer.FloatSplit: four multiplies and the window test). A lane is
screened with probability 2 / 2^F: 2^-14 at F = 15, one tile of 8 pixels x 32 channels in 64.

The product: acc is clamped to [-C, C] and shifted left by L (C <= 2^(31 - L) - 1, so that the shift cannot
overflow; C * S >= 257 in every channel, so a clamped lane still saturates), then multiplied by m = M * 2^j (M the
24-bit significand of S = M * 2^-E, j <= 7 so that m < 2^31): h = floor(acc * 2^L * m / 2^31), F = E + L + j - 31,
one F for every channel (each channel's j absorbs its exponent).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...quant_float import FloatRequant

# A clamped lane's |X| = C * S must saturate every byte after any zero point (round(X) >= 256); 257 leaves a margin.
SATURATING = 257
# vasr(Vu.w, Vv.w, Rt):rnd:sat reads 4 bits of Rt; the screen's halfwords hold 15 bits and a sign.
MAX_FRACTION_BITS = 15
# Below this the screen passes too many lanes (2^-10 each at F = 11: a tile of 256 lanes in 4) to gain.
MIN_FRACTION_BITS = 12
MAX_J = 7  # m = M << j < 2^31 for M < 2^24
# Scales of round decimals put many accumulators near a half (acc * 0.01 for acc = 50 mod 100: 1% of them). Past
# this share of screened lanes a tile of 8 pixels x 32 channels goes to the exact form one time in 8; a scale that
# screens more keeps the exact form alone. Measured on the accumulators up to SAMPLED in magnitude.
MAX_SCREENED = 2.0 ** -11
SAMPLED = 1 << 12


@dataclass(frozen=True, slots=True)
class FloatScreen:
    """The fast form's constants for one op: per-channel multipliers, the shared clamp, shift and fraction bits."""

    mults: tuple[int, ...]  # m = M << j per output channel (one, or one per channel padded)
    clamp: int  # C: acc is clamped to [-C, C]
    left: int  # L: then shifted left by L
    fraction_bits: int  # F: h = floor(acc * S * 2^F)

    @staticmethod
    @lru_cache(maxsize=4096)
    def of(floats: tuple[FloatRequant, ...]) -> "FloatScreen | None":
        """The fast form for these channels' scales, or None where their exponents spread too far for it or it
        would screen more than MAX_SCREENED of the lanes (cached: fusion plans an op many times)."""
        screen = FloatScreen._fitted(floats)
        if screen is None:
            return None
        distinct = tuple(dict.fromkeys(floats))  # per-channel tables repeat the last channel to whole blocks
        probe = FloatScreen._fitted(distinct)
        sample = np.arange(-SAMPLED, SAMPLED + 1, dtype=np.int64)[:, None]
        _, screened = probe.emulate(np.broadcast_to(sample, (sample.size, len(distinct))))
        return screen if screened.mean() <= MAX_SCREENED else None

    @classmethod
    def _fitted(cls, floats: tuple[FloatRequant, ...]) -> "FloatScreen | None":
        s_min = min(f.scale for f in floats)
        # the largest L whose clamp still saturates: (2^(31 - L) - 1) * s_min >= SATURATING
        left = next((L for L in range(30, -1, -1) if ((1 << (31 - L)) - 1) * s_min >= SATURATING), None)
        if left is None:
            return None
        e_min = min(f.exponent for f in floats)
        # the most fraction bits that clamp leaves (the smallest exponent's j = 7), then the least shift giving them
        bits = min(MAX_FRACTION_BITS, e_min + left + MAX_J - 31)
        left = max(0, bits + 31 - MAX_J - e_min)
        js = [bits - f.exponent - left + 31 for f in floats]
        if bits < MIN_FRACTION_BITS or min(js) < 0 or max(js) > MAX_J:
            return None
        mults = tuple(f.mantissa << j for f, j in zip(floats, js))
        return cls(mults=mults, clamp=cls._clamp(mults, left, bits), left=left, fraction_bits=bits)

    @staticmethod
    def _clamp(mults: tuple[int, ...], left: int, bits: int) -> int:
        """C: the largest value up to 2^(31 - L) - 1 whose clamped lanes pass the screen in every channel (relu
        layers clamp half their lanes: a screened clamp would send every tile to the exact form)."""
        top = (1 << (31 - left)) - 1
        for clamp in range(top, top - 256, -1):
            probe = FloatScreen(mults=mults, clamp=clamp, left=left, fraction_bits=bits)
            _, screened = probe.emulate(np.array([[clamp] * len(mults), [-clamp] * len(mults)]))
            if not screened.any():
                return clamp
        return top

    @property
    def half(self) -> int:
        return 1 << (self.fraction_bits - 1)

    def emulate(self, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's steps in numpy, per channel on the last axis: (floor(X + 1/2), screened). Where a lane is not
        screened the first is onnxruntime's rint(f32(f32(acc) * S)), or both saturate every byte."""
        acc = np.asarray(acc, dtype=np.int64)
        m = np.array(self.mults, dtype=np.int64)
        a = np.clip(acc, -self.clamp, self.clamp) << self.left
        h = np.clip((a * m) >> 31, -2 ** 31, 2 ** 31 - 1)  # vmpye + vmpyoacc: the floor, saturated
        r = (h + self.half) >> self.fraction_bits  # vasr:rnd (its result saturated to halfwords changes no byte)
        d = (h + self.half + 1) & ((1 << self.fraction_bits) - 1)  # (d + 1) mod 2^F, in the low halfwords
        return r, d < 2
