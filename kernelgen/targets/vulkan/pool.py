"""A pooling op of the chain as its own dispatch: one invocation per output element (n, oh, ow, c), its window read
as scalars from the source buffer (positions outside the input skipped: never the maximum, and out of the mean's
count unless count_include_pad), the result stored as one scalar. A pool reads each value a few times and does one
operation per read: memory-bound, so no tiles; its loops are the window's (kh x kw back-edges per invocation)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import kernelgen.expr as E
from ...layout import TensorLayout
from ...plan import OpGeometry

POOL_WORKGROUP = 64  # invocations per workgroup along x: a multiple of every subgroup size in the profiles
MAX_GROUPS = 65_535  # workgroups along one dispatch axis (Vulkan's guaranteed minimum)


@dataclass(frozen=True, slots=True, kw_only=True)
class VulkanPool:
    index: int  # 1-based
    src: int  # buffer numbers in VulkanPlan.buffers
    dst: int
    geo: OpGeometry
    wg_size: tuple[int, int, int]
    groups: tuple[int, int, int]  # x, and y when x alone would pass MAX_GROUPS
    row_items: int  # invocations per dispatch row: i = gl_GlobalInvocationID.y * row_items + x
    total: int  # output elements, with the channel padding a pad_value fills (channels rounded up to 4)
    channels: int  # channels per pixel the invocations walk: the real ones, or up to the next multiple of 4
    pad_value: str  # GLSL literal stored at channels past the tensor's ("" = none)
    trips: int  # loop back-edges per invocation
    x_index: str  # GLSL index of src at (n, ih, iw, c)
    y_index: str  # GLSL index of dst at (n, oh, ow, c)
    maximum: bool
    divisor: str  # a float literal (count_include_pad) or "float(count)"
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
    n, oh, ow, c = geo.out_shape
    _, h, w, _ = geo.in_shape
    walked = -(-c // 4) * 4 if pad_value else c
    total = n * oh * ow * walked
    items = math.ceil(total / POOL_WORKGROUP)
    gx = min(items, MAX_GROUPS)
    gy = math.ceil(items / gx)
    kh, kw = geo.kernel
    x = E.simplify(src_tl.flat_offset({"n": E.Var("n"), "h": E.Var("ih"), "w": E.Var("iw"), "c": E.Var("c")},
                                      bounds := {"n": (0, n - 1), "ih": (0, h - 1), "iw": (0, w - 1),
                                                 "c": (0, c - 1)}), bounds)
    out_bounds = {"n": (0, n - 1), "oh": (0, oh - 1), "ow": (0, ow - 1), "c": (0, walked - 1)}
    y = E.simplify(dst_tl.flat_offset({"n": E.Var("n"), "h": E.Var("oh"), "w": E.Var("ow"), "c": E.Var("c")},
                                      out_bounds), out_bounds)
    count_all = f"{float(kh * kw)!r}"
    factor = {}
    if scale is not None:
        at = {"n": E.Var("n"), "h": E.Const(0), "w": E.Const(0), "c": E.Var("c")}
        factor = dict(scale=scale[1], scale_index=E.to_c(E.simplify(scale[0].flat_offset(at, out_bounds), out_bounds), shifts=True))
    return VulkanPool(index=geo.index, src=src, dst=dst, geo=geo, wg_size=(POOL_WORKGROUP, 1, 1),
                      groups=(gx, gy, 1), row_items=gx * POOL_WORKGROUP, total=total, channels=walked,
                      pad_value=pad_value, trips=kh * (kw + 1),
                      x_index=E.to_c(x, shifts=True), y_index=E.to_c(y, shifts=True), maximum=geo.kind == "maxpool",
                      divisor=count_all if geo.count_include_pad else "float(count)", **factor)
