"""The c micro-kernels' tile: how one op's conv tile is blocked and where its operands are (microkernel.py emits
it, tiles.py chooses it), and the register and vector sizes it is blocked by. Pure data."""
from __future__ import annotations

from dataclasses import dataclass

from .direct import Direct
from .filter_prefetch import FilterPrefetch

LANES = 8  # floats per kg_vf: one AVX/AVX-512VL ymm register, two NEON q registers
HALF = 4  # floats per kg_vf4 (one SSE/NEON register): dense tiles of a k_block of 4, as schedule: auto may fit
ACCUMULATORS = 12  # vector accumulators of a dense tile: 12 + filter vectors + a broadcast fit x86-64's 16 ymm
# A dense tile's second variant, compiled where the C compiler targets AVX-512F (KG_VF16 in vector.h.j2): vectors
# of WIDE floats (one zmm) and up to WIDE_ACCUMULATORS of them, which with the filter vectors fill 30 of the 32 zmm
# registers (the broadcast input is the FMA's memory operand, {1to16}). Twice the floats per FMA: the 8-float
# tile cannot pass half of such a core's peak. Depthwise tiles keep 8 floats: a 16-pixel NCHW depthwise tile (the
# only one wide enough, MobileNetV2's features_1 at 112 columns) took 1.9-2.0 ms against 1.45 with 8 pixels.
WIDE = 16
WIDE_ACCUMULATORS = 28
# A dense filter in the repacked order, read in place (a 512x512x3x3 copy per call: 1.0 of 2.6 ms). Import names it.
IN_PLACE_FILTER = f"OHWI{WIDE}o"
DEPTHWISE_ACCUMULATORS = 12  # of a depthwise tile: 12 FMA chains (latency 4-5, two pipes), input and filter from memory
# A direct depthwise tile (reading the kernel's input in place) sums its channels a group of DIRECT_GROUP 8-float
# vectors at a time, one 64-byte line of each pixel, over as many pixels as fit: each tap's filter vectors then stay in
# registers for all the tile's pixels, where a group of a pixel's every channel (12 vectors of 96) took a filter load
# for every FMA, two loads an FMA; a core that loads one zmm a cycle (Zen 4) ran it at a third of its FMA peak.
# 112x112x96 on Zen 4 (`kernelgen bench`, warm): 12 vectors x 4 pixels 0.56 ms, one zmm x 8 pixels 0.41.
DIRECT_GROUP = 2
# 16-float pixels of such a tile. Fewer pixels a tile read the input sooner after its prefetch, cold (Zen 4,
# `kernelgen bench`, its epilogue in registers and its output streamed, runs of two processes): 112x112x96 at 8
# pixels 0.60-0.62 ms, 6 0.57, 4 0.47-0.58, 2 0.53-0.56; at stride 2, 8 pixels 0.55-0.61, 4 0.44-0.52, 2 0.44-0.46.
# The 8-float tile keeps 6 (12 accumulators): at 4 its cold 112x112x96 rose from 0.66 to 0.70-0.77 ms.
DIRECT_WIDE_PIXELS = 4
# While it sums output row oh, a direct depthwise tile prefetches the input row that row oh + 1 adds: the tile's own
# columns, every line of every pixel, a whole row of compute ahead. A few tiles ahead in the same row (as before)
# was too close on Zen 4: the lines came late however many tiles ahead.
LINE_FLOATS = 16  # a 64-byte cache line


