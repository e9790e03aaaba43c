"""Which tensors of an imported float network pass between kernels channels innermost (NHWC), and the configs that
then read and write them so. Pure.

The c kernels compute in NHWC caches whatever their tensors' layout (planner.geometry.cache_window): an NCHW input is
transposed into them and an NCHW output transposed back, at every kernel boundary. A tensor that only such kernels
write and read is better held as they compute it: the input read becomes one run per window row and the write-back
a plain copy. The network's own inputs and outputs stay as ONNX holds them (the caller's buffers: the first and
last kernel transpose once), and so does every tensor a host step (onnxruntime) reads or writes, or that is not an
image (a classifier's [N, C]). A concat step copies in whichever layout its tensors have, so it keeps none NCHW.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Collection, Iterable, Mapping, Protocol, Sequence

from .group_config import GroupConfig

CHANNELS_LAST = "NHWC"


class Kernel(Protocol):
    input: str
    output: str
    sides: tuple[str, ...]
    config: GroupConfig


# a step of the manifest: (a kernel's index, or a host or convert step's node indices, its inputs, its outputs)
StepTensors = tuple[int | tuple[int, ...], Sequence[str], Sequence[str]]


def channels_last_tensors(steps: Iterable[StepTensors], kernels: Sequence[Kernel], ends: Iterable[str],
                          shapes: Mapping[str, tuple[int, ...]], copies: Collection[tuple[int, ...]] = ()
                          ) -> frozenset[str]:
    """The 4-D tensors every step touching which is a float kernel or a concat step (`copies`: their nodes), none
    of them a network input or output (`ends`). The caller passes the steps only when the kernels' targets all
    compute channels innermost."""
    floats = {k for k, kernel in enumerate(kernels) if kernel.config.quant is None}
    touched: dict[str, bool] = {}  # tensor -> whether only float kernels touch it so far
    for what, inputs, outputs in steps:
        by_float_kernel = (isinstance(what, int) and what in floats) or what in copies
        for tensor in (*inputs, *outputs):
            touched[tensor] = touched.get(tensor, True) and by_float_kernel
    outside = set(ends)
    return frozenset(t for t, only in touched.items() if only and t not in outside and len(shapes[t]) == 4)


def relaid(kernel: Kernel, channels_last: frozenset[str]) -> GroupConfig:
    """The kernel's config with each of its tensors in `channels_last` NHWC (the others as it had them)."""
    group = kernel.config
    if not channels_last & {kernel.input, kernel.output, *kernel.sides}:
        return group

    def layout(tensor: str) -> str:
        return CHANNELS_LAST if tensor in channels_last else group.layout

    return replace(group, layout=layout(kernel.input), output_layout=layout(kernel.output),
                   sides=tuple(replace(side, layout=layout(side.tensor)) for side in group.sides))
