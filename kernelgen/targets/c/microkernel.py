"""Register-blocked micro-kernels for the c target: the compute of one conv tile as loop-tree nodes. Pure.

A tile is `pixels` output pixels of one output row (or `rows` rows) by the planner's k_block output channels. Dense
convs keep pixels x `lanes`-wide vectors of output channels in accumulators: each step of the reduction loads `vectors`
filter vectors (the filter cache repacked with output channels innermost, unit stride) and one input value per
pixel, broadcast into `pixels x vectors` multiply-adds. Depthwise convs keep `groups` channel vectors of each of
the tile's pixels in accumulators (up to DEPTHWISE_ACCUMULATORS) and sum the 9 taps of a pixel before moving on, so
the source is read pixel after pixel, in memory order (NHWC): the hardware prefetchers follow such a stream while
the FMAs run, where a tile of pixels read one channel vector at a time (stride one pixel) kept them behind. A tile
reading the kernel's input in place (below) sums one line of each pixel at a time instead (tile.DIRECT_GROUP), its
filter vectors kept for all its pixels, and prefetches the rows it will need.
Sums land in `tile[pixels][k_block]`, from which the planner's own per-pixel store (epilogue, guards, trace) runs.
(A dense tile whose store is simple runs the epilogue on its accumulators instead: register_epilogue.py.)

A depthwise conv that reads the kernel's input straight (`direct`) skips the input cache: each tap's pointer is
the input pixel, or a zero vector where the tap falls in the conv padding, so every input byte is read from memory
once and the copy into the cache (memory bound, then the compute: the two in sequence) is gone. Such a tile also
prefetches, while it sums a row, the input row the next output row adds (`fresh_rows`; see tile.DIRECT_GROUP).

Source positions are read through the window's layout split into a row, a column and a channel part (every
string layout and index map whose axes each use one dim splits so); columns are clamped into the window, so the
tile's tail pixels (past the row, or in a consumer's padding) read real cache data whose results the store drops.
"""
from __future__ import annotations

import re
from dataclasses import replace

import kernelgen.expr as E
from ...layout import TensorLayout
from ...plan_types import Block, Guard, Loop, Node, OpGeometry, Stmt
from .direct import Direct  # noqa: F401 (tiles.py imports it from here)
from .filter_prefetch import prefetch_line, prefetch_pointer
from .lane_groups import lane_group_nodes
from .tile import (ACCUMULATORS, DEPTHWISE_ACCUMULATORS, DIRECT_GROUP, DIRECT_WIDE_PIXELS, HALF,  # noqa: F401
                   IN_PLACE_FILTER, LANES, LINE_FLOATS, WIDE, WIDE_ACCUMULATORS, Tile)


def separable(layout: TensorLayout) -> bool:
    """Whether every physical axis reads one logical dim (and position 0 is offset 0): then an offset is its row,
    column and channel parts added."""
    zero = {d: E.Const(0) for d in layout.layout.dims}
    return (all(len(E.variables(out)) <= 1 for out in layout.layout.outputs)
            and E.evaluate(layout.flat_offset(zero, {}), {}) == 0)


def part(layout: TensorLayout, dim: str, expr: E.Expr, bounds: dict) -> str:
    """The C offset of logical position `expr` along `dim` alone (the other dims at 0)."""
    index = {d: E.Const(0) for d in layout.layout.dims} | {dim: expr}
    return E.to_c(layout.flat_offset(index, bounds))


def channels_contiguous(layout: TensorLayout, tail: bool = False) -> bool:
    """Whether each aligned run of LANES channels is LANES consecutive elements (NHWC, 8c/16c/32c blocks); with
    `tail`, the last run may be short (NHWC with 58 channels: a vector read there takes the next pixel's first
    channels, or past the cache, into the workspace's slack: tiles.READ_PAST_CHANNELS)."""
    channels = layout.logical_shape[3]
    if channels % LANES and not tail:
        return False
    bounds = {"c": (0, channels - 1)}
    offset = layout.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(0), "c": E.Var("c")}, bounds)
    return all(E.evaluate(offset, {"c": c}) - E.evaluate(offset, {"c": c - c % LANES}) == c % LANES
               for c in range(channels))