@dataclass(frozen=True, slots=True, kw_only=True)
class Tile:
    """How one op's tile is blocked and where its operands are (element offsets as C expressions)."""

    depthwise: bool
    pixels: int  # output pixels per tile
    vectors: int  # kg_vf accumulators per pixel (dense); 1 for depthwise
    k_block: int  # output channels of a tile (the planner's ki loop)
    kernel: tuple[int, int]
    stride: int  # column stride (rows are the planner's)
    dilation: int
    reduce: int  # input channels summed per tap (dense); 1 for depthwise
    src: str  # the source cache pointer
    row: str  # C: the source row offset of output row oh, kernel row rh
    col_base: str  # C: the source window column of tap 0 of the tile's first pixel
    col_limit: int  # the source window's last column
    col: tuple[str, ...]  # C: the column offset of clamped column xc<i> (one per pixel or loaded column)
    channel: str  # C: the channel offset of reduction channel rc (dense) or of the tile's vector kv (depthwise)
    filter_block: str  # C: the filter cache offset of the tile's first output channel block (dense: kv's)
    filter_tap: int  # filter cache elements between two taps (rh * kw + rw)
    present: str = ""  # depthwise or grouped, C: whether block kv has source channels ("": always); else sums 0
    # depthwise over a source whose columns are unit-stride but channels are not (NCHW): vectors of LANES
    # pixels, GROUP channels at a time; `channels` their offsets (C, in kv), `inside` whether every column the
    # tile reads lies in the window (then no clamps)
    columns: bool = False
    channels: tuple[str, ...] = ()
    inside: str = ""

    lanes: int = LANES  # floats per dense accumulator: LANES (kg_vf), HALF (kg_vf4) for a k_block of 4, or WIDE
    # dense: elements between two reduction channels' filter vectors (0: `width`, the repacked block), and each
    # vector's offset from its block's first (empty: v * lanes). A wide tile reads the 8-float variant's repacked
    # filter: its blocks are 16 channels wide, and a tile of two wide vectors reads two blocks.
    filter_row: int = 0
    vector_offsets: tuple[int, ...] = ()
    # dense, wide: elements between two source columns. The tile reads pixel p at a constant offset from the
    # tap's first pixel (column xw: its offset `col_at`), but for the `clamped` pixels, which some tile reads past
    # the window with (a row's first or last tile, in columns whose sums the store drops): each of those reads
    # through its own clamped column pointer, as the 8-float tile reads every pixel. A pointer per pixel would
    # not fit x86-64's 16 general registers for 28 pixels: gcc reloads each spilled one before its FMA.
    col_step: int = 0
    col_at: str = ""
    clamped: tuple[int, ...] = ()
    # dense, k_block a multiple of WIDE: the same tile in WIDE-float vectors, emitted beside this one for
    # compilers that target AVX-512F (rewrite.py)
    wide: "Tile | None" = None
    # dense, wide: a tile of `rows` output rows, pixels / rows each, row r's source `row_step` elements on; on a
    # one-row wide tile, `over_rows` is (such a tile, the one-row tile for the rows it leaves): tiles.py, rewrite.py
    rows: int = 1
    row_step: int = 0
    over_rows: "tuple[Tile, Tile] | None" = None
    # channel-vector depthwise: the tile holds every channel of the stripe, the planner's k_split blocks of
    # k_block / k_split (its ko_inner loop moves from around the rows to around each pixel's store), so a tile
    # writes whole output pixels at once rather than a third of each pixel per pass over the stripe
    k_split: int = 1
    groups: int = 1  # channel-vector depthwise: channel vectors per pixel in accumulators at once
    vector_channels: tuple[str, ...] = ()  # ... and the channel offset of each (C, in kv: the group's first vector)
    direct: Direct | None = None
    live_vectors: int = 0  # channel-vector depthwise: the vectors summed (0: all of k_block; fewer: the op's)
    # a dense 1x1 conv on a 1x1 image (a squeeze-excite FC, a classifier): a matrix-vector product, each output
    # channel a dot product of its filter row (the filter cache as read, not repacked) with the input's channels
    dot: bool = False
    # a dot tile over a filter tensor whose rows are already its order (OIHW: each output channel's input channels
    # consecutive): C, the first filter row of block kv, read in place; "" reads the filter cache. `rows_present`:
    # C, whether block kv's rows lie in the tensor ("": always); blocks past it sum nothing (the store drops them)
    filter_rows: str = ""
    rows_present: str = ""
    # dense: where filter blocks are read: the filter cache (repacked per call), or op j's `filter<j>` in place when
    # its layout is the repacked order (IN_PLACE_FILTER; filter_block, filter_tap are then offsets in the tensor)
    filter_base: str = "filter_cache"
    prefetch: FilterPrefetch | None = None  # dense, in place: the next channel block's filter brought into L2
    # depthwise over channels no multiple of LANES: the last vector reads past the pixel's channels (never stored)
    reads_past: bool = False
    lane_group: int = 0  # groups narrower than a vector: their width (lane_groups.py; `col`: the loaded columns)
    # dense, a dilated conv padded by at least its dilation (DeepLabV3's atrous pyramid: 3x3 dilated 12 over 14x14,
    # padded 12): C, whether kernel row rh of output row oh reads an input row (`live_row`), and the input column
    # of the window's column 0 (`input_col`, with the input's width `input_cols`), from which a tap column's test
    # is made (tap_guards): a tap whose rows or the tile's columns lie in the padding multiplies zeros, skipped
    live_row: str = ""
    input_col: str = ""
    input_cols: int = 0

    @property
    def filter_in_place(self) -> bool:  # the tile reads its op's filter tensor (no filter cache copy)
        return bool(self.filter_rows) or self.filter_base != "filter_cache"

    @property
    def folded(self) -> bool:
        """Whether the tile holds the stripe's channels (see k_split)."""
        return self.depthwise and not self.columns

    @property
    def width(self) -> int:
        """Output channels one accumulator block covers (a step of the kv loop)."""
        return self.vectors * self.lanes

    @property
    def suffix(self) -> str:
        """Of the vector type and its macros: "" (kg_vf, KG_LOAD), "4" (kg_vf4, KG_LOAD4) or "16" (kg_vf16)."""
        return "" if self.lanes == LANES else str(self.lanes)

    def live_col(self) -> str:
        """C: whether tap column rw of some pixel of the tile reads an input column ("": no test)."""
        if not self.input_col or self.rows != 1:
            return ""
        first = f"{self.input_col} + xb + rw * {self.dilation}"
        return f"{first} <= {self.input_cols - 1} && {first} + {(self.pixels - 1) * self.stride} >= 0"

    def filter_at(self, v: int) -> str:
        """C: where filter vector v of reduction channel rc lies in the tap's filter (wt)."""
        offset = self.vector_offsets[v] if self.vector_offsets else v * self.lanes
        return f"wt + rc * {self.filter_row or self.width} + {offset}"
