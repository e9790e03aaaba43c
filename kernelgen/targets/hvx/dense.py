"""The register blocking of a dense uint8 conv on HVX, chosen from its shape. Pure.

A group of `pixels` output pixels of one row shares each filter vector: 4 x pixels vrmpy per 8 filter vectors, and
one kernel row of the group is one scheduled block of inline assembly (vrmpy_asm.KernelRow). The pixel count is the
one that wastes the fewest computed columns per row (a group past the row's end repeats its last pixel and stores
nothing), then the largest: 14 columns take 2 groups of 7 (8 would compute 16, 12.5% for nothing), 56 take 7 of 8.
An odd count costs one more accumulator, added after the group.

Each group's pixels read their taps at byte offsets from the source row that only depend on the group's columns,
so they are one static table (`cols`: per group, per kernel column, the pixels' offsets, padded to even)."""
from __future__ import annotations

from dataclasses import dataclass

from .vrmpy_asm import MAX_PIXELS, MIN_PIXELS, KernelRow

PREFERRED_MAX = 8  # 8 accumulators + 8 filter vectors + the compiler's own: measured spill-free up to here


@dataclass(frozen=True, slots=True, kw_only=True)
class DenseBlocking:
    pixels: int  # output pixels of one row per group
    first_group: int  # the first group's first column (col_lo rounded down to a multiple of pixels)
    groups: int  # groups per row
    row: KernelRow  # one kernel row's schedule for the group
    cols: tuple[int, ...]  # groups x kw x row.column_stride byte offsets from the source row
    vector_sums: bool  # the group's columns span under 32 source pixels: its input sums are one vector per tap

    def __post_init__(self) -> None:
        assert len(self.cols) == self.groups * self.row.taps * self.row.column_stride

    @property
    def group_cols(self) -> int:
        """int32 entries of `cols` per group."""
        return self.row.taps * self.row.column_stride

    @property
    def asm(self) -> tuple[str, ...]:
        return self.row.packets()


def choose_pixels(columns: int, forced: int | None = None) -> int:
    """The pixels per group for a row of `columns` output columns: `forced` (hvx.pixels) when the assembly takes it,
    else the fewest wasted columns, then the most pixels, in [MIN_PIXELS, PREFERRED_MAX]."""
    if forced is not None:
        return forced
    candidates = range(MIN_PIXELS, PREFERRED_MAX + 1)
    return min(candidates, key=lambda p: (-(-columns // p) * p - columns, -p))


def live_vectors(op, chunks: int) -> int:
    """Filter vectors per tap that carry input channels: conv #1 on a source of one block of at most 28 channels
    (an RGB image: 1 of 8) reads an input cache whose padding lanes hold the input's zero point (copied pixel by
    pixel), so those lanes' products are left out of the sum and their weights out of the correction (exact: a
    lane at the zero point adds (za - za)(u - zu) = 0). Later ops' sources are not known to pad so: 8."""
    if op.index == 1 and chunks == 1 and op.src_cb == 1 and op.src_c <= 28:
        return -(-op.src_c // 4)
    return 8


def first_group(col_lo: int, col_hi: int, pixels: int) -> int:
    """The first pixel group's first column: col_lo rounded down to the pixel block; col_hi where the window holds
    padding columns alone (col_hi <= col_lo), so that no group runs there: its one clamped column lay left of the
    source, and its reads before the workspace faulted (a stride-3 1x1 with pad 1 after a 1-column conv)."""
    return col_lo - col_lo % pixels if col_lo < col_hi else col_hi


def dense_blocking(op, forced: int | None = None, chunks: int = 1) -> DenseBlocking | None:
    """The blocking of a dense conv op (plan.OpGeo), or None for ops the assembly does not compute (grouped convs,
    pools, and a forced pixel count past the scalar registers it has)."""
    if op.pool or op.group_in or (forced is not None and not MIN_PIXELS <= forced <= MAX_PIXELS):
        return None
    columns = op.col_hi - op.col_lo
    pixels = choose_pixels(columns, forced)
    first = first_group(op.col_lo, op.col_hi, pixels)
    groups = -(-(op.col_hi - first) // pixels)
    row = KernelRow(pixels=pixels, taps=op.kw, blocks=op.src_cb, vectors=live_vectors(op, chunks))
    cols = []
    for g in range(groups):
        for rw in range(op.kw):
            for p in range(row.column_stride):
                c = min(max(first + g * pixels + min(p, pixels - 1), op.col_lo), op.last_col)
                iw = (c - op.col_lo) * op.sw + rw * op.dw
                cols.append((iw >> 3) * op.src_col_stride + (iw & 7) * 32)
    return DenseBlocking(pixels=pixels, first_group=first, groups=groups, row=row, cols=tuple(cols),
                         vector_sums=(pixels - 1) * op.sw < 32)
