"""Which register-blocked micro-kernel tile each op of the c target gets (microkernel.Tile), or why it keeps the
planner's loops: the fit tests (dtype, groups, k_block, source layout, filter cache room), the tile's pixels and
channel vectors, and the index expressions it reads its source and filter with. blocking.py puts the tiles in the
loop nest (rewrite.py)."""
from __future__ import annotations

import math

import kernelgen.expr as E
from ...config import Config
from ...plan_types import Halo, Phase, Pipeline, Plan, Section, Step
from ...planner.geometry import (cache_window, channel_striped_input, filter_in_place, reduction_channels, temp_names,
                                 unproven)
from dataclasses import replace

from ...planner.tile_speed import stacked_rows
from .filter_prefetch import FilterPrefetch, filter_prefetch
from .lane_groups import LANE_GROUP_PIXELS
from .microkernel import (ACCUMULATORS, DEPTHWISE_ACCUMULATORS, DIRECT_GROUP, DIRECT_WIDE_PIXELS, DOT_ROWS, GROUP,
                          HALF, LANES, LINE_FLOATS,
                          WIDE, WIDE_ACCUMULATORS, Direct, Tile, channels_contiguous, column_step,
                          columns_contiguous, fresh_rows, part, separable)
from .tile_speed import LOAD_SLOTS


def reads_input(cfg: Config, plan: Plan) -> bool:
    """Whether op 1 may read the kernel's input in place of the input cache: the cache is the whole window, read
    once per stripe by op 1 alone (no ring of rows, pipeline or channel chunks), of an input whose channels are
    consecutive elements. Whether op 1 is a channel-vector depthwise conv, _tile decides."""
    s, parts = cfg.schedule, plan.stripe
    reads = [n for n in parts.load if isinstance(n, Section) and n.step is not None
             and n.step.phase in (Phase.INPUT_READ, Phase.INPUT_READ_KEPT, Phase.INPUT_READ_NEW)]
    if len(reads) != 1 or reads[0].step != Step(Phase.INPUT_READ) or s.halo is Halo.REUSE or s.c_block:
        return False
    if parts.pipeline is not Pipeline.NONE or parts.chunks != 1:
        return False
    full = cfg.input_layout.bind(tuple(plan.ops[0].in_shape))
    channels = full.logical_shape[3]
    bounds = {"c": (0, channels - 1)}
    offset = full.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(0), "c": E.Var("c")}, bounds)
    return all(E.evaluate(offset, {"c": c}) == c for c in range(channels))


# Elements past its end the c target's workspace holds for a depthwise tile whose last channel vector is short
# (Tile.reads_past): the widest vector's reach past a cache's last pixel.
READ_PAST_CHANNELS = WIDE

# A channel-vector depthwise tile over a cache holds at least this many pixels (at most 4 channel vectors each):
# each tap's filter vectors then serve 3 pixels (1.33 loads per FMA, not 2). MobileNetV3-small's 5x5 depthwise
# 576 channels on 7x7 (`kernelgen bench --repeat 20`, warm, two interleaved runs): 1 pixel x 12 vectors 0.145 /
# 0.126 ms, 3 x 4 0.095 / 0.088, 4 x 3 0.115 / 0.101, 7 x 1 0.103 / 0.090. A tile reading the kernel's input
# (direct) takes groups of DIRECT_GROUP vectors, one line of each pixel (tile.py says why).
DEPTHWISE_CACHED_PIXELS = 3


