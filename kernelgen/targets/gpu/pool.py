"""A pooling op's work on a GPU, in API-neutral terms: one work-item per output element (n, oh, ow, c), its window
read from the source tensor (positions outside the input skipped: never the maximum, and out of the mean's count
unless count_include_pad), the result stored to the destination. A pool reads each value a few times and does one
operation per read: memory-bound, so no tiles. Each target spells the offsets and the divisor in its language
(api.py) and wraps them in its own kernel record."""
from __future__ import annotations

import math
from dataclasses import dataclass

import kernelgen.expr as E
from ...ops import OPS
from ...layout import PadKind, TensorLayout
from ...planner.geometry import channel_cover
from ...plan_types import OpGeometry
from .api import GpuApi

POOL_WORKGROUP = 64  # work-items per group: a multiple of every subgroup and SIMD width in the profiles


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolWork:
    """The grid and the index text of one pooling op."""

    total: int  # output elements, with the channel padding a pad value fills
    channels: int  # channels per pixel the work-items walk: the real ones, or up to the padded count
    work_group: int
    groups: tuple[int, int]  # along x, and y when x alone would pass the API's limit
    row_items: int  # work-items per grid row: i = y * row_items + x
    source_index: str  # in n, ih, iw, c
    dest_index: str  # in n, oh, ow, c
    scale_index: str  # a mul's side input in n, c ("": none)
    divisor: str  # a mean's: a float literal (count_include_pad) or the count of inside positions as a float
    start: float  # the accumulator's first value (its kind's: kernelgen/ops), which each target spells
    step: str  # its kind's operation folding x into acc, in the API's dialect: acc + x, fmax(acc, x), max(acc, x)

    @property
    def global_items(self) -> int:
        return self.groups[0] * self.groups[1] * self.work_group


def pool_work(api: GpuApi, geo: OpGeometry, source: TensorLayout, dest: TensorLayout,
              scale: TensorLayout | None = None) -> PoolWork:
    """The work-items walk the destination's channels, and its channel padding too when that holds a value (a
    consumer may read the padding against zero filter channels)."""
    n, oh, ow, _ = geo.out_shape
    walked = channel_cover(dest) if dest.layout.pad_kind is PadKind.VALUE else geo.out_shape[3]
    _, h, w, c = geo.in_shape
    total = n * oh * ow * walked
    items = math.ceil(total / POOL_WORKGROUP)
    gx = min(items, api.max_groups or items)
    gy = math.ceil(items / gx)
    in_bounds = {"n": (0, n - 1), "ih": (0, h - 1), "iw": (0, w - 1), "c": (0, c - 1)}
    out_bounds = {"n": (0, n - 1), "oh": (0, oh - 1), "ow": (0, ow - 1), "c": (0, walked - 1)}
    src = E.simplify(source.flat_offset({"n": E.Var("n"), "h": E.Var("ih"), "w": E.Var("iw"), "c": E.Var("c")},
                                        in_bounds), in_bounds)
    dst = E.simplify(dest.flat_offset({"n": E.Var("n"), "h": E.Var("oh"), "w": E.Var("ow"), "c": E.Var("c")},
                                      out_bounds), out_bounds)
    factor = ""
    if scale is not None:
        channel = {"n": E.Var("n"), "h": E.Const(0), "w": E.Const(0), "c": E.Var("c")}
        factor = api.index_text(E.simplify(scale.flat_offset(channel, out_bounds), out_bounds))
    kh, kw = geo.kernel
    kind = OPS[geo.kind]
    divisor = api.dialect.literal(kh * kw) if geo.count_include_pad else api.count_as_float
    return PoolWork(total=total, channels=walked, work_group=POOL_WORKGROUP, groups=(gx, gy),
                    row_items=gx * POOL_WORKGROUP, source_index=api.index_text(src), dest_index=api.index_text(dst),
                    scale_index=factor, start=kind.ACC_INIT[0],
                    step=api.dialect.forms[kind.STEP].format("acc", "x"),
                    divisor=divisor if kind.MEAN else "")
