"""A lone 3x3 stride-1 conv by Winograd's F(2x2, 3x3) (templates/c/winograd.c.j2): each 2x2 block of outputs from
its 4x4 input patch with 16 multiply-adds per input-output channel pair where the direct conv takes 36. The
products become 16 matrix products over the input channels, [tiles x C] . [C x K], which run as the dense tile
does (a register block of tiles x 2 output-channel vectors, the transformed input broadcast); the transforms of
the input patches and the outputs are adds.

ResNet18's 3x3 convs are at the core's FMA peak the direct way (164-170 GFLOP/s against a 166 probe on one
Cooper Lake core), as onnxruntime's are, so fewer multiplies are the only way ahead of it. A C harness against
the generated direct kernels, same inputs, interleaved (quiet host): 56x56x64 -> 64 0.82 against 1.43 ms,
28x28x128 -> 128 0.79 against 1.60, 14x14x256 -> 256 0.83 + 0.31 (this call's filter transform) against 1.60;
outputs within 3.4e-6 of the direct kernel's (largest magnitude 3.8). In ResNet18's network program (one
thread): layer1's convs 1.37-1.41 -> 0.85-0.89 ms, layer2's 0.79-0.81, layer3's 1.09-1.12.

The filter is transformed in each call, so the weights stay the direct kernel's OHWI16o and nothing else in a
network changes: a panel of 2 output-channel vectors at a time (U, 16 x C x 2 vectors, 1 MiB at 512 input
channels), right before its 16 products and its outputs, so that U stays in L1/L2 and is never written out whole
(the first cut transformed all of U at the call's start: 4 MiB at 256 x 256 channels, 0.3 ms of layer3's 1.3).
The rounding differs from the direct sum (the transforms add and halve before and after
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
BLOCK_BYTES = 512 << 10  # V and a panel's M for a block of tiles: a quarter of a 2 MiB L2 (U takes the rest)
WHOLE_BYTES = 1 << 20  # ... or of the whole image, where that is within this: the filter then transformed once
# A filter past this (OHWI16o bytes) keeps the direct kernel: transforming it each call, its reads from memory
# among them, costs what the products save. ResNet18's layer4 (512 x 512 channels, 9.4 MB, 16 tiles of 7x7
# pixels): 1.74-1.86 ms against the direct 1.74-1.95; its layer3 (256 x 256, 2.4 MB, 49 tiles) 1.09-1.12 against
# 1.37-1.41.
MAX_FILTER_BYTES = 4 << 20
# a filter whose transform (16 x C x K floats) is within this is transformed whole at the call's start, once for all
# blocks of tiles, else a panel at a time in each block. ResNet18 (network program, one thread, interleaved runs):
# layer2's 128 x 128 channels (1 MiB transformed) in 5 blocks 0.81-0.88 ms a panel at a time, 0.63-0.75 whole;
# layer3's 256 x 256 (4 MiB) in one block 0.95-1.09 a panel at a time, 1.06-1.20 whole.
WHOLE_FILTER_BYTES = 1 << 20
WIDE_TILES, NARROW_TILES = 14, 6  # tiles a register block holds: 2 x 14 zmm, 2 x 6 ymm accumulators
WIDEST = 16  # floats a vector holds at most (KG_VF16): what the workspace is sized for


@dataclass(frozen=True, slots=True, kw_only=True)
class Winograd:
    """How the kernel cuts its tiles: `block_rows` tile rows a block (V holds them), the register blocks, and the
    workspace: V, then each thread's panel (U and M of 2 output-channel vectors)."""

    tile_rows: int
    tile_cols: int
    block_rows: int
    wide_tiles: int
    narrow_tiles: int
    v_elements: int
    u_elements: int  # the whole filter transformed (whole_u), else 0: a panel's U is in each thread's panel
    panel_elements: int
    threads: int

    @property
    def whole_u(self) -> bool:
        return self.u_elements > 0

    @property
    def block_tiles(self) -> int:
        return self.block_rows * self.tile_cols

    @property
    def workspace_elements(self) -> int:
        return self.v_elements + self.u_elements + self.threads * self.panel_elements


def winograd_fits(plan: Plan) -> str | None:
    """Why `plan` cannot run as a Winograd conv, or None when it can: one float conv2d, 3x3, stride and dilation 1,
    padding 1 all round, ungrouped, NHWC in and out (a side input too), its filter OHWI16o, input channels a
    multiple of 16 and output channels of 32, a clamp or no activation, a residual only from a side input, and a
    filter within MAX_FILTER_BYTES."""
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
    if op.epilogue.residual is not None and not isinstance(op.epilogue.residual, str):
        return "its residual is not a side input"
    if 9 * op.in_channels * op.out_channels * 4 > MAX_FILTER_BYTES:
        return f"its filter is past {MAX_FILTER_BYTES >> 20} MiB (transformed each call, it costs what it saves)"
    return None


def shape(plan: Plan, threads: int = 1) -> Winograd:
    op = plan.ops[0]
    _, h, w, c = op.in_shape
    tile_rows, tile_cols = math.ceil(h / 2), math.ceil(w / 2)
    tile_bytes = 16 * (c + 2 * WIDEST) * 4  # a tile's V and its M in a panel
    whole = tile_bytes * tile_rows * tile_cols <= WHOLE_BYTES
    block_rows = tile_rows if whole else max(1, min(tile_rows, BLOCK_BYTES // (tile_bytes * tile_cols)))
    tiles = block_rows * tile_cols
    u = 16 * c * op.out_channels
    whole_u = u * 4 <= WHOLE_FILTER_BYTES
    return Winograd(tile_rows=tile_rows, tile_cols=tile_cols, block_rows=block_rows,
                    wide_tiles=_divisor(tiles, WIDE_TILES), narrow_tiles=_divisor(tiles, NARROW_TILES),
                    v_elements=16 * tiles * c, u_elements=u if whole_u else 0,
                    panel_elements=16 * 2 * WIDEST * (tiles if whole_u else c + tiles), threads=threads)


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
    cut = shape(plan, threads)
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
        **{f: getattr(cut, f) for f in ("tile_rows", "tile_cols", "block_rows", "block_tiles", "wide_tiles",
                                        "narrow_tiles", "v_elements", "panel_elements", "whole_u")})
    body = tuple(Stmt(code=line, summary="") for line in text.splitlines() if line.strip())
    kernel = Function(name=plan.kernel.name, doc=f"{plan.kernel.doc}; Winograd F(2x2, 3x3)",
                      params=plan.kernel.params, prologue=(), body=body)
    return kernel, cut
