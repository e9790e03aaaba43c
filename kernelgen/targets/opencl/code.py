"""ConvOp -> Kernel: the values one OpenCL conv2d kernel is written from. Pure.

Index expressions come from the layout engine and are simplified against the loop bounds,
then split into a part fixed per filter tap (computed once outside the channel loop) and a
part that moves with the 4-channel group c4. Guards are kept only where the bounds cannot
prove them: a tile that divides the output and a conv without padding has none. The
statements themselves are written by templates/opencl/conv.cl.j2.
"""
from __future__ import annotations

import math

import kernelgen.expr as E
from ..gpu.api import OPENCL
from ..gpu.dispatch import GpuTensor
from .addressing import C4, address, c_text, conditions, contiguous4, flat, split
from .grouped import grouped_step
from .model import (Address, ConvBody, ConvOp, InputLoad, InputMode, Kernel, Mask, PadBody, Param, Position, Step,
                    Types)
from .stores import pixel_stores
from .names import NAMES
from ...planner.packing import c_float

# OpenCL C spells an activation as C does, with its min/max builtins (a vector's lanes at once; a literal of the
# element type widens)
OPENCL_C = OPENCL.dialect


def conv_kernel(name: str, op: ConvOp, *, half: bool, half_storage: bool, tile: tuple[int, int, int],
                local: tuple[int, int, int], width: int, vectors: int) -> Kernel:
    """fp32 arithmetic (half=False) on float or half storage, or full fp16 arithmetic (half=True)."""
    t = Types(half_math=half, half_storage=half_storage)
    n_batch, in_h, in_w, in_c = op.geo.in_shape
    th, tw, _ = tile
    per_item = width * vectors
    groups, tail = divmod(in_c, 4)
    glob = op.grid.global_size
    owt, oht, _ = op.tiles
    bounds = {"owt": (0, owt - 1), "oht": (0, oht - 1), "ko": (0, op.channel_blocks - 1), "n": (0, n_batch - 1),
              "kh": (0, op.geo.kernel[0] - 1), "kw": (0, op.geo.kernel[1] - 1), C4: (0, max(math.ceil(in_c / 4) - 1, 0))}
    n_var = E.Var("n") if n_batch > 1 else E.Const(0)
    ko_var = E.Var("ko") if op.channel_blocks > 1 else E.Const(0)
    pixels = [(ty, tx) for ty in range(th) for tx in range(tw)]

    positions, rows, cols, masks = _input_positions(op, pixels, tile, bounds)
    pixel_bounds = bounds | {v: (0, in_h - 1) for v in rows.values()} | {v: (0, in_w - 1) for v in cols.values()}
    masked = {m.pixel for m in masks}
    src = op.source
    src_vec = src.kind == "image" or contiguous4(src.layout)

    def src_index(p: int, channel: E.Expr) -> dict[str, E.Expr]:
        ty, tx = pixels[p]
        return {"n": n_var, "h": E.Var(rows[ty]), "w": E.Var(cols[tx]), "c": channel}

    group_channel = E.mul(E.Var(C4), 4)
    moving: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # pixel -> (xb parts, xc parts)
    for p in range(len(pixels)):
        parts = [split(a, C4) for a in address(src, src_index(p, group_channel), pixel_bounds)]
        if groups and src_vec and all(parts):
            moving[p] = (tuple(c_text(b) for b, _ in parts), tuple(c_text(m) for _, m in parts))

    def input_load(p: int, last_group: int | None) -> InputLoad:
        channel = group_channel if last_group is None else E.Const(4 * last_group)
        if last_group is None and p in moving:
            return InputLoad(pixel=p, mode=InputMode.MOVING, masked=p in masked)
        if src.kind == "image" or (last_group is None and src_vec):
            at = Address(tuple(c_text(a) for a in address(src, src_index(p, channel), pixel_bounds)))
            return InputLoad(pixel=p, mode=InputMode.AT, masked=p in masked, at=at)
        lanes = 4 if last_group is None else tail
        offsets = tuple(c_text(address(src, src_index(p, E.add(channel, E.Const(l))), pixel_bounds)[0])
                        for l in range(lanes))
        return InputLoad(pixel=p, mode=InputMode.LANES, masked=p in masked, lanes=offsets, zeros=4 - lanes)

    # Filter: a base per tap, plus a part moving with c4 and a constant per (lane, vector).
    # One filter load is one accumulator's worth of output channels: a texel, or a float8/16.
    filt = op.filter

    def f_index(lane: E.Expr, v: int) -> dict[str, E.Expr]:
        return {"o": E.add(E.mul(ko_var, per_item), E.Const(v * width)), "i": lane, "h": E.Var("kh"),
                "w": E.Var("kw")}

    f_parts = [split(a, C4) for a in address(filt, f_index(group_channel, 0), bounds)]
    assert all(f_parts), "the target's own filter packings are separable in c4"

    def delta(lane: int, v: int, last_group: int | None) -> tuple[int, ...]:
        channel = E.add(group_channel if last_group is None else E.Const(4 * last_group), E.Const(lane))
        out = []
        for a, (b, m) in zip(address(filt, f_index(channel, v), bounds), f_parts):
            d = E.simplify(E.add(a, E.mul(b, -1), E.mul(m, -1) if last_group is None else E.Const(0)), bounds)
            assert isinstance(d, E.Const), E.to_text(d)
            out.append(d.value)
        return tuple(out)

    def step(lanes: int, last_group: int | None) -> Step:
        return Step(lanes=lanes, moving=last_group is None,
                    loads=tuple(input_load(p, last_group) for p in range(len(pixels))),
                    filter_deltas=tuple(tuple(delta(lane, v, last_group) for v in range(vectors))
                                        for lane in range(lanes)))

    grouped, filter_base = None, tuple(c_text(b) for b, _ in f_parts)
    if op.geo.groups > 1:
        grouped, filter_base = grouped_step(op, pixels, rows, cols, n_var, ko_var, per_item, width, vectors, bounds,
                                            masked)
        groups, tail, moving = 0, 0, {}
    stores = pixel_stores(t, op, pixels, vectors, width, per_item, n_var, ko_var, bounds, tile)
    epilogue = dict(bias=op.bias.name if op.bias else None,
                    residual=op.residual.name if op.residual else None,
                    residual_kind=op.residual.kind if op.residual else "",
                    bias_offsets=tuple(c_text(E.add(E.mul(ko_var, per_item), E.Const(v * width)))
                                       for v in range(vectors)) if op.bias else (),
                    act=op.geo.epilogue.act, statements=op.geo.epilogue.statements,
                    dialect=OPENCL_C.with_type(t.vec(width), t.literal))
    first_moving = next(iter(moving.values()), ((), ()))
    body = ConvBody(types=t, width=width, vectors=vectors, pixels=len(pixels),
                    early=tuple((v, e) for v, e, idle in zip(("owt", "oht", "nk"), op.tiles, op.grid.idle()) if idle),
                    batch=n_batch > 1, channel_blocks=op.channel_blocks, taps=op.geo.kernel, groups=groups,
                    positions=positions, masks=masks, input_bases=tuple((p, xb) for p, (xb, _) in moving.items()),
                    input_moving=first_moving[1], filter_base=filter_base, grouped=grouped,
                    filter_moving=tuple(c_text(m) for _, m in f_parts), source=src.name, source_kind=src.kind,
                    filter=filt.name, filter_kind=filt.kind, dest=op.dest.name,
                    step=step(4, None) if groups else None, tail=step(tail, groups) if tail else None, stores=stores,
                    **epilogue)
    suffix = "_h" if half else ""
    geo = op.geo
    doc = (f"conv2d #{geo.index}: {list(geo.in_shape)} -> {list(geo.out_shape)}, kernel {list(geo.kernel)}, stride "
           f"{list(geo.stride)}, pad {list(geo.pad)}, dilation {list(geo.dilation)}; NDRange {list(glob)} / "
           f"{list(local)}; work-item tile {th}x{tw} pixels x {per_item} channels "
           f"({vectors} x {t.vec(width)})" + ("; fp16 arithmetic" if half else ""))
    reads = (op.source, op.filter) + ((op.bias,) if op.bias else ()) + (
        (op.residual,) if op.residual and op.residual.name != op.source.name else ())
    return Kernel(name=f"{name}_conv{geo.index}{suffix}", doc=doc, element=t.element,
                  params=(*(_param(s, False) for s in reads), _param(op.dest, True)),
                  args=(*(s.name for s in reads), op.dest.name), global_size=glob, local_size=local, body=body)


