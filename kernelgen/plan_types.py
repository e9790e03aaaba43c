"""The planner's result: frozen types every later stage reads and none may change.

A `Plan` holds the tensors (logical and physical), the caches carved out of one workspace,
the functions to emit (the fused kernel and its pack/unpack helpers) as loop trees whose
statements are C-family source text, and the work and traffic the schedule implies.
Templates iterate over this; they never compute a size.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Union

from .expr import Expr, evaluate
from .layout import PadKind, TensorLayout
from .ops import IDENTITY, Activation, Clamp
from .ops.statements import BIAS, RESIDUAL, Assign

Shape = tuple[int, int, int, int]  # logical NHWC


class TextEnum(str, enum.Enum):
    """An enumeration whose members are also their text: templates print, reports and JSON show, and code
    compares them as the strings they were (str() gives the value on every Python this supports)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Pipeline(TextEnum):
    NONE = "none"  # load, compute, store one stripe after another
    DOUBLE_BUFFER = "double_buffer"  # seed 001's: stripe s + 1 loads and s - 1 stores while s computes


class LoopOrder(TextEnum):
    """Which stripe loop is outermost for a chain (the loop nest the plan writes and every count follows)."""

    CHANNELS_OUTER = "channels_outer"  # seed 000's: ko_outer outside ho_outer; earlier ops rerun per channel stripe
    ROWS_OUTER = "rows_outer"  # ho_outer outside; the last op's channel blocks loop inside each row stripe


class Halo(TextEnum):
    RELOAD = "reload"  # every stripe loads its whole input window
    REUSE = "reuse"  # the rows two stripes share stay in a ring


class PadHandling(TextEnum):
    """How a loop treats positions outside a tensor (seed 003)."""

    OVERCOMPUTE = "overcompute"  # read known padding (zeros or pad_value against zero filter channels)
    BRANCH = "branch"  # test the bound
    FILL = "fill"  # write known values while filling a cache
    UNTOUCHED = "untouched"


class Scope(enum.Enum):
    GLOBAL = "global"  # caller-provided tensors in main memory
    CACHE = "cache"  # carved from the workspace (VTCM on Hexagon)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tensor:
    name: str  # C parameter name: input, filter1, output
    title: str  # report name: Input, Filter 1, Temp Output, Output
    logical_layout: str  # NHWC or OIHW
    layout: TensorLayout

    @property
    def logical_shape(self) -> tuple[int, ...]:
        return self.layout.logical_shape

    @property
    def physical_shape(self) -> tuple[int, ...]:
        return self.layout.physical_shape

    @property
    def physical_layout(self) -> str:
        return self.layout.layout.name

    @property
    def elements(self) -> int:
        return self.layout.size


@dataclass(frozen=True, slots=True, kw_only=True)
class Cache:
    name: str  # input, filter, temp_output, output (temp_output_1.. for longer chains)
    c_name: str  # the pointer in the kernel: input_cache
    logical_shape: tuple[int, ...]  # what one stripe needs, in its tensor's logical layout
    physical_layout: str
    physical_shape: tuple[int, ...]
    elements: int
    offset: int  # elements from the workspace start (aligned)
    element_bytes: int
    aliases: str | None = None  # name of the cache whose storage this one reuses
    note: str = ""

    def __post_init__(self) -> None:
        assert self.offset >= 0 and self.elements > 0

    @property
    def bytes(self) -> int:
        return self.elements * self.element_bytes


# ---------------------------------------------------------------- loop trees

@dataclass(frozen=True, slots=True, kw_only=True)
class Loop:
    var: str
    extent: int
    body: tuple["Node", ...]
    comment: str = ""

    def __post_init__(self) -> None:
        assert self.extent >= 1, (self.var, self.extent)


