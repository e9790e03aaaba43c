"""The hvx driver's channel steps (`concat: channels`, `slice`, `shuffle` between packed uint8 tensors): each part
(network/channel_copy.step_parts: a channel range of one input into channels of the output) as the copy network.c
makes of it in nhwc-8h8w32c, requantized through a 256-byte table when the input's scale or zero point is not the
output's (channel_copy.requantize_table: what onnxruntime computes). Pure.

In nhwc-8h8w32c an 8x8-pixel block's 32 channels are 2,048 contiguous bytes (16 HVX vectors), and a block's channel
blocks follow each other. A part that starts at a multiple of 32 channels on both sides and keeps its channels in
order therefore copies its whole channel blocks as vectors: one run per pixel block (the rows and columns of blocks
step alike on both sides), each vector through vlut32 when it requantizes. Its last block may hold fewer than 32
channels only where both tensors end there: the lanes past them are both layouts' padding, which no kernel reads
(the kernels take a channel tail as the zero point themselves). The channels left (a 48-channel branch's last 16, a
part from channel 24, a shuffle's every g-th channel) copy byte by byte at the layout engine's offsets.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...expr import Const, Expr, Var, add, mul, to_c
from ...layout import ACTIVATION_DIMS, TensorLayout, parse_layout
from ...network.channel_copy import input_tables, step_parts
from ...network.driver_text import comment_text
from ...network.manifest import Network, Step, Tensor
from .lut import vlut32_bytes

BLOCK_CHANNELS = 32  # the layout's innermost block: nhwc-8h8w32c
LAYOUT = "nhwc-8h8w32c"
VECTOR_BYTES = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockCopy:
    """Whole vectors: `runs` runs of `vectors` vectors, the k-th from input + from_offset + k * from_stride."""

    runs: int
    vectors: int
    from_offset: int
    to_offset: int
    from_stride: int
    to_stride: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ByteCopy:
    """Byte by byte over the part's (n, h, w, c), at the layout engine's offsets (expressions in n, h, w, c)."""

    extents: tuple[int, int, int, int]  # n, h, w, channels
    from_offset: Expr
    to_offset: Expr

    @property
    def from_index(self) -> str:
        return to_c(self.from_offset, shifts=True)  # non-negative: a shift is the floor division it means

    @property
    def to_index(self) -> str:
        return to_c(self.to_offset, shifts=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyPart:
    source: int  # the step's input it reads (its parameter in<source>)
    from_channel: int
    to_channel: int
    channels: int
    to_step: int
    table: int  # the step's table it requantizes through; -1: a plain copy
    copy: BlockCopy | ByteCopy

    @property
    def vectors(self) -> bool:
        return isinstance(self.copy, BlockCopy)


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyStep:
    """One step's copy: network.c's function `function`(in0, ..., out)."""

    function: str
    kind: str
    inputs: int
    parts: tuple[CopyPart, ...]
    tables: tuple[tuple[int, ...], ...]  # each as the step's parts read it: natural order for bytes
    vlut_tables: tuple[tuple[int, ...], ...]  # ... and in the order vlut32 reads it (lut.py)
    notes: tuple[str, ...]  # per table, for its comment: which input, its scale and zero point -> the output's


def copy_step(network: Network, step: Step) -> CopyStep:
    """The copy network.c makes of a channel step; every tensor is nhwc-8h8w32c (the driver checked)."""
    out = network.tensors[step.outputs[0]]
    tables, notes, table_of = [], [], {}
    for i, (name, table) in enumerate(zip(step.inputs, input_tables(network, step))):
        if table is not None and name not in table_of:
            table_of[name] = len(tables)
            tables.append(table)
            source = network.tensors[name]
            notes.append(f"in{i} ({comment_text(name)}) requantized into {comment_text(out.name)}: scale "
                         f"{source.scale:.9g}, zero point {source.zero_point} -> {out.scale:.9g}, {out.zero_point}")
    parts = tuple(part for name, first, to, channels, to_step in step_parts(network, step)
                  for part in _parts(network, step, out, name, first, to, channels, to_step, table_of.get(name, -1)))
    return CopyStep(function=f"{network.name}_step{step.index}_{step.kind}", kind=step.kind,
                    inputs=len(step.inputs), parts=parts, tables=tuple(tables),
                    vlut_tables=tuple(vlut32_bytes(t) for t in tables), notes=tuple(notes))


def _parts(network: Network, step: Step, out: Tensor, name: str, first: int, to: int, channels: int, to_step: int,
           table: int) -> list[CopyPart]:
    """A part as whole vectors where it can be: its whole channel blocks when it starts at a block on both sides,
    then the channels after them byte by byte (a 48-channel branch: one block of vectors and 16 channels)."""
    source = network.tensors[name]
    src, dst = _bound(source), _bound(out)
    index = list(step.inputs).index(name)
    aligned = first % BLOCK_CHANNELS == 0 and to % BLOCK_CHANNELS == 0 and to_step == 1
    ends = first + channels == source.shape[1] and to + channels == out.shape[1]
    whole = channels if ends else channels // BLOCK_CHANNELS * BLOCK_CHANNELS
    parts = []
    if aligned and whole:
        n, _, h, w = out.shape
        block_bytes = src.physical_shape[4] * src.physical_shape[5] * BLOCK_CHANNELS  # 8 * 8 * 32
        blocks = BlockCopy(runs=n * src.physical_shape[1] * src.physical_shape[2],  # n, h / 8, w / 8
                           vectors=-(-whole // BLOCK_CHANNELS) * block_bytes // VECTOR_BYTES,
                           from_offset=first // BLOCK_CHANNELS * block_bytes,
                           to_offset=to // BLOCK_CHANNELS * block_bytes,
                           from_stride=src.physical_shape[3] * block_bytes,
                           to_stride=dst.physical_shape[3] * block_bytes)
        parts.append(CopyPart(source=index, from_channel=first, to_channel=to, channels=whole, to_step=1,
                              table=table, copy=blocks))
        first, to, channels = first + whole, to + whole, channels - whole
    if channels:
        n, _, h, w = out.shape
        channel = Var("c")
        copy = ByteCopy(extents=(n, h, w, channels),
                        from_offset=_offset(src, add(channel, Const(first)), channels),
                        to_offset=_offset(dst, add(mul(channel, to_step), Const(to)), channels))
        parts.append(CopyPart(source=index, from_channel=first, to_channel=to, channels=channels, to_step=to_step,
                              table=table, copy=copy))
    return parts


def _bound(tensor: Tensor) -> TensorLayout:
    n, c, h, w = tensor.shape
    return parse_layout(tensor.layout, ACTIVATION_DIMS).bind((n, h, w, c))


def _offset(bound: TensorLayout, channel: Expr, channels: int) -> Expr:
    bounds = dict(bound.bounds) | {"c": (0, channels - 1)}
    return bound.flat_offset({"n": Var("n"), "h": Var("h"), "w": Var("w"), "c": channel}, bounds)
