"""Config + Plan -> OpenCLPlan: the `opencl` target's launch plan. Pure.

Every conv2d of the chain becomes one kernel; run in sequence they pass the intermediate
tensor through device memory (an image2d texture or a buffer). A work-item computes a tile
of tile_h x tile_w output pixels x 4*oc4 output channels in registers:

- texture variant: float4 accumulators (one RGBA texel = 4 channels), activations whose
  layout has one axis separator live in image2d_t (seed 004), filters in an image whose
  texel holds 4 output channels (`filters_in_textures`);
- buffer variant: float8/float16 accumulators over output channels and flat buffers in the
  config's layouts. PoCL's CPU backend reaches its FMA peak only through explicit vector
  types (measured here: 150-170 GFLOP/s vs 28-57 for scalar code), hence the wide vectors.
  A texture variant with filters_in_textures: false keeps activations in images and uses
  these wide filter vectors too (PoCL reads a texel in ~50 ns, in software).

Channels are consumed 4 at a time; the last group of a channel count that is not a
multiple of 4 is handled by its own unrolled step (seed 003: no branch in the hot loop,
and no reliance on what the input's padding holds). This module decides the arithmetic;
code.py and stores.py turn it into the values templates/opencl/conv.cl.j2 writes the kernels from.
"""
from __future__ import annotations

import json
import math
import re
import dataclasses
from dataclasses import dataclass

import kernelgen.expr as E
from ...config import Config
from ...config.keys import tensor_layout_key
from ...devices import profile
from ...errors import ConfigError
from ...layout import FILTER_DIMS, Layout, LayoutError, PadKind, TensorLayout, padding_cover, parse_layout
from ...plan_types import Plan
from ..gpu.dispatch import GpuTensor, Role, TensorKind, role_of
from ..gpu.profiles import opencl_defaults
from ..gpu.tiles import TileAxis, TileGrid
from .code import conv_kernel, pad_kernel
from .pool import pool_kernel
from .model import ConvOp, Kernel, PoolOp
from .options import opencl_options

PAD_KERNEL_LOCAL = 64
# Accumulator floats per work-item: the tile is unrolled into registers; far beyond the register
# file (32 x 16 floats on AVX-512) code size and compile time grow with no gain.
MAX_TILE_FLOATS = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenCLPlan:
    name: str
    variant: str  # texture | buffer
    dtype: str  # float32 | float16 (half storage)
    tile: tuple[int, int, int]  # (oh, ow, oc4)
    local_size: tuple[int, int, int]
    vector_width: int  # lanes of one accumulator (4 for the texture variant)
    vectors: int  # accumulators per pixel
    image_limit: tuple[int, int]
    storages: tuple[GpuTensor, ...]
    ops: tuple[ConvOp, ...]
    kernels: tuple[Kernel, ...]  # launch order, fp32 arithmetic
    half_kernels: tuple[Kernel, ...]  # full fp16 arithmetic, compiled only under cl_khr_fp16
    uses_images: bool
    flops: int
    notes: tuple[str, ...]

    @property
    def channels_per_item(self) -> int:
        return self.vector_width * self.vectors

    def storage(self, name: str) -> GpuTensor:
        return next(s for s in self.storages if s.name == name)

    def launch_dict(self) -> dict:
        return {
            "variant": self.variant, "dtype": self.dtype, "tile": {"oh": self.tile[0], "ow": self.tile[1],
                                                                   "oc4": self.tile[2]},
            "local_size": list(self.local_size), "vector_width": self.vector_width, "vectors": self.vectors,
            "flops": self.flops,
            "tensors": [{"name": s.name, "kind": s.kind, "shape": list(s.shape), "map": s.map_text,
                         **({"texels": list(s.texels)} if s.kind == "image" else {})} for s in self.storages],
            "kernels": [{"name": k.name, "args": list(k.args), "global_size": list(k.global_size),
                         "local_size": list(k.local_size)} for k in self.kernels],
            "half_kernels": [k.name for k in self.half_kernels],
            "notes": list(self.notes),
        }

    def launch_json(self) -> str:
        """Indented JSON with lists of numbers and names kept on one line."""
        text = json.dumps(self.launch_dict(), indent=2)
        return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + ", ".join(
            item.strip() for item in m.group(1).split(",\n")) + "]", text)


