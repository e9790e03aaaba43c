"""Where a direct depthwise tile (microkernel.py) finds each tap's input pixel in the kernel's input. Pure."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Direct:
    """A depthwise tile reading the kernel's input itself: where each tap's input pixel lies (C expressions)."""

    row: str  # the input row of output row oh, kernel row rh
    col: str  # the input column of window column 0
    rows: int  # the input's rows and columns: taps outside read zeros (the conv padding)
    cols: int
    row_offset: str  # the element offset of input row `ih` (and of the batch)
    col_offset: str  # the element offset of input column `iw`
    # kernel rows whose input row the output row before did not read: those of the next output row are prefetched,
    # the tile's `span` input columns, `lines` cache lines each (see tile.DIRECT_GROUP)
    fresh_rows: tuple[int, ...] = ()
    span: int = 0
    lines: int = 0
    channel: str = "0"  # the element offset of the tile's first channel
    col_step: int = 0  # elements between two input columns, where that is one number (NHWC: the channels); else 0
