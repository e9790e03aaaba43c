"""A pooling op of the chain as its own dispatch: one invocation per output element (n, oh, ow, c), its window read
as scalars from the source buffer (positions outside the input skipped: never the maximum, and out of the mean's
count unless count_include_pad), the result stored as one scalar. A pool reads each value a few times and does one
operation per read: memory-bound, so no tiles; its loops are the window's (kh x kw back-edges per invocation).
gpu/pool.py's work, as a Vulkan dispatch record."""
from __future__ import annotations

from dataclasses import dataclass

from ...layout import TensorLayout
from ...plan_types import OpGeometry
from ..gpu.api import VULKAN
from ..gpu.pool import pool_work


@dataclass(frozen=True, slots=True, kw_only=True)
class VulkanPool:
    index: int  # 1-based
    src: int  # buffer numbers in VulkanPlan.buffers
    dst: int
    geo: OpGeometry
    wg_size: tuple[int, int, int]
    groups: tuple[int, int, int]  # x, and y when x alone would pass VULKAN.max_groups
    row_items: int  # invocations per dispatch row: i = gl_GlobalInvocationID.y * row_items + x
    total: int  # output elements, with the channel padding a pad_value fills (channels rounded up to 4)
    channels: int  # channels per pixel the invocations walk: the real ones, or up to the next multiple of 4
    pad_value: str  # GLSL literal stored at channels past the tensor's ("" = none)
    trips: int  # loop back-edges per invocation
    x_index: str  # GLSL index of src at (n, ih, iw, c)
    y_index: str  # GLSL index of dst at (n, oh, ow, c)
    init: str  # the accumulator's first value, and the step that folds each x into it (the kind's, in GLSL)
    step: str
    divisor: str  # a mean's: a float literal (count_include_pad) or "float(count)" ("": none)
    scale: int = -1  # mul: the buffer of the side input each channel is multiplied by (binding 2)
    scale_index: str = ""  # GLSL index of that buffer at (n, c)
    is_pool: bool = True
    pair_index: str = ""  # (no 64-bit stores)

    @property
    def label(self) -> str:
        n, h, w, c = self.geo.in_shape
        return (f"{self.geo.kind.capitalize()}[{n}x{h}x{w}x{c}]/Window[{self.geo.kernel[0]}x{self.geo.kernel[1]}]"
                f"/Stride[{self.geo.stride[0]}x{self.geo.stride[1]}]/WGSize[{self.wg_size[0]}x1x1]")


def plan_pool(geo: OpGeometry, src_tl: TensorLayout, dst_tl: TensorLayout, src: int, dst: int,
              scale: tuple[TensorLayout, int] | None = None, pad_value: str = "") -> VulkanPool:
    """pad_value: the dst layout's, when it pads the channels (the caller allows only that, to the next 4)."""
    work = pool_work(VULKAN, geo, src_tl, dst_tl, scale[0] if scale is not None else None)
    kh, kw = geo.kernel
    factor = dict(scale=scale[1], scale_index=work.scale_index) if scale is not None else {}
    return VulkanPool(index=geo.index, src=src, dst=dst, geo=geo, wg_size=(work.work_group, 1, 1),
                      groups=(*work.groups, 1), row_items=work.row_items, total=work.total, channels=work.channels,
                      pad_value=pad_value, trips=kh * (kw + 1), x_index=work.source_index, y_index=work.dest_index,
                      init=VULKAN.dialect.literal(work.start), step=work.step,
                      divisor=work.divisor, **factor)
