"""The records the opencl target's planner hands to its kernel writer: device tensors, the
arithmetic of one conv2d, and one __kernel ready for the template."""
from __future__ import annotations

from dataclasses import dataclass

from ...ops import IDENTITY, Activation
from ...ops.dialect import Dialect
from ...ops.statements import Assign
from ...plan_types import OpGeometry, TextEnum
from ..gpu.dispatch import GpuTensor, TensorKind
from ..gpu.tiles import TileGrid
from .names import NAMES, KernelNames
from ...planner.packing import c_float


class InputMode(TextEnum):
    MOVING = "moving"  # base xb<p> plus the moving channel offset xc
    AT = "at"  # one address
    LANES = "lanes"  # element by element (zeros past the channels)


class GroupedMode(TextEnum):
    VECTOR = "vector"  # one vload / texel of adjacent channels
    BROADCAST = "broadcast"  # one element to every lane
    LANES = "lanes"  # lane by lane


class StoreMode(TextEnum):
    TEXEL = "texel"  # one write_imagef
    VECTOR = "vector"  # one vstore4
    LANES = "lanes"  # one store per lane, each guarded
    VECTOR_OR_LANES = "vector_or_lanes"  # a vstore4 where all 4 channels exist, lane stores otherwise


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvOp:
    """The arithmetic of one conv2d kernel, before it becomes text."""

    geo: OpGeometry  # the plan's record of this conv2d
    source: GpuTensor
    filter: GpuTensor
    dest: GpuTensor
    grid: TileGrid  # x: columns, y: rows, z: channel blocks (x images) over the work-items and work-groups
    bias: GpuTensor | None = None  # one value per output channel, zero-padded to whole channel blocks
    residual: GpuTensor | None = None  # the chain's input (or op K's output, a side input), added where the output is written

    @property
    def tiles(self) -> tuple[int, int, int]:
        """Work-items needed along (ow tiles, oh tiles, n * channel blocks)."""
        return self.grid.items

    @property
    def channel_blocks(self) -> int:
        """ceil(out channels / channels per work-item)."""
        return self.grid.axes[2].items


# ---------------------------------------------------------------- what the templates write
# Values only: index expressions come as C text from the layout engine, every statement and
# call (vload, read_image, fma, the stores) is written by templates/opencl/*.cl.j2.

@dataclass(frozen=True, slots=True)
class Types:
    """fp32 arithmetic on float or half storage, or full fp16 arithmetic (cl_khr_fp16)."""

    half_math: bool
    half_storage: bool

    @property
    def scalar(self) -> str:
        return "half" if self.half_math else "float"

    @property
    def element(self) -> str:
        """The element type of a buffer."""
        return "half" if self.half_storage else "float"

    @property
    def through_vload_half(self) -> bool:
        """half storage with fp32 math goes through vload_half/vstore_half, which need no cl_khr_fp16."""
        return self.half_storage and not self.half_math

    def vec(self, n: int) -> str:
        return self.scalar if n == 1 else f"{self.scalar}{n}"

    def zero(self, n: int) -> str:
        return f"({self.vec(n)})(0)" if self.half_math else f"({self.vec(n)})(0.0f)"

    def literal(self, value: float) -> str:
        return f"(half){c_float(value)}" if self.half_math else c_float(value)


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: TensorKind
    write: bool


@dataclass(frozen=True, slots=True)
class Address:
    """A buffer offset (one part) or an image coordinate (two parts: x, y), plus a constant.
    `parts` may be a variable holding a base address (ob0): then `plus` is the constant to add."""

    parts: tuple[str, ...]
    plus: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Position:
    """The input row (axis h) or column (w) that tile row/column i reads at this tap."""

    axis: str
    index: int
    raw: str  # C expression
    clamp_to: int | None  # clamp into [0, clamp_to] when it can fall outside (and mask)


@dataclass(frozen=True, slots=True)
class Mask:
    """Pixel p reads zeros where its row or column falls in the padding: one group of checks per axis."""

    pixel: int
    parts: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class InputLoad:
    """x<p>: 4 input channels of pixel p."""

    pixel: int
    mode: InputMode
    masked: bool
    at: Address | None = None
    lanes: tuple[str, ...] = ()  # buffer offsets of the channels that exist
    zeros: int = 0  # lanes past the last channel


