"""A concat step (`concat: channels`) as the copies a C driver makes: each input's elements into its channels of the
output, as loops over byte strides around one memcpy of the longest run both sides hold contiguously. Pure.

Both tensors are unpadded NCHW or NHWC images (the manifest's layouts a C driver passes). Equal layouts copy long
runs: NHWC, one run of the input's channels a pixel (the output's pixels are wider); NCHW, one run of the input's
whole planes a batch. Mixed layouts (an NHWC tensor between kernels into a concat the caller reads as NCHW) are a
transpose: one element a run, the loops in the source's order so that the reads stream.
"""
from __future__ import annotations

from dataclasses import dataclass

from .manifest import Network, Step

ELEMENT_BYTES = {"float32": 4, "float16": 2, "uint8": 1, "int8": 1, "int32": 4, "int64": 8}


@dataclass(frozen=True, slots=True)
class CopyLoop:
    extent: int
    to_stride: int  # bytes between iterations in the output
    from_stride: int  # bytes between iterations in the input


@dataclass(frozen=True, slots=True)
class ConcatPart:
    """One input of a concat step: `loops` (outermost first) around memcpy(to + to_offset + ..., from + ..., run)."""

    source: str  # the input's ONNX name
    first_channel: int  # where its channels start in the output
    channels: int
    to_offset: int  # bytes from the output's start to its first element
    loops: tuple[CopyLoop, ...]
    run_bytes: int

    @property
    def bytes(self) -> int:
        count = 1
        for loop in self.loops:
            count *= loop.extent
        return count * self.run_bytes


def concat_parts(network: Network, step: Step, layouts: dict[str, str]) -> tuple[ConcatPart, ...]:
    """The copies of a concat step; `layouts`: each tensor's layout as the driver holds it (NCHW or NHWC)."""
    out = network.tensors[step.outputs[0]]
    size = ELEMENT_BYTES[out.dtype]
    n, channels, h, w = out.shape
    to_strides = _strides(layouts[out.name], channels, h, w, size)
    parts, first = [], 0
    for name in step.inputs:
        source = network.tensors[name]
        own = source.shape[1]
        from_strides = _strides(layouts[name], own, h, w, size)
        order = _order(layouts[name])  # the source's axes, outermost first: its reads stream
        extents = {"n": n, "c": own, "h": h, "w": w}
        dims = [CopyLoop(extents[a], to_strides[a], from_strides[a]) for a in order if extents[a] > 1]
        run = size
        while dims and dims[-1].to_stride == run and dims[-1].from_stride == run:  # contiguous on both sides
            run *= dims.pop().extent
        parts.append(ConcatPart(source=name, first_channel=first, channels=own, to_offset=first * to_strides["c"],
                                loops=_merged(dims), run_bytes=run))
        first += own
    return tuple(parts)


def _strides(layout: str, channels: int, h: int, w: int, size: int) -> dict[str, int]:
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
