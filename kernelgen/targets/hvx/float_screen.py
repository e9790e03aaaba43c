"""The float32 requantization's fast form on hvx: one 32-bit product and a screen for the lanes near a half.

onnxruntime computes rint(f32(acc * S)): the product is first rounded to 24 bits, then to an integer. The two
roundings give round(acc * S) (the exact product rounded to the nearest integer) except where the product lies
within half a float32 ulp of a half-integer, where float32 lands on the half exactly and rint takes the even
neighbour. For results up to 256 in magnitude (larger ones saturate every byte) that ulp is at most 2^-15.

So the kernel computes h = floor(X * 2^F), X = acc * S, from one product (vmpye + vmpyoacc, exact floor for
signed words, checked under qemu-hexagon), takes r = floor(X + 1/2) = (h + 2^(F-1)) >> F, and screens every lane
whose fraction of X + 1/2 lies within T / 2^F of an integer (T >= 2^F * 2^-16): there, and only there, r may differ
from onnxruntime's. A tile with a screened lane is requantized again by the exact form (requantizer.FloatSplit:
four multiplies and the window test, about 25 vector instructions a vector against this form's 11).

The product: acc is clamped to [-C, C] and shifted left by L (C = 2^(31 - L) - 1 at most, so that the shift
cannot overflow; C * S >= 257 for every channel, so a clamped lane still saturates), then multiplied by
m = M * 2^j (M the 24-bit significand of S = M * 2^-E, j <= 7 so that m < 2^31): h = floor(acc * 2^L * m / 2^31),
F = E + L + j - 31, the same F for every channel (j per channel absorbs their exponents). F is about 21 less the
spread of the channels' exponents; a lane is screened with probability about (2T + 2) / 2^F, 2^-15 at F = 21.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...quant_float import FloatRequant

# A clamped lane's |X| = C * S must saturate every byte after any zero point: round(X) >= 256 -> X >= 255.5; 257
# leaves a margin.
SATURATING = 257
# Below this many fraction bits the screen passes too many lanes (P ~ 5 / 2^F each: at F = 12 one lane in 800,
# about every tile of 32 pixels x 32 channels) and the exact form alone is cheaper.
MIN_FRACTION_BITS = 12
# float32's ulp / 2 for results below 2^9 in magnitude: 2^(8 - 24)
HALF_ULP_LOG2 = -16
MAX_J = 7  # m = M << j < 2^31 for M < 2^24
# Scales such as 0.3 or 0.01 put many accumulators near a half (acc * 0.01 for acc = 50 mod 100): past this share
# of screened lanes a tile of 8 pixels x 32 channels goes to the exact form one time in 8, and a scale that
# screens more keeps the exact form alone. Measured on the accumulators up to SAMPLED in magnitude.
MAX_SCREENED = 2.0 ** -11
SAMPLED = 1 << 12


@dataclass(frozen=True, slots=True)
class FloatScreen:
    """The fast form's constants for one op: per-channel multipliers, the shared clamp, shift and screen."""

    mults: tuple[int, ...]  # m = M << j per output channel (one, or one per channel padded)
    clamp: int  # C: acc is clamped to [-C, C]
    left: int  # L: then shifted left by L
    fraction_bits: int  # F: h = floor(acc * S * 2^F)
    band: int  # T: screened when (h + 2^(F-1)) mod 2^F <= T or >= 2^F - T - 1

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
        e_min, e_max = min(f.exponent for f in floats), max(f.exponent for f in floats)
        s_min = min(f.scale for f in floats)
        # the largest L whose clamp still saturates: (2^(31 - L) - 1) * s_min >= SATURATING
        left = next((L for L in range(30, -1, -1) if ((1 << (31 - L)) - 1) * s_min >= SATURATING), None)
        if left is None:
            return None
        bits = e_min + left + MAX_J - 31  # the channel of the smallest exponent takes j = 7
        if bits < MIN_FRACTION_BITS or e_max - e_min > MAX_J:
            return None
        band = max(1, 1 << max(0, bits + HALF_ULP_LOG2))
        mults = tuple(f.mantissa << (bits - f.exponent - left + 31) for f in floats)
        clamp = cls._clamp(mults, left, bits, band)
        return cls(mults=mults, clamp=clamp, left=left, fraction_bits=bits, band=band)

    @staticmethod
    def _clamp(mults: tuple[int, ...], left: int, bits: int, band: int) -> int:
        """C: the largest value not above 2^(31 - L) - 1 whose clamped lanes pass the screen in every channel
        (relu layers clamp half their lanes: a screened clamp would send every tile to the exact form)."""
        top = (1 << (31 - left)) - 1
        for clamp in range(top, top - 256, -1):
            probe = FloatScreen(mults=mults, clamp=clamp, left=left, fraction_bits=bits, band=band)
            _, screened = probe.emulate(np.array([[clamp] * len(mults), [-clamp] * len(mults)]))
            if not screened.any():
                return clamp
        return top

    @property
    def half(self) -> int:
        return 1 << (self.fraction_bits - 1)

    @property
    def mask(self) -> int:
        return (1 << self.fraction_bits) - 1

    def emulate(self, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's steps in numpy, per channel on the last axis: (floor(X + 1/2), screened). Where a lane is not
        screened the first equals onnxruntime's rint(f32(f32(acc) * S)) or both saturate every byte."""
        acc = np.asarray(acc, dtype=np.int64)
        m = np.array(self.mults, dtype=np.int64)
        a = np.clip(acc, -self.clamp, self.clamp) << self.left
        h = np.clip((a * m) >> 31, -2 ** 31, 2 ** 31 - 1)  # vmpye + vmpyoacc: the floor, saturated
        t = np.minimum(h + self.half, 2 ** 31 - 1)  # vadd:sat
        u = (t + self.band + 1) & self.mask
        return t >> self.fraction_bits, u < 2 * self.band + 2
