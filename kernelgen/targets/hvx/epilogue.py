"""The qf32 variant's epilogue of one op as HvxPlan's OpGeo fields: the residual's blocked buffer geometry, and
the spellings of the plan's epilogue statements in HVX qf32 (the sums onto the qf32 accumulator, the activation
on sf vectors). Split from plan.py."""
from __future__ import annotations

from dataclasses import replace

from ...config import Conv2d
from ...ops import statements
from ...ops.dialect import Dialect, c_float

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
    literals = statements.literals(e.act.statements())
    names = {value: f"act_c{i}" for i, value in enumerate(literals)}  # splatted once per call, before the loops
    out |= dict(act_constants=tuple((names[value], c_float(value)) for value in literals),
                dialect=replace(QF32, literal=names.__getitem__), sum_dialect=QF32_SUM)
    return out


# HVX qf32 (v68+): an activation's statements as sf vectors; a product or sum goes through qf32 and is rounded
# back to sf at once (the kernels' float32 order); a literal is a vector splatted before the loops.
QF32 = Dialect(literal=c_float, decl="HVX_Vector", forms={
    "mul": "Q6_Vsf_equals_Vqf32(Q6_Vqf32_vmpy_VsfVsf({0}, {1}))",
    "add": "Q6_Vsf_equals_Vqf32(Q6_Vqf32_vadd_VsfVsf({0}, {1}))",
    "muladd": "Q6_Vsf_equals_Vqf32(Q6_Vqf32_vadd_Vqf32Vsf(Q6_Vqf32_vmpy_VsfVsf({0}, {1}), {2}))",
    "max": "Q6_Vsf_vmax_VsfVsf({0}, {1})", "min": "Q6_Vsf_vmin_VsfVsf({0}, {1})",
    "select_gt": "Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VsfVsf({0}, {1}), {2}, {3})"})

# the sums (+ bias, + residual) onto the qf32 accumulator: an sf operand added into qf32, rounded to sf once after
# them (the template's Q6_Vsf_equals_Vqf32), before the activation
QF32_SUM = replace(QF32, forms=QF32.forms | {"add": "Q6_Vqf32_vadd_Vqf32Vsf({0}, {1})"})
