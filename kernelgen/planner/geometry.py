"""Stripe geometry and cache windows: what one stripe of the schedule needs, and where it lives. Pure.

A stripe is k_split x k_block output channels (ko_outer) by h_split x h_block output rows
(ho_outer) by w_split x w_block output columns (wo_outer; the whole width unless split).
Working back through the chain, each tensor j gets a window: rows[j] x cols[j] positions
whose first global row and column are affine in the stripe indices (row_start[j],
col_start[j]). A window of R output positions reads (R - 1) * stride + span input
positions: the halo. Caches hold these windows in their tensor's own layout, carved from
one workspace, except where every target of the config wants them channels-innermost
(Config.channels_last_caches) and the tensor's layout is not: an NCHW tensor's windows are
then NHWC caches (cache_window), the same elements, and the input read and the write-back
transpose. The input window holds every input channel, except for a lone channelwise op
(channel_striped_input), whose channel stripe reads its own channels only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import kernelgen.expr as E
from ..config import Config
from ..layout import ACTIVATION_DIMS, Layout, LayoutError, PadKind, TensorLayout, padding_cover, parse_layout
from ..plan_types import Cache, Halo, LoopOrder, Pipeline, Shape, StripeGeometry, Stripes

ELEMENT_BYTES = {"float32": 4, "float16": 2, "uint8": 1}
CHANNELS_LAST = parse_layout("NHWC", ACTIVATION_DIMS)
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
    # Rows and columns are worked back through the chain apart, each once per chain and stripe size: the schedule
    # search asks for thousands of geometries cut the same few ways along each dimension.
    by_rows, by_cols = _chain(config)
    rows, row_affines, row_start = _back(by_rows, min(cut.rows, shape_list[-1][1]), cut.rows, "ho_outer")
    if cut.wo_extent > 1:
        cols, col_affines, col_start = _back(by_cols, cut.cols, cut.cols, "wo_outer")
    else:
        cols, col_affines, col_start = _full_width(by_cols, tuple(shape[2] for shape in shape_list), cut.cols)
    return StripeGeometry(shapes=tuple(shape_list), stripes=cut, rows=rows, cols=cols, row_start=row_start,
                          col_start=col_start, row_step=row_affines[0][0], row_affines=row_affines,
                          col_affines=col_affines)


Chain = tuple[tuple[int, int, int], ...]  # per op along one dimension: (stride, span, leading pad)
_CHAINS: dict[int, tuple[tuple, Layout, Shape, dict]] = {}


def _memo(config: Config) -> dict:
    """What depends only on a config's chain (its ops, input layout and shape) and a part of its schedule, kept per
    chain: the schedule search's trial configs share one chain. Keyed by the ops tuple's identity (hashing it would
    walk every layout), the entry keeping what it was made from alive."""
    entry = _CHAINS.get(id(config.ops))
    if entry is None or entry[0] is not config.ops or entry[1] is not config.input_layout or (
            entry[2] != config.input_shape):
        if len(_CHAINS) >= 1024:
            _CHAINS.clear()
        entry = _CHAINS[id(config.ops)] = (config.ops, config.input_layout, config.input_shape, {})
    return entry[3]


def _chain(config: Config) -> tuple[Chain, Chain]:
    """The ops' windows along rows and along columns."""
    memo = _memo(config)
    if "chain" not in memo:
        spans = [op.span for op in config.ops]
        memo["chain"] = (tuple((op.stride[0], span[0], op.pad[0]) for op, span in zip(config.ops, spans)),
                         tuple((op.stride[1], span[1], op.pad[1]) for op, span in zip(config.ops, spans)))
    return memo["chain"]


@lru_cache(maxsize=16384)
def _back(chain: Chain, count: int, step: int, var: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...],
                                                                 tuple[E.Expr, ...]]:
    """(positions, (step, first) and start expressions per tensor) of the windows behind `count` output positions
    whose stripes advance by `step`: a window of R positions reads (R - 1) * stride + span, from stride times the
    next one's start less the padding."""
    sizes, steps, firsts = [count], [step], [0]
    for stride, span, pad in reversed(chain):
        sizes.append((sizes[-1] - 1) * stride + span)
        steps.append(steps[-1] * stride)
        firsts.append(firsts[-1] * stride - pad)
    affines = tuple(zip(reversed(steps), reversed(firsts)))
    return tuple(reversed(sizes)), affines, tuple(_start(var, a, b) for a, b in affines)


@lru_cache(maxsize=4096)
def _full_width(chain: Chain, widths: tuple[int, ...], cols: int) -> tuple[tuple[int, ...],
                                                                          tuple[tuple[int, int], ...],
                                                                          tuple[E.Expr, ...]]:
    """_back for full-width stripes: op j computes only its real columns (the consumer's padding columns of window
    j are zeros), so the source window spans just what those read, from a constant column."""
    sizes = tuple((width - 1) * stride + span for (stride, span, _), width in zip(chain, widths[1:])) + (cols,)
    affines = tuple((0, -pad) for _, _, pad in chain) + ((0, 0),)
    return sizes, affines, tuple(_start("wo_outer", a, b) for a, b in affines)


