"""What the target's micro-kernel makes of a schedule: each op's executed FLOPs weighted by the speed of the tiles
its stripe width and channel block give, as FLOPs at the FMA peak (the budget search's compute side, search.py,
and the importer's group estimate). Pure.

A dense conv tile is `pixels` output pixels of a row x `vectors` vectors of the channel block (roofs.TileSpeed); each
reduction step loads `vectors` filter vectors and broadcasts one input value per pixel into pixels x vectors FMAs, and
each load costs `load_slots` FMA slots: 12 x 1 (k_block 8) makes 13 loads per 12 FMAs, 6 x 2 (k_block 16, 32) 8; a
narrow stripe's row of pixels gives short tiles (8 columns: 4 x 2, 0.75 loads per FMA), and each row costs
`row_pixels` pixels' worth of tiles on top (its set-up and stores), a larger share of a short row. A stripe row of
`cols` pixels takes ceil(cols / most) tiles of equal width, and every stripe its whole window of rows and tiles, the
last stripes' rows and columns past the tensor's edge included (computed, then dropped by the store), which the
executed FLOPs (clipped at the edges) do not count: they are charged as computed. A channel block that is not whole
vectors runs on half vectors (or the planner's plain loops), slower by the width it leaves idle. A depthwise tap loads
two operands per FMA (the input, the filter), a pool's tap one (the running max or sum stays in a register).

Where the target's source also carries a dense tile of wider vectors (TileSpeed.double_lanes: the c target's 16-float
tile, compiled where the compiler targets AVX-512F), one schedule runs the narrow tile on some hosts and the wide one
on others, and the choice must not depend on the host (the same config gives the same bytes everywhere): a schedule
is priced as the mean over the two kinds of host, each op's FMA slots counted against that host's own peak
(op_slots). The wide host runs a channel block of whole wide vectors on the wide tile (two a pixel where the block
holds two) and anything else on the narrow tile at the narrow vectors' share of its peak. MobileNetV2's
features_17_conv_2_to_18 (1x1 960->320, 1x1 320->1280 on 7x7) on the AVX-512 host: k_block 8 (7 x 1 narrow tiles, the
narrow tile's price alone chose it) 1.25 ms, k_block 32 (7 x 2 wide tiles) 0.57 ms."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import Config
from ..roofs import TileSpeed
from ..plan_types import LoopOrder, StripeGeometry, Stripes
from .geometry import cache_window, reduction_channels
from .work import Work

DEPTHWISE_LOADS_PER_FMA = 2  # an input and a filter value
POOL_LOADS_PER_OP = 1  # the input value


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTiles:
    """One op's tiles under a schedule, and the FMA slots each of its FMAs takes."""

    dense: bool
    pixels: int  # per tile (dense), else 0
    vectors: int
    cols: int  # output pixels of a stripe row
    tiles: int  # per stripe row
    width: int  # floats of a vector the channel block fills (the target's lanes when whole vectors)
    slots: float  # per FMA computed
    other_loads: int = 0  # not dense: loads per FMA (or per max or add of a pool)
    rows: int = 1  # dense: output rows one tile spans (stacked_rows), each `pixels` wide

    @property
    def loads_per_fma(self) -> float:
        held = self.pixels * self.rows
        return (held + self.vectors) / (held * self.vectors) if self.dense else self.other_loads

    def text(self) -> str:
        if not self.dense:
            return f"{self.loads_per_fma:g} loads per FMA"
        tail = self.tiles * self.pixels - self.cols
        rows = f" over {self.rows} rows" if self.rows > 1 else ""
        return (f"{self.tiles} tile(s) of {self.pixels} pixels{rows} x {self.vectors} vector(s) a row of {self.cols}"
                f"{f' ({tail} idle)' if tail else ''}, {self.loads_per_fma:.2f} loads per FMA")


