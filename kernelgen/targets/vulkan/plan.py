"""plan_vulkan(config, plan) -> VulkanPlan: seed 002's tiling for the `vulkan` target. Pure.

Each conv2d is one compute dispatch (a chain is successive dispatches with a barrier).
The output is partitioned over workgroups (wg_tile = [oh, ow, oc]) and invocations
(ivc_tile = [oh, ow, oc]); along channels an invocation owns ivc_oc / 4 vec4 chunks,
distributed cyclically (chunk = wg base + local x + wg_size.x * k), so adjacent
invocations touch adjacent 4-element chunks (seed 002). The filter of one input channel
group (for every tap) lives in registers, the output tile is accumulated in registers and
written once. The taps are unrolled (kw always, kh while the body stays under BODY_LIMIT),
so each input row segment is fetched once per channel group and serves every tap and
output row that reads it. What one trip of the innermost kept loop unrolls (VulkanOp.body)
stays under options.MAX_UNROLLED_BODY: a default tile shrinks to it, an explicit one past it
is refused at its key. Without a tile in the config each conv takes its own default (defaults.py: its kernel,
stride and output, by the device profile's rules; each op is its own shader). A default tile also shrinks until its store phase's storage accesses (each
chunk's store and residual read, 4 scalars apiece on NCHW) fit options.MAX_STORE_ACCESSES, and
they times that body options.MAX_STORE_WORK.

Every index expression comes from the layout engine (TensorLayout.offsets), printed as
GLSL text here; templates only substitute. A tensor is read or written as vec4 when its
layout keeps 4 consecutive channels (output channels for the filter) contiguous and
aligned, with physical slots up to the next multiple of 4; otherwise as scalars.

lavapipe stops every invocation after 65,535 loop back-edges in total (a loop's exit
counts too) without an error, so the planner counts each invocation's back-edges (the
fh0 loop and the input-channel loop, both [[dont_unroll]]; the taps are [[unroll]] loops, which
NIR removes) and unrolls the input-channel loop until the count fits, or rejects the config.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace


import kernelgen.expr as E
from ...config import Config
from ...config.keys import output_layout_key
from ...devices import profile as device_profile
from ...errors import ConfigError
from ...layout import PadKind, TensorLayout
from ...ops import IDENTITY, Activation
from ...ops.dialect import Dialect
from ...ops.statements import Assign
from ...plan_types import OpGeometry, Plan
from ..gpu.api import VULKAN
from ..gpu.dispatch import GpuTensor, role_of
from ..gpu.profiles import VULKAN_DEFAULTS
from ..gpu.stores import tail_fill, vector_stores
from ..gpu.tiles import TileAxis, TileGrid
from .access import (Access, access, channel_padding_only, glsl_dialect, index_text, quotient_text,
                     residual_access, vec_ok)
from .options import (MAX_STORE_ACCESSES, MAX_STORE_WORK, MAX_UNROLLED_BODY, check_accumulators, check_body,
                      vulkan_options)
from .defaults import chain_tile_for, default_tile_for, grouped_tile, shuffle_rows, wide_store
from .filters import packed_filter
from .names import filter_label
from .pool import VulkanPool, plan_pool
from .tiling import ConvBuffers, Tiling

LOOP_LIMIT = 65_535  # lavapipe: loop back-edges per invocation, all loops together
# Unrolled vec4 multiply-adds per input-channel chunk above which kh stays a loop (the sweep's
# fastest tiles unroll 4,608; options.MAX_UNROLLED_BODY bounds any body for compile time).
BODY_LIMIT = 4608
GLSL_TYPES = {"float32": ("float", "vec4"), "float16": ("float16_t", "f16vec4")}


# wide_store: the 8 channels of a chunk pair as 64-bit words (4 for float32, 2 for float16).
# lavapipe stores a storage-buffer vector with a loop over the subgroup's 8 lanes, one
# scalar store per component inside; what costs is the loop, not the scalars, so one
# 32-byte u64vec4 per pair instead of two vec4 stores took seed 002's kernel from ~72 to
# ~68 ms (the kernel without any store: ~57 ms).
WORD_TYPES = {"float32": "u64vec4", "float16": "u64vec2"}
SHORT_NAMES = {"float32": "f32", "float16": "f16"}  # seed 002's benchmark names


@dataclass(frozen=True, slots=True, kw_only=True)
class VulkanOp:
    index: int  # 1-based
    src: int  # buffer numbers in VulkanPlan.buffers
    filter: int
    dst: int
    geo: OpGeometry  # the plan's record of this conv2d
    wg_size: tuple[int, int, int]
    ivc_tile: tuple[int, int, int]  # [oh, ow, oc4 chunks]
    lane_chunks: int  # adjacent vec4 chunks an invocation owns per cyclic step: 1 (seed 002) or 2 (wide_store)
    chunk_step: int  # chunks between an invocation's successive groups: lane_chunks * wg_size.x
    wg_tile: tuple[int, int, int]  # [oh, ow, oc] (oc in channels)
    groups: tuple[int, int, int]  # dispatch: x = oc, y = ow, z = n * oh
    groups_oh: int  # z groups per batch image
    ic4_full: int  # whole input-channel chunks
    ic_tail: int  # channels in the last, partial chunk (0 = none)
    ic_unroll: int  # chunks per trip of the input-channel loop
    oc4: int  # output channel chunks
    oc_tail: int  # valid channels of the last chunk (4 = full)
    oc_ragged: bool  # some invocations own chunks past the last output chunk
    bounds_check: bool  # input reads may fall outside the tensor (padding or ragged tiles)
    zero_pad: bool  # some of those reads are spatial padding, which must read zeros (else only stores use them)
    store_guard: str  # GLSL condition for a tile element to be stored ("" = always)
    row: int  # input columns one output row of the invocation tile reads: all kw taps unrolled
    fh_block: int  # kernel rows unrolled per trip of the fh0 loop: kh, or 1 for large bodies
    rows: int  # input rows the invocation tile reads per fh0 trip
    trips: int  # loop back-edges per invocation
    body: int  # vec4 multiply-adds unrolled in one trip of the innermost loop the shader keeps
    x: Access
    f: Access
    y: Access
    pair_index: str  # wide_store: index of a chunk pair's 64-bit-word vector in dst ("" = vec4 / scalar stores)
    store_chunks: int  # vec4 chunks per store: 2 with a pair_index, else 1
    out_pad: str  # GLSL literal for the output's channel padding ("" = leave unwritten)
    # The epilogue before each store: + bias (buffer number, binding 3; -1 = none), + the residual, then the
    # activation: `statements`, the plan's without the bias (which starts the accumulators), in `dialect`.
    bias: int = -1
    residual: Access | None = None  # the chain's input, op K's output or a side input at this position (binding 4)
    res_buffer: int = -1
    res_name: str = ""  # the plan's name of that tensor (input, temp<K>, side_<name>)
    act: Activation = IDENTITY  # then the activation (kernelgen/ops), spelled by `dialect` on the vec4
    dialect: Dialect | None = None
    statements: tuple[Assign, ...] = ()
    filter_at_use: bool = False  # each filter vec4 loaded at its multiply-add, not a kw x chunk slice held ahead
    taps_at_use: bool = False  # the kw taps in a kept loop, each input vec4 fetched at its use (needs filter_at_use)
    # Grouped and depthwise convs: output channel k reads input channels k // group_out * group_in + rc
    # (rc < group_in), element by element at x_element (the flat index of (n, ih, iw, c)), except for the
    # first fast_chunks chunks of a depthwise conv with multiplier 1, which read their own chunk (load_src).
    # group_read: how many elements a chunk's 4 lanes fetch. lavapipe's texelFetch is an out-of-line call that
    # clobbers every vector register; 4 per multiply-add against 72 live vec4 accumulators (groups 3 on 24
    # channels, wide_store's 4x9x8 tile) took its LLVM 25-36 s to compile, 1 took 2.4 s. "shared": output
    # channels per group a multiple of 4, one element for all 4 lanes; "pair": 2 or more per group, the lanes lie
    # in at most 2 groups, 2 elements; "lanes": one per lane.
    group_in: int = 0  # 0: a dense conv
    group_out: int = 0
    x_element: str = ""
    fast_chunks: int = 0
    group_read: str = "lanes"
    group_of: str = ""  # GLSL for k / group_out (0 <= k < out_c), in multiplies and shifts
    # a depthwise conv with multiplier 1 and whole chunks, its taps unrolled: per kernel row each output row's input
    # segment (ROW vec4s) is fetched once and shared by the taps of the pixels it serves, as the dense path does
    depthwise_rows: bool = False
    # lanes along the workgroup's x that share each input row segment and fetch it a column each, passing the
    # columns round by subgroup shuffles (VulkanDefaults.shuffle_rows); 0: every lane fetches every column
    shuffle_lanes: int = 0

    @property
    def shuffle_fetches(self) -> int:
        """Fetches per input row segment with shuffles: one for every shuffle_lanes columns."""
        return -(-self.row // self.shuffle_lanes)

    is_pool = False

    @property
    def epilogue(self) -> bool:
        return self.bias >= 0 or bool(self.statements)

    @property
    def label(self) -> str:
        """Seed 002's benchmark name: Input[..]xFilter[..]/Stride[..]/Tile[..]/WGSize[..]."""
        g = self.geo
        n, h, w, c = g.in_shape
        return (f"Input[{n}x{h}x{w}x{c}]x{filter_label(g)}"
                f"/Stride[{g.stride[0]}x{g.stride[1]}]/Tile[{self.ivc_tile[0]}x{self.ivc_tile[1]}x"
                f"{self.ivc_tile[2] * 4}]/WGSize[{self.wg_size[0]}x{self.wg_size[1]}x{self.wg_size[2]}]")