@lru_cache(maxsize=4096)
def _start(var: str, step: int, first: int) -> E.Expr:
    """var * step + first in the expression module's normal form (a constant when the step is 0)."""
    return E.add(E.mul(E.Var(var), step), E.Const(first))


def cache_window(config: Config, layout: Layout, shape: Shape) -> TensorLayout:
    """The cache of a `shape` window of a tensor in `layout`: that layout bound, or NHWC where the config's targets
    want channels innermost and the layout keeps a pixel's channels apart (NCHW). Only a layout without padding
    is swapped: its cache then holds the same elements, and no read past the real channels relies on a pad value."""
    bound = layout.bind(shape)
    if not config.channels_last_caches or shape[3] == 1 or bound.padding:
        return bound
    at = [bound.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(0), "c": E.Const(c)}, {})
          for c in (0, 1)]
    return bound if E.evaluate(at[1], {}) - E.evaluate(at[0], {}) == 1 else CHANNELS_LAST.bind(shape)


def channel_striped_input(config: Config) -> bool:
    """Whether each channel stripe's input window holds only that stripe's channels: the chain is one op whose output
    channel k reads input channel k alone (a pool or a mul; a depthwise conv, one filter per channel), the input is
    read inside the channel-stripe loop (channels_outer), in one chunk, for targets whose kernels read it so
    (Config.channel_striped_inputs). Elsewhere a stripe's input window holds every channel: a later op, or a dense
    first op, reads them all. (MobileNetV3-Large's 5x5 depthwise over 14x14x672 asked for 790,528 bytes of caches when it
    counted all 672 channels in each stripe's input window, past a 512 KiB L2, and ran in onnxruntime.)"""
    return config.schedule.order is LoopOrder.CHANNELS_OUTER and lone_channelwise_op(config)


def lone_channelwise_op(config: Config) -> bool:
    """channel_striped_input but for the loop order: one op, each output channel from its own input channel, the
    input in one chunk, on targets that read such an input by channel stripe."""
    if not config.channel_striped_inputs or len(config.ops) != 1 or config.schedule.c_block:
        return False
    op, channels = config.ops[0], config.input_shape[3]
    return op.pool or (op.kind == "conv2d" and op.groups == channels == op.out_channels)


@dataclass(frozen=True, slots=True)
class Windows:
    """The cache windows of one schedule, each bound to its tensor's layout."""

    input: TensorLayout
    temps: tuple[TensorLayout, ...]  # output of op j (1..n-1)
    filters: tuple[TensorLayout | None, ...]  # k-stripe of each op's filter (None: a pool has none)
    in_place: tuple[bool, ...]  # per op: its filter is read from its tensor, with no filter cache (filter_in_place)
    output: TensorLayout
    temp_names: tuple[str, ...]


@lru_cache(maxsize=64)
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
    memo, key = _memo(config), ("reduce", config.schedule.c_block)
    if key not in memo:
        memo[key] = _reduction_channels(config, shape_list)
    return memo[key]


