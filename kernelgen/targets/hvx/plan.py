"""hvx_plan(config, plan) -> HvxPlan: the arithmetic the Hexagon HVX templates need. Pure.

The `hvx` target keeps the plan's schedule (seed 000: ko_outer x ho_outer stripes, the input cache with its
halo, a ko_outer_<j> loop per earlier op, one shared filter cache, temp-output caches, the output cache aliasing
the input cache, the write-back) and replaces the bodies of its sections with calls to HVX helpers. Everything
the helpers need (window extents, block strides, zero points, the requantization multiplier) is computed here
from the plan's stripe geometry (plan.geometry), with io.py (the input read and write-back), quantized.py (each
op's uint8 fields) and workspace.py (the VTCM scratch), as plain ints, so the templates only substitute.

uint8 arithmetic (per conv op, per output element; `a` activations, `u` weights as
unsigned bytes with zero point `zu`, n taps including channel padding):

    acc = sum(a * u) - zu * sum(a) - za * sum(u) + n * za * zu + bias   (int32)
        = sum((a - za) * (u - zu)) + bias

`vrmpy(Vu.ub, Rt.ub)` gives sum(a * u) for 32 output channels x 4 input channels per
instruction; sum(u) per output channel comes from the filter cache read (one vrmpy per
filter vector against 0x01010101), sum(a) per output pixel from per-pixel channel sums
of the source cache. Padding (spatial and channel) holds the source zero point, so it
contributes exactly 0. int8 weights are read as u = w + 128 (xor 0x80), zu = zw + 128,
because HVX has vrmpy(Vu.ub, Rt.ub) and vrmpy(Vu.ub, Rt.b) but no signed-vector x
unsigned-scalar form.

Requantization (HVX `vmpye` + `vmpyo:<<1:rnd:sat:shift`, mirrored bit for bit in
reference_quant.py):

    r = sat32(((((acc * m_lo) >> 16) + acc * m_hi) >> 14) + 1) >> 1)   # ~ round(acc * m / 2^31)
    r = sat32(r + rnd) >> shift                                        # rnd = 2^(shift-1)
    q = clamp(sat32(r + z_out), 0, 255)

with m in [2^30, 2^31) and shift >= 0 such that m * 2^-(31 + shift) ~ s_in * s_w / s_out.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Config
from ...ops.dialect import Dialect
from ...plan_types import Function, Halo, OpGeometry, Plan
from ...planner import fitted_config
from ...planner.geometry import temp_names
from ...quant import Requant, ResidualAdd, op_quants
from ...quant_float import FloatRequant
from .blocked import ACTIVATION_LAYOUT, FILTER_LAYOUT, unblocked_key
from .dense import DenseBlocking, dense_blocking, first_group
from .depthwise import depthwise, depthwise_pixels
from .epilogue import BLOCK, qf32_epilogue
from .io import IoGeo, io_geometry
from .kernels import qf32_kernel, uint8_kernel
from .avgpool import VectorAvg
from .lut import vlut32_bytes
from .mulrq import MulRequant
from .options import QF32_ARCHES, VTCM_DEFAULT_BYTES, hvx_options
from .quantized import uint8_fields, weight_zero_point
from .requantizer import FloatSplit, PoolRequant, Requantizer
from .workspace import workspace

FILTER_TAP_BLOCK = 1024  # elements of one 8i x 32o x 4i filter block (one (rh, rw) of 32 outputs x 32 inputs)
DEFAULT_PIXELS = 8  # output pixels sharing each filter vector (register blocking)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpGeo:
    """One conv op of the chain, as its stripe helper sees it (element units)."""

    geo: OpGeometry  # the plan's record of this conv2d
    last: bool
    src: str  # source cache pointer: input_cache, temp_output
    dst: str  # destination cache pointer
    src_rows: int  # window rows / columns of the source cache
    src_cols: int
    src_wb: int  # 8-column blocks of the source window
    src_cb: int  # 32-channel blocks of the source
    src_c: int  # source channels (unpadded)
    dst_rows: int
    dst_cols: int  # columns of the destination window (with the consumer's padding)
    dst_wb: int
    dst_cb: int  # 32-channel blocks held by the destination window
    out_h: int  # the op's full output extent
    out_w: int
    out_k: int
    out_kb: int  # 32-channel blocks of the op's output
    k_tail: int  # out_k % 32 (0: the last block is full)
    row_a: int  # global output row of window row 0 = ho_outer * row_a + row_b
    row_b: int
    col_lo: int  # valid window columns [col_lo, col_hi); window col = global col + col_lo
    col_hi: int
    filter_block: int  # elements of filter per 32 output channels: src_cb * kh * kw * 1024
    taps: int  # reduction length including channel padding: kh * kw * src_cb * 32
    zp_in: int
    zp_w: int  # unsigned weight zero point (int8 weights: zw + 128)
    zp_out: int
    requant: Requant | None  # None for float32; with per-channel weight scales, output channel 0's

    first_group: int  # first column of the first pixel group: col_lo rounded down to the pixel block
    # uint8: per output channel (padded to whole 32-channel blocks) when the weight scales differ, else ();
    # the activation as a clamp of the output bytes
    requants: tuple[Requant, ...] = ()
    q_min: int = 0
    q_max: int = 255
    f_cb: int = 0  # 32-channel blocks of the filter's input channels (a group's channels; a chunk's)
    filter_stride: int = 0  # bytes of the global filter per 32 output channels
    zp_w_raw: int = 0  # the weight zero point as declared (int8: signed)
    add: ResidualAdd | None = None  # uint8 residual: the conv's bytes (zero point zp_conv) + the residual's
    floats: FloatSplit | None = None  # quant.requantization float32: onnxruntime's rounding (requantizer.py)
    zp_conv: int = 0
    # float32 qf32 variant: groups, then the epilogue (+ bias, + residual, clamp) before each store.
    group_in: int = 0  # input channels per group (0: a dense conv)
    group_out: int = 0
    bias: bool = False
    # the residual: a blocked buffer (the chain's input, or op K's window) read at window row
    # gh - (ho_outer * res_row_a + res_row_b), column gw + res_col_lo; res_image elements per batch image
    residual: int | None = None
    res_wb: int = 0
    res_cb: int = 0
    res_image: int = 0
    res_row_a: int = 0
    res_row_b: int = 0
    res_col_lo: int = 0
    # the plan's epilogue statements (geo.epilogue) in `sum_dialect` (+ bias, + residual onto the qf32 sum) and
    # `dialect` (the activation), its literals splatted into act_constants: (name, C literal) before the loops
    act_constants: tuple[tuple[str, str], ...] = ()
    dialect: Dialect | None = None
    sum_dialect: Dialect | None = None
    # uint8 pools: "max" or "avg" (a global average pool; "": a conv), the op's input extent and padding (a max
    # skips taps outside the input), an average's requantization
    pool: str = ""
    src_h: int = 0
    src_w: int = 0
    pad_top: int = 0
    pad_left: int = 0
    pool_rq: PoolRequant | None = None
    # a uint8 hardswish / hardsigmoid: the output byte of each conv byte (the conv requantizes to zp_out = its own
    # zero point; padding and channel tails hold zp_store, the output's)
    table: tuple[int, ...] = ()
    gate: str = ""  # its name, for the comment
    zp_store: int = 0
    side: str = ""  # a uint8 mul: the side input of its factors, and their zero point
    zp_side: int = 0
    pool_floats: tuple[FloatRequant, ...] = ()  # a global average pool's float32 requantization
    mul_rq: MulRequant | None = None  # a float32 mul's integer form (mulrq.py); None: the scalar float32 loop

    # The kernel's taps, strides and dilations under the short names the HVX templates use.
    @property
    def index(self) -> int:
        return self.geo.index

    @property
    def kh(self) -> int:
        return self.geo.kernel[0]

    @property
    def kw(self) -> int:
        return self.geo.kernel[1]

    @property
    def sh(self) -> int:
        return self.geo.stride[0]

    @property
    def sw(self) -> int:
        return self.geo.stride[1]

    @property
    def dh(self) -> int:
        return self.geo.dilation[0]

    @property
    def dw(self) -> int:
        return self.geo.dilation[1]

    @property
    def filter_vectors(self) -> int:
        return self.filter_block // 128

    @property
    def last_col(self) -> int:
        return self.col_hi - 1

    @property
    def last_block(self) -> int:
        return self.out_kb - 1

    @property
    def src_row_stride(self) -> int:
        """Elements between 8-row blocks of the source window."""
        return self.src_wb * self.src_cb * BLOCK

    @property
    def src_col_stride(self) -> int:
        """Elements between 8-column blocks of the source window."""
        return self.src_cb * BLOCK

    @property
    def cb_vectors(self) -> int:
        """Filter vectors between input-channel blocks: kh * kw taps of 8 vectors."""
        return self.kh * self.kw * 8

    @property
    def requantizer(self) -> Requantizer:
        """How this op's kernel requantizes (requantizer.py): the per-channel tables, the shift-only, narrowing
        and zero-point-folding forms."""
        return Requantizer(requant=self.requant, requants=self.requants, add=bool(self.add), zp_out=self.zp_out,
                           floats=self.floats)

    @property
    def corr_const(self) -> int:
        """n * za * zu of the zero-point expansion."""
        return self.taps * self.zp_in * self.zp_w

    @property
    def k_tail_splat(self) -> int:
        return self.k_tail * 0x01010101

    @property
    def vector_avg(self) -> VectorAvg | None:
        """A global average pool's vector sums and rounding (avgpool.py); None: not one, or the scalar loop (a
        windowed pool: its windows start at any column, where whole-vector reads would not line up)."""
        glob = self.pool == "avg" and (self.out_h, self.out_w) == (1, 1)
        return VectorAvg.of(self.kw, self.pool_floats) if glob else None

    @property
    def vector_mul(self) -> MulRequant | None:
        """The mul's integer form when its 4-pixel groups line up in source and destination (the window starting at
        a multiple of 4 columns), else None (the scalar loop)."""
        return self.mul_rq if self.col_lo % 4 == 0 else None

    @property
    def gate_lut(self) -> tuple[int, ...]:
        """The gate's byte table in the order of the two vectors vlut32 reads (lut.py)."""
        return vlut32_bytes(self.table)

    @property
    def zp_out_splat(self) -> int:
        """The byte a consumer's padding and a block's channel tail hold (the output's zero point), 4 times."""
        return self.zp_store * 0x01010101


