"""Which uint8 depthwise convs the HVX vector path computes (templates/hvx/depthwise_uint8.c.j2). Pure.

A depthwise conv (channel multiplier 1) has one weight per channel and tap, so its weights are per lane:
vrmpy's scalar-weight forms and its 4-channel reduction do not fit channel-last data as stored. Three forms:

- conv #1 3x3 (no dilation) as the chain's only op, with one column of left padding and the fixed-point
  requantization that folds the output zero point into its rounding: the sweep
  (templates/hvx/depthwise_sweep_uint8.c.j2) reads the input tensor and stores into the output tensor, no cache
  copy, no write-back; each block of up to 4 output rows of a 32-channel block is one block of packets
  list-scheduled by depthwise_asm.py, each input vector transposed in registers as below, once per block
  (depthwise_program.py).
- another conv #1 3x3 (no dilation) reads the input cache, which the input read then stores transposed (per
  4-pixel vector, byte 4c + p: a word per channel holding 4 neighbouring pixels). `vrmpy(Vu.ub, Vv.b)` with the
  row's weights [w0, w1, w2, 0] or [0, w0, w1, w2] per word is then 3 taps of one output pixel for 32 channels, in
  channel order; the words of pixels 4q+2..4q+5 come from two vectors with one shift and one vshuffo
  (templates/hvx/depthwise_weights_uint8.c.j2 reads the weights as vectors).
- any other (a later op, or a conv #1 of other taps; 2 to 7 taps a row, up to 7 rows, any dilation) reads its
  source cache as stored (4 pixels x 32 channels per vector): `vmpy(Vu.ub, Vv.b)` per tap (128 exact int16
  products) and two taps' products summed into int32 with one `vadd(Vu.h, Vv.h)` accumulate; a tap's 4 pixels are
  the row's aligned vectors joined with valign (stride 1) or dealt into even and odd pixels and then joined
  (stride 2), never gathered. MobileNetV3's and EfficientNet's 5x5 and DeepLabV3's dilated 5x5 take it.

All need the weights minus their zero point as int8 (int8 weights at zero point 0, uint8 weights at 128); the
input zero point is folded into the per-channel correction (bias - za * sum(w - zw)), so the loops are products
and sums only. Everything else keeps the generic grouped path.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Config
from ...plan_types import Halo, Pipeline, Plan
from ...planner.geometry import shapes
from .depthwise_asm import MAX_ROWS, Block, RowAsm, block_asm

# taps a row and rows of the vmpy form: a row's taps' products are live at once (two vectors each), and the
# largest depthwise kernels of mobile networks are 7x7
MAX_TAPS = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class Depthwise:
    """The template's view: which convs take the vector path, and how much of the input a stripe copies."""

    ops: tuple[int, ...]  # conv indices (1-based) computed by depthwise_uint8.c.j2
    # a chain of one depthwise op: its channel stripe ko reads input channel blocks [ko * k, ko * k + k) only,
    # so the input cache read copies those (k = k_split); 0: every channel block
    input_blocks: int
    # conv #1 takes the vector path, and reads the input cache alone: the input read stores each 4-pixel vector
    # transposed (byte 4c + p: a word per channel holds 4 neighbouring pixels, what vrmpy(Vu.ub, Vv.b) reduces),
    # and copies a channel tail block whole (the path weighs the padding lanes 0)
    transposed: bool
    # conv #1, the chain's only op, sweeps its output rows straight from the input tensor to the output tensor
    # (templates/hvx/depthwise_sweep_uint8.c.j2: no cache copy, no write-back), each block of up to `rows` output
    # rows of a 32-channel block one block of scheduled packets (depthwise_asm.py): `asm` holds a schedule for each
    # kind of block the stripes have (its rows, its padding input rows above and below the input, whole or tail
    # channel block). Taken with one column of left padding and the fixed-point requantization that folds the
    # output zero point into its rounding (per-channel scales, or one scale with a shift past the narrowing
    # form's), no residual add or gate table, no halo ring or prefetch.
    sweep: bool = False
    rows: int = 0
    asm: tuple[RowAsm, ...] = ()

    @property
    def vrmpy(self) -> bool:
        """conv #1 multiplies with vrmpy(Vu.ub, Vv.b) on 4-pixel words (either form): its weights are the row
        vectors of depthwise_weights_uint8.c.j2, and it weighs a channel tail block's padding lanes 0."""
        return self.transposed or self.sweep


def vector_op(config: Config, j: int) -> bool:
    """Conv #j (1-based) is a uint8 depthwise conv of 2 to 7 taps a row and up to 7 rows (stride 1 or 2 across, any
    down, any dilation) whose weights minus their zero point fit int8: the vmpy form computes it."""
    op = config.ops[j - 1]
    q = config.quant
    fits_int8 = q.weight_zero_point == (0 if q.weight_dtype == "int8" else 128)
    return (config.dtype == "uint8" and not op.pool and op.groups > 1
            and op.groups == shapes(config)[j - 1][3] == op.out_channels and 1 <= op.kernel[0] <= MAX_TAPS
            and 2 <= op.kernel[1] <= MAX_TAPS and op.stride[1] in (1, 2) and fits_int8)


