"""Fixed-point requantization of int32 accumulators to uint8: the one definition that the
numpy reference (reference_quant.py) and the hvx kernels (HVX `vmpye` + `vmpyo:<<1:rnd:sat:shift`)
share bit for bit.

    r = sat32(((((acc * m_lo) >> 16) + acc * m_hi) >> 14) + 1) >> 1)   # ~ round(acc * m / 2^31)
    r = sat32(r + rnd) >> shift                                        # rnd = 2^(shift-1)
    q = clamp(sat32(r + z_out), 0, 255)

with m in [2^30, 2^31) and shift >= 0 such that m * 2^-(31 + shift) ~ s_in * s_w / s_out: the default form
(quant.requantization: fixed_point). With requantization: float32, a conv requantizes as onnxruntime does
(quant_float.py) and OpQuant.float_requants holds its scales; a residual add stays fixed-point in both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .config import Config
from .ops import OPS
from .quant_float import FloatRequant, float_requantization, of_scale


# Power-of-two multipliers (real = 2^-t) skip the multiply: x >> t rounded half to even, one rounding, what a
# float requantization (onnxruntime: acc * real, exact for a power of two, then rint) gives bit for bit. Other
# multipliers go through the Q31 multiply rounded half up, then a rounding shift: two roundings, at most 1 apart
# from the float result. t is kept at most 22 so a saturating add near 2^31 still ends at byte 255.
MAX_SHIFT_ONLY = 22


def shift_only(requants: tuple["Requant", ...]) -> bool:
    """Every channel's multiplier is a power of two: the layer requantizes by shifts alone."""
    return all(r.power_of_two for r in requants)


@dataclass(frozen=True, slots=True, kw_only=True)
class Requant:
    multiplier: int  # m in [2^30, 2^31)
    shift: int  # right shift after the Q31 multiply
    rounding: int  # 2^(shift-1), or 0
    real: float  # s_in * s_w / s_out, for the comment

    @property
    def power_of_two(self) -> bool:
        """real == 2^-(shift + 1) exactly: requantized by one rounding shift (shift_only), no multiply."""
        return self.multiplier == 1 << 30 and self.shift + 1 <= MAX_SHIFT_ONLY

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ResidualAdd:
    """A quantized add as TFLite's ADD structures it: both operands centred and shifted left by LEFT_SHIFT, each
    multiplied by its scale over twice the larger one (rq_a, rq_b <= 0.5), summed, then multiplied by twice the
    larger scale over 2^LEFT_SHIFT * s_out (rq_out) and offset by the output zero point. Every multiply is
    quant.py's fixed-point one (rq_mul), so the numpy reference and the HVX kernel agree bit for bit."""

    z_a: int  # the conv result's zero point
    z_b: int  # the residual's zero point
    rq_a: Requant
    rq_b: Requant
    rq_out: Requant
    left_shift: int = 20  # LEFT_SHIFT, for the templates


LEFT_SHIFT = 20  # TFLite's: 255 << 20 still fits an int32 with room for the sum


@dataclass(frozen=True, slots=True, kw_only=True)
class OpQuant:
    """One uint8 op's quantization: real = scale * (q - zero_point) for its input, weights and output."""

    s_in: float
    z_in: int
    s_w: tuple[float, ...]  # one weight scale per output channel (all equal: per-tensor)
    z_w: int
    s_out: float
    z_out: int
    q_min: int  # the activation as a clamp of the output bytes (TFLite's activation range); 0: none below
    q_max: int  # 255: none above
    requants: tuple[Requant, ...]  # per output channel: s_in * s_w[k] / s_conv
    # with a residual: the conv's result is quantized to (s_conv, z_conv), then added (ResidualAdd); else
    # s_conv, z_conv are s_out, z_out
    s_conv: float = 0.0
    z_conv: int = 0
    add: "ResidualAdd | None" = None
    # quant.requantization float32: per output channel, onnxruntime's float scale (quant_float.py); else ()
    float_requants: tuple[FloatRequant, ...] = ()
    # a table activation (a hard gate): the output byte of each of the conv's bytes (at s_conv, z_conv); else ()
    table: tuple[int, ...] = ()
    # how far onnxruntime's own table may lie from it (a sigmoid's: MLAS's approximate logistic); 0: exactly it
    table_slack: int = 0

    @property
    def per_channel(self) -> bool:
        if self.float_requants:
            return len({r.scale for r in self.float_requants}) > 1
        return len({(r.multiplier, r.shift) for r in self.requants}) > 1