@dataclass(frozen=True, slots=True, kw_only=True)
class HvxPlan:
    arch: str
    vtcm_bytes: int
    workspace_bytes: int  # what the caller allocates (<= vtcm_bytes): the plan's caches, then the scratch
    scratch_offset: int  # bytes: pixel sums (int32 per source pixel)
    wcorr_offset: int  # bytes: per-output-channel corrections, k_split x 32 int32
    grouped_offset: int  # bytes: a grouped conv's int16 weights (0: no grouped op)
    pixels: int  # output pixels sharing each filter vector
    dense: tuple[DenseBlocking | None, ...]  # per op: a dense uint8 conv's vrmpy blocking (dense.py), else None
    ring_rows: int  # halo reuse: the input cache is a ring of this many rows (0: no ring)
    ring_step: int  # halo reuse: input rows between vertically adjacent stripes
    k_split: int
    batch: int
    ops: tuple[OpGeo, ...]
    io: IoGeo | None  # None when the layouts are not the blocked HVX ones (float32 scalar only)
    weight_flip: bool  # int8 weights: xor 0x80 while reading the filter cache
    bias: bool
    kernel: Function  # the kernel to emit: the plan's (float32) or its HVX version (uint8)
    qf32: Function | None  # float32 on v68+: the HVX float variant (compile-only under QEMU 7.2)
    macs: int  # useful multiply-accumulates
    executed_macs: int  # what the schedule computes (halo rows, chain recompute)
    notes: tuple[str, ...]

    @property
    def float_rounding(self) -> bool:
        """Some op rounds as onnxruntime's float32 in integers (the kernel's kg_rq_float)."""
        return any(o.floats or (o.vector_avg and o.vector_avg.split) for o in self.ops)

    @property
    def float_screen(self) -> bool:
        """Some op takes the float32 rounding's fast form first (float_screen.py: kg_rq_product, kg_screen_pair)."""
        return any(o.floats and o.floats.screen for o in self.ops)