GROUP = 4  # channels a column tile sums at once: four independent FMA chains


def tile_nodes(t: Tile) -> tuple[Node, ...]:
    """Sums of the tile at output row oh, pixels owb * pixels + p, into tile[p * k_block + k]."""
    if t.columns:
        return _depthwise_columns(t)
    if t.dot or t.lane_group:
        return _dot(t) if t.dot else lane_group_nodes(t)
    return _depthwise(t) if t.depthwise else _dense(t)


def columns_contiguous(layout: TensorLayout) -> bool:
    """Whether the window's columns are consecutive elements (NCHW, NHWC with one channel): pixel vectors."""
    width = layout.logical_shape[2]
    offset = layout.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Var("w"), "c": E.Const(0)},
                                {"w": (0, width - 1)})
    return all(E.evaluate(offset, {"w": w}) == w for w in range(width))


def column_step(layout: TensorLayout) -> int:
    """Elements between two consecutive columns, where every column is that far from the one before (else 0)."""
    width = layout.logical_shape[2]
    offsets = [E.evaluate(layout.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(w), "c": E.Const(0)},
                                             {}), {}) for w in range(width)]
    step = offsets[1] - offsets[0] if width > 1 else 0
    return step if all(b - a == step for a, b in zip(offsets, offsets[1:])) else 0


def _clamp(name: str, offset: str, limit: int) -> Stmt:
    return Stmt(code=f"const int {name} = KG_CLAMP({offset}, 0, {limit});", summary=f"{name} = column in the window")


def _guarded(cond: str, body: tuple[Node, ...]) -> tuple[Node, ...]:
    """`body` under `cond` (a tap that reads only padding, skipped: its products are zeros), or as it is."""
    return (Guard(cond=cond, body=body),) if cond else body