def quant_params(config: Config) -> list[tuple[float, int, float, int]]:
    """Per op: (input scale, input zero point, output scale, output zero point)."""
    return [(q.s_in, q.z_in, q.s_out, q.z_out) for q in op_quants(config)]


def op_quants(config: Config) -> list[OpQuant]:
    """Per op: an op's own `quant:` block, else the top-level quant (intermediates: intermediate_*, else output_*);
    each op's input is the previous op's output. A max pool keeps its input's quantization (a maximum of bytes is
    the byte of the maximum); a global average pool requantizes its byte sums (pool_quant)."""
    q = config.quant
    mid_scale = q.intermediate_scale or q.output_scale
    mid_zp = q.output_zero_point if q.intermediate_zero_point is None else q.intermediate_zero_point
    n = len(config.ops)
    sides = {side.name: side for side in config.side_inputs}
    out: list[OpQuant] = []
    for j, op in enumerate(config.ops):
        own = op.quant
        s_in, z_in = (q.input_scale, q.input_zero_point) if j == 0 else (out[-1].s_out, out[-1].z_out)
        if OPS[op.kind].KEEPS_QUANT:
            out.append(OpQuant(s_in=s_in, z_in=z_in, s_w=(), z_w=0, s_out=s_in, z_out=z_in, q_min=0, q_max=255,
                               requants=(), s_conv=s_in, z_conv=z_in))
            continue
        s_out = own.output_scale if own and own.output_scale is not None else (q.output_scale if j == n - 1
                                                                               else mid_scale)
        z_out = own.output_zero_point if own and own.output_zero_point is not None else (
            q.output_zero_point if j == n - 1 else mid_zp)
        out_key = _output_scale_key(config, j)
        if op.scale_by:  # x times a side input's value
            out.append(mul_quant(config, sides[op.scale_by], s_in, z_in, s_out, z_out, out_key))
            continue
        if op.pool:
            out.append(pool_quant(config, op, s_in, z_in, s_out, z_out, out_key))
            continue
        scales = own.weight_scale if own and own.weight_scale is not None else q.weight_scale
        s_w = tuple(scales) if isinstance(scales, list) else (scales,)
        s_w = s_w * op.out_channels if len(s_w) == 1 else s_w
        s_conv, z_conv, add = s_out, z_out, None
        conv_key = out_key
        table: tuple[int, ...] = ()
        slack = 0
        if op.act.UINT8 == "table":  # the conv's bytes at its own scale, through the activation's table (config
            s_conv, z_conv = own.conv_scale, own.conv_zero_point  # checked both)
            conv_key = f"ops[{j}].conv2d.quant.conv_scale"
            gate = None if own.gate_scale is None else (own.gate_scale, own.gate_zero_point)
            table = op.act.byte_table(s_conv, z_conv, s_out, z_out, gate)
            slack = op.act.table_slack(s_conv, z_conv, s_out, z_out, gate)
        if op.residual is not None:
            s_conv = own.conv_scale if own and own.conv_scale is not None else s_out
            z_conv = own.conv_zero_point if own and own.conv_zero_point is not None else z_out
            conv_key = f"ops[{j}].conv2d.quant.conv_scale" if own and own.conv_scale is not None else out_key
            if isinstance(op.residual, str):  # a side input: its own quantization
                s_res, z_res = sides[op.residual].scale, sides[op.residual].zero_point
            else:
                s_res, z_res = (q.input_scale, q.input_zero_point) if op.residual == 0 else (
                    out[op.residual - 1].s_out, out[op.residual - 1].z_out)
            twice = 2 * max(s_conv, s_res)
            # the add's operands relate the conv's scale to the residual's (blamed on this op's key), its result
            # the larger one to the output's
            add = ResidualAdd(z_a=z_conv, z_b=z_res, rq_a=requantization(s_conv / twice, conv_key, config),
                              rq_b=requantization(s_res / twice, conv_key, config),
                              rq_out=requantization(twice / (2 ** LEFT_SHIFT * s_out), out_key, config))
        key = f"ops[{j}].conv2d.quant.weight_scale" if own and own.weight_scale is not None else conv_key
        floats = {s: float_requantization(s_in, s, s_conv, key, config) for s in dict.fromkeys(s_w)} \
            if q.requantization == "float32" else {}
        requants = {s: requantization(s_in * s / s_conv, key, config) for s in dict.fromkeys(s_w)}
        q_min, q_max = activation_range(op.epilogue.clamp, s_out, z_out)
        out.append(OpQuant(s_in=s_in, z_in=z_in, s_w=s_w, z_w=q.weight_zero_point, s_out=s_out, z_out=z_out,
                           q_min=q_min, q_max=q_max, requants=tuple(requants[s] for s in s_w), s_conv=s_conv,
                           z_conv=z_conv, add=add, float_requants=tuple(floats[s] for s in s_w) if floats else (),
                           table=table, table_slack=slack))
    return out