@dataclass(frozen=True, slots=True)
class Step:
    """One 4-channel group: load the pixels' inputs, then per lane the filter vectors and the fmas."""

    lanes: int  # 4, or the channels of the partial last group
    moving: bool  # inside the c4 loop: addresses move with c4 (xc, fc)
    loads: tuple[InputLoad, ...]
    filter_deltas: tuple[tuple[tuple[int, ...], ...], ...]  # [lane][vector] constant added to fb (+ fc)


@dataclass(frozen=True, slots=True)
class LaneLoad:
    """One input element: a buffer element, or one RGBA lane of a texel (known here, or at run time)."""

    at: Address
    guard: str | None  # C condition that the lane's output channel exists; None: always (else 0)
    component: int | None = None  # image: the texel lane, when known here
    component_at: str | None = None  # image: C expression of the lane, when known only at run time


@dataclass(frozen=True, slots=True)
class GroupedLoad:
    """The input vector accumulator <vector> of pixel <pixel> multiplies in a grouped conv.
    mode: vector (one vload / texel of adjacent channels), broadcast (one element to every lane),
    lanes (one load per lane; None: 0, past the channels)."""

    pixel: int
    vector: int
    mode: GroupedMode
    masked: bool
    at: Address | None = None
    lane: LaneLoad | None = None  # broadcast: the element
    swizzle: str = ""  # vector from one texel: its lanes in this order (.s0011 for channel multiplier 2)
    lanes: tuple[LaneLoad | None, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupedStep:
    """The body of a grouped conv's loop over its group's input channels rc."""

    channels: int  # C / G: the trip count
    filter_moving: tuple[str, ...]  # fc parts (with rc)
    filter_deltas: tuple[tuple[int, ...], ...]  # [vector] constant added to fb + fc
    loads: tuple[GroupedLoad, ...]

    @property
    def dynamic_lanes(self) -> bool:
        return any(lane is not None and lane.component_at is not None
                   for ld in self.loads for lane in (*ld.lanes, ld.lane))


@dataclass(frozen=True, slots=True)
class LaneStore:
    value: str  # an accumulator lane: acc0_0.s1
    at: Address
    guard: str | None  # C condition; None: always


@dataclass(frozen=True, slots=True)
class GroupStore:
    """4 output channels of one pixel."""

    mode: StoreMode
    value: str  # the 4-lane accumulator (part): acc0_0, acc0_0.s4567
    at: Address | None
    guard: str | None = None  # texel / vector: C condition; None: always
    lanes: tuple[LaneStore, ...] = ()
    tail: tuple[str, ...] = ()  # texel of a partial group: its lanes then pad values
    tail_when: str | None = None  # texel: "full" condition choosing value over tail; None: tail always


@dataclass(frozen=True, slots=True)
class PixelStore:
    pixel: int
    inside: str | None  # C condition that the pixel lies on the output; None: always
    base: tuple[str, ...] | None  # ob<p>: the address of the block's first channel, when channels add constants
    groups: tuple[GroupStore, ...]
    # residual: input: per accumulator, the input at this pixel as buffer lanes (an Address, or None past the
    # channels: 0) or image texels (one Address per 4 lanes)
    residual: tuple[tuple[Address | None, ...], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvBody:
    types: Types
    width: int  # lanes of one accumulator and of one filter load
    vectors: int  # accumulators per pixel
    pixels: int  # output pixels per work-item
    early: tuple[tuple[str, int], ...]  # (global id, extent) checks for a global size rounded up
    batch: bool  # nk holds the image index n
    channel_blocks: int  # nk holds the channel block ko (when > 1)
    taps: tuple[int, int]
    groups: int  # full 4-channel groups: the trip count of the c4 loop
    positions: tuple[Position, ...]
    masks: tuple[Mask, ...]
    input_bases: tuple[tuple[int, tuple[str, ...]], ...]  # (pixel, xb<p> parts) for moving loads
    input_moving: tuple[str, ...]  # xc parts
    filter_base: tuple[str, ...]  # fb parts
    filter_moving: tuple[str, ...]  # fc parts
    source: str
    source_kind: str
    filter: str
    filter_kind: str
    dest: str
    step: Step | None  # the c4 loop body
    tail: Step | None  # the partial last group
    stores: tuple[PixelStore, ...]
    # The epilogue on the accumulators before they are stored: the plan's statements (+ bias vector v, its offset
    # into the bias buffer C text; + the residual; the activation's), spelled by `dialect` in the kernel's type.
    bias: str | None = None
    bias_offsets: tuple[str, ...] = ()
    residual: str | None = None  # the storage read for residual: input
    residual_kind: str = ""  # image | buffer
    act: Activation = IDENTITY  # then the activation (kernelgen/ops), spelled by `dialect` in the kernel's type
    dialect: Dialect | None = None
    statements: tuple[Assign, ...] = ()
    grouped: GroupedStep | None = None  # a grouped or depthwise conv's reduction (then no step or tail)

    @property
    def tail_channel(self) -> int:
        return 4 * self.groups

    @property
    def names(self) -> KernelNames:
        """The variables the kernel declares (names.py): one spelling for the Python and the template."""
        return NAMES


@dataclass(frozen=True, slots=True, kw_only=True)
class PadBody:
    """Walk the logical domain grown to whole blocks; store pad_value past the tensor's extents."""

    types: Types
    total: int
    decode: tuple[tuple[str, int, int], ...]  # (dim, stride, extent) of the flat work-item index
    outside: str  # C condition
    offset: str  # C expression
    value: str  # pad_value literal
    dest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolOp:
    """A pooling op of the chain: its own kernel between two buffers."""

    geo: OpGeometry
    source: GpuTensor
    dest: GpuTensor
    scale: GpuTensor | None = None  # mul: the side input [n, 1, 1, c] each channel is multiplied by
    residual: None = None  # (a pool adds nothing)


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolBody:
    """One output element per work-item: the window of its channel, then the max or the mean."""

    types: Types
    total: int
    decode: tuple[tuple[str, int, int], ...]  # (dim, stride, extent) of the flat work-item index
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int]  # top, left
    extent: tuple[int, int]  # the input's rows and columns
    init: str  # the accumulator's first value, and the step that folds each x into it (the kind's, in OpenCL C)
    step: str
    divisor: str  # a mean's: a float literal (count_include_pad) or "(float)count" (the inside positions); "": none
    source: str
    source_offset: str  # C expression in n, ih, iw, c
    dest: str
    dest_offset: str  # C expression in n, oh, ow, c
    scale: str | None = None  # mul: the side input multiplied in (1x1 window, no division)
    channels: int = 0  # with pad_value: the real channels; work-items past them store pad_value (channel padding)
    pad_value: str = ""
    scale_offset: str = ""  # C expression in n, c


@dataclass(frozen=True, slots=True, kw_only=True)
class Kernel:
    """One __kernel: its launch and what its body computes."""

    name: str
    doc: str
    params: tuple[Param, ...]
    element: str  # buffer element type
    args: tuple[str, ...]  # storage names, in parameter order
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    body: ConvBody | PadBody | PoolBody

    def __post_init__(self) -> None:
        assert all(g % l == 0 for g, l in zip(self.global_size, self.local_size)), (self.name, self.global_size)

    @property
    def work_group_3d(self) -> tuple[int, int, int]:
        """The local size as reqd_work_group_size wants it: always three numbers."""
        return (*self.local_size, *(1,) * (3 - len(self.local_size)))  # type: ignore[return-value]

    @property
    def is_conv(self) -> bool:
        return isinstance(self.body, ConvBody)

    @property
    def is_pool(self) -> bool:
        return isinstance(self.body, PoolBody)

    @property
    def dynamic_lanes(self) -> bool:
        """Reads texel lanes chosen at run time (kg_lane)."""
        return self.is_conv and self.body.grouped is not None and self.body.grouped.dynamic_lanes