@dataclass(frozen=True, slots=True, kw_only=True)
class VulkanPlan:
    dtype: str
    short: str  # f32 / f16, as in seed 002's benchmark names
    scalar: str  # float / float16_t
    vec: str  # vec4 / f16vec4
    words: str  # u64vec4 / u64vec2: a chunk pair as 64-bit words (wide_store)
    buffers: tuple[GpuTensor, ...]  # layout: a filter in the target's own order (filters.py), not the config's
    ops: tuple[VulkanOp | VulkanPool, ...]
    loop_limit: int
    body_limit: int = MAX_UNROLLED_BODY

    @property
    def int64(self) -> bool:
        """Some op stores chunk pairs as 64-bit words: the shader needs shaderInt64."""
        return any(op.pair_index for op in self.ops)

    @property
    def shuffles(self) -> bool:
        """Some op passes input columns between lanes: the shader needs subgroup shuffles."""
        return any(not op.is_pool and op.shuffle_lanes for op in self.ops)


def _problem(config: Config, key: str, message: str) -> ConfigError:
    return config.problem(key, message)  # points at the key's line (vulkan.wg_size, ...; its block when unset)


def _tile_key(config: Config) -> str:
    """The tile key the user set (the workgroup count follows from it), else the vulkan block."""
    return next((k for k in ("vulkan.ivc_tile", "vulkan.wg_tile") if k in config.marks), "vulkan")