def mul_quant(config: Config, side, s_in: float, z_in: int, s_out: float, z_out: int, key: str) -> OpQuant:
    """A mul by a side input as onnxruntime's QLinearMul: (q - z_in) * (f - z_f), an exact int, times S = f32(f32(s_in *
    s_f) / s_out) in float32, plus z_out in float32, rounded half to even once (float32), or quant.py's fixed-point
    multiply then z_out (fixed_point)."""
    floats: tuple[FloatRequant, ...] = ()
    requants: tuple[Requant, ...] = ()
    if config.quant.requantization == "float32":
        with np.errstate(all="ignore"):
            floats = (of_scale(float(np.float32(np.float32(s_in) * np.float32(side.scale)) / np.float32(s_out))),)
    else:
        requants = (requantization(s_in * side.scale / s_out, key, config),)
    return OpQuant(s_in=s_in, z_in=z_in, s_w=(side.scale,), z_w=side.zero_point, s_out=s_out, z_out=z_out, q_min=0,
                   q_max=255, requants=requants, s_conv=s_out, z_conv=z_out, float_requants=floats)


def pool_quant(config: Config, op, s_in: float, z_in: int, s_out: float, z_out: int, key: str) -> OpQuant:
    """A global average pool as onnxruntime's QLinearGlobalAveragePool computes it: the int32 sum of its n bytes
    less n * z_in, requantized by s_in / (s_out * n) (float32: S = f32(s_in / f32(s_out * n)), MLAS's one rounding
    half to even; fixed point: quant.py's multiplier and shift), plus z_out."""
    pixels = op.kernel[0] * op.kernel[1]
    floats: tuple[FloatRequant, ...] = ()
    requants: tuple[Requant, ...] = ()
    if config.quant.requantization == "float32":  # scalar float32 in the kernel: any scale (|sum| < 2^24 is exact)
        with np.errstate(all="ignore"):
            floats = (of_scale(float(np.float32(s_in) / np.float32(np.float32(s_out) * np.float32(pixels)))),)
    else:
        requants = (requantization(s_in / (s_out * pixels), key, config),)
    return OpQuant(s_in=s_in, z_in=z_in, s_w=(), z_w=0, s_out=s_out, z_out=z_out, q_min=0, q_max=255,
                   requants=requants, s_conv=s_out, z_conv=z_out, float_requants=floats)


def _output_scale_key(config: Config, j: int) -> str:
    """The key that gives op j's output scale: its own quant.output_scale, else the top-level one (an
    intermediate's: quant.intermediate_scale when set)."""
    for key, kind in OPS.items():  # the kinds whose block has a quant key
        if "quant" in kind.MODEL.model_fields and f"ops[{j}].{key}.quant.output_scale" in config.marks:
            return f"ops[{j}].{key}.quant.output_scale"
    if j < len(config.ops) - 1 and config.quant.intermediate_scale:
        return "quant.intermediate_scale"
    return "quant.output_scale"


def activation_range(clamp: tuple[float, float] | None, scale: float, zero_point: int) -> tuple[int, int]:
    """A clamp [lo, hi] of real values as output bytes, as TFLite computes it: z + round(bound / scale) (half away
    from zero), within [0, 255]."""
    if clamp is None:
        return 0, 255
    lo, hi = clamp

    def quantize(value: float) -> int:
        scaled = value / scale
        return zero_point + int(math.copysign(math.floor(abs(scaled) + 0.5), scaled))

    q_min = 0 if lo == -math.inf else max(0, min(255, quantize(lo)))
    q_max = 255 if hi == math.inf else max(0, min(255, quantize(hi)))
    return q_min, q_max