# ---------------------------------------------------------------- planning

class _OverLimit(Exception):
    """An image over the profile's image2d limit: a config error, or a fallback when the choice was a default."""

    def __init__(self, storage: GpuTensor, error: ConfigError) -> None:
        super().__init__(str(error))
        self.storage, self.error = storage, error


def plan_opencl(config: Config, plan: Plan) -> OpenCLPlan:
    """The device profile's choices (opencl.device), falling back where a default one does not fit the profile's
    image2d limit: filters from textures to buffers, then activations from textures to buffers, with a note."""
    o = opencl_options(config)
    variant, kind = variant_of(config)
    notes: list[str] = []
    while True:
        try:
            return _plan(config, plan, variant, kind, notes)
        except _OverLimit as over:
            if over.storage.role == "filter" and kind == "texels" and o.filters_in_textures is None:
                kind = "vectors+images"
            elif over.storage.role != "filter" and variant == "texture" and o.variant is None:
                variant, kind = "buffer", "vectors"
            else:
                raise over.error from None
            notes.append(f"{over.error.problems[0].message.split(' (opencl.image_limit')[0]}: "
                         f"{'filters' if kind == 'vectors+images' else 'activations'} stay in buffers instead")


def _plan(config: Config, plan: Plan, variant: str, kind: str, notes: list[str]) -> OpenCLPlan:
    o = opencl_options(config)
    notes = list(notes)  # this attempt's: a fallback plans again from the caller's
    device = profile(o.device)
    texel_filters = kind == "texels"
    defaults = opencl_defaults(o.device)
    tile = tuple(o.tile) if o.tile else _default_tile(defaults.tiles[kind], plan)
    local = tuple(o.local_size or defaults.local_size)
    local = (*local, *(1,) * (3 - len(local)))
    limit = tuple(o.image_limit or device.max_image)
    problems = [("opencl.tile", f"expected 3 positive ints [oh, ow, oc4], got {list(tile)}")] if min(tile) < 1 else []
    problems += [("opencl.local_size", f"expected positive ints, got {list(local)}")] if min(local) < 1 else []
    if math.prod(local) > device.max_workgroup:
        problems.append(("opencl.local_size", f"{list(local)} has {math.prod(local)} work-items, over "
                                              f"{device.name}'s {device.max_workgroup} (opencl.device)"))
    if min(tile) >= 1 and tile[0] * tile[1] * 4 * tile[2] > MAX_TILE_FLOATS:
        problems.append(("opencl.tile", f"{list(tile)} holds {tile[0] * tile[1] * 4 * tile[2]} accumulators per "
                                        f"work-item; keep oh * ow * 4 * oc4 <= {MAX_TILE_FLOATS} (the kernel unrolls "
                                        f"every one of them)"))
    if o.half_arithmetic and config.dtype != "float16":
        problems.append(("opencl.half_arithmetic", f"needs dtype float16 (half storage), got {config.dtype}"))
    if problems:  # each at its own key
        raise ConfigError([p for key, message in problems for p in _error(config, key, message).problems])
    # A texel of filter is 4 output channels; a filter buffer gives float8/float16 vectors.
    width = 4 if texel_filters else next(w for w in (16, 8, 4) if 4 * tile[2] % w == 0)
    vectors = 4 * tile[2] // width
    per_item = width * vectors

    images = variant == "texture"
    storages: list[GpuTensor] = []
    source = _activation(config, "input", config.input_layout.bind(plan.ops[0].in_shape), images)
    storages.append(source)
    sides = {side.name: _activation(config, side.param, side.layout.bind(side.shape), images)
             for side in config.side_inputs}
    storages += sides.values()
    chain = [source]  # tensor j of the chain: what a residual names (0: the input, K: op K's output)
    ops = []
    for j, geo in enumerate(plan.ops, start=1):
        last = j == len(plan.ops)
        dest = _activation(config, "output" if last else f"temp{j}", config.ops[j - 1].output_layout.bind(geo.out_shape),
                           images)
        if geo.pool:
            scale = sides[geo.scale_by] if geo.scale_by else None
            if "image" in (source.kind, dest.kind, scale.kind if scale else "buffer"):
                raise _error(config, f"ops[{j - 1}]", f"{geo.label} reads and writes buffers; the texture variant "
                                                      f"keeps its {'input' if source.kind == 'image' else 'output'} "
                                                      f"in an image2d (opencl.variant: buffer, or a layout without "
                                                      f"an axis separator)")
            storages.append(dest)
            ops.append(PoolOp(geo=geo, source=source, dest=dest, scale=scale))
            source = dest
            chain.append(dest)
            continue
        filt = _filter(config, j, geo.out_channels, geo.in_channels // geo.groups, geo.kernel, texel_filters, per_item)
        n, oh, ow, oc = geo.out_shape
        bias = None
        if geo.epilogue.bias:  # padded with zeros to whole blocks: a work-item's vload never leaves the buffer
            bias = GpuTensor.packed(f"bias{j}", TensorKind.BUFFER,
                                    parse_layout(f"o -> o // {per_item}, o % {per_item}", ("o",), pad=0.0).bind((oc,)))
        storages += [filt, *([bias] if bias else []), dest]  # the output stays last
        ops.append(ConvOp(geo=geo, source=source, filter=filt, dest=dest,
                          grid=TileGrid(axes=(TileAxis(ow, tile[1], local[0]), TileAxis(oh, tile[0], local[1]),
                                              TileAxis(oc, per_item, local[2])), batch=n, batch_per_group=False),
                          bias=bias, residual=_residual(geo.epilogue.residual, chain, sides)))
        source = dest
        chain.append(dest)
    folded = {s.name: _fold(s, limit) for s in storages if s.kind == "image" and s.role != "filter"}
    for name, fit in folded.items():
        if fit is not None:
            fold, storage = fit
            declared = _storage(storages, name)
            notes.append(f"the {name} texture would be {declared.texels[0]}x{declared.texels[1]} texels "
                         f"({declared.map_text}), over the image2d limit {limit[0]}x{limit[1]}: folded to "
                         f"{storage.texels[0]}x{storage.texels[1]}, every {fold} rows side by side (the same bytes in "
                         f"the same order as the declared map: only the image's width and height change)")
    storages = [folded[s.name][1] if folded.get(s.name) else s for s in storages]
    ops = [_refold(op, {s.name: s for s in storages}) for op in ops]
    for s in storages:
        _check_image(config, s, limit)
    geometry = dict(tile=tile, local=local, width=width, vectors=vectors, half_storage=config.dtype == "float16")
    half_storage = config.dtype == "float16"
    kernels = [pool_kernel(config.name, op, half_storage) if isinstance(op, PoolOp) else
               conv_kernel(config.name, op, half=False, **geometry) for op in ops]
    output = storages[-1]
    if output.kind == "buffer" and output.layout.layout.pad_kind is PadKind.VALUE and output.layout.padding:
        try:
            grown = padding_cover(output.layout)
        except LayoutError as error:
            raise _error(config, tensor_layout_key(config, "output"), str(error)) from None
        kernels.append(pad_kernel(config.name, output, grown, PAD_KERNEL_LOCAL, config.dtype == "float16"))
        notes.append(f"{config.name}_pad_output writes pad_value {output.layout.layout.pad_value:g} into the "
                     f"output's layout padding (seed 003: the producer owns its padding)")
    half_kernels = ()
    if config.dtype == "float16":
        half_kernels = tuple(pool_kernel(config.name, op, half_storage) if isinstance(op, PoolOp) else
                             conv_kernel(config.name, op, half=True, **geometry) for op in ops)
        notes.append("full-fp16 kernels (half arithmetic, read_imageh) are compiled only where the device "
                     "defines cl_khr_fp16")
    if images and not any(s.kind == "image" for s in storages if s.role != "filter"):
        notes.append("texture variant without an axis-separated activation layout: activations stay in buffers")
    return OpenCLPlan(name=config.name, variant=variant, dtype=config.dtype, tile=tile, local_size=local,
                      vector_width=width, vectors=vectors, image_limit=limit, storages=tuple(storages),
                      ops=tuple(ops), kernels=tuple(kernels), half_kernels=half_kernels,
                      uses_images=any(s.kind == "image" for s in storages), flops=plan.flops, notes=tuple(notes))


def variant_of(config: Config) -> tuple[str, str]:
    """(variant, kind of filter loads): texels (filter images), vectors+images, or vectors."""
    o = opencl_options(config)
    device = profile(o.device)
    variant = o.variant or ("texture" if config.input_layout.separators and device.textures else "buffer")
    if variant == "texture":
        in_textures = device.texture_filters if o.filters_in_textures is None else o.filters_in_textures
        return variant, "texels" if in_textures else "vectors+images"
    return variant, "vectors"


def _default_tile(tile: tuple[int, int, int], plan: Plan) -> tuple[int, int, int]:
    """The profile's `tile` for this plan's kind of loads, its channel block narrowed to the plan's channels."""
    oh, ow, oc4 = tile
    widest = max(math.ceil(op.out_shape[3] / 4) for op in plan.ops)
    while oc4 > 1 and oc4 // 2 >= widest:  # do not compute mostly-empty channel blocks
        oc4 //= 2
    if plan.memory_bound:
        # depthwise: a channel block that divides every op's channels, so no work-item reads a channel tail (one
        # element at a time, each behind its own test): 112x112x96 on PoCL ran 0.3 GB/s with 64-channel blocks
        # (96 = 64 + a half-empty block), 3.6 GB/s with 32-channel ones
        while oc4 > 1 and any(op.out_shape[3] % (4 * oc4) for op in plan.ops if op.depthwise):
            oc4 //= 2
    return (oh, ow, oc4)


def _error(config: Config, key: str, message: str) -> ConfigError:
    return config.problem(key, message)  # points at the key's line in the config file


def texture_problem(bound: TensorLayout) -> str | None:
    """Why a layout cannot be an RGBA image of 4-channel texels; None when it can.

    One axis separator (seed 004: rows | texels x 4 lanes); channels 4*c4 .. 4*c4+3 share a
    texel and sit in its lanes in order; no texel holds only padding.
    """
    layout = bound.layout
    if len(layout.separators) != 1:
        return f"an image2d needs exactly one axis separator, {layout.source!r} has {len(layout.separators)}"
    n, h, w, c = bound.logical_shape
    groups = math.ceil(c / 4)
    bounds = {"n": (0, n - 1), "h": (0, h - 1), "w": (0, w - 1), "c4": (0, groups - 1), "l": (0, 3)}
    index = {"n": E.Var("n"), "h": E.Var("h"), "w": E.Var("w"), "c": E.add(E.mul(E.Var("c4"), 4), E.Var("l"))}
    row, col = bound.offsets(index, bounds)
    base = E.simplify(E.substitute(col, {"l": E.Const(0)}), bounds)
    lanes_ok = E.simplify(E.add(col, E.mul(base, -1)), bounds) == E.Var("l")
    if "l" in E.variables(row) or not lanes_ok or E.simplify(E.floormod(base, 4), bounds) != E.Const(0):
        return f"{layout.source!r} does not put 4 consecutive channels (c % 4) in the lanes of one texel"
    rows, cols = bound.flat_shape
    if rows * cols // 4 != n * h * w * groups:
        return (f"{layout.source!r} leaves {rows * cols // 4 - n * h * w * groups} texels of padding beyond the "
                f"channel lanes; use a map whose only padding is c % 4")
    return None


def _residual(residual: int | str | None, chain: list[GpuTensor], sides: dict[str, GpuTensor]) -> GpuTensor | None:
    """The storage a residual names: chain tensor K (0: the input), or a side input by name."""
    if residual is None:
        return None
    return sides[residual] if isinstance(residual, str) else chain[residual]


def _activation(config: Config, name: str, bound: TensorLayout, images: bool) -> GpuTensor:
    """The input, a side input, temp<j> or output tensor; a problem points at the key that gives it its layout
    (config_keys)."""
    problem = texture_problem(bound) if images and bound.layout.separators else "no axis separator"
    kind = "image" if images and problem is None else "buffer"
    if images and bound.layout.separators and problem is not None:
        raise _error(config, tensor_layout_key(config, name), f"the {name} tensor cannot be an image2d texture: "
                                                              f"{problem}")
    channels = bound.logical_shape[3]
    written = role_of(name) not in (Role.INPUT, Role.SIDE)  # by a kernel of the chain
    if kind == "image" and channels % 4 and bound.layout.pad_kind is PadKind.NONE and written:
        raise _error(config, tensor_layout_key(config, name), f"{name} has {channels} channels, not a multiple of 4: "
                                                              f"texels are written whole, so its layout needs a "
                                                              f"pad_value (or 'undef')")
    return GpuTensor.packed(name, TensorKind(kind), bound)


def _filter(config: Config, j: int, out_c: int, in_c: int, kernel: tuple[int, int], texels: bool,
            per_item: int) -> GpuTensor:
    """The target's own filter packing: output channels in the inner lanes, zero-padded.

    texels: one texel = 4 output channels of one (o-block, kh, kw) row at x = input channel;
    otherwise one float4/8/16 vector of output channels per (o-block, kh, kw, input channel).
    """
    if texels:
        text = f"o, i, h, w -> o // {per_item}, o % {per_item} // 4, h, w, |, i, o % 4"
    else:
        text = f"o, i, h, w -> o // {per_item}, h, w, i, o % {per_item}"
    bound = parse_layout(text, FILTER_DIMS, pad=0.0).bind((out_c, in_c, *kernel))
    kind = "image" if texels else "buffer"
    return GpuTensor.packed(f"filter{j}", TensorKind(kind), bound)


def _storage(storages: list[GpuTensor], name: str) -> GpuTensor:
    return next(s for s in storages if s.name == name)


def _fold(storage: GpuTensor, limit: tuple[int, ...]) -> tuple[int, GpuTensor] | None:
    """An activation texture taller than the limit, folded to fit: the innermost row axis e splits into e // f
    (rows) and e % f (the outermost column axis), so the image is f times wider and f times shorter while every
    texel keeps its linear position (row * width + column): the host's bytes are the declared layout's. None when
    it fits already, or no divisor f of e makes it fit."""
    width, height = storage.texels
    if height <= limit[1]:
        return None
    layout = storage.layout.layout
    (cut,) = layout.separators
    extent = storage.layout.physical_shape[cut - 1]
    for fold in range(2, extent + 1):
        if extent % fold or height // fold > limit[1]:
            continue
        if width * fold > limit[0]:
            return None
        inner = layout.outputs[cut - 1]
        outputs = (*layout.outputs[:cut - 1], E.floordiv(inner, fold), E.floormod(inner, fold), *layout.outputs[cut:])
        refolded = Layout(source=layout.source, name=layout.name, dims=layout.dims, outputs=outputs, separators=(cut,),
                          pad_kind=layout.pad_kind, pad_value=layout.pad_value)
        return fold, dataclasses.replace(storage, layout=refolded.bind(storage.layout.logical_shape))
    return None


def _refold(op: ConvOp, by_name: dict[str, GpuTensor]) -> ConvOp:
    """The op reading and writing the folded storages (the same tensors, other image shapes)."""
    pick = (lambda s: None if s is None else by_name.get(s.name, s))
    return dataclasses.replace(op, source=pick(op.source), dest=pick(op.dest), residual=pick(op.residual))


def _check_image(config: Config, storage: GpuTensor, limit: tuple[int, ...]) -> None:
    if storage.kind != "image":
        return
    width, height = storage.texels
    if width > limit[0] or height > limit[1]:
        key = "opencl.filters_in_textures" if storage.role == "filter" else tensor_layout_key(config, storage.name)
        raise _OverLimit(storage, _error(config, key, f"the {storage.name} texture would be {width}x{height} texels "
                                                      f"({storage.map_text}), over the image2d limit {limit[0]}x"
                                                      f"{limit[1]} (opencl.image_limit; PoCL: 8192x8192, Adreno: "
                                                      f"16384x16384)"))


def check_device_limit(config: Config, cplan: OpenCLPlan, device_limit: tuple[int, int], device: str,
                       max_work_group: int) -> None:
    """The device's CL_DEVICE_IMAGE2D_MAX_* may be below the configured limit; so may its work-group size."""
    if math.prod(cplan.local_size) > max_work_group:
        raise _error(config, "opencl.local_size", f"work-group {list(cplan.local_size)} has "
                                                  f"{math.prod(cplan.local_size)} work-items, over {device}'s "
                                                  f"CL_DEVICE_MAX_WORK_GROUP_SIZE {max_work_group}")
    for storage in cplan.storages:
        if storage.kind == "image":
            width, height = storage.texels
            if width > device_limit[0] or height > device_limit[1]:
                raise _error(config, "opencl.image_limit",
                             f"the {storage.name} texture is {width}x{height} texels, over {device}'s image2d "
                             f"limit {device_limit[0]}x{device_limit[1]}")