def hvx_plan(config: Config, plan: Plan) -> HvxPlan:
    config = fitted_config(config, plan)  # the schedule the plan chose, for the checks below and their key lines
    options = hvx_options(config)
    arch = options.arch
    vtcm = options.vtcm_bytes or VTCM_DEFAULT_BYTES[arch]
    pixels = options.pixels or depthwise_pixels(config) or _default_pixels(plan)
    unblocked = unblocked_key(config)
    blocked = unblocked is None
    uint8 = config.dtype == "uint8"
    if uint8 and unblocked is not None:
        _fail(config, unblocked, f"the hvx target computes uint8 on {ACTIVATION_LAYOUT} activations and "
                                 f"{FILTER_LAYOUT} filters (no pad_value), with k_block 32")
    if uint8 and plan.w_split is not None:
        _fail(config, "schedule.w_split", "expected full-width stripes: the hvx uint8 kernel does not split the "
                                          "width (leave w_split out, or give a budget the full width fits)")
    if pixels < 4 or pixels % 4:
        _fail(config, "hvx.pixels", f"expected a positive multiple of 4, got {pixels}")
    ops = _ops(config, plan, pixels) if blocked else ()
    space = workspace(config, plan, ops, vtcm, arch, explicit=bool(options.vtcm_bytes))
    geo = plan.geometry
    keep = geo.halo_rows if plan.halo is Halo.REUSE else 0  # input rows a stripe keeps for the next
    kernel = uint8_kernel(config, plan, keep, depthwise(config, plan, ops).sweep) if uint8 else plan.kernel
    no_qf32 = _no_qf32(config, plan, blocked) if not uint8 and arch in QF32_ARCHES else ()
    qf32 = qf32_kernel(config, plan, ops) if not uint8 and arch in QF32_ARCHES and not no_qf32 else None
    return HvxPlan(arch=arch, vtcm_bytes=vtcm, workspace_bytes=space.bytes,
                   scratch_offset=space.scratch_offset, wcorr_offset=space.wcorr_offset,
                   grouped_offset=space.grouped_offset,
                   pixels=pixels, dense=tuple(dense_blocking(o, options.pixels, plan.c_split) if uint8 else None
                                           for o in ops),
                   ring_rows=geo.rows[0] if keep else 0, ring_step=geo.row_step if keep else 0,
                   k_split=plan.k_split, batch=geo.shapes[0][0], ops=ops, io=io_geometry(plan) if blocked else None,
                   weight_flip=config.quant.weight_dtype == "int8", bias=uint8 and any(op.bias for op in config.ops),
                   kernel=kernel, qf32=qf32, macs=plan.flops // 2, executed_macs=plan.executed_flops // 2,
                   notes=tuple(no_qf32))