def _groups(vectors: int, cols: int, channel_offset, direct: bool) -> tuple[int, int]:
    """(channel vectors per group, pixels) of a channel-vector depthwise tile: the largest group of at most
    DEPTHWISE_ACCUMULATORS vectors (over a cache: that leaves DEPTHWISE_CACHED_PIXELS pixels; direct, where groups of
    DIRECT_GROUP divide the stripe's vectors: DIRECT_GROUP) that divides the stripe's, whose vectors lie at the same
    offsets from the group's first in every group; as many pixels as fill the accumulators (at most the row's).
    A direct 5x5 over 28x28x120 (15 vectors) in single vectors of 12 pixels took 0.26 ms cold against 0.16 in groups
    of 5 vectors of 2 pixels (MobileNetV3-Large's features_5_block_1)."""
    most = DEPTHWISE_ACCUMULATORS // (1 if direct else min(cols, DEPTHWISE_CACHED_PIXELS))
    if direct and vectors % DIRECT_GROUP == 0:
        most = DIRECT_GROUP
    for g in range(min(vectors, most), 0, -1):
        if vectors % g:
            continue
        steps = {tuple(channel_offset(k + i) - channel_offset(k) for i in range(g)) for k in range(0, vectors, g)}
        if len(steps) == 1:
            return g, max(1, min(DEPTHWISE_ACCUMULATORS // g, cols))
    return 1, min(DEPTHWISE_ACCUMULATORS, cols)


def op_tile(cfg: Config, plan: Plan, j: int, shape_list: list, cut, geo, filter_room: int, direct: bool = False
          ) -> tuple[Tile | None, str]:
    op, n = cfg.ops[j - 1], len(cfg.ops)
    last = j == n
    if op.kind != "conv2d" or plan.dtype != "float32":
        return None, ""
    s = cfg.schedule
    out_k = shape_list[j][3]
    reduce = reduction_channels(cfg, shape_list)[j - 1] // op.groups
    depthwise = op.groups > 1 and reduce == 1 and op.groups == out_k == shape_list[j - 1][3]
    grouped = op.groups > 1 and not depthwise  # a dense tile per group: each vector of outputs in one group
    group_out = out_k // op.groups
    # groups narrower than a vector, as many inputs as outputs: each lane sums its own group (lane_groups.py).
    # Whole vectors of channels: a block's 8 input channels are then all in the source pixel
    lane_group = group_out if grouped and group_out < LANES and LANES % group_out == 0 and reduce == group_out \
        and out_k % LANES == 0 and s.k_block % LANES == 0 and not (j == 1 and s.c_block) else 0
    if grouped and not lane_group and (group_out % LANES or s.k_block % LANES or (j == 1 and s.c_block)):
        return None, (f"a grouped conv whose groups' {group_out} output channels are not whole vectors of {LANES} "
                      f"(or a k_block of {s.k_block}, input-channel chunks)")
    if s.k_block % HALF:
        return None, f"k_block {s.k_block} is not a multiple of {HALF}"
    layout = cfg.input_layout if j == 1 else cfg.ops[j - 2].output_layout
    striped = j == 1 and channel_striped_input(cfg)  # the input cache holds the channel stripe's channels alone
    channels = s.c_block if j == 1 and s.c_block else cut.channels if striped else max(reduce, shape_list[j - 1][3])
    src = cache_window(cfg, layout, (1, geo.rows[j - 1], geo.cols[j - 1], channels))  # the cache's layout
    if not separable(src):
        return None, f"its source layout {layout.name} mixes dims in one axis"
    # a depthwise tile's last channel vector may be short (ShuffleNetV2's 58 and 116 channels): its lanes past the
    # channels read what follows in the cache (the next pixel, or the workspace's slack: READ_PAST_CHANNELS) and are
    # never stored. Such a tile reads a cache, never the kernel's input in place (nothing is known to follow it)
    columns = depthwise and not channels_contiguous(src, tail=True)
    reads_past = depthwise and not columns and src.logical_shape[3] % LANES != 0
    if depthwise and not columns and s.k_block % LANES:
        return None, f"depthwise channel vectors need a k_block that is a multiple of {LANES}, not {s.k_block}"
    if columns and (s.c_block or out_k % GROUP or not columns_contiguous(src)):
        return None, (f"depthwise over a source layout ({layout.name}) with neither {LANES} consecutive channels "
                      f"nor consecutive columns (or channels not a multiple of {GROUP})")
    taps = op.kernel[0] * op.kernel[1]
    vectors = 2 if s.k_block % (2 * LANES) == 0 and not depthwise and not (grouped and group_out % (2 * LANES)) \
        else 1
    lanes = LANES if s.k_block % LANES == 0 or depthwise else HALF
    in_place = filter_in_place(cfg, shape_list, j, cut.channels)  # the plan keeps no filter cache for it
    if not in_place and cut.channels * taps * (1 if depthwise else reduce) > filter_room:
        return None, "the filter cache cannot hold the repacked block"
    cols = geo.cols[j]
    most = ACCUMULATORS // vectors
    if lane_group:
        most = LANE_GROUP_PIXELS
    pixels = LANES if columns else math.ceil(cols / math.ceil(cols / most))
    ko_var = "ko_outer" if last else f"ko_outer_{j}"
    produced = out_k if last else max(out_k, reduction_channels(cfg, shape_list)[j])
    width = vectors * lanes
    bounds = {"ko_outer": (0, cut.ko_extent - 1), "ho_outer": (0, cut.ho_extent - 1), "wo_outer": (0, cut.wo_extent - 1),
              "nb": (0, shape_list[0][0] - 1), "ci_outer": (0, max(s.c_split, 1) - 1),
              ko_var: (0, math.ceil(produced / cut.channels) - 1), "ko_inner": (0, s.k_split - 1),
              "oh": (0, geo.rows[j] - 1), "rh": (0, op.kernel[0] - 1), "rw": (0, op.kernel[1] - 1),
              "rc": (0, reduce - 1), "kv": (0, s.k_block // width - 1), "owb": (0, math.ceil(cols / pixels) - 1)}
    in_row = E.add(E.mul(E.Var("oh"), op.stride[0]), E.mul(E.Var("rh"), op.dilation[0]))
    if j == 1 and s.halo is Halo.REUSE and geo.halo_rows > 0:  # the ring of input rows (planner.builder.ring_row)
        in_row = E.floormod(E.add(E.mul(E.Var("ho_outer"), geo.row_step), in_row), geo.rows[0],
                            bounds | {"ih": (0, geo.rows[0] - 1)})
    col_base = E.add(E.mul(E.add(geo.col_start[j], E.mul(E.Var("owb"), pixels)), op.stride[1]), E.Const(-op.pad[1]),
                     E.mul(geo.col_start[j - 1], -1))
    count = (pixels - 1) * op.stride[1] + (op.kernel[1] - 1) * op.dilation[1] + 1 if (
        depthwise and not columns) or lane_group else (0 if columns else pixels)
    bounds |= {f"xc{i}": (0, geo.cols[j - 1] - 1) for i in range(count)}
    k_first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("ko_inner"), s.k_block), E.mul(E.Var("kv"), LANES))
    k_block, k_split = s.k_block, 1
    groups, vector_channels, loaded, live = 1, ("0",), None, 0
    if depthwise and not columns:  # the tile holds the stripe's channels: ko_inner runs per pixel store
        k_block, k_split, live = cut.channels, s.k_split, cut.channels // LANES
        bounds["kv"] = (0, live - 1)
        k_first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("kv"), LANES))
        src_first = E.mul(E.Var("kv"), LANES) if striped else k_first
        present = unproven([(k_first, "<", out_k)], bounds)
        if present and last and bounds[ko_var] == (0, 0) and out_k % LANES == 0:
            # one channel stripe wider than the op (144 channels in 5 blocks of 32): only the op's vectors are
            # summed; the store's channel test reads no others
            live = out_k // LANES
            bounds["kv"] = (0, live - 1)
            present = unproven([(k_first, "<", out_k)], bounds)

        def offset(kv: int) -> int:
            return E.evaluate(src.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(0),
                                               "c": E.Const(kv * LANES)}, {}), {})
        groups, pixels = _groups(live, cols, offset, direct) if not present else (1, min(8, cols))
        vector_channels = tuple(str(offset(i) - offset(0)) for i in range(groups))
        loaded = (pixels - 1) * op.stride[1] + (op.kernel[1] - 1) * op.dilation[1] + 1
        bounds["owb"] = (0, math.ceil(cols / pixels) - 1)
        bounds |= {f"xc{i}": (0, geo.cols[j - 1] - 1) for i in range(loaded)}
    group: tuple[str, ...] = ()
    inside = ""
    if columns:  # GROUP channels per step of kv
        k_first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("ko_inner"), s.k_block),
                        E.mul(E.Var("kv"), GROUP))
        bounds["kv"] = (0, s.k_block // GROUP - 1)
        src_first = E.add(E.mul(E.Var("ko_inner"), s.k_block), E.mul(E.Var("kv"), GROUP)) if striped else k_first
        group = tuple(part(src, "c", E.add(src_first, E.Const(c)), bounds) for c in range(GROUP))
        channel, block, tap = "", f"ko_inner * {s.k_block} + kv * {GROUP}", cut.channels
        present = unproven([(k_first, "<", out_k)], bounds)
        reach = (LANES - 1) * op.stride[1] + (op.kernel[1] - 1) * op.dilation[1]
        inside = f"xb >= 0 && xb + {reach} <= {geo.cols[j - 1] - 1}"
    elif depthwise:
        channel, block, tap = part(src, "c", src_first, bounds), f"kv * {LANES}", cut.channels
        present = unproven([(k_first, "<", out_k)], bounds)
    else:
        channel, present = part(src, "c", E.Var("rc"), bounds), []
        if grouped:  # block kv's outputs are one group's: it sums that group's `reduce` input channels
            block_first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("ko_inner"), s.k_block),
                                E.mul(E.Var("kv"), width))
            group_first = E.mul(E.floordiv(block_first, group_out), reduce)
            # a lane-group tile's inputs are its outputs' channels (reduce == group_out): the block's first
            channel = part(src, "c", group_first if lane_group else E.add(group_first, E.Var("rc")), bounds)
            present = unproven([(block_first, "<", out_k)], bounds)  # a stripe's blocks past the op: no group
        tap = reduce * width
        block = f"(ko_inner * {s.k_block // width} + kv) * {taps * tap}"
    found = None
    # op 1 reads the input in place, where its channels are whole vectors: a short last vector would read past
    # the input's last pixel (it did, 6 floats past a 58-channel input, before the input's channels were checked)
    whole = shape_list[j - 1][3] % LANES == 0
    if direct and depthwise and not columns and not present and whole:
        full = cfg.input_layout.bind(tuple(plan.ops[0].in_shape))
        wide = bounds | {"ih": (-op.pad[0], shape_list[0][1] - 1), "iw": (-op.pad[1], shape_list[0][2] - 1)}
        found = Direct(row=E.to_c(E.simplify(E.add(geo.row_start[0], in_row), bounds)),
                       col=E.to_c(E.simplify(geo.col_start[0], bounds)), rows=shape_list[0][1], cols=shape_list[0][2],
                       row_offset=part(full, "h", E.Var("ih"), wide) + (
                           f" + {part(full, 'n', E.Var('nb'), bounds)}" if shape_list[0][0] > 1 else ""),
                       col_offset=part(full, "w", E.Var("iw"), wide), fresh_rows=fresh_rows(op),
                       span=pixels * op.stride[1], lines=-(-live * LANES // LINE_FLOATS),
                       channel=part(full, "c", E.mul(E.Var(ko_var), cut.channels), bounds), col_step=column_step(full))
        channel = part(full, "c", k_first, bounds)
    col_base = E.add(E.mul(E.add(geo.col_start[j], E.mul(E.Var("owb"), pixels)), op.stride[1]), E.Const(-op.pad[1]),
                     E.mul(geo.col_start[j - 1], -1))
    if loaded is not None:
        count = loaded
    dot = _dot_product(op, src, reduce, shape_list[j], s) and op.groups == 1
    rows, rows_present = "", []
    if dot and _rows_in_place(plan, j, out_k, reduce, shape_list[j - 1][3]):
        first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("ko_inner"), s.k_block),
                      E.mul(E.Var("kv"), DOT_ROWS))
        dot_bounds = bounds | {"kv": (0, s.k_block // DOT_ROWS - 1)}
        rows = f"filter{j} + ({E.to_c(E.simplify(first, dot_bounds))}) * {reduce}"
        rows_present = unproven([(first, "<", out_k)], dot_bounds)
    live_row, input_col = _padding_taps(cfg, op, j, geo, s, bounds)
    tile = Tile(depthwise=depthwise, pixels=pixels, vectors=vectors, k_block=k_block, k_split=k_split, kernel=op.kernel,
                stride=op.stride[1], dilation=op.dilation[1], reduce=reduce, src=(["input_cache", *temp_names(len(cfg.ops))])[j - 1],
                row=part(src, "h", in_row, bounds), col_base=E.to_c(E.simplify(col_base, bounds)),
                col_limit=geo.cols[j - 1] - 1, col=tuple(part(src, "w", E.Var(f"xc{i}"), bounds) for i in range(count)),
                channel=channel, filter_block=block, filter_tap=tap, present=present[0] if present else "",
                columns=columns, channels=group, inside=inside, lanes=lanes, groups=groups,
                vector_channels=vector_channels, direct=found, live_vectors=live, dot=dot, filter_rows=rows,
                rows_present=rows_present[0] if rows_present else "", lane_group=lane_group,
                reads_past=reads_past, live_row="" if depthwise or columns or dot else live_row,
                input_col="" if depthwise or columns or dot else input_col, input_cols=shape_list[0][2])
    stride, first = 0, ""
    if not depthwise and not dot and not grouped:
        chunked = j == 1 and s.c_block  # input-channel chunks: the tile sums chunk ci_outer's channels
        stride, inputs = _block_stride(plan, j, tile, math.ceil(produced / cut.channels) * cut.channels,
                                       cut.channels)
        if stride and (inputs % reduce == 0 if chunked else inputs == reduce):
            # blocks of WIDE output channels `stride` apart; taps, then input channels, in each
            first = (f"{ko_var} * {cut.channels // WIDE * stride} + ko_inner * {s.k_block // WIDE * stride}"
                     + (f" + ci_outer * {reduce * WIDE}" if chunked else ""))
            tile = replace(tile, filter_base=f"filter{j}", filter_block=f"{first} + kv * {stride}",
                           filter_tap=inputs * WIDE)
        else:
            stride = 0
    if in_place and not stride:
        return None, "its filter tensor's blocks do not line up with the tile's (and the plan keeps no filter cache)"
    if not depthwise and not dot and not lane_group and tile.width == WIDE and tile.lanes == LANES:
        ring = j == 1 and s.halo is Halo.REUSE and geo.halo_rows > 0  # input rows in a ring: not evenly spaced
        tile = replace(tile, wide=_wide(tile, src, op, geo, j, bounds, stride, first, ring, one_vector=grouped))
    if depthwise and not columns and found is None and _paired(tile.vector_channels):
        # as many pixels as DEPTHWISE_ACCUMULATORS wide vectors hold: each tap's filter vectors serve twice the pixels
        most = min(DEPTHWISE_ACCUMULATORS // (groups // 2), cols)
        wide_pixels = math.ceil(cols / math.ceil(cols / most))
        wide_bounds = bounds | {"owb": (0, math.ceil(cols / wide_pixels) - 1)}
        wide_base = E.add(E.mul(E.add(geo.col_start[j], E.mul(E.Var("owb"), wide_pixels)), op.stride[1]),
                          E.Const(-op.pad[1]), E.mul(geo.col_start[j - 1], -1))
        wide_loaded = (wide_pixels - 1) * op.stride[1] + (op.kernel[1] - 1) * op.dilation[1] + 1
        wide_bounds |= {f"xc{i}": (0, geo.cols[j - 1] - 1) for i in range(wide_loaded)}
        tile = replace(tile, wide=replace(
            tile, lanes=WIDE, pixels=wide_pixels, col_base=E.to_c(E.simplify(wide_base, wide_bounds)),
            col=tuple(part(src, "w", E.Var(f"xc{i}"), wide_bounds) for i in range(wide_loaded))))
    elif found is not None and _paired(tile.vector_channels):
        # a direct tile: each pair of vectors one 16-float vector (a border tap selects a zero vector as wide), as
        # many pixels as WIDE_ACCUMULATORS hold, each tap's filter vectors loaded once for them all. MobileNetV3-small's
        # 5x5 depthwise alone (C harness, warm, AVX-512F): 7x7x576 58 us (8-float, 1 pixel) -> 50 (wide, 1) -> 34
        # (wide, 4; 5 the same); 14x14x288 stride 2: 29 -> 25 -> 18
        most = min(WIDE_ACCUMULATORS // (groups // 2), cols, DIRECT_WIDE_PIXELS)
        wide_pixels = math.ceil(cols / math.ceil(cols / most))
        wide_bounds = bounds | {"owb": (0, math.ceil(cols / wide_pixels) - 1)}
        wide_base = E.add(E.mul(E.add(geo.col_start[j], E.mul(E.Var("owb"), wide_pixels)), op.stride[1]),
                          E.Const(-op.pad[1]), E.mul(geo.col_start[j - 1], -1))
        tile = replace(tile, wide=replace(tile, lanes=WIDE, pixels=wide_pixels,
                                          col_base=E.to_c(E.simplify(wide_base, wide_bounds)),
                                          direct=replace(found, span=wide_pixels * op.stride[1])))
    return tile, ""


def _paired(vector_channels: tuple[str, ...]) -> bool:
    """Whether a channel-vector depthwise tile's group is pairs of adjacent 8-float vectors, each pair one WIDE-float
    vector: its wide variant (where the compiler targets AVX-512F) then halves the FMAs and loads, and holds as many
    pixels as its accumulators do. MobileNetV3-small in its program: features_5_block_0_to_1 (1x1 40->240, then 5x5
    depthwise on 14x14 in tiles of 6 pixels x 16 channels) 0.156 -> 0.102 ms with the wide pairs (same pixels),
    0.098 -> 0.091 with 7 pixels; the 5x5 on 7x7x576 0.090 -> 0.072 with 4 pixels, not 3 (interleaved runs of the
    two programs). A direct tile pairs them too (its border taps select a zero vector as wide)."""
    offsets = [int(c) for c in vector_channels]
    return len(offsets) % 2 == 0 and all(offsets[i + 1] - offsets[i] == LANES for i in range(0, len(offsets), 2))


def _padding_taps(cfg: Config, op, j: int, geo, s, bounds: dict) -> tuple[str, str]:
    """(Tile.live_row, Tile.input_col) of op j: set where a whole row (column) of taps can lie in the padding for
    some output, a dilated conv padded by at least its dilation reading the zero-filled input cache; "" elsewhere
    (a 3x3 padded by 1 reads the image with every tap but at the border, where no test would pay)."""
    if j != 1 or (s.halo is Halo.REUSE and geo.halo_rows > 0):  # (a ring's rows are not the input's in order)
        return "", ""
    live_row = input_col = ""
    if op.dilation[0] > 1 and min(op.pad[0], op.pad[2]) >= op.dilation[0]:
        raw = E.add(E.mul(E.Var("oh"), op.stride[0]), E.mul(E.Var("rh"), op.dilation[0]))
        row = E.to_c(E.simplify(E.add(geo.row_start[0], raw), bounds))
        live_row = f"{row} >= 0 && {row} <= {cfg.input_shape[1] - 1}"
    if op.dilation[1] > 1 and min(op.pad[1], op.pad[3]) >= op.dilation[1]:
        input_col = f"({E.to_c(E.simplify(geo.col_start[0], bounds))})"
    return live_row, input_col


def _block_stride(plan: Plan, j: int, t: Tile, channels: int, stripe: int) -> tuple[int, int]:
    """(the elements between two blocks of WIDE output channels, its input channels I) of op j's filter tensor when
    a tile may read it in place (IN_PLACE_FILTER's order: element (o, i, h, w) at (o / WIDE) * stride +
    ((h * kw + w) * I + i) * WIDE + o % WIDE), with whole blocks in the tile's kv steps and the stripe, and every
    block the stripes reach (`channels`) in the tensor; else (0, 0): the tile reads the filter cache."""
    filt = next((f for f in plan.tensors if f.name == f"filter{j}"), None)
    if filt is None or t.width != WIDE or stripe % WIDE or t.k_block % WIDE or not separable(filt.layout):
        return 0, 0
    o, i, kh, kw = filt.logical_shape
    if channels > math.ceil(o / WIDE) * WIDE:
        return 0, 0

    def at(oc: int, ic: int, h: int, w: int) -> int:
        index = {"o": E.Const(oc), "i": E.Const(ic), "h": E.Const(h), "w": E.Const(w)}
        return E.evaluate(filt.layout.flat_offset(index, {}), {})
    stride = at(WIDE, 0, 0, 0) if o > WIDE else kh * kw * i * WIDE
    # separable: an offset is its dims' parts added, so each dim is checked alone
    if not (all(at(k, 0, 0, 0) == k // WIDE * stride + k % WIDE for k in range(o))
            and all(at(0, c, 0, 0) == c * WIDE for c in range(i))
            and all(at(0, 0, h, w) == (h * kw + w) * i * WIDE for h in range(kh) for w in range(kw))):
        return 0, 0
    return stride, i


def _wide(t: Tile, src, op, geo, j: int, bounds: dict, stride: int = 0, first: str = "", ring: bool = False,
          one_vector: bool = False) -> Tile | None:
    """The dense tile `t` (filter blocks of WIDE channels) in WIDE-float vectors: two per pixel where k_block
    allows (two filter loads per 2 x 14 FMAs), else one; as many pixels as WIDE_ACCUMULATORS hold (at most the
    row's). None where the source's columns are not evenly spaced (no constant offsets between pixels). `stride`:
    the elements between two filter blocks where `t` reads its filter tensor in place (0: the filter cache), `first`
    where the tile's first block (kv = 0) lies then. Where a whole row leaves the accumulators room for more rows
    (planner.tile_speed.stacked_rows, the tile model's price) and the source rows are evenly spaced (`ring`: op 1's
    input rows in a ring are not), the tile's `over_rows` spans that many rows. `one_vector`: a grouped conv's tile,
    whose kv step is 16 channels of one group (its source channel offset, in kv, holds for one wide vector alone)."""
    step = column_step(src)
    if not step:
        return None
    vectors = 2 if t.k_block % (2 * WIDE) == 0 and not one_vector else 1
    cols = geo.cols[j]
    pixels = math.ceil(cols / math.ceil(cols / (WIDE_ACCUMULATORS // vectors)))
    limit = geo.cols[j - 1] - 1
    wide = bounds | {"owb": (0, math.ceil(cols / pixels) - 1)}
    wide |= {f"xc{i}": (0, limit) for i in range(pixels)}
    col_base = E.simplify(E.add(E.mul(E.add(geo.col_start[j], E.mul(E.Var("owb"), pixels)), op.stride[1]),
                                E.Const(-op.pad[1]), E.mul(geo.col_start[j - 1], -1)), wide)
    lo, hi = E.interval(col_base, wide)
    # the pixels some tile reads past the window with: the first ones left of it, the last ones right of it
    left = max(0, -(lo // op.stride[1]))
    right = min(pixels, max(0, pixels - ((limit - hi - (op.kernel[1] - 1) * op.dilation[1]) // op.stride[1] + 1)))
    clamped = tuple(p for p in range(pixels) if p < left or p >= pixels - right)
    wide["xw"] = (lo, hi + (op.kernel[1] - 1) * op.dilation[1])  # the taps' first columns, some left of the window
    block = op.kernel[0] * op.kernel[1] * t.reduce * WIDE  # one repacked filter block of WIDE channels
    filter_block = f"(ko_inner * {t.k_block // WIDE} + kv * {vectors}) * {block}"
    tiles, rows = math.ceil(cols / pixels), geo.rows[j]
    stacked = stacked_rows(LOAD_SLOTS, cols, rows, vectors, WIDE_ACCUMULATORS // vectors)
    row_step = _row_step(src) * op.stride[0]
    if clamped or not row_step or ring:  # a row's pixels each through its own pointer, or rows not evenly spaced
        stacked = 1
    stacked_tiles = rows // stacked + rows % stacked  # a stripe's row tiles: stacked ones, then one-row ones

    def prefetch(row: str, row_tiles: int) -> FilterPrefetch | None:
        """In place: the next block's filter lines over the block's calls, row tile `row` (C) of `row_tiles`."""
        if not stride:
            return None
        kv_steps, taps = t.k_block // (vectors * WIDE), op.kernel[0] * op.kernel[1]
        call = f"(({row} * {tiles} + owb) * {kv_steps} + kv) * {taps} + rh * {op.kernel[1]} + rw"
        return filter_prefetch(ahead=f"filter{j} + {first} + {t.k_block // WIDE * stride}", call=call,
                               calls=row_tiles * tiles * kv_steps * taps, taps=taps, blocks=t.k_block // WIDE,
                               block_stride=stride, tap_stride=t.filter_tap, line=WIDE, reduce=t.reduce)
    if stride:  # in place: each kv step `vectors` blocks
        filter_block, block = f"{first} + kv * {stride * vectors}", stride
    one_row = replace(t, lanes=WIDE, vectors=vectors, pixels=pixels, col_base=E.to_c(col_base), clamped=clamped,
                      prefetch=prefetch("oh", rows),  # oh: the stripe's
                      col=tuple(part(src, "w", E.Var(f"xc{i}"), wide) for i in range(pixels)),
                      col_at=part(src, "w", E.Var("xw"), wide), col_step=step, filter_block=filter_block,
                      filter_row=WIDE, vector_offsets=tuple(v * block for v in range(vectors)))
    if stacked == 1:
        return one_row
    # the stacked tile runs rows 0, stacked, ... (row tile oh / stacked), the one-row tile the rows left over from
    # row `first_left` on (row tile oh - first_left + first_left / stacked)
    first_left = rows - rows % stacked
    return replace(one_row, over_rows=(
        replace(one_row, rows=stacked, pixels=stacked * pixels, row_step=row_step,
                prefetch=prefetch(f"(oh / {stacked})", stacked_tiles)),
        replace(one_row, prefetch=prefetch(f"(oh - {first_left - first_left // stacked})", stacked_tiles))))


def _row_step(layout) -> int:
    """Elements between two consecutive rows of the window, where every row is that far from the one before (else
    0: no constant offset between a stacked tile's rows)."""
    height = layout.logical_shape[1]
    offsets = [E.evaluate(layout.flat_offset({"n": E.Const(0), "h": E.Const(h), "w": E.Const(0), "c": E.Const(0)},
                                             {}), {}) for h in range(height)]
    step = offsets[1] - offsets[0] if height > 1 else 0
    return step if all(b - a == step for a, b in zip(offsets, offsets[1:])) else 0


def _rows_in_place(plan: Plan, j: int, out_k: int, reduce: int, in_c: int) -> bool:
    """Whether a dot tile may read op j's filter tensor itself: its input channel i of output channel o at
    o * reduce + i (OIHW, 1x1), no zero-padded reduction channels, and whole DOT_ROWS blocks of rows (a block is
    then all in the tensor or all past it)."""
    filt = next((t for t in plan.tensors if t.name == f"filter{j}"), None)
    if filt is None or reduce != in_c or out_k % DOT_ROWS or not separable(filt.layout):
        return False

    def at(o: int, i: int) -> int:
        index = {"o": E.Const(o), "i": E.Const(i), "h": E.Const(0), "w": E.Const(0)}
        return E.evaluate(filt.layout.flat_offset(index, {}), {})
    # separable: an offset is its dims' parts added, so the rows and the columns are checked apart
    return all(at(o, 0) == o * reduce for o in range(out_k)) and all(at(0, i) == i for i in range(reduce))


def _dot_product(op, src, reduce: int, out_shape, s) -> bool:
    """Whether a dense op runs as dot products (microkernel.DOT_ROWS): a 1x1 conv whose output is one pixel, over
    input channels that are consecutive elements, whole vectors of them, in channel blocks of whole DOT_ROWS."""
    if op.kernel != (1, 1) or tuple(out_shape[1:3]) != (1, 1) or reduce % LANES or s.k_block % DOT_ROWS or s.c_block:
        return False
    bounds = {"c": (0, reduce - 1)}
    offset = src.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(0), "c": E.Var("c")}, bounds)
    return all(E.evaluate(offset, {"c": c}) == c for c in range(reduce))