def _param(s: GpuTensor, write: bool) -> Param:
    return Param(name=s.name, kind=s.kind, write=write)


def _input_positions(op: ConvOp, pixels: list[tuple[int, int]], tile: tuple[int, int, int], bounds: dict
                     ) -> tuple[tuple[Position, ...], dict[int, str], dict[int, str], tuple[Mask, ...]]:
    """Per tap: the input row of each tile row and the column of each tile column, and masks.

    A mask (zeros from the conv's padding) is needed only where an output pixel that exists
    reads outside the input; pixels past the output's edge read clamped, in-bounds data and
    are never stored. Returns (positions, row variables, column variables, masks).
    """
    _, in_h, in_w, _ = op.geo.in_shape
    _, out_h, out_w, _ = op.geo.out_shape
    positions, checks_of, names = [], {}, {"h": {}, "w": {}}
    geo = op.geo
    for axis, count, tiles_var, step, dil, taps, pad_before, extent, out_extent, tap in (
            ("h", tile[0], "oht", geo.stride[0], geo.dilation[0], geo.kernel[0], geo.pad[0], in_h, out_h, "kh"),
            ("w", tile[1], "owt", geo.stride[1], geo.dilation[1], geo.kernel[1], geo.pad[1], in_w, out_w, "kw")):
        for i in range(count):
            raw = E.add(E.mul(E.Var(tiles_var), count * step), E.Const(i * step - pad_before), E.mul(E.Var(tap), dil))
            may_leave = bool(conditions([(raw, ">=", 0), (raw, "<", extent)], bounds))
            positions.append(Position(axis=axis, index=i, raw=c_text(raw), clamp_to=extent - 1 if may_leave else None))
            last = (out_extent - 1 - i) // count * count + i  # the last existing output index of this row/column
            r = NAMES.raw_index(axis, i)
            checks = [f"{r} >= 0"] if i * step - pad_before < 0 else []
            checks += [f"{r} < {extent}"] if last * step + (taps - 1) * dil - pad_before >= extent else []
            if checks and last >= i:
                checks_of[axis, i] = tuple(checks)
            names[axis][i] = NAMES.index(axis, i)
    masks = []
    for p, (ty, tx) in enumerate(pixels):
        parts = tuple(checks_of[k] for k in (("h", ty), ("w", tx)) if k in checks_of)
        if parts:
            masks.append(Mask(pixel=p, parts=parts))
    return tuple(positions), names["h"], names["w"], tuple(masks)