def _dense(t: Tile) -> tuple[Node, ...]:
    p_range, v_range, x = range(t.pixels), range(t.vectors), t.suffix
    accs = [[f"a{p}_{v}" for v in v_range] for p in p_range]
    step = t.stride
    clamped = p_range if not t.col_step else t.clamped
    pointers: list[Node] = [_clamp(f"xc{p}", f"xb + {p * step} + rw * {t.dilation}", t.col_limit) for p in clamped]
    pointers += [Stmt(code=f"const float *const x{p} = {t.src} + xr + {t.col[p]};", summary=f"x{p} = pixel {p}")
                 for p in clamped]
    across = t.pixels // t.rows  # pixel p: row p / across, column p % across
    inputs = [f"x{p}[ch]" if p in clamped else
              f"x[xo + ch + {p % across * step * t.col_step + p // across * t.row_step}]" for p in p_range]
    if len(clamped) < t.pixels:
        pointers += [Stmt(code=f"const int xw = xb + rw * {t.dilation};", summary="xw = the first pixel's column"),
                     Stmt(code=f"const int xo = {t.col_at};", summary="xo = its column offset"),
                     Stmt(code=f"const float *const x = {t.src} + xr;", summary="x = the source row")]
    pointers.append(Stmt(code=f"const float *const wt = wk + (rh * {t.kernel[1]} + rw) * {t.filter_tap};",
                         summary="wt = filter tap"))
    pointers += prefetch_pointer(t.prefetch) if t.prefetch else ()
    loads = ", ".join(f"w{v} = KG_LOAD{x}({t.filter_at(v)})" for v in v_range)
    macs = [Stmt(code=" ".join(f"KG_FMA{x}(a{p}_{v}, {inputs[p]}, w{v});" for v in v_range),
                 summary=f"a{p}_* += x{p}[rc] * w*") for p in p_range]
    reduction = Loop(var="rc", extent=t.reduce, body=(
        *((prefetch_line(t.prefetch),) if t.prefetch else ()),
        Stmt(code=f"const kg_vf{x} {loads};", summary="w* = filter vectors"),
        Stmt(code=f"const int ch = {t.channel};", summary="ch = channel offset"), *macs))
    body: tuple[Node, ...] = (
        Stmt(code=f"const float *const wk = {t.filter_base} + {t.filter_block};", summary="wk = filter block"),
        *(Stmt(code=f"kg_vf{x} " + ", ".join(f"{a} = KG_ZERO{x}" for a in row) + ";", summary="accumulators = 0")
          for row in accs),
        Loop(var="rh", extent=t.kernel[0], body=_guarded(t.live_row if t.rows == 1 else "", (
            Stmt(code=f"const int xr = {t.row};", summary="xr = source row"),
            Loop(var="rw", extent=t.kernel[1], body=_guarded(t.live_col(), (Block(label="one tap, every pixel", body=(
                *pointers, reduction)),))),))),
        *(Stmt(code=" ".join(f"KG_STORE{x}(tile + {p * t.k_block} + kv * {t.width} + {v * t.lanes}, a{p}_{v});"
                             for v in v_range), summary=f"tile[{p}] = a{p}_*") for p in p_range))
    if t.present:  # a grouped conv's stripe past its last group: no source to read, the sums stay 0
        body = (*body[:-len(p_range) - 1], Guard(cond=t.present, body=(body[-len(p_range) - 1],)),
                *body[-len(p_range):])
    return (Stmt(code=f"const int xb = {t.col_base};", summary="xb = first column"),
            Loop(var="kv", extent=t.k_block // t.width, body=body))


DOT_ROWS = 8  # filter rows (output channels) a dot tile sums at once: eight FMA chains, one input load each step


def _dot(t: Tile) -> tuple[Node, ...]:
    """A 1x1 conv's one output pixel as dot products: per step, one vector of LANES input channels against that
    vector of DOT_ROWS filter rows, each row its own accumulator, summed across its lanes at the end. The filter
    streams through once in memory order; the dense tile's repack (a transpose of the whole filter into output
    channels innermost, for one pixel) cost three times the products (MobileNetV3-small's classifier: 74% of the
    kernel in the two repacks). Over an OIHW filter the rows are read in place (filter_rows): the filter cache
    copy, once per call and a bounds test per element, was itself 22% of MobileNetV2's classifier kernel."""
    rows = range(DOT_ROWS)
    accs = [f"a{i}" for i in rows]
    steps = Loop(var="rv", extent=t.reduce // LANES, body=(
        Stmt(code=f"const kg_vf xv = KG_LOAD(x0 + rv * {LANES});", summary="xv = input channels"),
        *(Stmt(code=f"KG_FMAV({a}, KG_LOAD(wk + {i * t.reduce} + rv * {LANES}), xv);", summary=f"{a} += row {i} * xv")
          for i, a in enumerate(accs))))
    lanes = [[f"KG_LANE({a}, {i})" for i in range(LANES)] for a in accs]
    while len(lanes[0]) > 1:  # pairwise: ((l0 + l1) + (l2 + l3)) + ...
        lanes = [[f"({x[k]} + {x[k + 1]})" for k in range(0, len(x), 2)] for x in lanes]
    first = t.filter_rows or f"filter_cache + (ko_inner * {t.k_block} + kv * {DOT_ROWS}) * {t.reduce}"
    body: tuple[Node, ...] = (
        Stmt(code=f"const float *const wk = {first};", summary="wk = the block's first filter row"),
        Stmt(code="kg_vf " + ", ".join(f"{a} = KG_ZERO" for a in accs) + ";", summary="accumulators = 0"),
        Loop(var="rh", extent=1, body=(
            Stmt(code=f"const int xr = {t.row};", summary="xr = source row"),
            Loop(var="rw", extent=1, body=(Block(label="the one pixel's channels", body=(
                _clamp("xc0", "xb + rw", t.col_limit),
                Stmt(code=f"const float *const x0 = {t.src} + xr + {t.col[0]};", summary="x0 = the pixel"),
                steps)),)),)),
        *(Stmt(code=f"tile[kv * {DOT_ROWS} + {i}] = {x[0][1:-1]};", summary=f"tile[{i}] = the lanes of {a}")
          for i, (a, x) in enumerate(zip(accs, lanes))))
    if t.rows_present:  # rows past the tensor: not read (in place there is nothing there); the store drops them
        body = (Guard(cond=t.rows_present, body=body),)
    return (Stmt(code=f"const int xb = {t.col_base};", summary="xb = first column"),
            Loop(var="kv", extent=t.k_block // DOT_ROWS, body=body))


def _depthwise(t: Tile) -> tuple[Node, ...]:
    """Channel vectors, pixel by pixel: per group of `groups` vectors, each pixel's 9 taps summed into its
    accumulators (input and filter vectors straight from memory: one FMA per two loads), the tile's pixels side by
    side. A wide tile (lanes WIDE) sums each pair of the group's 8-float vectors as one 16-float vector."""
    g, p_range, i_range = t.groups, range(t.pixels), range(t.groups)
    taps: list[Node] = []
    if t.direct is not None:
        d = t.direct
        taps.append(Stmt(code=f"const int ih = {d.row};", summary="ih = input row"))
        taps.append(Stmt(code=f"const int row_in = ih >= 0 && ih < {d.rows};", summary="row_in = ih in the input"))
    else:
        taps.append(Stmt(code=f"const int xr = {t.row};", summary="xr = source row"))
    for p in p_range:
        for rw in range(t.kernel[1]):
            column = p * t.stride + rw * t.dilation
            if t.direct is not None:
                d = t.direct
                at = re.sub(r"\biw\b", f"iw{p}_{rw}", d.col_offset)
                taps += [Stmt(code=f"const int iw{p}_{rw} = {d.col} + xb + {column};", summary="iw = input column"),
                         Stmt(code=f"const float *x{p}_{rw} = row_in && iw{p}_{rw} >= 0 && iw{p}_{rw} < {d.cols} "
                                   f"? input + {d.row_offset} + {at} + ch "
                                   f": kg_zeros;", summary="x = input pixel, or zeros (padding)"),
                         # opaque: else gcc turns the select into branches that copy the 12 vectors to the stack
                         Stmt(code=f"KG_OPAQUE(x{p}_{rw});", summary="x, opaque: a select, not branches")]
            else:
                taps.append(Stmt(code=f"const float *const x{p}_{rw} = {t.src} + xr + {t.col[column]} + ch;",
                                 summary="x = source pixel"))
    v = t.suffix
    for rw in range(t.kernel[1]):
        taps.append(Stmt(code=f"const float *const w{rw} = wk + (rh * {t.kernel[1]} + {rw}) * {t.filter_tap};",
                         summary=f"w{rw} = tap (rh, {rw})"))
        taps += [Stmt(code=" ".join(f"KG_FMAV{v}(a{p}_{i}, KG_LOAD{v}(x{p}_{rw} + {t.vector_channels[i]}), "
                                    f"KG_LOAD{v}(w{rw} + {i * LANES}));" for i in i_range[::t.lanes // LANES]),
                      summary=f"a{p}_* += tap (rh, {rw})") for p in p_range]
    loop = Loop(var="kg", extent=(t.live_vectors or t.k_block // LANES) // g, body=_group(t, tuple(taps)))
    loops: tuple[Node, ...] = (loop,)
    if t.direct is not None and t.direct.col_step:
        # a tile whose window lies inside the input (all but the border tiles): one pointer per input row and taps
        # at constant offsets from it, where the others select each tap's pixel or the zeros (112x112x96 in a C
        # harness, cold 0.79 -> 0.76 ms on huge pages)
        inside = _inside(t)
        loops = (Guard(cond=f"KG_LIKELY({inside})", body=(replace(loop, body=_group(t, _inside_taps(t))),)),
                 Guard(cond=f"!({inside})", body=(loop,)))
    read = sorted({p * t.stride + rw * t.dilation for p in p_range for rw in range(t.kernel[1])})  # a 1x1 at stride
    clamps = [] if t.direct is not None else [_clamp(f"xc{i}", f"xb + {i}", t.col_limit) for i in read]  # 2 skips some
    zeros = [Stmt(code=f"static const float kg_zeros[{g * LANES}] = {{0}};", summary="kg_zeros = the conv padding")
             ] if t.direct is not None else []
    return (*zeros, Stmt(code=f"const int xb = {t.col_base};", summary="xb = first column"), *_prefetch(t), *clamps,
            *loops)


def _group(t: Tile, taps: tuple[Node, ...]) -> tuple[Node, ...]:
    """One group of channel vectors: accumulators zeroed, every kernel row's `taps`, the sums stored in the tile."""
    p_range, i_range, v = range(t.pixels), range(0, t.groups, t.lanes // LANES), t.suffix
    accumulate: tuple[Node, ...] = (
        Stmt(code=f"const int ch = {t.channel};", summary="ch = channel offset"),
        Loop(var="rh", extent=t.kernel[0], body=taps))
    if t.present:  # a channel stripe's tail past the op's channels: no source to read, the sums stay 0
        accumulate = (Guard(cond=t.present, body=accumulate),)
    return (
        Stmt(code=f"const int kv = kg * {t.groups};", summary="kv = the group's first channel vector"),
        Stmt(code=f"const float *wk = filter_cache + {t.filter_block};", summary="wk = the group's filter vectors"),
        Stmt(code="KG_OPAQUE(wk);", summary="wk, opaque: its loads stay in the pixel loop"),
        *(Stmt(code=f"kg_vf{v} " + ", ".join(f"a{p}_{i} = KG_ZERO{v}" for i in i_range) + ";",
               summary="accumulators = 0") for p in p_range),
        *accumulate,
        *(Stmt(code=" ".join(f"KG_STORE{v}(tile + {p * t.k_block} + (kv + {i}) * {LANES}, a{p}_{i});"
                             for i in i_range), summary=f"tile[{p}] = a{p}_*") for p in p_range))


def _inside(t: Tile) -> str:
    """C: whether every tap of the tile reads an input pixel (rows grow with rh, columns with the pixel and rw)."""
    d = t.direct
    reach = (t.pixels - 1) * t.stride + (t.kernel[1] - 1) * t.dilation
    first, last = (re.sub(r"\brh\b", str(r), d.row) for r in (0, t.kernel[0] - 1))
    return f"{first} >= 0 && {last} < {d.rows} && {d.col} + xb >= 0 && {d.col} + xb + {reach} < {d.cols}"


def _inside_taps(t: Tile) -> tuple[Node, ...]:
    """A kernel row of a tile inside the input: its first pixel's pointer, every tap at a constant offset."""
    d, v, step = t.direct, t.suffix, t.direct.col_step
    first = re.sub(r"\biw\b", f"({d.col} + xb)", d.col_offset)
    taps: list[Node] = [Stmt(code=f"const int ih = {d.row};", summary="ih = input row"),
                        Stmt(code=f"const float *const x = input + {d.row_offset} + {first} + ch;",
                             summary="x = the tile's first input pixel in row ih")]
    for rw in range(t.kernel[1]):
        taps.append(Stmt(code=f"const float *const w{rw} = wk + (rh * {t.kernel[1]} + {rw}) * {t.filter_tap};",
                         summary=f"w{rw} = tap (rh, {rw})"))
        taps += [Stmt(code=" ".join(f"KG_FMAV{v}(a{p}_{i}, KG_LOAD{v}(x + {(p * t.stride + rw * t.dilation) * step}"
                                    f" + {t.vector_channels[i]}), KG_LOAD{v}(w{rw} + {i * LANES}));"
                                    for i in range(0, t.groups, t.lanes // LANES)),
                      summary=f"a{p}_* += tap (rh, {rw})") for p in range(t.pixels)]
    return tuple(taps)


def fresh_rows(op: OpGeometry) -> tuple[int, ...]:
    """The kernel rows whose input row the output row before did not read: the last `stride` at dilation 1."""
    (kh, _), stride, dilation = op.kernel, op.stride[0], op.dilation[0]
    return tuple(r for r in range(kh) if r * dilation + stride > (kh - 1) * dilation)


def _prefetch(t: Tile) -> tuple[Node, ...]:
    """A direct tile's prefetches: the input rows the next output row adds (its fresh kernel rows), the tile's own
    `span` columns, every line of each pixel."""
    d = t.direct
    if d is None or not d.fresh_rows or not re.search(r"\boh\b", d.row):
        return ()
    out: list[Node] = [Stmt(code=f"const int iw_ahead = {d.col} + xb;", summary="iw_ahead = the tile's first column")]
    column = re.sub(r"\biw\b", "iw_ahead", d.col_offset)
    # each pixel's lines where the columns are one step apart, else the first pixel's
    lines = sorted({c * d.col_step + i * LINE_FLOATS for c in range(d.span if d.col_step else 1) for i in range(d.lines)})
    for r in d.fresh_rows:
        row = re.sub(r"\bih\b", f"ih_ahead{r}", d.row_offset)
        prefetches = tuple(Stmt(code=f"KG_PREFETCH(input + {row} + {column} + {d.channel} + {at});",
                                summary="prefetch a line") for at in lines)
        ih = re.sub(r"\boh\b", "(oh + 1)", re.sub(r"\brh\b", str(r), d.row))
        out += [Stmt(code=f"const int ih_ahead{r} = {ih};",
                     summary=f"ih_ahead{r} = the next output row's input row of kernel row {r}"),
                Guard(cond=f"ih_ahead{r} >= 0 && ih_ahead{r} < {d.rows} && iw_ahead >= 0 && iw_ahead < {d.cols}",
                      body=prefetches)]
    return tuple(out)


def _depthwise_columns(t: Tile) -> tuple[Node, ...]:
    """Depthwise on a source with unit-stride columns: each of GROUP channels keeps a vector of LANES pixels; per
    tap one filter value is broadcast against the pixels' input vector. Tiles whose columns all lie in the window
    load them straight (stride 1: one vector load per tap); edge tiles read each lane at its clamped column."""
    lanes = range(LANES)
    accs = [f"a{c}" for c in range(GROUP)]

    def taps(inside: bool) -> Node:
        body: list[Node] = [Stmt(code=f"const int xr = {t.row};", summary="xr = source row")]
        for rw in range(t.kernel[1]):
            body.append(Stmt(code="const float " + ", ".join(
                f"w{c}_{rw} = filter_cache[{t.filter_block} + {c} + (rh * {t.kernel[1]} + {rw}) * {t.filter_tap}]"
                for c in range(GROUP)) + ";", summary=f"w*_{rw} = taps (rh, {rw})"))
        for c in range(GROUP):
            for rw in range(t.kernel[1]):
                at = f"xb + {rw * t.dilation}"
                if inside and t.stride == 1:
                    x = f"KG_LOAD(x{c} + xr + {at})"
                elif inside:
                    x = "KG_SET(" + ", ".join(f"x{c}[xr + {at} + {i * t.stride}]" for i in lanes) + ")"
                else:
                    x = "KG_SET(" + ", ".join(f"x{c}[xr + xc{i}_{rw}]" for i in lanes) + ")"
                body.append(Stmt(code=f"KG_FMA({accs[c]}, w{c}_{rw}, {x});", summary=f"a{c} += w * x"))
        return Loop(var="rh", extent=t.kernel[0], body=tuple(body))

    clamps = [_clamp(f"xc{i}_{rw}", f"xb + {i * t.stride + rw * t.dilation}", t.col_limit)
              for rw in range(t.kernel[1]) for i in lanes]
    accumulate: tuple[Node, ...] = (
        *(Stmt(code=f"const float *const x{c} = {t.src} + {t.channels[c]};", summary=f"x{c} = channel {c}")
          for c in range(GROUP)),
        Guard(cond=t.inside, body=(taps(True),)), Guard(cond=f"!({t.inside})", body=(taps(False),)))
    if t.present:
        accumulate = (Guard(cond=t.present, body=accumulate),)
    body: tuple[Node, ...] = (
        Stmt(code="kg_vf " + ", ".join(f"{a} = KG_ZERO" for a in accs) + ";", summary="accumulators = 0"),
        *accumulate,
        *(Stmt(code=" ".join(f"tile[{i * t.k_block} + kv * {GROUP} + {c}] = KG_LANE(a{c}, {i});" for i in lanes),
               summary=f"tile[*][{c}] = a{c}") for c in range(GROUP)))
    return (Stmt(code=f"const int xb = {t.col_base};", summary="xb = first column"), *clamps,
            Loop(var="kv", extent=t.k_block // GROUP, body=body))
