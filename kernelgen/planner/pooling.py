"""The statements of a pooling op's window in the stripe's loop nest (builder.py): a tap of a max or average pool,
and an average pool's divisor at an output position. Pure text from the plan's expressions."""
from __future__ import annotations

import kernelgen.expr as E
from ..config import Conv2d
from ..plan import Guard, Node, Stmt
from .geometry import unproven
from .packing import c_float

Shape = tuple[int, int, int, int]


def tap(op: Conv2d, in_shape: Shape, row: E.Expr, col: E.Expr, bounds: dict, load: Stmt) -> tuple[Node, ...]:
    """One tap of a pool's window at output position (row, col): the max or the sum so far with x (loaded by
    `load`). A max skips positions outside the input (ONNX: padding is never the maximum); a sum adds the zeros the
    caches hold there."""
    if op.kind == "avgpool":
        return (load, Stmt(code="acc[ki] += x;", summary="acc[ki] += x"))
    _, in_h, in_w, _ = in_shape
    in_row = E.add(E.mul(row, op.stride[0]), E.Const(-op.pad[0]), E.Var("rh"))
    in_col = E.add(E.mul(col, op.stride[1]), E.Const(-op.pad[1]), E.Var("rw"))
    inside = unproven([(in_row, ">=", 0), (in_row, "<", in_h), (in_col, ">=", 0), (in_col, "<", in_w)], bounds)
    tap = (load, Stmt(code="acc[ki] = x > acc[ki] ? x : acc[ki];", summary="acc[ki] = max(acc[ki], x)"))
    return (Guard(cond=" && ".join(inside), body=tap),) if inside else tap

def divisor(op: Conv2d, in_shape: Shape, at: tuple[E.Expr, E.Expr], bounds: dict) -> str:
    """An average pool's count at output position `at`: the whole window, or its positions inside the input."""
    if op.count_include_pad:
        return c_float(op.kernel[0] * op.kernel[1])
    _, in_h, in_w, _ = in_shape
    counts = []
    for start, extent, k, stride, pad in ((at[0], in_h, op.kernel[0], op.stride[0], op.pad[0]),
                                          (at[1], in_w, op.kernel[1], op.stride[1], op.pad[1])):
        first = E.add(E.mul(start, stride), E.Const(-pad))
        lo, hi = E.interval(first, bounds)
        if lo >= 0 and hi + k <= extent:
            counts.append(str(k))
            continue
        f = E.to_c(first)
        counts.append(f"(({f}) + {k} < {extent} ? ({f}) + {k} : {extent}) - (({f}) > 0 ? ({f}) : 0)")
    return f"(float)(({counts[0]}) * ({counts[1]}))"
