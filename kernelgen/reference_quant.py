"""The quantized numpy reference: a uint8 conv2d chain in logical NHWC / OIHW, bit-exact.

Per op: int64 accumulation of (a - za) * (w - zw) over the taps (spatial padding holds the
input zero point, so it adds 0), plus an optional int32 bias, then the config's requantization:
fixed-point (quant.py; one multiplier and shift per output channel with per-channel weight scales) or
onnxruntime's float32 one (quant_float.py), saturating to uint8, then the activation's clamp of the bytes.
The HVX kernel computes the same integers in a different order (vrmpy over unsigned bytes with zero-point
corrections); integer arithmetic makes the orders agree exactly.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .config import Config
from .quant import LEFT_SHIFT, OpQuant, Requant, ResidualAdd, op_quants, shift_only
from .quant_float import requantize_float
from .ops import OPS
from .ops.op import Requantizers

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def _sat32(x: np.ndarray) -> np.ndarray:
    return np.clip(x, INT32_MIN, INT32_MAX)


def requantize(acc: np.ndarray, rq: Requant | tuple[Requant, ...], zero_point: int, q_min: int = 0,
               q_max: int = 255) -> np.ndarray:
    """int32 accumulators -> uint8, exactly as vmpye + vmpyo:<<1:rnd:sat:shift + vasr + vpack:sat (then the
    activation's vmax / vmin on bytes), or as one rounding shift (half to even) when every multiplier is a power
    of two. rq: one requantization, or one per output channel (the last axis)."""
    per = (rq,) if isinstance(rq, Requant) else rq
    r = _sat32((rne_shift(acc, per) if shift_only(per) else rq_mul(acc, rq)) + zero_point)  # vadd(...):sat
    return np.clip(np.clip(r, 0, 255), q_min, q_max).astype(np.uint8)  # vpack w->h:sat, h->ub:sat; vmax, vmin


def requantize_op(acc: np.ndarray, oq: OpQuant, zero_point: int, q_min: int = 0, q_max: int = 255) -> np.ndarray:
    """One op's int32 sums -> uint8 in the config's form: onnxruntime's float32 one (quant_float.py) when
    quant.requantization is float32, else the fixed-point one (requantize)."""
    if not oq.float_requants:
        return requantize(acc, oq.requants, zero_point, q_min, q_max)
    r = _sat32(requantize_float(acc, oq.float_requants) + zero_point)
    return np.clip(np.clip(r, 0, 255), q_min, q_max).astype(np.uint8)


def rne_shift(x: np.ndarray, per: tuple[Requant, ...]) -> np.ndarray:
    """x / 2^t rounded half to even, t = shift + 1 (a power-of-two multiplier): vasr, vand 1 (the quotient's
    low bit), x + 2^(t-1) - 1 + that bit (vadd:sat twice), vasr."""
    x = np.asarray(x).astype(np.int64)
    t = np.array([r.shift + 1 for r in per], dtype=np.int64)
    return _sat32(_sat32(x + (1 << (t - 1)) - 1) + ((x >> t) & 1)) >> t


def rq_mul(x: np.ndarray, rq: Requant | tuple[Requant, ...]) -> np.ndarray:
    """round(x * m / 2^31) then a rounding right shift: vmpye + vmpyo:<<1:rnd:sat:shift, vadd:sat, vasr."""
    x = np.asarray(x).astype(np.int64)
    per = (rq,) if isinstance(rq, Requant) else rq
    m_lo, m_hi, rounding, shift = (np.array([getattr(r, f) for r in per], dtype=np.int64)
                                   for f in ("m_lo", "m_hi", "rounding", "shift"))
    t = (x * m_lo) >> 16  # vmpye(Vu.w, Vv.uh): the low half of the multiplier, unsigned
    r = _sat32((((t + x * m_hi) >> 14) + 1) >> 1)  # vmpyo(Vu.w, Vv.h):<<1:rnd:sat:shift
    return _sat32(r + rounding) >> shift  # vadd(...):sat, vasr


def quantized_add(a: np.ndarray, b: np.ndarray, add: ResidualAdd, zero_point: int, q_min: int = 0,
                  q_max: int = 255) -> np.ndarray:
    """uint8 a (the conv's result) + uint8 b (the residual) -> uint8, as quant.ResidualAdd spells it."""
    a1 = rq_mul((a.astype(np.int64) - add.z_a) << LEFT_SHIFT, add.rq_a)
    b1 = rq_mul((b.astype(np.int64) - add.z_b) << LEFT_SHIFT, add.rq_b)
    r = _sat32(rq_mul(_sat32(a1 + b1), add.rq_out) + zero_point)
    return np.clip(np.clip(r, 0, 255), q_min, q_max).astype(np.uint8)


def chain(config: Config, x: np.ndarray, filters: list[np.ndarray | None], biases: list[np.ndarray | None],
          sides: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    return chain_outputs(config, x, filters, biases, sides)[-1]


def chain_outputs(config: Config, x: np.ndarray, filters: list[np.ndarray | None], biases: list[np.ndarray | None],
                  sides: Mapping[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """[x, op 1's output, ..., op n's output]: every tensor of the chain (sides: the side inputs by name)."""
    sources = [x]  # the chain's input, then each op's output: what a residual names
    quants = op_quants(config)
    for j in range(len(config.ops)):
        sources.append(op_output(config, j, sources, filters[j], biases[j], quants[j], sides))
    return sources


def op_output(config: Config, j: int, sources: list[np.ndarray], w: np.ndarray | None, b: np.ndarray | None,
              oq: OpQuant | None = None, sides: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """Op j (0-based) on sources[j] (its input) and, with a residual, the source it names: the op alone, for
    the op-by-op check on the kernel's own intermediates (its kind's uint8 reference, kernelgen/ops)."""
    op = config.ops[j]
    return OPS[op.kind].reference_uint8(op, sources, j, w, b, oq or op_quants(config)[j], sides, REQUANTIZERS)


# the steps above, as a kind's uint8 reference (kernelgen/ops) takes them
REQUANTIZERS = Requantizers(requantize=requantize, requantize_op=requantize_op, quantized_add=quantized_add)
