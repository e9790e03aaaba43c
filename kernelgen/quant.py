"""Fixed-point requantization of int32 accumulators to uint8: the one definition that the
numpy reference (reference_quant.py) and the hvx kernels (HVX `vmpye` + `vmpyo:<<1:rnd:sat:shift`)
share bit for bit.

    r = sat32(((((acc * m_lo) >> 16) + acc * m_hi) >> 14) + 1) >> 1)   # ~ round(acc * m / 2^31)
    r = sat32(r + rnd) >> shift                                        # rnd = 2^(shift-1)
    q = clamp(sat32(r + z_out), 0, 255)

with m in [2^30, 2^31) and shift >= 0 such that m * 2^-(31 + shift) ~ s_in * s_w / s_out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .config import Config


@dataclass(frozen=True, slots=True, kw_only=True)
class Requant:
    multiplier: int  # m in [2^30, 2^31)
    shift: int  # right shift after the Q31 multiply
    rounding: int  # 2^(shift-1), or 0
    real: float  # s_in * s_w / s_out, for the comment

    @property
    def m_lo(self) -> int:
        return self.multiplier & 0xFFFF

    @property
    def m_hi(self) -> int:
        return self.multiplier >> 16


def requantization(real: float, key: str, config: Config) -> Requant:
    if not 0 < real < 1:
        raise config.problem(key, f"the requantization multiplier s_in * s_w / s_out must lie in (0, 1), got {real:.6g}")
    frac, exp = math.frexp(real)  # real = frac * 2^exp, frac in [0.5, 1)
    m = round(frac * (1 << 31))
    if m == 1 << 31:
        m, exp = 1 << 30, exp + 1
    shift = -exp
    if shift > 30:
        raise config.problem(key, f"the requantization multiplier {real:.3g} is below 2^-31: scales too far apart")
    return Requant(multiplier=m, shift=shift, rounding=(1 << (shift - 1)) if shift else 0, real=real)


def quant_params(config: Config) -> list[tuple[float, int, float, int]]:
    """Per op: (input scale, input zero point, output scale, output zero point)."""
    q = config.quant
    mid_scale = q.intermediate_scale or q.output_scale
    mid_zp = q.intermediate_zero_point
    mid_zp = q.output_zero_point if mid_zp is None else mid_zp
    n = len(config.ops)
    out = []
    for j in range(n):
        s_in, z_in = (q.input_scale, q.input_zero_point) if j == 0 else (mid_scale, mid_zp)
        s_out, z_out = (q.output_scale, q.output_zero_point) if j == n - 1 else (mid_scale, mid_zp)
        out.append((s_in, z_in, s_out, z_out))
    return out
