"""What a GPU kernel stores of its output tile, decided once for both APIs: whether a tensor's 4-channel groups
are stored as one vector each, and what a store writes into the lanes past the last channel of a partial group.
Which addresses and guards follow (OpenCL's per-pixel store records, opencl/stores.py; a Vulkan invocation's
vec4 chunks, vulkan/plan.py) stays each API's spelling; which work-items store past the output's edge is
tiles.py's."""
from __future__ import annotations

from ...layout import PadKind, TensorLayout
from .api import GpuApi
from .vectors import aligned, lanes_together


def vector_stores(api: GpuApi, layout: TensorLayout) -> bool:
    """An NHWC-indexed buffer tensor stored a 4-channel group at a time. A vector store at any element offset
    (OpenCL's vstore4) needs the group's lanes together, and a partial last group falls back to lane stores; one
    that indexes whole vectors (a GLSL vec4 buffer) needs them aligned, and a partial last group is stored whole
    only into padding slots the layout declares."""
    if api.vectors_at_any_offset:
        return lanes_together(layout)
    whole = layout.logical_shape[3] % 4 == 0 or layout.layout.pad_kind is not PadKind.NONE
    return aligned(layout, 3) and whole


def tail_fill(layout: TensorLayout) -> float | None:
    """The value a whole-vector store of the partial last channel group writes past the channels: the layout's
    pad_value; None when every group is whole or the padding holds no value."""
    if layout.layout.pad_kind is not PadKind.VALUE or layout.logical_shape[3] % 4 == 0:
        return None
    return layout.layout.pad_value
