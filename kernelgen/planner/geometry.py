"""Stripe geometry and cache windows: what one stripe of the schedule needs, and where it lives. Pure.

A stripe is k_split x k_block output channels (ko_outer) by h_split x h_block output rows
(ho_outer) by w_split x w_block output columns (wo_outer; the whole width unless split).
Working back through the chain, each tensor j gets a window: rows[j] x cols[j] positions
whose first global row and column are affine in the stripe indices (row_start[j],
col_start[j]). A window of R output positions reads (R - 1) * stride + span input
positions: the halo. Caches hold these windows in their tensor's own layout, carved from
one workspace.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import kernelgen.expr as E
from ..config import Config
from ..layout import LayoutError, PadKind, TensorLayout, padding_cover
from ..plan_types import Cache, Halo, LoopOrder, Pipeline, Shape, StripeGeometry, Stripes

ELEMENT_BYTES = {"float32": 4, "float16": 2, "uint8": 1}
# Hexagon DMA and VTCM want 2048-byte aligned buffers; other targets lose nothing by it.
ALIGNMENT_BYTES = 2048


def shapes(config: Config) -> list[Shape]:
    """Logical NHWC shapes: index 0 is the input, j the output of op j."""
    out = [config.input_shape]
    for op in config.ops:
        n, h, w, _ = out[-1]
        (sh, sw), (kh, kw) = op.stride, op.span
        out.append((n, (h + op.pad[0] + op.pad[2] - kh) // sh + 1, (w + op.pad[1] + op.pad[3] - kw) // sw + 1,
                    op.out_channels))
    return out


def stripes(config: Config, shape_list: list[Shape]) -> Stripes:
    s = config.schedule
    _, out_h, out_w, out_k = shape_list[-1]
    channels, rows = s.k_split * s.k_block, s.h_split * s.h_block
    cols = out_w if s.w_split is None else min(s.w_split * s.w_block, out_w)
    return Stripes(channels=channels, rows=rows, cols=cols, ko_extent=math.ceil(out_k / channels),
                   ho_extent=math.ceil(out_h / rows), wo_extent=math.ceil(out_w / cols))


def stripe_geometry(config: Config, shape_list: list[Shape], cut: Stripes) -> StripeGeometry:
    n_ops = len(config.ops)
    rows, cols = [0] * (n_ops + 1), [0] * (n_ops + 1)
    # Window j starts at stripe_index * step + first (affine); the steps and offsets are worked out as ints and
    # each made an expression once (the schedule search asks for thousands of geometries with the same few).
    row_steps, row_firsts = [0] * (n_ops + 1), [0] * (n_ops + 1)
    col_steps, col_firsts = [0] * (n_ops + 1), [0] * (n_ops + 1)
    rows[n_ops], cols[n_ops] = min(cut.rows, shape_list[-1][1]), cut.cols
    row_steps[n_ops] = cut.rows
    split_width = cut.wo_extent > 1
    col_steps[n_ops] = cut.cols if split_width else 0
    for j in range(n_ops, 0, -1):
        op = config.ops[j - 1]
        (sh, sw), (kh, kw) = op.stride, op.span
        rows[j - 1] = (rows[j] - 1) * sh + kh
        row_steps[j - 1], row_firsts[j - 1] = row_steps[j] * sh, row_firsts[j] * sh - op.pad[0]
        if not split_width:
            # Full width: op j computes only its real columns (the consumer's padding columns of
            # window j are zeros), so the source window spans just what those read.
            cols[j - 1] = (shape_list[j][2] - 1) * sw + kw
            col_firsts[j - 1] = -op.pad[1]
        else:
            cols[j - 1] = (cols[j] - 1) * sw + kw
            col_steps[j - 1], col_firsts[j - 1] = col_steps[j] * sw, col_firsts[j] * sw - op.pad[1]
    return StripeGeometry(shapes=tuple(shape_list), stripes=cut, rows=tuple(rows), cols=tuple(cols),
                          row_start=tuple(_start("ho_outer", a, b) for a, b in zip(row_steps, row_firsts)),
                          col_start=tuple(_start("wo_outer", a, b) for a, b in zip(col_steps, col_firsts)),
                          row_step=row_steps[0], row_affines=tuple(zip(row_steps, row_firsts)),
                          col_affines=tuple(zip(col_steps, col_firsts)))


@lru_cache(maxsize=4096)
def _start(var: str, step: int, first: int) -> E.Expr:
    """var * step + first in the expression module's normal form (a constant when the step is 0)."""
    return E.add(E.mul(E.Var(var), step), E.Const(first))


@dataclass(frozen=True, slots=True)
class Windows:
    """The cache windows of one schedule, each bound to its tensor's layout."""

    input: TensorLayout
    temps: tuple[TensorLayout, ...]  # output of op j (1..n-1)
    filters: tuple[TensorLayout | None, ...]  # k-stripe of each op's filter (None: a pool has none)
    output: TensorLayout
    temp_names: tuple[str, ...]


def temp_names(n_ops: int) -> tuple[str, ...]:
    return ("temp_output",) if n_ops == 2 else tuple(f"temp_output_{j}" for j in range(1, n_ops))


def channel_cover(layout: TensorLayout) -> int:
    """Channels the layout stores, padding included (c = 10 in 32c blocks: 32). A map whose padding
    cannot be enumerated per channel (w and c mixed in one axis) counts only its real channels."""
    axis = layout.layout.dims.index("c")
    try:
        return padding_cover(layout)[axis]
    except LayoutError:
        return layout.logical_shape[axis]