def _no_qf32(config: Config, plan: Plan, blocked: bool) -> list[str]:
    """Why a float32 config on a v68+ arch gets no qf32 variant ([]: it gets one)."""
    notes = []
    if config.side_inputs:
        notes.append("no qf32 variant with side inputs (its residual reads the chain's own buffers)")
    if any(op.pool for op in config.ops):
        notes.append("no qf32 variant with pooling ops (its helpers are convs); the scalar float32 kernel pools")
    if plan.c_split > 1:
        notes.append("no qf32 variant with input-channel chunks (its helpers accumulate a whole reduction)")
    if plan.halo is Halo.REUSE:
        notes.append("no qf32 variant with halo: reuse (its helpers address the input cache without the ring)")
    if not blocked:
        notes.append("no qf32 variant: it needs NHWC8h8w32c activations and OIHW8i32o4i filters")
    return notes


def _fail(config: Config, key: str, message: str) -> None:
    raise config.problem(key, message)  # points at the key's line in the config file


def _default_pixels(plan: Plan) -> int:
    """8 output pixels per filter vector, or 4 for uint8 ops whose widths all end 1-4 columns past a multiple
    of 8: a group of 8 there computes up to 7 columns of nothing (28 wide: 32 computed, 12.5% wasted), a
    group of 4 none. Measured (qemu, v66, 1x1 128 -> 512 on 28x28): 55% of the vrmpy limit with 8, 61% with 4."""
    widths = [shape[2] for shape in plan.geometry.shapes[1:]]
    if plan.dtype == "uint8" and all(1 <= w % DEFAULT_PIXELS <= 4 for w in widths):
        return 4
    return DEFAULT_PIXELS