@dataclass(frozen=True, slots=True, kw_only=True)
class Guard:
    cond: str  # C expression; the body runs only where it holds (halo and tail guards)
    body: tuple["Node", ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    label: str  # a C scope of its own: the stripe coordinates and cache pointers one pipeline step uses
    body: tuple["Node", ...]


class Phase(enum.Enum):
    """Which step of a stripe a section is: what a target that replaces section bodies (hvx) looks for."""

    INPUT_READ = "input cache read"  # the whole window
    INPUT_READ_KEPT = "input cache read, kept rows"  # halo reuse: the rows the next stripe keeps (first stripe)
    INPUT_READ_NEW = "input cache read, new rows"  # halo reuse: the rows the ring does not hold yet
    FILTER_READ = "filter cache read"
    CONV = "conv2d"
    WRITE_BACK = "write back output cache"


@dataclass(frozen=True, slots=True)
class Step:
    phase: Phase
    op: int = 0  # 1-based op of a FILTER_READ or CONV step


@dataclass(frozen=True, slots=True, kw_only=True)
class Section:
    label: str  # "input cache read", "conv2d #1": printed as a comment before the body
    body: tuple["Node", ...]
    step: Step | None = None  # the stripe step it is (None: pipeline prologues, padding fills, epilogues)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stmt:
    code: str  # one C statement, with its semicolon ("" when `assign` holds it)
    summary: str  # what the report prints: input_cache[...] = input[...]
    # an epilogue's step as its record (kernelgen/ops/statements), which the templates spell in their dialect
    assign: Assign | None = None
    loads: tuple[tuple[str, str], ...] = ()  # (load leaf, its C read) for `assign`: ("bias", "bias1[k]")

    @property
    def text(self) -> str:
        """All the C text it holds (a rewrite that looks for a name or a test looks here)."""
        return " ".join((self.code, *(read for _, read in self.loads)))


Node = Union[Loop, Guard, Block, Section, Stmt]


@dataclass(frozen=True, slots=True, kw_only=True)
class Param:
    name: str
    ctype: str  # const float *restrict


@dataclass(frozen=True, slots=True, kw_only=True)
class Function:
    name: str
    doc: str
    params: tuple[Param, ...]
    prologue: tuple[str, ...]  # declarations before the loops (cache pointers)
    body: tuple[Node, ...]
    traces: int = 0  # intermediates its KG_TRACE statements store in a validation build (chains: ops - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class StripeParts:
    """One stripe's three phases before they are put in loops (plain or pipelined): targets that
    replace section bodies rewrite these and compose them with planner.compose_stripes."""

    load: tuple["Node", ...]
    compute: tuple["Node", ...]
    store: tuple["Node", ...]
    ko_extent: int
    ho_extent: int
    wo_extent: int
    batch: int
    channels: int  # output channels per stripe
    rows: int  # output rows per stripe
    cols: int  # output columns per stripe
    pipeline: Pipeline
    ctype: str  # element type of the cache pointers
    chunks: int = 1  # input-channel chunks (schedule.c_split): load and compute run once per chunk
    # rows_outer: the stripes are rows x columns; compute holds the last op's channel loop (ko_outer) with its
    # write-back, and store is empty
    order: LoopOrder = LoopOrder.CHANNELS_OUTER

    @property
    def count(self) -> int:
        """Stripes the loops (or the pipeline) walk: a channel stripe is one only under channels_outer."""
        channels = self.ko_extent if self.order is LoopOrder.CHANNELS_OUTER else 1
        return self.batch * channels * self.ho_extent * self.wo_extent


@dataclass(frozen=True, slots=True, kw_only=True)
class Epilogue:
    """What the store of a conv does to its sum, in this order (ResNet's and MobileNetV2's): + bias<op> (one
    value per output channel), + the residual, then the activation (a record of kernelgen/ops). Every target
    renders its store from `statements`, the whole epilogue as statement records, through one shared macro."""

    bias: bool = False
    # 0: + the chain's input at the same position; K: + op K's output (1-based); a name: + that side input
    residual: int | str | None = None
    act: Activation = IDENTITY
    activation: str = "none"  # as the config spells it, for reports: relu, relu6, clamp[lo, hi], hardswish

    def __bool__(self) -> bool:
        return self.bias or self.residual is not None or self.activated

    @property
    def activated(self) -> bool:
        return bool(self.act.statements())

    @property
    def sums(self) -> tuple[Assign, ...]:
        """The adds onto the conv's sum, each of a load the target spells: + bias, then + the residual."""
        return ((BIAS,) if self.bias else ()) + ((RESIDUAL,) if self.residual is not None else ())

    @property
    def statements(self) -> tuple[Assign, ...]:
        """The whole epilogue as statement records, in the order every target computes it (the float reference's
        order too): the sums, then the activation's."""
        return self.sums + self.act.statements()

    @property
    def clamp(self) -> tuple[float, float] | None:
        """A clamp activation's bounds (relu: (0, inf)); None for any other."""
        return self.act.bounds if isinstance(self.act, Clamp) else None

    @property
    def steps(self) -> tuple[str, ...]:
        """Its steps in order, for reports: ("bias", "residual", "relu6")."""
        return (("bias",) if self.bias else ()) + (("residual",) if self.residual is not None else ()) + (
            (self.activation,) if self.activated else ())

    @property
    def residual_name(self) -> str | None:
        """What the residual adds, as the plan's tensors name it: input, or temp<K> (op K's output)."""
        if isinstance(self.residual, str):
            return f"side_{self.residual}"  # config.SideInput.param
        return None if self.residual is None else "input" if self.residual == 0 else f"temp{self.residual}"

    @property
    def residual_op(self) -> int | None:
        """K when the residual is op K's output (an intermediate of the chain); None otherwise."""
        return self.residual if isinstance(self.residual, int) and self.residual > 0 else None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpGeometry:
    """One conv2d of the chain, as every target reads it: the one op record past the config."""

    index: int  # 1-based, as in "conv2d #1"
    in_shape: tuple[int, int, int, int]  # logical NHWC
    out_shape: tuple[int, int, int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: tuple[int, int]
    flops: int  # 2 * multiply-adds
    groups: int = 1  # channels split into independent convs; in_channels == groups: depthwise
    epilogue: Epilogue = Epilogue()
    kind: str = "conv2d"  # or maxpool, avgpool: channel k's window of the input, no filter
    count_include_pad: bool = False  # avgpool: divide by the whole window, else by its positions in the input
    scale_by: str | None = None  # mul: the side input each channel is multiplied by (its kernel argument: side_<name>)

    def __post_init__(self) -> None:
        assert min(self.in_shape + self.out_shape + self.kernel + self.stride + self.dilation) >= 1, self
        assert min(self.pad) >= 0, self

    @property
    def pool(self) -> bool:
        return self.kind != "conv2d"

    @property
    def label(self) -> str:
        """How reports and comments name it: conv2d #2, maxpool #2."""
        return f"{self.kind} #{self.index}"

    @property
    def in_channels(self) -> int:
        return self.in_shape[3]

    @property
    def depthwise(self) -> bool:
        """One filter per channel: a handful of multiply-adds per byte moved, so memory bound."""
        return self.kind == "conv2d" and self.groups > 1 and self.groups == self.in_channels == self.out_channels

    @property
    def out_channels(self) -> int:
        return self.out_shape[3]

    @property
    def span(self) -> tuple[int, int]:
        """Input rows and columns one output pixel reads: (k - 1) * dilation + 1."""
        return ((self.kernel[0] - 1) * self.dilation[0] + 1, (self.kernel[1] - 1) * self.dilation[1] + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stripes:
    """How the last op's output is cut: channels x rows x columns per stripe, and how many."""

    channels: int  # k_split * k_block
    rows: int  # h_split * h_block
    cols: int  # w_split * w_block, or the whole width
    ko_extent: int
    ho_extent: int
    wo_extent: int  # 1: full-width stripes, and no wo_outer loop

    @property
    def count(self) -> int:
        return self.ko_extent * self.ho_extent * self.wo_extent


@dataclass(frozen=True, slots=True, kw_only=True)
class StripeGeometry:
    """The schedule's stripe windows, derived once by the planner: per tensor of the chain (index 0 = the input,
    j = op j's output), the window one stripe needs and where it starts. Targets read it; none re-derives it."""

    shapes: tuple[Shape, ...]  # whole tensors
    stripes: Stripes
    rows: tuple[int, ...]  # rows of tensor j one stripe needs (with halo)
    cols: tuple[int, ...]  # columns held (for intermediates: with the consumer's padding)
    row_start: tuple[Expr, ...]  # first global row of the window, in terms of ho_outer
    col_start: tuple[Expr, ...]  # first global column, in terms of wo_outer (constant for full width)
    row_step: int  # input rows between the windows of two vertically adjacent stripes
    # row_start[j] = ho_outer * step + first and col_start[j] = wo_outer * step + first as (step, first) ints, for
    # the schedule search's counts (the expressions say the same; a geometry built by hand may leave them empty)
    row_affines: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)
    col_affines: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def halo_rows(self) -> int:
        """Input rows two vertically adjacent stripes share."""
        return max(0, self.rows[0] - self.row_step)

    def row_affine(self, j: int) -> tuple[int, int]:
        """(a, b) with row_start[j] = ho_outer * a + b."""
        b = int(evaluate(self.row_start[j], {"ho_outer": 0}))
        return int(evaluate(self.row_start[j], {"ho_outer": 1})) - b, b


@dataclass(frozen=True, slots=True, kw_only=True)
class Traffic:
    """Bytes moved between main memory and the caches over the whole kernel."""

    input_bytes: int
    filter_bytes: int
    output_bytes: int

    @property
    def total(self) -> int:
        return self.input_bytes + self.filter_bytes + self.output_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class PadStrategy:
    """How one loop treats positions outside a tensor (seed 003): read known padding, or branch."""

    loop: str  # "conv2d #1 channel reduction", "write back output cache"
    strategy: PadHandling
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    name: str
    config_path: str
    dtype: str
    ctype: str  # C element type: float
    element_bytes: int
    k_split: int
    h_split: int
    w_split: int | None  # None: full-width stripes
    k_block: int
    h_block: int
    w_block: int
    stripe_counts: tuple[int, int, int]  # ko_outer, ho_outer, wo_outer extents
    geometry: StripeGeometry  # the stripe windows of every tensor of the chain
    ops: tuple[OpGeometry, ...]
    tensors: tuple[Tensor, ...]  # input, filter1.., output, in argument order
    intermediates: tuple[Tensor, ...]  # chain tensors that live only in caches
    caches: tuple[Cache, ...]
    workspace_elements: int
    alignment_bytes: int
    kernel: Function
    stripe: StripeParts  # the kernel's stripe loop, before composition
    helpers: tuple[Function, ...]  # pack / unpack between logical and physical layouts
    flops: int  # useful work: 2 * MACs of the convolutions as specified
    executed_flops: int  # what the schedule computes, with halo rows and chain recompute
    traffic: Traffic
    output_pad_kind: PadKind
    pipeline: Pipeline
    timeline: tuple[str, ...]  # double buffer: load1; load2; conv1; load3; conv2; store1; ...
    halo: Halo
    reload_input_bytes: int  # input traffic if every stripe loaded its whole window (equal without reuse)
    pad_strategies: tuple[PadStrategy, ...]
    search: Any = None  # schedule_search.ScheduleSearch when the splits were fitted to a budget
    notes: tuple[str, ...] = field(default=())
    c_split: int = 1  # input-channel chunks per stripe (c_block channels each)
    c_block: int = 0
    order: LoopOrder = LoopOrder.CHANNELS_OUTER
    schedule_origin: str = ""  # "explicit (x.yaml:7)", "auto (no schedule given: ...)": config.Schedule.origin

    @property
    def workspace_bytes(self) -> int:
        return self.workspace_elements * self.element_bytes

    @property
    def compulsory_bytes(self) -> int:
        """Every tensor (input, filters, biases, output) moved once: what a memory-bound kernel is judged by."""
        return sum(t.elements for t in self.tensors) * self.element_bytes

    @property
    def memory_bound(self) -> bool:
        """Depthwise convs (and pools between them) only: judged by GB/s against a bandwidth probe, not GFLOP/s."""
        return any(op.depthwise for op in self.ops) and all(op.depthwise or op.pool for op in self.ops)

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)

    def cache(self, name: str) -> Cache:
        return next(c for c in self.caches if c.name == name)
