"""The qf32 variant's epilogue of one op as HvxPlan's OpGeo fields: + bias, + residual (its blocked buffer's
geometry), the clamp, the hard gates (C float literals). Split from plan.py."""
from __future__ import annotations

import math

from ...config import Conv2d
from ...planner.packing import c_float

BLOCK = 2048  # elements of one 8h x 8w x 32c activation block


def qf32_epilogue(op: Conv2d, earlier: list, shape_list: list, src_c: int, out_k: int) -> dict:
    """The qf32 variant's groups and epilogue fields of one op (float32; uint8 has neither): `earlier` are the
    plan's OpGeo of the ops before it (a residual of op K reads op K's window)."""
    e = op.epilogue
    out: dict = dict(bias=e.bias, residual=e.residual)
    if op.groups > 1:
        out |= dict(group_in=src_c // op.groups, group_out=out_k // op.groups)
    if e.residual == 0:
        _, h, w, c = shape_list[0]
        out |= dict(res_wb=-(-w // 8), res_cb=-(-c // 32), res_image=-(-h // 8) * -(-w // 8) * -(-c // 32) * BLOCK)
    elif isinstance(e.residual, str):  # a side input of the op's output shape, read where the output is written
        _, h, w, c = shape_list[len(earlier) + 1]
        out |= dict(res_wb=-(-w // 8), res_cb=-(-c // 32), res_image=-(-h // 8) * -(-w // 8) * -(-c // 32) * BLOCK)
    elif e.residual_op:
        k = earlier[e.residual_op - 1]
        out |= dict(res_wb=k.dst_wb, res_cb=k.dst_cb, res_row_a=k.row_a, res_row_b=k.row_b, res_col_lo=k.col_lo)
    if e.clamp is not None:
        lo, hi = e.clamp
        out |= dict(clamp_lo=c_float(lo) if lo > -math.inf else "", clamp_hi=c_float(hi) if hi < math.inf else "")
    if e.hard is not None:
        out |= dict(gate_alpha=c_float(e.hard.alpha), gate_beta=c_float(e.hard.beta),
                    gate_times_value=e.hard.times_value)
    return out