def vrmpy_op(config: Config, j: int) -> bool:
    """Conv #j takes the vector path and its rows are 3 neighbouring taps, what the vrmpy forms of conv #1 (the
    transposed input cache, the sweep) reduce in one instruction a row."""
    op = config.ops[j - 1]
    return vector_op(config, j) and op.kernel == (3, 3) and op.dilation == (1, 1)


def depthwise(config: Config, plan: Plan, ops: tuple) -> Depthwise:
    """ops: the hvx plan's OpGeo records. The vector path reads whole aligned vectors from window column 0,
    so an op whose window starts left of its first output (a padded consumer: col_lo > 0) keeps the generic
    path, as does a first op whose input channels come in chunks."""
    chosen = tuple(o.index for o in ops if not o.pool and vector_op(config, o.index) and o.col_lo == 0
                   and (o.index > 1 or plan.c_split == 1))
    first = ops[0] if ops else None
    vrmpy = 1 in chosen and vrmpy_op(config, 1)
    sweep = (vrmpy and first.last and config.ops[0].pad[1] == 1 and plan.halo is not Halo.REUSE
             and plan.pipeline is not Pipeline.DOUBLE_BUFFER and first.floats is None and first.add is None
             and not first.table and not first.requantizer.shift_only and first.requantizer.folds_zero_point
             and not first.requantizer.narrows)
    rows, asm = block_rows(first.sw, first.out_w) if sweep else 0, ()
    while sweep and not asm:
        try:
            asm = tuple(block_asm(b) for b in sweep_blocks(config, first, rows))
        except ValueError:  # its values do not fit the registers: fewer rows
            if rows == 1:
                raise
            rows -= 1
    return Depthwise(ops=chosen, input_blocks=plan.k_split if single_input_stripe(config, plan) else 0,
                     transposed=vrmpy and not sweep, sweep=sweep, rows=rows, asm=asm)


def block_rows(stride: int, out_w: int) -> int:
    """Output rows per scheduled block: 4 for short rows at stride 2 across (the per-row start, 3 rows' first loads
    and transposes, overlaps the previous row's work, and at stride 2 down the rows share an input row), else 2
    (one row's program is long enough to hide the next one's start). Measured (the schedule's packets per row,
    v66's 576 channels 14x14 stride 2, 7 wide: 1 row 51, 2 rows 44.5, 4 rows 40.3; 144 channels 56x56 stride 2, 28
    wide: 2 rows 159, 3 rows 162.3, 4 rows 162.8)."""
    return MAX_ROWS if stride == 2 and out_w <= 8 else 2


def sweep_blocks(config: Config, first, rows: int) -> tuple[Block, ...]:
    """Each kind of block of the sweep's stripes: output rows gh0.. gh0 + n - 1 (n <= rows, a stripe's rows past
    the output not computed) read input rows down * gh0 - pad .. down * (gh0 + n - 1) - pad + 2, those outside
    the input being padding; whole and tail channel blocks."""
    op = config.ops[0]
    down, pad, in_h = first.sh, op.pad[0], config.input_shape[1]
    clamps = (first.q_min > 0, first.q_max < 255)
    kinds = []
    stripe = 0
    while (row0 := stripe * first.row_a + first.row_b) < first.out_h:
        for oh in range(0, first.dst_rows, rows):
            if row0 + oh >= first.out_h:
                break
            n = min(rows, first.dst_rows - oh, first.out_h - row0 - oh)
            ih0 = (row0 + oh) * down - pad
            pads = tuple(k for k in range(down * (n - 1) + 3) if not 0 <= ih0 + k < in_h)
            if (n, pads) not in kinds:
                kinds.append((n, pads))
        stripe += 1
    return tuple(Block(stride=first.sw, down=down, in_w=config.input_shape[2], out_w=first.out_w, clamps=clamps,
                       rows=n, pads=pads, lanes=lanes)
                 for lanes in ((False, True) if first.k_tail else (False,)) for n, pads in kinds)


def single_input_stripe(config: Config, plan: Plan | None) -> bool:
    """A chain of one depthwise op of the vector path: each channel stripe reads its own input channels."""
    return len(config.ops) == 1 and vector_op(config, 1) and (plan is None or plan.c_split == 1)


def depthwise_pixels(config: Config) -> int:
    """Output pixels per group for a lone depthwise op of the vector path (0: not one, plan.py's default): 8 when
    the width is whole groups of 8, else 4. Measured (qemu, v66, compute packets): 576 channels 14x14, 41364 with
    4 and 47916 with 8 (both compute 16 columns); 256 channels 28x28, 42960 with 4 and 60920 with 8 (28 or 32
    columns); 96 channels 56x56, 54978 with 8 and 58884 with 4."""
    if not single_input_stripe(config, None):
        return 0
    return 8 if shapes(config)[1][2] % 8 == 0 else 4
