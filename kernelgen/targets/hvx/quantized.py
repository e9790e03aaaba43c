"""The uint8 fields of one op of the hvx plan: zero points, requantization (per channel, float split), the
activation as a byte clamp or table, a pool's window and requantization. Split from plan.py, whose docstring
gives the arithmetic."""
from __future__ import annotations

from ...config import Config
from ...ops import OPS
from ...quant import OpQuant
from .mulrq import MulRequant
from .requantizer import FloatSplit, PoolRequant


def weight_zero_point(config: Config) -> int:
    """The unsigned weight zero point the kernels read (int8 weights: zw + 128, since vrmpy reads them xor 0x80)."""
    q = config.quant
    zw_u = q.weight_zero_point + (128 if q.weight_dtype == "int8" else 0)
    if config.dtype == "uint8" and not 0 <= zw_u <= 255:
        raise config.problem("quant.weight_zero_point", f"expected an int in the range of {q.weight_dtype}, "
                                                        f"got {q.weight_zero_point}")
    return zw_u


def uint8_fields(config: Config, j: int, oq: OpQuant, src_shape: tuple[int, ...], out_k: int, taps: int) -> dict:
    """OpGeo's uint8 fields of op j (1-based) from its quantization `oq`; `src_shape`: its input's NHWC shape."""
    op = config.ops[j - 1]
    if op.pool:  # the template's pool by its kind's step (kernelgen/ops); a max's bytes need no requantizing
        kind = OPS[op.kind]
        return dict(zp_in=oq.z_in, zp_out=oq.z_out, zp_store=oq.z_out, requant=None,
                    pool="mul" if op.scale_by else {"max": "max", "add": "avg"}[kind.STEP], src_h=src_shape[1],
                    src_w=src_shape[2], pad_top=op.pad[0], pad_left=op.pad[1],
                    pool_rq=None if kind.KEEPS_QUANT else PoolRequant.of(
                        oq.requants[0] if oq.requants else None, oq.float_requants, bool(op.scale_by)),
                    zp_side=oq.z_w, side=op.scale_by or "", mul_rq=_mul_requant(op, oq),
                    pool_floats=() if op.scale_by else oq.float_requants)
    for value, key in ((oq.z_in, "quant.input_zero_point"), (oq.z_out, "quant.output_zero_point")):
        if not 0 <= value <= 255:
            raise config.problem(key, f"expected an int in [0, 255], got {value}")
    if taps * 255 * 255 >= 2 ** 31 - 2 ** 24:
        raise config.problem(f"ops[{j - 1}].conv2d", f"{taps} taps can overflow the int32 accumulator")
    # per output channel (padded to whole blocks): vectors of multipliers, roundings and shifts
    padded = oq.requants + (oq.requants[-1],) * (-out_k % 32)
    fields = dict(zp_in=oq.z_in, zp_out=oq.z_out, zp_store=oq.z_out, requant=oq.requants[0], q_min=oq.q_min,
                  q_max=oq.q_max, requants=padded if oq.per_channel else (), add=oq.add, zp_conv=oq.z_conv)
    fields["floats"] = split = FloatSplit.padded(oq.float_requants, out_k, oq.per_channel)
    if isinstance(split, str):
        raise config.problem("quant.requantization", split + "; use requantization: fixed_point")
    if oq.table:  # the conv requantizes to its own zero point; the table maps those bytes to the output's
        fields |= dict(table=oq.table, gate=op.activation, zp_out=oq.z_conv)
    return fields


def _mul_requant(op, oq: OpQuant) -> MulRequant | None:
    """A float32 mul's exact integer form for the vector loop (mulrq.py), or None: the scalar float32 loop (the
    fixed-point form, or scales the integer form does not cover)."""
    if not op.scale_by or not oq.float_requants:
        return None
    found = MulRequant.of(oq.float_requants[0], oq.z_in, oq.z_w, oq.z_out)
    return None if isinstance(found, str) else found
