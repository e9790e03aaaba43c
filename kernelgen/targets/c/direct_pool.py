"""A lone max pool between channels-innermost tensors (NHWC in and out, float32): its windows read straight from
the input, each output pixel's channels a max over the window's positions inside the input, stored straight into
the output. The planner's stripe loops copy the input into a zero-filled cache first and test each tap's position
per output pixel, then copy the output cache out: for ResNet18's maxpool (112x112x64, 3x3 stride 2) the two
copies cost more than the pool (C harness, loaded AVX-512 host: 0.30 ms against 0.13 ms read in place).

A window's rows and columns are clamped to the input once per output row and pixel, so the tap loops have no
tests and the channel loop is a plain max over consecutive floats, which gcc and clang vectorize. Each pixel's
channels run in blocks of at most BLOCK, whose running max stays in registers rather than in the output."""
from __future__ import annotations

from ...plan_types import Epilogue, Function, Loop, Plan, Section, Stmt

BLOCK = 64  # channels a window's running max holds at once: 4 zmm or 8 ymm registers


def direct_max_pool(plan: Plan) -> Function | None:
    """The kernel function of a plan that is one max pool over an NHWC float32 input into an NHWC output (no
    epilogue, no side inputs, no dilation), reading and writing the tensors in place; None for any other plan."""
    if plan.dtype != "float32" or len(plan.ops) != 1 or len(plan.tensors) != 2:
        return None
    op = plan.ops[0]
    if op.kind != "maxpool" or op.epilogue != Epilogue() or op.dilation != (1, 1):
        return None
    if any(t.physical_layout != "NHWC" or t.physical_shape != t.logical_shape for t in plan.tensors):
        return None
    n, in_h, in_w, channels = op.in_shape
    _, out_h, out_w, _ = op.out_shape
    block = min(channels, BLOCK)
    tail = channels % block
    (stride_h, stride_w), (pad_top, pad_left) = op.stride, op.pad[:2]
    (k_h, k_w) = op.kernel
    def inside(var: str, out: str, stride: int, pad: int, k: int, extent: int) -> tuple[Stmt, Stmt]:
        """The window's first and last-plus-one row (or column) inside the input, at output position `out`."""
        start = f"{out} * {stride} - {pad}"
        return (Stmt(code=f"const int {var}0 = {start} > 0 ? {start} : 0;", summary=f"{var}0 = max({start}, 0)"),
                Stmt(code=f"const int {var}1 = {start} + {k} < {extent} ? {start} + {k} : {extent};",
                     summary=f"{var}1 = min({start} + {k}, {extent})"))

    row = inside("h", "oh", stride_h, pad_top, k_h, in_h)
    pixel = inside("w", "ow", stride_w, pad_left, k_w, in_w)
    width = f"(cb * {block} + {block} <= {channels} ? {block} : {tail})" if tail else str(block)
    window = (
        Stmt(code=f"const int kn = {width};", summary="kn = channels in this block"),
        Stmt(code=f"float acc[{block}];", summary=f"acc[{block}]"),
        Stmt(code="for (int ki = 0; ki < kn; ++ki) acc[ki] = -3.4028234663852886e+38f;", summary="acc[ki] = -FLT_MAX"),
        Stmt(code=(f"for (int h = h0; h < h1; ++h) for (int w = w0; w < w1; ++w) {{ "
                   f"const float *const x = input + (((nb * {in_h} + h) * {in_w} + w) * {channels} + cb * {block}); "
                   f"for (int ki = 0; ki < kn; ++ki) acc[ki] = x[ki] > acc[ki] ? x[ki] : acc[ki]; }}"),
             summary="acc[ki] = max(acc[ki], input[...]) over the window inside the input"),
        Stmt(code=f"float *const y = output + (((nb * {out_h} + oh) * {out_w} + ow) * {channels} + cb * {block});",
             summary="y = output[...]"),
        Stmt(code="for (int ki = 0; ki < kn; ++ki) y[ki] = acc[ki];", summary="y[ki] = acc[ki]"),
    )
    blocks = Loop(var="cb", extent=-(-channels // block), body=window, comment=f"channel blocks of {block}")
    pixels = Loop(var="ow", extent=out_w, body=(*pixel, blocks))
    rows = Loop(var="oh", extent=out_h, body=(*row, pixels))
    body = (Section(label=f"{op.label}: windows read from the input in place", body=(
        Loop(var="nb", extent=n, body=(rows,), comment="images"),)),)
    return Function(name=plan.kernel.name, doc=plan.kernel.doc + "; windows read from the input in place",
                    params=plan.kernel.params, prologue=("(void)workspace; /* the pool reads and writes in place */",),
                    body=body)
