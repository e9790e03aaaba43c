"""What plan.py's _plan_op tiles one conv with, as two records instead of 19 parameters: the tiling of the conv (the
workgroup and the device profile's choices every conv of the plan shares; the tile the config gives, or this conv's
own default) and the one conv's buffers."""
from __future__ import annotations

from dataclasses import dataclass

from ...layout import TensorLayout


@dataclass(frozen=True, slots=True, kw_only=True)
class Tiling:
    """The same for every conv of a plan, but a default tile on a tile_per_op profile: each conv its own."""

    ivc: tuple[int, int, int] | None  # the invocation tile [oh, ow, oc]; None: each conv its profile default
    wg: tuple[int, int, int]  # the workgroup size
    lanes: int  # vec4 chunks an invocation stores at once: 2 with wide_store
    scalar: str  # the element type: float, float16_t
    default_tile: bool = False  # the profile's tile (shrunk to the body limit), not one the config gave
    unroll_rows: bool = True  # the profile's choices (defaults.py)
    words64: bool = True
    scalar_texels: bool = False
    trip_body: int = 0
    trip_cap: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvBuffers:
    """One conv's source, filter and destination: their layouts and buffer numbers (VulkanPlan.buffers)."""

    x: TensorLayout
    f: TensorLayout
    y: TensorLayout
    src: int
    filter: int
    dst: int
    res: TensorLayout | None = None  # the residual the epilogue adds, if any
