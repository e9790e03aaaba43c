"""The steps that move channels without computing (`concat: channels`, `slice: {start, stop}`, `shuffle: {groups}`)
as the copies a C driver makes: each a set of parts, a run of an input's channels into channels of the output (one
after another, or every g-th for a shuffle), as loops over byte strides around one memcpy of the longest run both
sides hold contiguously. Pure.

Both tensors are unpadded NCHW or NHWC images (the manifest's layouts a C driver passes). Equal layouts copy long
runs: NHWC, one run of a part's channels a pixel; NCHW, one run of its whole planes an image. A shuffle's channels
land every g-th, so NHWC copies element by element there, NCHW a plane at a time. Mixed layouts (an NHWC tensor
between kernels into an output the caller reads as NCHW) are a transpose: one element a run, the loops in the
source's order so that the reads stream.

A uint8 part whose input has another scale or zero point than the output is requantized on the way: each byte
through a table of 256 (`requantize_table`), what onnxruntime computes for DequantizeLinear, Concat (or Slice),
QuantizeLinear in float32.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ops.activations import IDENTITY
from .manifest import Network, Step, Tensor

ELEMENT_BYTES = {"float32": 4, "float16": 2, "uint8": 1, "int8": 1, "int32": 4, "int64": 8}


@dataclass(frozen=True, slots=True)
class CopyLoop:
    extent: int
    to_stride: int  # bytes between iterations in the output
    from_stride: int  # bytes between iterations in the input


@dataclass(frozen=True, slots=True)
class ChannelPart:
    """Channels from_channel.. of `source` into channels to_channel, to_channel + to_step, ... of the output:
    `loops` (outermost first) around memcpy(to + to_offset + ..., from + from_offset + ..., run_bytes)."""

    source: str  # the input's ONNX name
    from_channel: int
    to_channel: int
    channels: int
    to_step: int
    to_offset: int  # bytes from the output's start to the part's first element
    from_offset: int  # bytes from the input's start
    loops: tuple[CopyLoop, ...]
    run_bytes: int

    @property
    def last_channel(self) -> int:
        return self.to_channel + (self.channels - 1) * self.to_step


def requantize_table(source: Tensor, result: Tensor) -> tuple[int, ...] | None:
    """The byte each of a uint8 input's 256 bytes becomes in the output: (q - z_in) * s_in in float32, then
    saturate(rint(v / s_out) + z_out), as onnxruntime's DequantizeLinear and QuantizeLinear compute it; None when the
    two tensors share scale and zero point (or are not uint8): a plain copy."""
    if source.dtype != "uint8" or (source.scale, source.zero_point) == (result.scale, result.zero_point):
        return None
    return IDENTITY.byte_table(source.scale, source.zero_point, result.scale, result.zero_point)


def input_tables(network: Network, step: Step) -> list[tuple[int, ...] | None]:
    """requantize_table of each of a channel step's inputs into its output."""
    result = network.tensors[step.outputs[0]]
    return [requantize_table(network.tensors[name], result) for name in step.inputs]


def step_parts(network: Network, step: Step) -> list[tuple[str, int, int, int, int]]:
    """(input, its first channel, the output's first channel, channels, output channel step) of each part."""
    if step.concat:
        parts, first = [], 0
        for name in step.inputs:
            channels = network.tensors[name].shape[1]
            parts.append((name, 0, first, channels, 1))
            first += channels
        return parts
    source = step.inputs[0]
    if step.slice is not None:
        start, stop = step.slice
        return [(source, start, 0, stop - start, 1)]
    groups = step.shuffle
    width = network.tensors[source].shape[1] // groups  # [N, g, C/g, H, W] -> [N, C/g, g, H, W]: channel i*C/g + j
    return [(source, i * width, i, width, groups) for i in range(groups)]  # lands at j*g + i


def copy_parts(network: Network, step: Step, layouts: dict[str, str]) -> tuple[ChannelPart, ...]:
    """The copies of a channel step; `layouts`: each tensor's layout as the driver holds it (NCHW or NHWC)."""
    out = network.tensors[step.outputs[0]]
    size = ELEMENT_BYTES[out.dtype]
    n, _, h, w = out.shape
    to_strides = strides(layouts[out.name], out.shape, size)
    parts = []
    for name, from_channel, to_channel, channels, to_step in step_parts(network, step):
        from_strides = strides(layouts[name], network.tensors[name].shape, size)
        extents = {"n": n, "c": channels, "h": h, "w": w}
        steps = {"c": to_step}
        dims = [CopyLoop(extents[a], to_strides[a] * steps.get(a, 1), from_strides[a])
                for a in _order(layouts[name]) if extents[a] > 1]
        run = size
        while dims and dims[-1].to_stride == run and dims[-1].from_stride == run:  # contiguous on both sides
            run *= dims.pop().extent
        parts.append(ChannelPart(source=name, from_channel=from_channel, to_channel=to_channel, channels=channels,
                                 to_step=to_step, to_offset=to_channel * to_strides["c"],
                                 from_offset=from_channel * from_strides["c"], loops=_merged(dims), run_bytes=run))
    return tuple(parts)


def strides(layout: str, shape: tuple[int, ...], size: int) -> dict[str, int]:
    _, channels, h, w = shape
    if layout == "NHWC":
        return {"n": h * w * channels * size, "h": w * channels * size, "w": channels * size, "c": size}
    return {"n": channels * h * w * size, "c": h * w * size, "h": w * size, "w": size}


def _order(layout: str) -> str:
    return "nhwc" if layout == "NHWC" else "nchw"


def _merged(dims: list[CopyLoop]) -> tuple[CopyLoop, ...]:
    """Adjacent loops that step as one on both sides (an NHWC pixel's rows and columns) as one loop."""
    merged: list[CopyLoop] = []
    for dim in dims:
        if merged and merged[-1].to_stride == dim.to_stride * dim.extent and \
                merged[-1].from_stride == dim.from_stride * dim.extent:
            merged[-1] = CopyLoop(merged[-1].extent * dim.extent, dim.to_stride, dim.from_stride)
        else:
            merged.append(dim)
    return tuple(merged)