def _ops(config: Config, plan: Plan, pixels: int) -> tuple[OpGeo, ...]:
    """Each op's windows (from the plan's stripe geometry), filter blocks, and uint8 or qf32 epilogue fields."""
    geo = plan.geometry
    shape_list = geo.shapes
    n = len(config.ops)
    uint8 = config.dtype == "uint8"
    zw_u = weight_zero_point(config)
    quants = op_quants(config) if uint8 else []
    temps = temp_names(n)
    sources = ["input_cache", *temps]
    ops: list[OpGeo] = []
    for j in range(1, n + 1):
        op = config.ops[j - 1]
        last = j == n
        _, out_h, out_w, out_k = shape_list[j]
        src_c = shape_list[j - 1][3]
        filter_stride = -(-(src_c // op.groups) // 32) * op.kernel[0] * op.kernel[1] * FILTER_TAP_BLOCK
        if j == 1 and plan.c_block:  # input-channel chunks: the caches hold one chunk
            src_c = plan.c_block
        src_cb = -(-src_c // 32)
        f_cb = -(-(src_c // op.groups) // 32)  # input-channel blocks of the filter: one group's channels
        a, b = geo.row_affine(j)
        dst_cols = out_w if last else geo.cols[j]
        col_lo = 0 if last else -geo.col_start[j].value
        col_hi = min(col_lo + out_w, dst_cols)
        taps = op.kernel[0] * op.kernel[1] * src_cb * 32
        quantized = (uint8_fields(config, j, quants[j - 1], shape_list[j - 1], out_k, taps) if uint8
                     else dict(zp_in=0, zp_out=0, requant=None))
        ops.append(OpGeo(
            geo=plan.ops[j - 1], last=last, src=sources[j - 1], dst="output_cache" if last else temps[j - 1],
            src_rows=geo.rows[j - 1], src_cols=geo.cols[j - 1],
            src_wb=-(-geo.cols[j - 1] // 8), src_cb=src_cb, src_c=src_c, dst_rows=geo.rows[j], dst_cols=dst_cols,
            dst_wb=-(-dst_cols // 8), dst_cb=plan.k_split if last else -(-out_k // 32), out_h=out_h, out_w=out_w,
            out_k=out_k, out_kb=-(-out_k // 32), k_tail=out_k % 32, row_a=a, row_b=b, col_lo=col_lo,
            col_hi=col_hi, first_group=first_group(col_lo, col_hi, pixels),
            filter_block=f_cb * op.kernel[0] * op.kernel[1] * FILTER_TAP_BLOCK, taps=taps, f_cb=f_cb, zp_w=zw_u,
            filter_stride=filter_stride, zp_w_raw=config.quant.weight_zero_point, **quantized,
            **qf32_epilogue(op, ops, list(shape_list), src_c, out_k)))
    return tuple(ops)