@dataclass(frozen=True, slots=True)
class _Reduction:
    fh_block: int  # kernel rows unrolled per fh0 trip
    ic_unroll: int  # input-channel chunks per trip of the channel loop
    trips: int  # loop back-edges per invocation
    body: int  # vec4 multiply-adds per trip of the innermost kept loop


def _reduction(op: OpGeometry, ioh: int, iow: int, k4: int, texels: bool, unroll_rows: bool,
               taps_loop: bool = False, trip_body: int = 0, trip_cap: int = 0) -> _Reduction:
    """How a dense conv's reduction runs for an invocation tile: kh unrolled too when the body stays small
    enough for lavapipe's LLVM to compile quickly and both reads are texel fetches (a scalar storage read is a
    per-lane loop of its own: unrolled by the hundreds it bloats the code for little gain); the input-channel
    loop unrolled until one invocation's loop back-edges fit lavapipe's limit. A grouped conv keeps its rc and
    fh loops and unrolls the kw taps. `taps_loop`: the kw taps stay a loop too (a profile's taps_in_loop).
    `trip_body` (a profile's, 0: none): more input-channel chunks per trip while a trip's multiply-adds stay
    within it (VulkanDefaults.trip_body says why). `trip_cap` (a profile's, 0: none): where one kernel row of one
    chunk fits it, a trip holds at most that many: the kernel rows go into the fh0 loop when all of them would pass
    it, and chunks join a trip only within it (VulkanDefaults.trip_cap says why); else trip_body rules."""
    kh, kw = op.kernel
    taps = kw + 1 if taps_loop else 0  # the kw loop's back-edges and exit, per instance
    if op.groups > 1:
        group_in = op.in_shape[3] // op.groups
        return _Reduction(fh_block=1, ic_unroll=1, trips=2 + group_in * (kh + 1 + kh * taps),
                          body=ioh * iow * k4 * (1 if taps_loop else kw))
    ic4_full = op.in_shape[3] // 4
    body = ioh * iow * k4 * kh * kw * 4  # vec4 multiply-adds per input-channel chunk, all taps
    capped = bool(trip_cap) and not taps_loop and body // kh <= trip_cap
    fh_block = kh if (unroll_rows and body <= BODY_LIMIT and texels and not taps_loop
                      and not (capped and body > trip_cap)) else 1
    tail = ioh * fh_block * taps if op.in_shape[3] % 4 else 0

    def trips_at(unroll: int) -> int:
        """The fh0 loop (kh / fh_block trips), per trip the input-channel loop's trips and exit (with a taps
        loop, per channel trip its kw loops), the tail channels' kw loops."""
        return 1 + kh // fh_block * (2 + ic4_full // unroll * (1 + unroll * ioh * fh_block * taps) + tail)

    unroll = 1
    while trips_at(unroll) > LOOP_LIMIT and unroll < max(ic4_full, 1):
        unroll *= 2
    while ic4_full % unroll:
        unroll //= 2
    chunk_body = body // kh * fh_block  # multiply-adds of one chunk's trip
    limit = trip_cap if capped else trip_body
    while limit and not taps_loop and ic4_full % (2 * unroll) == 0 and 2 * unroll * chunk_body <= limit:
        unroll *= 2
    body = iow * k4 * 4 if taps_loop else unroll * chunk_body
    return _Reduction(fh_block=fh_block, ic_unroll=unroll, trips=trips_at(unroll), body=body)