def reduction_channels(config: Config, shape_list: list[Shape]) -> tuple[int, ...]:
    """Per op, the input channels its reduction runs over. Seed 003: a source whose layout promises a
    pad value may be read in its channel padding (the filter cache holds zeros there), so the loop runs
    whole blocks without a branch; otherwise it stops at the real channel count."""
    sources = [config.input_layout] + [op.output_layout for op in config.ops[:-1]]
    if config.schedule.c_block:  # input-channel chunks: the reduction runs over one chunk at a time
        return (config.schedule.c_block,)
    out = []
    for j, layout in enumerate(sources):
        channels = shape_list[j][3]
        # a grouped conv reads each group's own channels: no run over the padding past the last group
        overcompute = layout.pad_kind is PadKind.VALUE and config.ops[j].groups == 1 and not config.ops[j].pool
        out.append(channel_cover(layout.bind(shape_list[j])) if overcompute else channels)
    return tuple(out)


def windows(config: Config, shape_list: list[Shape], geo: StripeGeometry, cut: Stripes) -> Windows:
    n_ops = len(config.ops)
    reduce = reduction_channels(config, shape_list)
    temps = tuple(config.ops[j - 1].output_layout.bind((1, geo.rows[j], geo.cols[j], shape_list[j][3]))
                  for j in range(1, n_ops))
    filters = tuple(None if op.pool else op.filter_layout.bind((cut.channels, reduce[j] // op.groups, *op.kernel))
                    for j, op in enumerate(config.ops))
    return Windows(input=config.input_layout.bind((1, geo.rows[0], geo.cols[0],
                                                   config.schedule.c_block or shape_list[0][3])), temps=temps,
                   filters=filters, output=config.ops[-1].output_layout.bind((1, geo.rows[-1], geo.cols[-1],
                                                                                cut.channels)),
                   temp_names=temp_names(n_ops))


def allocate(config: Config, win: Windows) -> tuple[Cache, ...]:
    """Carve the caches from one workspace, aligned; say why a cache reuses another or is doubled."""
    s = config.schedule
    n_ops = len(config.ops)
    ebytes = ELEMENT_BYTES[config.dtype]
    align = ALIGNMENT_BYTES // ebytes
    caches: list[Cache] = []
    offset = 0

    def add(name: str, c_name: str, layout: TensorLayout, alias: str | None = None, note: str = "",
            widen: int = 1) -> None:
        nonlocal offset
        caches.append(Cache(name=name, c_name=c_name, logical_shape=layout.logical_shape,
                            physical_layout=layout.layout.name, physical_shape=layout.physical_shape,
                            elements=layout.size * widen, offset=0 if alias else offset, element_bytes=ebytes,
                            aliases=alias, note=note))
        if alias is None:
            offset += -(-layout.size * widen // align) * align

    double = s.pipeline is Pipeline.DOUBLE_BUFFER
    if double:
        add("input_a", "input_cache_a", win.input, note="double buffer: even stripes")
        add("input_b", "input_cache_b", win.input, note="double buffer: odd stripes (loaded while input_a computes)")
    else:
        add("input", "input_cache", win.input,
            note="ring buffer: a stripe's last rows stay for the next" if s.halo is Halo.REUSE else "")
    convs = [w for w in win.filters if w is not None]
    if convs:  # pools read no filter
        add("filter", "filter_cache", max(convs, key=lambda w: w.size),
            note="one filter cache, reused by every conv2d of the chain" if len(convs) > 1 else "")
    for name, window in zip(win.temp_names, win.temps):
        add(name, name, window)
    out = win.output
    if double and s.order is LoopOrder.ROWS_OUTER:
        add("output", "output_cache", out, note="rows_outer: each channel block is written back inside the compute, "
                                                "so one cache; it cannot reuse an input cache (the prefetch fills "
                                                "the other)")
    elif double:
        add("output_a", "output_cache_a", out, note="double buffer: cannot reuse an input cache, whose next load "
                                                    "overlaps this stripe's store")
        add("output_b", "output_cache_b", out, note="double buffer: odd stripes")
    elif n_ops > 1 and out.size <= win.input.size and s.halo is not Halo.REUSE:
        add("output", "output_cache", out, alias="input", note="reuses the input cache: dead once conv2d #1 has run")
    else:
        why = "; cannot reuse the input cache, whose ring rows the next stripe reads" if (
            n_ops > 1 and s.halo is Halo.REUSE) else ""
        add("output", "output_cache", out, note=why.lstrip("; "))
    if config.dtype == "uint8" and s.c_block:
        # input-channel chunks: uint8 outputs cannot hold partial sums, an int32 buffer of the window does
        add("accumulator", "acc_cache", out, note="int32 partial sums of the output window between input-channel "
                                                  "chunks (4 bytes per element)", widen=4)
    return tuple(caches)


def workspace_elements(caches: tuple[Cache, ...]) -> int:
    align = ALIGNMENT_BYTES // caches[0].element_bytes
    return max(c.offset + -(-c.elements // align) * align for c in caches if c.aliases is None)


def unproven(checks: list[tuple[E.Expr, str, int]], bounds: dict[str, tuple[int, int]]) -> list[str]:
    """C comparisons for the (expr, op, limit) checks that the loop bounds cannot prove."""
    out = []
    for expr, op, limit in checks:
        lo, hi = E.interval(expr, bounds)
        if op == ">=" and lo >= limit or op == "<" and hi < limit:
            continue
        out.append(f"{E.to_c(expr)} {op} {limit}")
    return out
