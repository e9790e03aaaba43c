"""A float Conv's kernel without the taps that only ever read padding. Pure.

DeepLabV3's atrous pyramid runs 3x3 convs dilated by 12, 24 and 36 over a 14x14 image, padded as much: a tap 24 or
36 rows away from the centre lies outside the image for every output, so it multiplies zeros. Kept, its padding is
what the plan must cache (a stripe's window of 14 + 2 x 36 columns, 6.2 MB of the dilation-36 conv's input chunks
against a 512 KiB budget), and the conv stayed with onnxruntime. Without those taps the dilation-24 and -36 convs are
the 1x1 convs they compute. Only whole outer rows and columns of taps go (the kernel stays a rectangle), each pad
shrinks by the dilated extent it drops, and the output's shape is the same; the filter is the model's, sliced
(onnx/weights.py), and the oracle gives onnxruntime the sliced filter back inside zeros of the model's shape
(onnx/oracle.py): the same conv.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

Pair = tuple[int, int]


class Trim(NamedTuple):
    kernel: Pair
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: Pair
    taps: tuple[int, int, int, int]  # the model filter's rows r0..r1 and columns c0..c1 kept


def live_range(extent: int, kernel: int, stride: int, dilation: int, before: int, after: int) -> tuple[int, int]:
    """The first and last tap along one axis that reads inside [0, extent) for some output position."""
    outputs = (extent + before + after - (kernel - 1) * dilation - 1) // stride + 1
    live = [r for r in range(kernel)
            if any(0 <= o * stride + r * dilation - before < extent for o in range(outputs))]
    return (live[0], live[-1]) if live else (0, kernel - 1)


def trim(kernel: Pair, stride: Pair, dilation: Pair, pad: tuple[int, int, int, int], in_hw: Pair) -> Trim | None:
    """A conv's kernel, pads and dilation without its outer taps that read padding alone; None when every outer
    tap reads the input somewhere (or dropping some would leave a pad below 0)."""
    top, left, bottom, right = pad
    rows = live_range(in_hw[0], kernel[0], stride[0], dilation[0], top, bottom)
    cols = live_range(in_hw[1], kernel[1], stride[1], dilation[1], left, right)
    if rows == (0, kernel[0] - 1) and cols == (0, kernel[1] - 1):
        return None
    kept = (rows[1] - rows[0] + 1, cols[1] - cols[0] + 1)
    pads = (top - rows[0] * dilation[0], left - cols[0] * dilation[1],
            bottom - (kernel[0] - 1 - rows[1]) * dilation[0], right - (kernel[1] - 1 - cols[1]) * dilation[1])
    if min(pads) < 0:  # a live tap past the far edge: keep the kernel as the model has it
        return None
    dilated = (1 if kept[0] == 1 else dilation[0], 1 if kept[1] == 1 else dilation[1])  # one tap: no dilation
    return Trim(kernel=kept, pad=pads, dilation=dilated, taps=(*rows, *cols))


def sliced(weight: np.ndarray, taps: tuple[int, int, int, int]) -> np.ndarray:
    """The model's OIHW filter cut to the live taps."""
    r0, r1, c0, c1 = taps
    return weight[:, :, r0:r1 + 1, c0:c1 + 1]


def embedded(weight: np.ndarray, taps: tuple[int, int, int, int], shape: tuple[int, ...]) -> np.ndarray:
    """A live-taps filter back in the model's shape, zeros at the dropped taps (which read padding alone)."""
    r0, r1, c0, c1 = taps
    full = np.zeros(shape, weight.dtype)
    full[:, :, r0:r1 + 1, c0:c1 + 1] = weight
    return full
