"""A device's compute and bandwidth roofs: what the importer's fusion estimate (onnx/fusion.py) divides by."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Roofs:
    flops_per_second: float  # float32 arithmetic
    bytes_per_second: float  # to and from main memory
    source: str  # where the numbers come from
    int8_ops_per_second: float | None = None  # uint8 x int8 multiply-adds, 2 ops each (None: as float)
    # how fast its micro-kernel runs each tile shape (None: every schedule at the one roof)
    tile_speed: TileSpeed | None = None

    def ops_per_second(self, dtype: str) -> float:
        return self.int8_ops_per_second if dtype == "uint8" and self.int8_ops_per_second else self.flops_per_second


@dataclass(frozen=True, slots=True, kw_only=True)
class TileSpeed:
    """How fast a target's dense conv micro-kernel runs a tile, for the budget search (planner/tile_speed.py): a
    tile is up to `accumulators` vector accumulators, pixels x vectors, `wide_vectors` vectors per pixel when the
    channel block holds that many whole vectors; each reduction step loads one filter vector per vector and
    broadcasts one input value per pixel, and every load takes `load_slots` FMA issue slots from the tile; each stripe
    row costs as much again as `row_pixels` pixels of it. A second variant of the tile in vectors of `double_lanes`
    floats (up to `double_accumulators` of them), where the same source compiles for wider vectors, runs on the hosts
    that have them: a schedule is priced on both kinds of host (planner/tile_speed.op_slots)."""

    lanes: int  # floats per vector
    half_lanes: int  # floats per half vector (a channel block of that many runs on them)
    accumulators: int
    wide_vectors: int
    load_slots: float
    # what each row of a stripe costs besides its tiles (setting up the row, its stores), in pixels' worth of tiles
    row_pixels: float
    # what a kernel costs besides its stripes (the call, its first cache fills): what cutting a chain adds
    call_seconds: float = 0.0
    # what a byte costs on top of its traffic, in FLOPs at the FMA peak, where it crosses a layout change between a
    # tensor and its cache (an NCHW tensor's channel planes into channels-innermost caches, and back): the
    # target's transposes move it slower than a copy (the budget search's, planner/tile_speed.transpose_flops)
    transpose_flops_per_byte: float = 0.0
    double_lanes: int = 0  # floats per vector of the second variant (0: none), a channel block of whole ones
    double_accumulators: int = 0
    # the filter layout (by name) whose blocks of `double_lanes` output channels the dense tiles read in place where a
    # schedule's channel stripes lie in whole blocks of the tensor; elsewhere each stripe copies its filter block into
    # the filter cache, at `filter_copy_flops` FLOPs at the FMA peak an element ("": every schedule alike)
    in_place_filter: str = ""
    filter_copy_flops: float = 0.0
    source: str  # the measurement the numbers come from