def pad_kernel(name: str, s: GpuTensor, grown: tuple[int, ...], local: int, half_storage: bool = False) -> Kernel:
    """Walks the logical domain grown to whole blocks; stores pad_value past the tensor's extents."""
    t = Types(half_math=False, half_storage=half_storage)
    total = math.prod(grown)
    glob = math.ceil(total / local) * local
    dims = s.layout.layout.dims
    bounds = {d: (0, g - 1) for d, g in zip(dims, grown)}
    strides = [math.prod(grown[i + 1:]) for i in range(len(grown))]
    outside = " || ".join(f"{d} >= {e}" for d, e, g in zip(dims, s.layout.logical_shape, grown) if g > e)
    assert outside, "a pad kernel only for a layout with padding"
    offset = flat(s.layout, {d: E.Var(d) for d in dims}, bounds)
    body = PadBody(types=t, total=total, decode=tuple(zip(dims, strides, grown)), outside=outside,
                   offset=c_text(offset), value=c_float(s.layout.layout.pad_value), dest=s.name)
    return Kernel(name=f"{name}_pad_{s.name}", doc=f"layout padding of {s.name} holds pad_value "
                                                   f"{s.layout.layout.pad_value:g}; NDRange [{glob}] / [{local}]",
                  params=(_param(s, True),), element=t.element, args=(s.name,), global_size=(glob,),
                  local_size=(local,), body=body)

