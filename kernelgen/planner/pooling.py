"""The statements of a pooling op in the stripe's loop nest (builder.py): its window, tap by tap over a channel
block, and an average pool's divisor at an output position. Pure text from the plan's expressions."""
from __future__ import annotations

import kernelgen.expr as E
from ..config import Conv2d
from ..ops import OPS
from ..plan_types import Guard, Loop, Node, Stmt
from .geometry import unproven
from .packing import c_float

Shape = tuple[int, int, int, int]


def tap(op: Conv2d, load: Stmt) -> tuple[Node, ...]:
    """One channel of one tap of a pool's window: its kind's step (kernelgen/ops), the max or the sum so far with
    x (loaded by `load`)."""
    code, summary = OPS[op.kind].TAP
    return (load, Stmt(code=code, summary=summary))


def window(op: Conv2d, in_shape: Shape, row: E.Expr, col: E.Expr, bounds: dict, channel: tuple[Node, ...],
           k_block: int, k_checks: list[str]) -> Node:
    """A pool's (or a mul's) window at output position (row, col): each tap's `channel` statements over the
    channel block. A max skips positions outside the input (ONNX: padding is never the maximum); a sum adds the
    zeros the caches hold there.

    The taps are outside the channel loop and each tap's position test outside it too, so the channel loop is a
    plain max or sum over consecutive channels (only a block's tail channels tested). With the test inside it
    (`for ki: if (k < K) for rh, rw: if (inside) max`), gcc 12.2 at -O3 with a 256-bit tuning (-march=native on
    Zen 3, Haswell and later) vectorizes the channels into masked gathers and, for the taps whose position test
    it folds to true once the output rows are unrolled, gives the gather an all-true mask of 1s instead of -1s:
    the AVX2 gather then reads no lane (tests/data/gcc12_masked_gather.c; issue 44's 9x8 max pool lost the last
    row of its windows)."""
    if k_checks:  # a block's tail: channels past the tensor read nothing
        channel = (Guard(cond=k_checks[0], body=channel),)
    channels: Node = Loop(var="ki", extent=k_block, body=channel)
    inside: list[str] = []
    if OPS[op.kind].SKIPS_PADDING:
        _, in_h, in_w, _ = in_shape
        in_row = E.add(E.mul(row, op.stride[0]), E.Const(-op.pad[0]), E.Var("rh"))
        in_col = E.add(E.mul(col, op.stride[1]), E.Const(-op.pad[1]), E.Var("rw"))
        inside = unproven([(in_row, ">=", 0), (in_row, "<", in_h), (in_col, ">=", 0), (in_col, "<", in_w)], bounds)
    tap_node = Guard(cond=" && ".join(inside), body=(channels,)) if inside else channels
    return Loop(var="rh", extent=op.kernel[0], body=(Loop(var="rw", extent=op.kernel[1], body=(tap_node,)),))


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
