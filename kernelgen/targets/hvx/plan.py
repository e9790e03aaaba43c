"""hvx_plan(config, plan) -> HvxPlan: the arithmetic the Hexagon HVX templates need. Pure.

The `hvx` target keeps the plan's schedule (seed 000: ko_outer x ho_outer stripes, the input cache with its
halo, a ko_outer_<j> loop per earlier op, one shared filter cache, temp-output caches, the output cache aliasing
the input cache, the write-back) and replaces the bodies of its sections with calls to HVX helpers. Everything
the helpers need (window extents, block strides, zero points, the requantization multiplier) is computed here,
as plain ints, so the templates only substitute.

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

import kernelgen.expr as E
from ...config import Config
from ...ops import IDENTITY, Activation
from ...ops.dialect import Dialect
from ...plan import Function, Halo, OpGeometry, Plan
from ...planner import fitted_config
from ...planner.geometry import Geometry, geometry, shapes, stripes
from ...quant import Requant, ResidualAdd, op_quants
from .blocked import ACTIVATION_LAYOUT, FILTER_LAYOUT, unblocked_key
from .dense import DenseBlocking, dense_blocking
from .depthwise import depthwise, depthwise_pixels
from .epilogue import BLOCK, qf32_epilogue
from .requantizer import FloatSplit, PoolRequant, Requantizer
from .kernels import qf32_kernel, uint8_kernel
from .options import QF32_ARCHES, VTCM_DEFAULT_BYTES, hvx_options

FILTER_TAP_BLOCK = 1024  # elements of one 8i x 32o x 4i filter block (one (rh, rw) of 32 outputs x 32 inputs)
DEFAULT_PIXELS = 8  # output pixels sharing each filter vector (register blocking)
ALIGN = 2048


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
    act: Activation = IDENTITY  # the activation (kernelgen/ops) in `dialect`, its literals splatted into
    act_constants: tuple[tuple[str, str], ...] = ()  # (name, C literal) vectors before the loops
    dialect: Dialect | None = None
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
    def zp_out_splat(self) -> int:
        """The byte a consumer's padding and a block's channel tail hold (the output's zero point), 4 times."""
        return self.zp_store * 0x01010101


@dataclass(frozen=True, slots=True, kw_only=True)
class IoGeo:
    """The input cache read and the output write-back."""

    in_rows: int
    in_cols: int
    in_wb: int  # window column blocks
    in_cb: int
    in_h: int
    in_w: int
    in_c: int
    in_row_a: int
    in_row_b: int
    in_col_off: int  # window col = global col + in_col_off
    in_g_wb: int  # column blocks of the global input tensor
    in_image: int  # elements of one batch image of the input tensor
    in_chunk_cb: int  # channel blocks the input cache holds: all of them, or one chunk's (schedule.c_split)
    chunks: int  # input-channel chunks
    out_rows: int
    out_h: int
    out_w: int
    out_k: int
    out_kb: int
    out_row_a: int
    out_win_wb: int
    out_g_wb: int
    out_image: int


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


def hvx_plan(config: Config, plan: Plan) -> HvxPlan:
    config = fitted_config(config, plan)
    options = hvx_options(config)
    arch = options.arch
    vtcm = options.vtcm_bytes or VTCM_DEFAULT_BYTES[arch]
    pixels = options.pixels or depthwise_pixels(config) or _default_pixels(config)
    unblocked = unblocked_key(config)
    blocked = unblocked is None
    if config.dtype == "uint8" and unblocked is not None:
        _fail(config, unblocked, f"the hvx target computes uint8 on {ACTIVATION_LAYOUT} activations and "
                                 f"{FILTER_LAYOUT} filters (no pad_value), with k_block 32")
    if config.dtype == "uint8" and plan.w_split is not None:
        _fail(config, "schedule.w_split", "expected full-width stripes: the hvx uint8 kernel does not split the "
                                          "width (leave w_split out, or give a budget the full width fits)")
    if pixels < 4 or pixels % 4:
        _fail(config, "hvx.pixels", f"expected a positive multiple of 4, got {pixels}")
    ops = _ops(config, plan, pixels) if blocked else ()
    io = _io(config, plan) if blocked else None
    uint8 = config.dtype == "uint8"
    # uint8 scratch after the plan's caches: int32 channel sums per source pixel, then the
    # per-output-channel corrections of one stripe (k_split x 32 int32).
    scratch_offset = plan.workspace_bytes
    wcorr_offset = scratch_offset + _aligned(max((o.src_rows * o.src_cols * 4 for o in ops), default=0))
    # a grouped conv's weights, widened to int16 (w - zw) and doubled: k_split x taps x group channels x 128 bytes
    grouped_bytes = max((plan.k_split * o.kh * o.kw * o.group_in * 128 for o in ops if o.group_in), default=0)
    grouped_offset = wcorr_offset + _aligned(plan.k_split * 32 * 4) if uint8 and grouped_bytes else 0
    workspace_bytes = (wcorr_offset + _aligned(plan.k_split * 32 * 4) + _aligned(grouped_bytes) if uint8
                       else plan.workspace_bytes)
    if workspace_bytes > vtcm:
        _fail(config, "hvx.vtcm_bytes",
              f"the workspace needs {workspace_bytes} bytes of VTCM (caches {plan.workspace_bytes} + helper "
              f"scratch), more than the {vtcm} bytes of {arch}" + ("" if options.vtcm_bytes else " (default)")
              + ": lower schedule.k_split / h_split or raise hvx.vtcm_bytes")
    kernel = uint8_kernel(config, plan, _ring_keep(config, plan), depthwise(config, plan, ops).sweep) if uint8 else plan.kernel
    qf32 = (qf32_kernel(config, plan, ops) if (not uint8 and blocked and arch in QF32_ARCHES and plan.halo is not Halo.REUSE
                                                and plan.c_split == 1 and not config.side_inputs
                                                and not any(op.pool for op in config.ops)) else None)
    notes = []
    if not uint8 and arch in QF32_ARCHES and config.side_inputs:
        notes.append("no qf32 variant with side inputs (its residual reads the chain's own buffers)")
    if not uint8 and arch in QF32_ARCHES and any(op.pool for op in config.ops):
        notes.append("no qf32 variant with pooling ops (its helpers are convs); the scalar float32 kernel pools")
    if not uint8 and arch in QF32_ARCHES and plan.c_split > 1:
        notes.append("no qf32 variant with input-channel chunks (its helpers accumulate a whole reduction)")
    if not uint8 and arch in QF32_ARCHES and plan.halo is Halo.REUSE:
        notes.append("no qf32 variant with halo: reuse (its helpers address the input cache without the ring)")
    keep = _ring_keep(config, plan)
    geo = _stripe_geometry(config)
    if not uint8 and arch in QF32_ARCHES and not blocked:
        notes.append("no qf32 variant: it needs NHWC8h8w32c activations and OIHW8i32o4i filters")
    return HvxPlan(arch=arch, vtcm_bytes=vtcm, workspace_bytes=workspace_bytes,
                   scratch_offset=scratch_offset, wcorr_offset=wcorr_offset, grouped_offset=grouped_offset,
                   pixels=pixels, dense=tuple(dense_blocking(o, options.pixels) if uint8 else None for o in ops),
                   ring_rows=geo.rows[0] if keep else 0, ring_step=geo.row_step if keep else 0,
                   k_split=plan.k_split, batch=config.input_shape[0], ops=ops, io=io,
                   weight_flip=config.quant.weight_dtype == "int8", bias=uint8 and any(op.bias for op in config.ops),
                   kernel=kernel, qf32=qf32, macs=plan.flops // 2, executed_macs=plan.executed_flops // 2,
                   notes=tuple(notes))


# ---------------------------------------------------------------- checks

def _fail(config: Config, key: str, message: str) -> None:
    raise config.problem(key, message)  # points at the key's line in the config file


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


# ---------------------------------------------------------------- geometry

def _affine(expr: E.Expr) -> tuple[int, int]:
    """row_start = ho_outer * a + b."""
    b = int(E.evaluate(expr, {"ho_outer": 0}))
    return int(E.evaluate(expr, {"ho_outer": 1})) - b, b


def _default_pixels(config: Config) -> int:
    """8 output pixels per filter vector, or 4 for uint8 ops whose widths all end 1-4 columns past a multiple
    of 8: a group of 8 there computes up to 7 columns of nothing (28 wide: 32 computed, 12.5% wasted), a
    group of 4 none. Measured (qemu, v66, 1x1 128 -> 512 on 28x28): 55% of the vrmpy limit with 8, 61% with 4."""
    widths = [shape[2] for shape in shapes(config)[1:]]
    if config.dtype == "uint8" and all(1 <= w % DEFAULT_PIXELS <= 4 for w in widths):
        return 4
    return DEFAULT_PIXELS


def _ops(config: Config, plan: Plan, pixels: int) -> tuple[OpGeo, ...]:
    shape_list = shapes(config)
    n = len(config.ops)
    geo = _stripe_geometry(config)
    uint8 = config.dtype == "uint8"
    q = config.quant
    zw_u = q.weight_zero_point + (128 if q.weight_dtype == "int8" else 0)
    if uint8 and not 0 <= zw_u <= 255:
        _fail(config, "quant.weight_zero_point", f"expected an int in the range of {q.weight_dtype}, "
                                                 f"got {q.weight_zero_point}")
    quants = op_quants(config) if uint8 else []
    temp_names = ["temp_output"] if n == 2 else [f"temp_output_{j}" for j in range(1, n)]
    sources = ["input_cache", *temp_names]
    ops = []
    for j in range(1, n + 1):
        op = config.ops[j - 1]
        last = j == n
        _, out_h, out_w, out_k = shape_list[j]
        src_c = shape_list[j - 1][3]
        filter_stride = -(-(src_c // op.groups) // 32) * op.kernel[0] * op.kernel[1] * FILTER_TAP_BLOCK
        if j == 1 and config.schedule.c_block:  # input-channel chunks: the caches hold one chunk
            src_c = config.schedule.c_block
        src_cb = -(-src_c // 32)
        f_cb = -(-(src_c // op.groups) // 32)  # input-channel blocks of the filter: one group's channels
        a, b = _affine(geo.row_start[j])
        dst_cols = out_w if last else geo.cols[j]
        col_lo = 0 if last else -geo.col_start[j].value
        taps = op.kernel[0] * op.kernel[1] * src_cb * 32
        z_in, z_out, requant, per_channel = 0, 0, None, {}
        pooling = {}
        if uint8 and op.pool:
            oq = quants[j - 1]
            z_in, z_out = oq.z_in, oq.z_out
            pooling = dict(pool={"maxpool": "max", "mul": "mul"}.get(op.kind, "avg"), src_h=shape_list[j - 1][1],
                           src_w=shape_list[j - 1][2], pad_top=op.pad[0], pad_left=op.pad[1],
                           pool_rq=None if op.kind == "maxpool" else PoolRequant.of(
                               oq.requants[0] if oq.requants else None, oq.float_requants, op.kind == "mul"),
                           zp_side=oq.z_w, side=op.scale_by or "")
        elif uint8:
            oq = quants[j - 1]
            z_in, z_out, requant = oq.z_in, oq.z_out, oq.requants[0]
            for value, key in ((z_in, "quant.input_zero_point"), (z_out, "quant.output_zero_point")):
                if not 0 <= value <= 255:
                    _fail(config, key, f"expected an int in [0, 255], got {value}")
            if taps * 255 * 255 >= 2 ** 31 - 2 ** 24:
                _fail(config, f"ops[{j - 1}].conv2d", f"{taps} taps can overflow the int32 accumulator")
            # per output channel (padded to whole blocks): vectors of multipliers, roundings and shifts
            padded = oq.requants + (oq.requants[-1],) * (-out_k % 32)
            per_channel = dict(q_min=oq.q_min, q_max=oq.q_max, requants=padded if oq.per_channel else (),
                               add=oq.add, zp_conv=oq.z_conv)
            per_channel["floats"] = split = FloatSplit.padded(oq.float_requants, out_k, oq.per_channel)
            if isinstance(split, str):
                _fail(config, "quant.requantization", split + "; use requantization: fixed_point")
            if oq.table:  # the conv requantizes to its own zero point; the table maps those bytes to the output's
                per_channel |= dict(table=oq.table, gate=op.activation)
                z_out = oq.z_conv
        ops.append(OpGeo(
            geo=plan.ops[j - 1], last=last, src=sources[j - 1], dst="output_cache" if last else temp_names[j - 1],
            src_rows=geo.rows[j - 1], src_cols=geo.cols[j - 1],
            src_wb=-(-geo.cols[j - 1] // 8), src_cb=src_cb, src_c=src_c, dst_rows=geo.rows[j], dst_cols=dst_cols,
            dst_wb=-(-dst_cols // 8), dst_cb=plan.k_split if last else -(-out_k // 32), out_h=out_h, out_w=out_w,
            out_k=out_k, out_kb=-(-out_k // 32), k_tail=out_k % 32, row_a=a, row_b=b, col_lo=col_lo,
            col_hi=min(col_lo + out_w, dst_cols), first_group=col_lo - col_lo % pixels, filter_block=f_cb * op.kernel[0] * op.kernel[1] * FILTER_TAP_BLOCK,
            taps=taps, zp_in=z_in, zp_out=z_out, requant=requant, **per_channel, f_cb=f_cb,
            zp_store=quants[j - 1].z_out if uint8 else 0, zp_w=zw_u,
            filter_stride=filter_stride,
            zp_w_raw=q.weight_zero_point, **pooling,
            **qf32_epilogue(op, ops, shape_list, src_c, out_k)))
    return tuple(ops)


def _io(config: Config, plan: Plan) -> IoGeo:
    shape_list = shapes(config)
    geo = _stripe_geometry(config)
    _, h, w, c = shape_list[0]
    _, oh, ow, ok = shape_list[-1]
    a, b = _affine(geo.row_start[0])
    out_a, _ = _affine(geo.row_start[-1])
    in_tensor, out_tensor = plan.tensor("input").layout, plan.tensor("output").layout
    chunk_cb = config.schedule.c_block // 32 if config.schedule.c_block else -(-c // 32)
    return IoGeo(in_rows=geo.rows[0], in_cols=geo.cols[0], in_wb=-(-geo.cols[0] // 8), in_cb=-(-c // 32),
                 in_chunk_cb=chunk_cb, chunks=config.schedule.c_split if config.schedule.c_block else 1,
                 in_h=h, in_w=w, in_c=c, in_row_a=a, in_row_b=b, in_col_off=-geo.col_start[0].value,
                 in_g_wb=-(-w // 8), in_image=in_tensor.size // shape_list[0][0], out_rows=geo.rows[-1], out_h=oh,
                 out_w=ow, out_k=ok, out_kb=-(-ok // 32), out_row_a=out_a, out_win_wb=-(-ow // 8),
                 out_g_wb=-(-ow // 8), out_image=out_tensor.size // shape_list[0][0])


def _stripe_geometry(config: Config) -> Geometry:
    """The plan's stripe windows (config with the plan's splits, see fitted_config)."""
    shape_list = shapes(config)
    return geometry(config, shape_list, stripes(config, shape_list))


def _ring_keep(config: Config, plan: Plan) -> int:
    """Input rows a stripe keeps for the next with halo reuse (0: every stripe loads its whole window)."""
    return _stripe_geometry(config).halo_rows if plan.halo is Halo.REUSE else 0
