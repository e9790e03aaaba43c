"""A lone 3x3 stride-1 conv by Winograd's F(2x2, 3x3) (templates/c/winograd.c.j2): each 2x2 block of outputs from
its 4x4 input patch with 16 multiply-adds per input-output channel pair where the direct conv takes 36. The
products become 16 matrix products over the input channels, [tiles x C] . [C x K], which run as the dense tile
does (a register block of tiles x 2 output-channel vectors, the transformed input broadcast); the transforms of
the input patches and the outputs are adds.

ResNet18's 3x3 convs are at the core's FMA peak the direct way (164-170 GFLOP/s against a 166 probe on one
Cooper Lake core), as onnxruntime's are, so fewer multiplies are the only way ahead of it. A C harness against
the generated direct kernels, same inputs, interleaved (quiet host): 56x56x64 -> 64 0.82 against 1.43 ms,
28x28x128 -> 128 0.79 against 1.60, 14x14x256 -> 256 0.83 + 0.31 (this call's filter transform) against 1.60;
outputs within 3.4e-6 of the direct kernel's (largest magnitude 3.8).

The filter is transformed in each call (U, 16 x C x K floats in the workspace), so the weights stay the direct
kernel's OHWI16o and nothing else in a network changes; that caps where it pays: at 512 x 512 channels (ResNet18's
layer4, 7x7 pixels) writing U alone takes about what the conv saves, so such a conv keeps the direct kernel
(MAX_FILTER_BYTES). The rounding differs from the direct sum (the transforms add and halve before and after
the products) by a few units in the last place of the largest outputs; validation bounds it as any float sum.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...emit import environment
from ...ops.activations import Clamp, Identity
from ...ops.dialect import c_float
from ...plan_types import Function, Plan, Stmt

TEMPLATE = "c/winograd.c.j2"
MAX_FILTER_BYTES = 4 << 20  # U, the transformed filter, written every call: 256 x 256 channels at most
BLOCK_BYTES = 512 << 10  # V and M of a block of tile rows: L2's share (1 MiB or more a core on x86)
WHOLE_IMAGE_BYTES = 2 << 20  # ... or all of them, so that U is read once a call (it is then past L2)
WIDE_TILES, NARROW_TILES = 14, 6  # tiles a register block holds: 2 x 14 zmm, 2 x 6 ymm accumulators


@dataclass(frozen=True, slots=True, kw_only=True)
class Winograd:
    """How the kernel cuts its tiles: `block_rows` tile rows a block (V and M hold them), the register blocks."""

    tile_rows: int
    tile_cols: int
    block_rows: int
    wide_tiles: int
    narrow_tiles: int
    u_elements: int
    v_elements: int
    m_elements: int

    @property
    def workspace_elements(self) -> int:
        return self.u_elements + self.v_elements + self.m_elements


def winograd_fits(plan: Plan) -> str | None:
    """Why `plan` cannot run as a Winograd conv, or None when it can: one float conv2d, 3x3, stride and dilation 1,
    padding 1 all round, ungrouped, NHWC in and out (a side input too), its filter OHWI16o, input channels a
    multiple of 16 and output channels of 32, a clamp or no activation, and U within MAX_FILTER_BYTES."""
    if plan.dtype != "float32" or len(plan.ops) != 1 or plan.ops[0].kind != "conv2d":
        return "not one float conv2d"
    op = plan.ops[0]
    if op.kernel != (3, 3) or op.stride != (1, 1) or op.dilation != (1, 1) or op.pad != (1, 1, 1, 1) or \
            op.groups != 1:
        return "not a 3x3 conv of stride 1, padding 1"
    filters = [t for t in plan.tensors if t.name.startswith("filter")]
    pixels = [t for t in plan.tensors if t.logical_layout == "NHWC"]
    if len(filters) != 1 or filters[0].physical_layout != "OHWI16o":
        return "its filter is not OHWI16o"
    if any(t.physical_layout != "NHWC" or t.physical_shape != t.logical_shape for t in pixels):
        return "a tensor that is not plain NHWC"
    if op.in_channels % 16 or op.out_channels % 32:
        return "channels not multiples of 16 (input) and 32 (output)"
    if not isinstance(op.epilogue.act, (Identity, Clamp)):
        return f"its activation ({op.epilogue.activation}) is not a clamp"
    if 16 * op.in_channels * op.out_channels * 4 > MAX_FILTER_BYTES:
        return f"its transformed filter would take more than {MAX_FILTER_BYTES >> 20} MiB a call"
    return None


def shape(plan: Plan) -> Winograd:
    op = plan.ops[0]
    _, h, w, c = op.in_shape
    k = op.out_channels
    tile_rows, tile_cols = math.ceil(h / 2), math.ceil(w / 2)
    row_bytes = 16 * tile_cols * (c + k) * 4  # V and M of one row of tiles
    if row_bytes * tile_rows <= WHOLE_IMAGE_BYTES:
        block_rows = tile_rows
    else:
        block_rows = max(1, min(tile_rows, BLOCK_BYTES // row_bytes))
    tiles = block_rows * tile_cols
    return Winograd(tile_rows=tile_rows, tile_cols=tile_cols, block_rows=block_rows,
                    wide_tiles=_divisor(tiles, WIDE_TILES), narrow_tiles=_divisor(tiles, NARROW_TILES),
                    u_elements=16 * c * k, v_elements=16 * tiles * c, m_elements=16 * tiles * k)


def _divisor(tiles: int, most: int) -> int:
    """The register block: the most tiles up to `most` that divide a block's tiles (the last block of rows may
    leave a few to the one-tile loop), or `most` where none above half of it does."""
    best = max(d for d in range(1, most + 1) if tiles % d == 0)
    return best if best > most // 2 else most


def winograd_kernel(plan: Plan, lanes: int, threads: int = 1) -> tuple[Function, Winograd]:
    """The kernel function (the plan's name and parameters, the template's body) and its cut. With more than one
    thread, one team a call (kernel.c.j2's timed choice of the team or one thread): every thread walks the blocks,
    and the filter's output-channel vectors, each transform's tiles and the 16 products are split between them,
    each written by one thread, so the outputs are the one-thread bytes."""
    op = plan.ops[0]
    cut = shape(plan)
    n, h, w, c = op.in_shape
    names = [p.name for p in plan.kernel.params]
    epi = op.epilogue
    residual = f"side_{epi.residual}" if isinstance(epi.residual, str) else None
    if epi.residual is not None and residual not in names:
        raise AssertionError(f"{plan.name}: a residual that is not a side input ({epi.residual})")
    act = epi.act
    lo = c_float(act.lo) if isinstance(act, Clamp) and math.isfinite(act.lo) else None
    hi = c_float(act.hi) if isinstance(act, Clamp) and math.isfinite(act.hi) else None
    filter_name = next(name for name in names if name.startswith("filter"))
    bias = next((name for name in names if name.startswith("bias")), None) if epi.bias else None
    text = environment().get_template(TEMPLATE).render(
        c=c, k=op.out_channels, h=h, w=w, batch=n, odd=bool(h % 2 or w % 2), input="input", output="output",
        team=threads > 1,
        filter=filter_name, bias=bias, residual=residual, lo=lo, hi=hi, lanes=lanes,
        epilogue=", ".join(("+ bias",) * bool(bias) + ("+ the residual",) * bool(residual) +
                           ((epi.activation,) if epi.activated else ())) or "none",
        block_tiles=cut.block_rows * cut.tile_cols, **{f: getattr(cut, f) for f in (
            "tile_rows", "tile_cols", "block_rows", "wide_tiles", "narrow_tiles", "u_elements", "v_elements")})
    body = tuple(Stmt(code=line, summary="") for line in text.splitlines() if line.strip())
    kernel = Function(name=plan.kernel.name, doc=f"{plan.kernel.doc}; Winograd F(2x2, 3x3)",
                      params=plan.kernel.params, prologue=(), body=body)
    return kernel, cut