def stacked_rows(load_slots: float, cols: int, rows: int, vectors: int, most: int) -> int:
    """How many output rows one dense tile of `vectors` vectors spans where a whole row of `cols` pixels leaves its
    `most` accumulators room for more: the count (1 to most // cols) whose tiles take the fewest load slots over a
    stripe's `rows` rows, the rows a count leaves over (rows % count) on one-row tiles. Each filter vector loaded then
    serves the pixels of several rows: ResNet18's 7x7x512 3x3 convs (7-pixel rows, 2 wide vectors) reloaded their
    590 KB filter block from L2 for every row. Over two rows (14 pixels; `kernelgen bench`, interleaved with the
    one-row tiles, loaded 2-core AVX-512 host) layer4_0_conv2 went from 0.72-0.85 to 0.85-0.89 of the FMA probe warm,
    layer4_1_conv2_to_fc 0.73-0.81 to 0.85-0.86; in the network program layer4 from 29.0% to 26.8% of the time."""
    if cols * 2 > most or rows < 2:
        return 1

    def slots(count: int) -> float:  # per computed pixel
        def per_fma(pixels: int) -> float:
            return 1 + load_slots * (pixels + vectors) / (pixels * vectors)
        stacked = rows - rows % count
        return (stacked * per_fma(count * cols) + rows % count * per_fma(cols)) / rows
    return min(range(1, min(most // cols, rows) + 1), key=lambda count: (slots(count), count))


def op_tiles(speed: TileSpeed, config: Config, j: int, cols: int) -> OpTiles:
    """Op j's (1-based) tiles over stripe rows of `cols` output pixels."""
    op, k_block = config.ops[j - 1], config.schedule.k_block
    width = (speed.lanes if k_block % speed.lanes == 0 else speed.half_lanes if k_block % speed.half_lanes == 0
             else min(k_block, speed.half_lanes))
    narrow = speed.lanes / width
    if op.kind != "conv2d" or op.groups != 1 or config.dtype != "float32":
        loads = DEPTHWISE_LOADS_PER_FMA if op.kind == "conv2d" else POOL_LOADS_PER_OP
        return OpTiles(dense=False, pixels=0, vectors=0, cols=cols, tiles=0, width=width,
                       slots=(1 + speed.load_slots * loads) * narrow, other_loads=loads)
    vectors = speed.wide_vectors if k_block % (speed.wide_vectors * speed.lanes) == 0 else 1
    tiles = math.ceil(cols / (speed.accumulators // vectors))
    pixels = math.ceil(cols / tiles)
    loads = (pixels + vectors) / (pixels * vectors)
    slots = (1 + speed.load_slots * loads) * (1 + speed.row_pixels / cols) * narrow
    return OpTiles(dense=True, pixels=pixels, vectors=vectors, cols=cols, tiles=tiles, width=width, slots=slots)


def double_tiles(speed: TileSpeed, config: Config, j: int, cols: int, rows: int = 1) -> OpTiles | None:
    """Op j's (1-based) tiles in the wider vectors (TileSpeed.double_lanes) over stripe rows of `cols` output pixels
    (`rows` of them a stripe: a tile may span several, stacked_rows), on a host that has them; None where op j keeps
    the narrow tile there (not dense, or a channel block that is not whole wide vectors)."""
    op, k_block, lanes = config.ops[j - 1], config.schedule.k_block, speed.double_lanes
    if not lanes or k_block % lanes or op.kind != "conv2d" or op.groups != 1 or config.dtype != "float32":
        return None
    vectors = speed.wide_vectors if k_block % (speed.wide_vectors * lanes) == 0 else 1
    most = speed.double_accumulators // vectors
    tiles = math.ceil(cols / most)
    pixels = math.ceil(cols / tiles)
    stacked = stacked_rows(speed.load_slots, cols, rows, vectors, most)
    left = rows % stacked  # rows on one-row tiles

    def loads(held: int) -> float:
        return (held + vectors) / (held * vectors)
    per_fma = ((rows - left) * loads(pixels * stacked) + left * loads(pixels)) / rows if stacked > 1 else loads(pixels)
    slots = (1 + speed.load_slots * per_fma) * (1 + speed.row_pixels / cols)
    return OpTiles(dense=True, pixels=pixels, vectors=vectors, cols=cols, tiles=tiles, width=lanes, slots=slots,
                   rows=stacked)


def tiles_text(speed: TileSpeed, config: Config, j: int, cols: int, rows: int = 1) -> str:
    """Op j's tiles for the plan's `why:` line: the narrow ones, and the wide ones where a host with them runs those."""
    narrow, wide = op_tiles(speed, config, j, cols), double_tiles(speed, config, j, cols, rows)
    return narrow.text() + (f" ({wide.width}-float vectors: {wide.text()})" if wide is not None else "")


def op_slots(speed: TileSpeed, config: Config, geo: StripeGeometry, cut: Stripes, work: Work, j: int) -> float:
    """The FMA slots at its host's peak op j's (1-based) tiles take per executed FLOP: on the narrow tile, or (a
    target with wider vectors too) the mean of the host without them and the host with them, where a narrow tile
    fills a part of each FMA (a dense one; a depthwise tap or pool loads as many values either way)."""
    narrow = op_tiles(speed, config, j, geo.cols[j])
    own = computed_share(speed, config, geo, cut, work, j, narrow) * narrow.slots
    if not speed.double_lanes:
        return own
    # a 1x1 conv on one pixel (a squeeze-excite FC, a classifier) runs as dot products of narrow vectors on every host
    # (the c target's dot tile): at k_block 32 MobileNetV3-small's SE FCs took 0.034 ms against 0.013 at 16
    dot = config.ops[j - 1].kernel == (1, 1) and tuple(geo.shapes[j][1:3]) == (1, 1)
    wide = None if dot else double_tiles(speed, config, j, geo.cols[j], geo.rows[j])
    on_wide = (computed_share(speed, config, geo, cut, work, j, wide) * wide.slots if wide is not None
               else own * speed.double_lanes / speed.lanes if narrow.dense else own)
    return (own + on_wide) / 2


def peak_flops(speed: TileSpeed, config: Config, geo: StripeGeometry, cut: Stripes, work: Work) -> int:
    """The FLOPs the FMA units could have run at their peak in the time the schedule's tiles take (and the filter
    copies a schedule makes of a filter its tiles could read in place)."""
    return round(sum(flops * op_slots(speed, config, geo, cut, work, j)
                     for j, flops in enumerate(work.op_flops, start=1))
                 + speed.filter_copy_flops * sum(copied_filter(speed, config, geo, cut, j)
                                                 for j in range(1, len(config.ops) + 1)))


def copied_filter(speed: TileSpeed, config: Config, geo: StripeGeometry, cut: Stripes, j: int) -> int:
    """The filter elements op j's (1-based) stripes copy into the filter cache where its filter is in the layout the
    tiles read in place (TileSpeed.in_place_filter) but the schedule's channel blocks are not whole blocks of it:
    144 channels in blocks of 32 reach channel 159, past the tensor's 9 blocks of 16 (targets/c/tiles.py's
    _block_stride); 0 where the tiles read it in place, or where no schedule would."""
    op, s, lanes = config.ops[j - 1], config.schedule, speed.double_lanes
    layout = op.filter_layout
    if (not speed.in_place_filter or layout is None or layout.name != speed.in_place_filter or op.kind != "conv2d"
            or op.groups != 1 or config.dtype != "float32" or s.c_block):
        return 0
    out_k = geo.shapes[j][3]
    produced = out_k if j == len(config.ops) else max(out_k, reduction_channels(config, list(geo.shapes))[j])
    blocks = math.ceil(produced / cut.channels)
    whole = blocks * cut.channels <= math.ceil(out_k / lanes) * lanes  # no block past the tensor's
    if s.k_block % lanes == 0 and cut.channels % lanes == 0 and whole:
        return 0
    reruns = 1 if s.order is LoopOrder.ROWS_OUTER or j == len(config.ops) else cut.ko_extent
    per_channel = op.kernel[0] * op.kernel[1] * reduction_channels(config, list(geo.shapes))[j - 1]
    return cut.ho_extent * cut.wo_extent * reruns * blocks * cut.channels * per_channel


def transpose_flops(speed: TileSpeed, config: Config, geo: StripeGeometry, work: Work) -> int:
    """What the schedule's transposed traffic (transposed_bytes) costs beyond a plain copy, in FLOPs at the peak.
    The budget search weighs it (a channel stripe more re-reads an NCHW input through the transposes); the
    importer's group costs do not: its candidates are NCHW, but the tensors between two kernels end up NHWC
    (onnx/layouts.py), so a cut there transposes nothing (priced, it fused MobileNetV3-small's features_9 worse)."""
    return round(speed.transpose_flops_per_byte * transposed_bytes(config, geo, work))


def transposed_bytes(config: Config, geo: StripeGeometry, work: Work) -> int:
    """The input and output traffic whose tensor's layout is not its cache's (geometry.cache_window: an NCHW tensor
    and channels-innermost caches): the input cache read and the output's write-back transpose it."""
    ends = ((config.input_layout, geo.shapes[0], work.traffic.input_bytes),
            (config.ops[-1].output_layout, geo.shapes[-1], work.traffic.output_bytes))
    return sum(moved for layout, shape, moved in ends if cache_window(config, layout, tuple(shape)).layout != layout)


def computed_share(speed: TileSpeed, config: Config, geo: StripeGeometry, cut: Stripes, work: Work, j: int,
                   tiles: OpTiles | None = None) -> float:
    """Op j's outputs its tiles (`tiles`, else the narrow ones) compute (pixels x channels) over those its executed
    FLOPs count (1: not a dense tile)."""
    t = tiles or op_tiles(speed, config, j, geo.cols[j])
    if not t.dense or not work.op_pixels[j - 1]:
        return 1.0
    rows = cut.ho_extent * geo.rows[j]
    if j == len(config.ops):
        # the last op skips the rows its last row stripe has past the output (the loop nest's guard): 28 rows in
        # stripes of 16 compute 28, not 32 (priced 32, ResNet18's 28x28 layer2 convs cost 22% past their pixels
        # where the tiles compute 7%, and the importer fused them into pairs that ran slower than one by one)
        rows = min(rows, geo.shapes[j][1])
    computed = rows * cut.wo_extent * t.tiles * t.pixels * geo.shapes[0][0]
    # a tile computes whole channel blocks: 8 channels in a k_block of 32 compute 32 (the store drops 24)
    channels, k_block = config.ops[j - 1].out_channels, config.schedule.k_block
    return computed / work.op_pixels[j - 1] * math.ceil(channels / k_block) * k_block / channels