def _choice(value, default):
    return tuple(value) if value is not None else default


def plan_vulkan(config: Config, plan: Plan, *, ivc_tile: tuple[int, int, int] | None = None,
                wg_size: tuple[int, int, int] | None = None) -> VulkanPlan:
    """ivc_tile / wg_size override the config (the bench sweep's permutations)."""
    options = vulkan_options(config)
    defaults = VULKAN_DEFAULTS[options.device]
    profile = device_profile(options.device)
    wg = wg_size or _choice(options.wg_size, defaults.wg_size)
    ivc = ivc_tile or _choice(options.ivc_tile, None)
    lanes = 2 if wide_store(options.wide_store, options.wg_tile, defaults, plan, wg, ivc) else 1
    if min(wg) < 1 or math.prod(wg) > profile.max_workgroup:
        raise _problem(config, "vulkan.wg_size", f"expected 3 positive ints with a product <= {profile.max_workgroup} "
                               f"({profile.name}'s workgroup limit), got {list(wg)}")
    if options.wg_tile is not None and ivc is None:
        t = options.wg_tile
        if t[0] % wg[2] or t[1] % wg[1] or t[2] % (4 * lanes * wg[0]):
            raise _problem(config, "vulkan.wg_tile", f"expected a multiple of [wg_size z, y, {4 * lanes} * x] = "
                                                     f"[{wg[2]}, {wg[1]}, {4 * lanes * wg[0]}], got {list(t)}")
        ivc = (t[0] // wg[2], t[1] // wg[1], t[2] // wg[0])
    default_tile = ivc is None  # each conv its own (Tiling.ivc None), or one for the chain without tile_per_op
    if default_tile and not defaults.tile_per_op:
        ivc = chain_tile_for(defaults, plan, wg, lanes)
    if ivc is not None and (min(ivc) < 1 or ivc[2] % (4 * lanes)):
        raise _problem(config, "vulkan.ivc_tile", f"expected positive [oh, ow, oc] with oc a multiple of "
                               f"{4 * lanes}{' (wide_store owns chunk pairs)' if lanes == 2 else ''}, got {list(ivc)}")
    if ivc is not None:
        check_accumulators(config, ivc, profile, explicit=ivc_tile is None and options.ivc_tile is not None)
    scalar, vec = GLSL_TYPES[config.dtype]
    tiling = Tiling(ivc=ivc, wg=wg, lanes=lanes, scalar=scalar, default_tile=default_tile,
                    unroll_rows=defaults.unroll_kernel_rows, words64=profile.int64,
                    scalar_texels=defaults.scalar_texel_reads, trip_body=defaults.trip_body,
                    trip_cap=defaults.trip_cap)
    tensors = {t.name: t.layout for t in plan.tensors}
    inter = {t.name: t.layout for t in plan.intermediates}
    n_ops = len(config.ops)
    # the plan's argument order (input, filters, biases, side inputs), then the temps and the output
    biases = [f"bias{j}" for j, op in enumerate(plan.ops, start=1) if op.epilogue.bias]
    sides = [side.param for side in config.side_inputs]
    names = (["input"] + [f"filter{j}" for j, op in enumerate(plan.ops, start=1) if not op.pool] + biases + sides
             + [f"temp{j}" for j in range(1, n_ops)] + ["output"])
    packed = {nm: own for nm in names if nm.startswith("filter") and (own := packed_filter(tensors[nm])) is not None}
    layouts = {**tensors, **inter, **packed}
    # a bias is read a vec4 chunk (wide_store: a pair) at a time: zero-padded to whole pairs of chunks
    buffers = tuple(GpuTensor(name=nm, role=role_of(nm), layout=packed.get(nm),
                              elements=-(-math.prod(layouts[nm].flat_shape) // 8) * 8 if nm in biases else
                              math.prod(layouts[nm].flat_shape)) for nm in names)
    number = {nm: i for i, nm in enumerate(names)}
    ops = []
    for j, op in enumerate(plan.ops, start=1):
        src_name = "input" if j == 1 else f"temp{j - 1}"
        dst_name = "output" if j == n_ops else f"temp{j}"
        if op.pool:
            scale = f"side_{op.scale_by}" if op.scale_by else None
            ops.append(plan_pool(op, layouts[src_name], layouts[dst_name], number[src_name], number[dst_name],
                                 (layouts[scale], number[scale]) if scale else None,
                                 _pool_pad(config, layouts[dst_name], j, scalar)))
            continue
        filter_at_use = defaults.filter_slice_max_kw is not None and op.kernel[1] > defaults.filter_slice_max_kw
        taps_loop = defaults.taps_in_loop and filter_at_use and op.kernel[1] > 1
        # the residual: the chain's input (0) or op K's output, a temp buffer still bound from op K
        res_name = op.epilogue.residual_name
        operands = ConvBuffers(x=layouts[src_name], f=layouts[f"filter{j}"], y=layouts[dst_name],
                               src=number[src_name], filter=number[f"filter{j}"], dst=number[dst_name],
                               res=layouts[res_name] if res_name else None)
        own = tiling if tiling.ivc else replace(tiling, ivc=default_tile_for(defaults, op, wg, lanes))
        planned = _plan_op(config, op, own, operands, taps_loop)
        residual = residual_access(layouts[res_name], op) if res_name else None
        ops.append(replace(planned, bias=number.get(f"bias{j}", -1), residual=residual,
                           res_buffer=number[res_name] if res_name else -1, res_name=res_name or "",
                           act=op.epilogue.act, dialect=glsl_dialect(scalar, vec),
                           statements=replace(op.epilogue, bias=False).statements,
                           filter_at_use=filter_at_use, taps_at_use=taps_loop,
                           shuffle_lanes=wg[0] if shuffle_rows(defaults, profile.subgroup, planned.group_in,
                                                               taps_loop, wg, planned.row) else 0,
                           ))
    # a source read as scalars through 4-element texels (access.py) is bound as whole texels
    texel_scalars = {op.src for op in ops if not op.is_pool and op.x.texel and not op.x.vec4 and not op.x.rgb}
    buffers = tuple(replace(b, elements=-(-b.elements // 4) * 4, slack=-b.elements % 4) if i in texel_scalars else b
                    for i, b in enumerate(buffers))
    return VulkanPlan(dtype=config.dtype, short=SHORT_NAMES[config.dtype], scalar=scalar, vec=vec,
                      words=WORD_TYPES[config.dtype], buffers=buffers, ops=tuple(ops), loop_limit=LOOP_LIMIT)


def _store_accesses(op: OpGeometry, y_tl: TensorLayout, res_tl: TensorLayout | None) -> int:
    """Storage-buffer accesses the store phase makes per output chunk (options.MAX_STORE_ACCESSES): its store, 4
    scalars or one vector, and its residual read, 4 scalars or one vec4."""
    stores = 1 if vector_stores(VULKAN, y_tl) else 4
    return stores + (0 if res_tl is None else 1 if residual_access(res_tl, op).vec4 else 4)


def _pool_pad(config: Config, y_tl: TensorLayout, j: int, scalar: str) -> str:
    """A pool's output padding: pad_value into channel padding up to the next multiple of 4 (as a conv's store
    writes it); any other padding that must hold a value is refused, as for a conv."""
    if y_tl.layout.pad_kind is not PadKind.VALUE or not y_tl.padding:
        return ""
    if not channel_padding_only(y_tl):
        raise _padding_problem(config, y_tl, j)
    return f"{scalar}({y_tl.layout.pad_value!r})"


def _padding_problem(config: Config, y_tl: TensorLayout, j: int) -> ConfigError:
    return _problem(config, output_layout_key(config, j - 1),
                    f"the vulkan target writes pad_value only into channel padding (channels rounded up to 4); "
                    f"layout {y_tl.layout.source!r} of ops[{j - 1}]'s output pads more")


def _plan_op(config: Config, op: OpGeometry, tiling: Tiling, buffers: ConvBuffers, taps_loop: bool) -> VulkanOp:
    j = op.index
    x_tl, f_tl, y_tl = buffers.x, buffers.f, buffers.y
    wg, lanes, scalar, default_tile = tiling.wg, tiling.lanes, tiling.scalar, tiling.default_tile
    n, in_h, in_w, in_c = op.in_shape
    _, out_h, out_w, out_c = op.out_shape
    kh, kw = op.kernel
    oc4 = -(-out_c // 4)
    # The largest input coordinates a tile touches (for index simplification only).
    in_bounds = {"n": (0, n - 1), "ih": (0, in_h - 1), "iw": (0, in_w - 1), "ic4": (0, max(0, -(-in_c // 4) - 1)),
                 "ci": (0, in_c - 1), "fh": (0, kh - 1), "fw": (0, kw - 1), "oc4": (0, oc4 - 1),
                 "oh": (0, out_h - 1), "ow": (0, out_w - 1)}
    ioh, iow, ioc = grouped_tile(op, tiling.ivc, vec_ok(x_tl, 3)) if default_tile else tiling.ivc
    k4 = ioc // 4
    use_x4 = vec_ok(x_tl, 3)
    x = access(x_tl, "src", 3, {"n": E.Var("n"), "h": E.Var("ih"), "w": E.Var("iw")}, "ic4", in_bounds, use_x4, read=True,
               scalar_texels=tiling.scalar_texels, rgb_ok=op.groups == 1)  # grouped convs read single elements
    use_f4 = vec_ok(f_tl, 0)
    # a grouped conv reads its filter from a storage buffer: 3 reads per kernel row, where texel fetches took the
    # depthwise 3x3 of configs/mobilenet_v2_block.yaml from 7.7 to 32 s of CPU to compile cold
    f = access(f_tl, "flt", 0, {"i": E.Var("ci"), "h": E.Var("fh"), "w": E.Var("fw")}, "oc4", in_bounds, use_f4,
               read=op.groups == 1)

    def reduction(ioh: int, iow: int) -> _Reduction:
        return _reduction(op, ioh, iow, k4, x.texel and f.texel, tiling.unroll_rows, taps_loop, tiling.trip_body,
                          tiling.trip_cap)

    red = reduction(ioh, iow)
    while default_tile and red.body > MAX_UNROLLED_BODY and ioh * iow > 1:  # rows, then columns, halved
        ioh, iow = (ioh // 2, iow) if ioh > 1 else (ioh, iow // 2)
        red = reduction(ioh, iow)
    per_chunk = _store_accesses(op, y_tl, buffers.res)
    while default_tile and ioh * iow > 1 and (ioh * iow * k4 * per_chunk > MAX_STORE_ACCESSES
                                              or ioh * iow * k4 * per_chunk * red.body > MAX_STORE_WORK):
        ioh, iow = (ioh, iow // 2) if iow > ioh else (ioh // 2, iow)  # the longer side: fewer input rows refetched
        red = reduction(ioh, iow)
    check_body(config, j - 1, (ioh, iow, k4), red.body, explicit=not default_tile)
    wg_tile = (ioh * wg[2], iow * wg[1], 4 * k4 * wg[0])
    grid = TileGrid(axes=(TileAxis(oc4, k4, wg[0]), TileAxis(out_w, iow, wg[1]), TileAxis(out_h, ioh, wg[2])),
                    batch=n, batch_per_group=True)
    groups = grid.groups
    if grid.over_limit(VULKAN):
        raise _problem(config, _tile_key(config), f"ops[{j - 1}] would take {list(groups)} workgroups, over "
                                                  f"65,535 along one axis; use a larger vulkan tile")
    ic4_full, ic_tail = divmod(in_c, 4)
    ragged = grid.axes[2].ragged or grid.axes[1].ragged
    padded = any(op.pad)
    bounds_check = bool(padded or ragged)
    grouped = {}
    if op.groups > 1:
        # the rc loop (group_in trips), per trip the fh loop (kh) and its exit, and main's own
        group_in, group_out = in_c // op.groups, out_c // op.groups
        if red.trips > LOOP_LIMIT:
            raise _problem(config, f"ops[{j - 1}].conv2d.groups", f"each invocation would take {red.trips} loop "
                                                                  f"back-edges, more than lavapipe's {LOOP_LIMIT}; use "
                                                                  f"fewer channels per group")
        grouped = dict(group_in=group_in, group_out=group_out, fh_block=1, trips=red.trips,
                       x_element=index_text(x_tl, {"n": E.Var("n"), "h": E.Var("ih"), "w": E.Var("iw"), "c": E.Var("c")},
                                        in_bounds | {"c": (0, in_c - 1)}),
                       fast_chunks=out_c // 4 if group_in == group_out == 1 else 0,
                       group_of=quotient_text("k", group_out, out_c),
                       group_read="shared" if group_out % 4 == 0 else "pair" if group_out > 1 else "lanes")
    fh_block, unroll, trips = red.fh_block, red.ic_unroll, red.trips
    if trips > LOOP_LIMIT and not grouped:
        raise _problem(config, f"ops[{j - 1}]", f"each invocation would take {trips} loop back-edges, more than "
                                                f"lavapipe's {LOOP_LIMIT}; use fewer input channels per conv")
    pad_kind = y_tl.layout.pad_kind
    use_y4 = vector_stores(VULKAN, y_tl)
    y_index = {"n": E.Var("n"), "h": E.Var("oh"), "w": E.Var("ow")}
    y = access(y_tl, "dst", 3, y_index, "oc4", in_bounds, use_y4)
    pair_index = ""
    # else the pair's chunks are stored one by one (as on a profile without shaderInt64: no 64-bit words)
    if lanes == 2 and tiling.words64 and out_c % 8 == 0 and vec_ok(y_tl, 3, 8):
        pair_bounds = {**in_bounds, "oc8": (0, out_c // 8 - 1)}  # oc8: the pair's first chunk / 2
        pair_index = index_text(y_tl, {**y_index, y_tl.layout.dims[3]: E.mul(E.Var("oc8"), 8)}, pair_bounds, divide=8)
    if pad_kind is PadKind.VALUE and y_tl.padding and not (use_y4 and channel_padding_only(y_tl)):
        raise _padding_problem(config, y_tl, j)
    fill = tail_fill(y_tl)
    out_pad = "" if fill is None else f"{scalar}({fill!r})"
    reduction = dict(ic4_full=ic4_full, ic_tail=ic_tail, ic_unroll=unroll, fh_block=fh_block, trips=trips, body=red.body,
                     row=(iow - 1) * op.stride[1] + (kw - 1) * op.dilation[1] + 1,
                     rows=(ioh - 1) * op.stride[0] + (fh_block - 1) * op.dilation[0] + 1)
    if grouped:
        rows = grouped["fast_chunks"] == oc4 and not taps_loop
        reduction = dict(ic4_full=0, ic_tail=0, ic_unroll=1, rows=0, body=red.body, depthwise_rows=rows,
                         row=(iow - 1) * op.stride[1] + (kw - 1) * op.dilation[1] + 1 if rows else 0, **grouped)
    return VulkanOp(index=j, src=buffers.src, filter=buffers.filter, dst=buffers.dst, geo=op, wg_size=wg,
                    ivc_tile=(ioh, iow, k4), lane_chunks=lanes, chunk_step=lanes * wg[0], wg_tile=wg_tile,
                    groups=groups, groups_oh=grid.axes[2].groups, oc4=oc4, oc_tail=out_c - 4 * (oc4 - 1),
                    oc_ragged=grid.axes[0].ragged, bounds_check=bounds_check, zero_pad=padded,
                    store_guard=" && ".join(grid.guards(("oc4", "ow", "oh"), order=(2, 1, 0))),
                    x=x, f=f, y=y, pair_index=pair_index, store_chunks=2 if pair_index else 1, out_pad=out_pad,
                    **reduction)