def _reduction_channels(config: Config, shape_list: list[Shape]) -> tuple[int, ...]:
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
    # the intermediate windows depend on the stripe's rows and columns only, the filters' on its channels only:
    # each bound once per chain
    n_ops = len(config.ops)
    memo = _memo(config)
    temps_key = ("temps", geo.rows, geo.cols, config.channels_last_caches)
    filters_key = ("filters", cut.channels, config.schedule.c_block, config.schedule.k_block,
                   config.in_place_filter_layout, config.dtype)
    temps = memo.get(temps_key)
    if temps is None:
        temps = memo[temps_key] = tuple(cache_window(config, config.ops[j - 1].output_layout,
                                                     (1, geo.rows[j], geo.cols[j], shape_list[j][3]))
                                        for j in range(1, n_ops))
    filters = memo.get(filters_key)
    if filters is None:
        reduce = reduction_channels(config, shape_list)
        filters = memo[filters_key] = tuple(
            None if op.pool else op.filter_layout.bind((cut.channels, reduce[j] // op.groups, *op.kernel))
            for j, op in enumerate(config.ops))
        memo[filters_key + ("in place",)] = tuple(filter_in_place(config, shape_list, j, cut.channels)
                                                   for j in range(1, n_ops + 1))
    input_channels = (cut.channels if channel_striped_input(config)
                      else config.schedule.c_block or shape_list[0][3])
    return Windows(input=cache_window(config, config.input_layout, (1, geo.rows[0], geo.cols[0], input_channels)),
                   temps=temps, filters=filters, in_place=memo[filters_key + ("in place",)],
                   output=cache_window(config, config.ops[-1].output_layout,
                                       (1, geo.rows[-1], geo.cols[-1], cut.channels)),
                   temp_names=temp_names(n_ops))


def filter_in_place(config: Config, shape_list: list[Shape], j: int, channels: int) -> bool:
    """Whether op j (1-based) reads its filter from the filter tensor itself, with no filter cache, under stripes
    of `channels` output channels: a dense float conv whose filter layout is the one every target of the config
    reads in place (Config.in_place_filter_layout, blocks of `block` output channels), with the stripes and the
    channel block in whole blocks, the stripes inside the tensor's blocks, its reduction over the real input
    channels, and more than one output pixel (a 1x1 conv on one pixel runs as dot products over OIHW rows). A
    filter cache the in-place tiles never fill would take budget a wider stripe could use: ResNet18's 7x7x512
    convs ran in two input-channel chunks of 16-channel-block stripes to leave room for one."""
    op = config.ops[j - 1]
    if (not config.in_place_filter_layout or config.dtype != "float32" or op.kind != "conv2d" or op.pool
            or op.groups != 1 or op.filter_layout is None or op.filter_layout.name != config.in_place_filter_layout):
        return False
    block = op.filter_layout.block_factor("o") or 1
    out_k, in_c = shape_list[j][3], shape_list[j - 1][3]
    produced = out_k if j == len(config.ops) else max(out_k, reduction_channels(config, shape_list)[j])
    reach = -(-produced // channels) * channels  # the channels the stripes run over
    if channels % block or config.schedule.k_block % block or reach > -(-out_k // block) * block:
        return False
    c_block = config.schedule.c_block if j == 1 else 0
    if (in_c % c_block if c_block else reduction_channels(config, shape_list)[j - 1] != in_c):
        return False
    return not (op.kernel == (1, 1) and tuple(shape_list[j][1:3]) == (1, 1))


def allocate(config: Config, win: Windows) -> tuple[Cache, ...]:
    """Carve the caches from one workspace, aligned; say why a cache reuses another or is doubled."""
    ebytes = ELEMENT_BYTES[config.dtype]
    align = ALIGNMENT_BYTES // ebytes
    caches: list[Cache] = []
    offset = 0
    for name, c_name, layout, alias, note, widen in _carve(config, win):
        caches.append(Cache(name=name, c_name=c_name, logical_shape=layout.logical_shape,
                            physical_layout=layout.layout.name, physical_shape=layout.physical_shape,
                            elements=layout.size * widen, offset=0 if alias else offset, element_bytes=ebytes,
                            aliases=alias, note=note))
        if alias is None:
            offset += -(-layout.size * widen // align) * align
    return tuple(caches)


def workspace_of(config: Config, win: Windows) -> int:
    """workspace_elements(allocate(config, win)) without building the caches' records: the schedule search asks
    it of every candidate."""
    align = ALIGNMENT_BYTES // ELEMENT_BYTES[config.dtype]
    return sum(-(-layout.size * widen // align) * align
               for _, _, layout, alias, _, widen in _carve(config, win) if alias is None)


def _carve(config: Config, win: Windows):
    """The caches in workspace order: (name, C name, window, the cache it reuses or None, note, element widening)."""
    s = config.schedule
    n_ops = len(config.ops)
    double = s.pipeline is Pipeline.DOUBLE_BUFFER
    if double:
        yield "input_a", "input_cache_a", win.input, None, "double buffer: even stripes", 1
        yield ("input_b", "input_cache_b", win.input, None,
               "double buffer: odd stripes (loaded while input_a computes)", 1)
    else:
        yield ("input", "input_cache", win.input, None,
               "ring buffer: a stripe's last rows stay for the next" if s.halo is Halo.REUSE else "", 1)
    convs = [w for w, in_place in zip(win.filters, win.in_place) if w is not None and not in_place]
    if convs:  # pools read no filter, and a filter read in place needs no cache
        yield ("filter", "filter_cache", max(convs, key=lambda w: w.size), None,
               "one filter cache, reused by every conv2d of the chain" if len(convs) > 1 else "", 1)
    for name, window in zip(win.temp_names, win.temps):
        yield name, name, window, None, "", 1
    out = win.output
    if double and s.order is LoopOrder.ROWS_OUTER:
        yield "output", "output_cache", out, None, ("rows_outer: each channel block is written back inside the "
                                                    "compute, so one cache; it cannot reuse an input cache (the "
                                                    "prefetch fills the other)"), 1
    elif double:
        yield "output_a", "output_cache_a", out, None, ("double buffer: cannot reuse an input cache, whose next "
                                                        "load overlaps this stripe's store"), 1
        yield "output_b", "output_cache_b", out, None, "double buffer: odd stripes", 1
    elif n_ops > 1 and out.size <= win.input.size and s.halo is not Halo.REUSE:
        yield "output", "output_cache", out, "input", "reuses the input cache: dead once conv2d #1 has run", 1
    else:
        why = "; cannot reuse the input cache, whose ring rows the next stripe reads" if (
            n_ops > 1 and s.halo is Halo.REUSE) else ""
        yield "output", "output_cache", out, None, why.lstrip("; "), 1
    if config.dtype == "uint8" and s.c_block:
        # input-channel chunks: uint8 outputs cannot hold partial sums, an int32 buffer of the window does
        yield "accumulator", "acc_cache", out, None, ("int32 partial sums of the output window between "
                                                      "input-channel chunks (4 bytes per element)"), 4


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
