"""QLinearMul's float32 rounding (ops/mul.py's qlinear_mul) in integers, for the HVX mul: exact by construction
where the two can differ, and checked on every pair of bytes the op can see.

The float path: p = (a - za) * (f - zf) (exact), y = f32(p * S), w = f32(y + z), q = rint_even(w), saturated.
Write x = p * S + z for the exact real value; S = M * 2^-E (M < 2^24), so x - z = p * M / 2^E.

1. floor(x + 1/2), round half up of the exact value, is integer arithmetic: with M = Mh * 2^t + Ml (Ml < 2^t),
   Y = p * Mh + floor(p * Ml / 2^t) and floor(x + 1/2) = z + floor((Y + 2^(E-t-1)) / 2^(E-t)) (nested floors of
   divisions by integers are one floor). With t = 12 and |p| <= 255 * 255 every step fits int32 (checked below).
2. float32 agrees with it except where w lands on a half-integer. Every half-integer H with |H| < 2^22 is a
   float32 value, and rounding is monotone and fixes float32 values: x < H gives p * S < H - z (a float32 value,
   z an integer), so y <= H - z, y + z <= H and w <= H; x >= H gives w >= H alike. So with n = floor(x + 1/2),
   n - 1/2 <= w <= n + 1/2, and rint_even(w) = n unless w is n + 1/2 or n - 1/2 with n odd (then n + 1 or n - 1).
3. Those products (a near-tie the two roundings turn into a tie, or an exact tie) are few and known at build time:
   the kernel corrects each by +-1 (a compare and a conditional add), found by evaluating the float32 path on all
   65,536 byte pairs; `of` then checks the kernel's integer steps against it on all of them again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ops.mul import qlinear_mul
from ...quant_float import FloatRequant

SPLIT = 12  # t: p * Mh and p * Ml both stay below 2^29 for |p| < 2^16
MAX_FIXES = 8  # products corrected one by one; more (not seen on real scales) keep the scalar float path
INT32 = 2 ** 31


@dataclass(frozen=True, slots=True, kw_only=True)
class MulRequant:
    m_high: int  # Mh = M >> t
    m_low: int  # Ml = M mod 2^t
    shift: int  # E - t
    zero_point: int  # z, added after the shift
    z_in: int  # za: the products start from -za * (f - zf)
    fixes: tuple[tuple[int, int], ...]  # (product, +1 or -1): where float32 rounds a made tie to even

    @property
    def rounding(self) -> int:
        return 1 << (self.shift - 1)

    @property
    def split(self) -> int:
        return SPLIT

    # vmpyi(Vu.w, Rt.h) multiplies lane i by halfword i % 2 of Rt: each constant twice, as a C literal
    @property
    def m_high_pair(self) -> str:
        return _pair(self.m_high)

    @property
    def m_low_pair(self) -> str:
        return _pair(self.m_low)

    @property
    def minus_za_pair(self) -> str:
        return _pair(-self.z_in)

    @classmethod
    def of(cls, scale: FloatRequant, z_in: int, z_side: int, z_out: int) -> "MulRequant | str":
        """The integer form for this op's scale and zero points, or why there is none (the kernel then keeps the
        scalar float32 loop)."""
        shift = scale.exponent - SPLIT
        if not 2 <= shift <= 30:
            return f"the mul's scale {scale.scale:.3g} is outside [2^-19, 2^10)"
        bare = cls(m_high=scale.mantissa >> SPLIT, m_low=scale.mantissa & ((1 << SPLIT) - 1), shift=shift,
                   zero_point=z_out, z_in=z_in, fixes=())
        products = all_products(z_in, z_side)
        want = qlinear_mul(products, scale.scale, z_out).astype(np.int64)
        got = bare.emulate(products)
        wrong = got != want
        fixes = {}
        for p, delta in zip(products[wrong].tolist(), (want - got)[wrong].tolist()):
            if abs(delta) != 1 or fixes.get(p, delta) != delta:
                return f"the mul's float32 rounding differs from round half up by {delta} at product {p}"
            fixes[p] = delta
        if len(fixes) > MAX_FIXES:
            return f"{len(fixes)} products where float32 rounds a tie to even (the kernel corrects {MAX_FIXES})"
        fixed = cls(m_high=bare.m_high, m_low=bare.m_low, shift=shift, zero_point=z_out,
                    z_in=z_in, fixes=tuple(sorted(fixes.items())))
        if not (fixed.emulate(products) == want).all():  # the proof, on every input the kernel can see
            return "the mul's integer form disagrees with float32"
        return fixed

    def emulate(self, products: np.ndarray) -> np.ndarray:
        """The kernel's steps in int64, each checked to stay inside int32 as the vector lanes hold it; the bytes
        (0..255) as int64."""
        p = np.asarray(products, dtype=np.int64)
        low = _int32(p * self.m_low)  # vmpyi(p, Ml)
        y = _int32(p * self.m_high + (low >> SPLIT))  # vmpyiacc(vasr(low, t), p, Mh)
        q = _int32(_int32(y + self.rounding) >> self.shift) + self.zero_point
        for product, delta in self.fixes:
            q = q + np.where(p == product, delta, 0)
        return np.clip(q, 0, 255)


def all_products(z_in: int, z_side: int) -> np.ndarray:
    """(a - za) * (f - zf) for every pair of bytes a, f: 65,536 products."""
    a = np.arange(256, dtype=np.int64)
    return ((a[:, None] - z_in) * (a[None, :] - z_side)).reshape(-1)


def _pair(value: int) -> str:
    half = value & 0xFFFF
    return f"(int32_t){half * 0x10001:#x}u"


def _int32(x: np.ndarray) -> np.ndarray:
    if x.size and (x.max() >= INT32 or x.min() < -INT32):
        raise AssertionError("an int32 lane of the mul's integer form overflows")
    return x
