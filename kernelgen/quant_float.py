"""The float32 requantization of `quant.requantization: float32`: what onnxruntime computes for a quantized conv
(QLinearConv, and a DequantizeLinear -> Conv -> QuantizeLinear group once its optimizer has fused it), so that
a kernel can agree with it bit for bit.

onnxruntime forms one float32 scale per output channel, S = f32(f32(s_in * s_w[k]) / s_out) (qlinearconv.cc,
ComputeOutputScale), then requantizes each int32 sum in MLAS as

    q = rint_half_even(f32(f32(acc) * S)) + z_out, saturated to [0, 255]

(a float convert, one float multiply, a clamp in float and a round-to-nearest-even convert). Unlike the
fixed-point form (quant.py: a Q31 multiply rounded half up, then a rounding shift), the only roundings are
IEEE ones, and that is what this module and the numpy reference reproduce. The hvx kernels compute the same
integers without floating point (requantizer.py, FloatSplit).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .config import Config

# The integer form needs |acc| < 2^24 wherever the result is not saturated (f32(acc) is then exact):
# S >= 2^-16 gives |acc * S| >= 256 beyond it, saturated whatever the rounding.
MIN_SCALE = 2.0 ** -16
# S < 1/2 leaves the multiply's 24-bit mantissa room below the hvx kernel's split (requantizer.FloatSplit).
MAX_SCALE = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class FloatRequant:
    scale: float  # S as a float32 value (exactly representable in a Python float)
    mantissa: int  # M in [2^23, 2^24)
    exponent: int  # E: S = M * 2^-E

    @property
    def real(self) -> float:
        return self.scale


def float_scale(s_in: float, s_w: float, s_out: float) -> float:
    """S = f32(f32(s_in * s_w) / s_out), every operand and step in float32, as onnxruntime forms it."""
    with np.errstate(all="ignore"):
        return float(np.float32(np.float32(s_in) * np.float32(s_w)) / np.float32(s_out))


def float_requantization(s_in: float, s_w: float, s_out: float, key: str, config: Config) -> FloatRequant:
    scale = float_scale(s_in, s_w, s_out)
    if not MIN_SCALE <= scale < MAX_SCALE:
        raise config.problem(key, f"quant.requantization float32 needs s_in * s_w / s_out in [2^-16, 0.5), got "
                                  f"{scale:.6g}; use requantization: fixed_point for these scales")
    return of_scale(scale)


def of_scale(scale: float) -> FloatRequant:
    """A float32 scale as M * 2^-E (no range check: float_requantization's)."""
    scale = float(np.float32(scale))
    frac, exp = math.frexp(scale)  # exact for a float32 value: frac has at most 24 significant bits
    return FloatRequant(scale=scale, mantissa=int(frac * (1 << 24)), exponent=24 - exp)


def requantize_float(acc: np.ndarray, per: tuple[FloatRequant, ...]) -> np.ndarray:
    """rint(f32(f32(acc) * S)) per output channel (the last axis), as int64, before the zero point: numpy's
    float32 convert, multiply and rint are the IEEE round-to-nearest-even operations MLAS uses."""
    scales = np.array([r.scale for r in per], dtype=np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(acc).astype(np.float32) * scales
    return np.rint(y).astype(np.int64)
