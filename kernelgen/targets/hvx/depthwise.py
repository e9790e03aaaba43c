"""Which uint8 depthwise convs the HVX vector path computes (templates/hvx/depthwise_uint8.c.j2). Pure.

A depthwise conv (channel multiplier 1) has one weight per channel and tap, so its weights are per lane:
vrmpy's scalar-weight forms and its 4-channel reduction do not fit channel-last data as stored. Three forms:

- conv #1 as the chain's only op, with one column of left padding and the fixed-point requantization that folds
  the output zero point into its rounding: the sweep (templates/hvx/depthwise_sweep_uint8.c.j2) reads the input
  tensor and stores into the output tensor, no cache copy, no write-back; each pair of output rows of a 32-channel
  block is one block of packets list-scheduled by depthwise_asm.py, each input vector transposed in registers as
  below, once per output row.
- another conv #1 reads the input cache, which the input read then stores transposed (per 4-pixel vector, byte 4c + p:
  a word per channel holding 4 neighbouring pixels). `vrmpy(Vu.ub, Vv.b)` with the row's weights [w0, w1, w2, 0]
  or [0, w0, w1, w2] per word is then 3 taps of one output pixel for 32 channels, in channel order; the words
  of pixels 4q+2..4q+5 come from two vectors with one shift and one vshuffo (templates/hvx/depthwise_weights_uint8.c.j2
  reads the weights as vectors).
- a later op reads its producer's cache as stored (4 pixels x 32 channels per vector): `vmpy(Vu.ub, Vv.b)`
  per tap (128 exact int16 products) and two taps' products summed into int32 with one `vadd(Vu.h, Vv.h)`
  accumulate; neighbouring taps are the row's aligned vectors joined with valign (stride 1) or dealt into even
  and odd pixels (stride 2), never gathered.

All need the weights minus their zero point as int8 (int8 weights at zero point 0, uint8 weights at 128); the
input zero point is folded into the per-channel correction (bias - za * sum(w - zw)), so the loops are products
and sums only. Everything else keeps the generic grouped path.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Config
from ...plan import Halo, Pipeline, Plan
from ...planner.geometry import shapes
from .depthwise_asm import RowAsm, row_asm


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
    # (templates/hvx/depthwise_sweep_uint8.c.j2: no cache copy, no write-back), each pair of rows of a 32-channel
    # block one block of scheduled packets (depthwise_asm.py): `asm` holds one row's and two rows' schedules, then
    # the same storing a tail block's channels alone. Taken with one column of left padding and the fixed-point
    # requantization that folds the output zero point into its rounding (per-channel scales, or one scale with a
    # shift past the narrowing form's), no residual add or gate table, no halo ring or prefetch.
    sweep: bool = False
    asm: tuple[RowAsm, ...] = ()

    @property
    def vrmpy(self) -> bool:
        """conv #1 multiplies with vrmpy(Vu.ub, Vv.b) on 4-pixel words (either form): its weights are the row
        vectors of depthwise_weights_uint8.c.j2, and it weighs a channel tail block's padding lanes 0."""
        return self.transposed or self.sweep


def vector_op(config: Config, j: int) -> bool:
    """Conv #j (1-based) is a uint8 depthwise 3x3 (stride 1 or 2 across, any down, no dilation) whose weights
    minus their zero point fit int8."""
    op = config.ops[j - 1]
    q = config.quant
    fits_int8 = q.weight_zero_point == (0 if q.weight_dtype == "int8" else 128)
    return (config.dtype == "uint8" and not op.pool and op.groups > 1
            and op.groups == shapes(config)[j - 1][3] == op.out_channels and op.kernel == (3, 3)
            and op.dilation == (1, 1) and op.stride[1] in (1, 2) and fits_int8)


def depthwise(config: Config, plan: Plan, ops: tuple) -> Depthwise:
    """ops: the hvx plan's OpGeo records. The vector path reads whole aligned vectors from window column 0,
    so an op whose window starts left of its first output (a padded consumer: col_lo > 0) keeps the generic
    path, as does a first op whose input channels come in chunks."""
    chosen = tuple(o.index for o in ops if not o.pool and vector_op(config, o.index) and o.col_lo == 0
                   and (o.index > 1 or plan.c_split == 1))
    first = ops[0] if ops else None
    sweep = (1 in chosen and first.last and config.ops[0].pad[1] == 1 and plan.halo is not Halo.REUSE
             and plan.pipeline is not Pipeline.DOUBLE_BUFFER and first.floats is None and first.add is None
             and not first.table and not first.requantizer.shift_only and first.requantizer.folds_zero_point
             and not first.requantizer.narrows)
    clamps = (first.q_min > 0, first.q_max < 255) if sweep else (False, False)
    asm = tuple(row_asm(first.sw, config.input_shape[2], first.out_w, clamps, rows, lanes)
                for lanes in (False, True) for rows in (1, 2)) if sweep else ()
    return Depthwise(ops=chosen, input_blocks=plan.k_split if single_input_stripe(config, plan) else 0,
                     transposed=1 in chosen and not sweep, sweep=sweep, asm=asm)


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
