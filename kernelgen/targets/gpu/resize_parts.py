"""A GPU network's resize steps as dispatches: one work-item per output float of NCHW float32 buffers, in groups of
64 along x (and y past 65,535 of them), as the channel copies are (channel_copies.py). Pure.

Each work-item reads its output row's two input rows and its column's two input columns from tables the shader
holds as constants (network/resize.axis_taps: onnxruntime's taps worked out once in float32 on the host), so a GPU's
own division never picks another row, and blends them with onnxruntime's four weight products (nearest: the first
tap alone). The records give the shader and the OpenCL function their numbers; `spans` is empty (a resize reads and
writes its whole tensors)."""
from __future__ import annotations

from dataclasses import dataclass

from ...network.manifest import Network, Step
from ...network.resize import axis_taps, float_literal
from .channel_copies import buffer_pair, element_dispatch
from .dispatch import GpuDispatch, GpuTensor


@dataclass(frozen=True, slots=True, kw_only=True)
class ResizePart:
    name: str  # the kernel function / shader label: resize<step>
    step: int
    source: str
    output: str
    linear: bool
    images: int
    channels: int
    in_h: int
    in_w: int
    out_h: int
    out_w: int
    top: tuple[int, ...]  # per output row: the input rows read and their weights (axis_taps)
    bottom: tuple[int, ...]
    top_weight: tuple[str, ...]  # float32 weights as literals that read back as the same floats
    bottom_weight: tuple[str, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    left_weight: tuple[str, ...]
    right_weight: tuple[str, ...]
    what: str  # for comments: "linear, half_pixel, scales 8 x 8"
    kind = "resize"

    @property
    def spans(self) -> dict[str, tuple[int, int]]:
        return {}  # it reads and writes its whole tensors

    @property
    def elements(self) -> int:
        return self.images * self.channels * self.out_h * self.out_w

    @property
    def dispatch(self) -> GpuDispatch:
        return element_dispatch(self.name, self.elements)

    def tensors(self, network: Network) -> tuple[GpuTensor, GpuTensor]:
        return buffer_pair(network, self.source, self.output)


def resize_part(network: Network, step: Step) -> ResizePart:
    source, result = network.tensors[step.inputs[0]], network.tensors[step.outputs[0]]
    resize = step.resize
    rows = axis_taps(resize, 0, source.shape[2], result.shape[2])
    cols = axis_taps(resize, 1, source.shape[3], result.shape[3])
    scales = " x ".join(f"{x:g}" for x in resize.scales)
    rounding = f", {resize.rounding}" if resize.mode == "nearest" else ""
    return ResizePart(name=f"resize{step.index}", step=step.index, source=source.name, output=result.name,
                      linear=resize.mode == "linear", images=result.shape[0], channels=result.shape[1],
                      in_h=source.shape[2], in_w=source.shape[3], out_h=result.shape[2], out_w=result.shape[3],
                      top=rows.first, bottom=rows.second, top_weight=_floats(rows.first_weight),
                      bottom_weight=_floats(rows.second_weight), left=cols.first, right=cols.second,
                      left_weight=_floats(cols.first_weight), right_weight=_floats(cols.second_weight),
                      what=f"{resize.mode}, {resize.coordinates}{rounding}, scales {scales}")


def _floats(values: tuple[float, ...]) -> tuple[str, ...]:
    return tuple(float_literal(v) for v in values)
