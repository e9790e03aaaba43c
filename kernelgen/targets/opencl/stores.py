"""Where each work-item's accumulators go: whole texels, vstore4 of 4 adjacent channels, or
one guarded store per channel lane. Pure; templates/opencl/conv.cl.j2 writes the stores.

Each pixel computes one base address (ob<p>) for the first channel of its block when the
channel groups differ from it by constants (_channel_deltas); else each store gets its own.
"""
from __future__ import annotations

import kernelgen.expr as E
from ..gpu.api import OPENCL
from ..gpu.dispatch import GpuTensor
from ..gpu.stores import tail_fill, vector_stores
from .addressing import address, c_text, when
from .model import Address, ConvOp, GroupStore, LaneStore, PixelStore, StoreMode, Types
from .names import NAMES

LANES = "0123456789abcdef"


def pixel_stores(t: Types, op: ConvOp, pixels: list[tuple[int, int]], vectors: int, width: int, per_item: int,
                 n_var: E.Expr, ko_var: E.Expr, bounds: dict, tile: tuple[int, int, int]) -> tuple[PixelStore, ...]:
    dest = op.dest
    _, out_h, out_w, out_c = op.geo.out_shape
    th, tw, _ = tile
    image = dest.kind == "image"
    vec_store = not image and vector_stores(OPENCL, dest.layout)
    lane_wise = not image and not vec_store
    fill = tail_fill(dest.layout)  # a texel is written whole: zeros past the channels of a layout without pad_value
    pad = 0.0 if fill is None else fill
    block = E.mul(ko_var, per_item)  # first output channel of this work-item
    deltas = _channel_deltas(dest, list(range(per_item)) if lane_wise else list(range(0, per_item, 4)), block,
                             bounds)
    out = []
    for p, (ty, tx) in enumerate(pixels):
        oh = E.add(E.mul(E.Var("oht"), th), E.Const(ty))
        ow = E.add(E.mul(E.Var("owt"), tw), E.Const(tx))
        inside = when([(oh, "<", out_h), (ow, "<", out_w)], bounds)
        if inside is False:
            continue  # this tile position never lands on the output
        index = {"n": n_var, "h": oh, "w": ow}

        def where(cc: int) -> Address:  # channel block + cc of this pixel
            if deltas is not None:
                return Address((NAMES.output_base(p),), deltas[cc])
            return Address(tuple(c_text(a) for a in address(dest, index | {"c": E.add(block, E.Const(cc))}, bounds)))

        groups = []
        for v in range(vectors):
            for q in range(width // 4):
                cc = v * width + 4 * q  # channel offset of this group inside the block
                channel = E.add(block, E.Const(cc))
                acc = NAMES.accumulator(p, v)
                lanes = [f"{acc}.s{LANES[4 * q + l]}" for l in range(4)]
                value = acc if width == 4 else f"{acc}.s{LANES[4 * q: 4 * q + 4]}"
                full = when([(E.add(channel, E.Const(3)), "<", out_c)], bounds)
                if image:
                    exists = when([(channel, "<", out_c)], bounds)
                    if exists is False:
                        continue
                    partial = full is not True and out_c % 4
                    tail = tuple(lanes[:out_c % 4]) + (t.literal(pad),) * (4 - out_c % 4) if partial else ()
                    groups.append(GroupStore(mode=StoreMode.TEXEL, value=value, at=where(cc), guard=_cond(exists),
                                             tail=tail, tail_when=full if partial and full is not False else None))
                    continue
                lane_stores = []
                for l in range(4):
                    exists = when([(E.add(channel, E.Const(l)), "<", out_c)], bounds)
                    if exists is False:
                        continue
                    at = (Address((NAMES.output_base(p),), (deltas[cc][0] + l,)) if vec_store and deltas is not None else
                          Address(where(cc).parts, (l,)) if vec_store and l else where(cc + l))
                    lane_stores.append(LaneStore(value=lanes[l], at=at, guard=_cond(exists)))
                if not vec_store or full is False:
                    groups.append(GroupStore(mode=StoreMode.LANES, value=value, at=None, lanes=tuple(lane_stores)))
                elif full is True or out_c % 4 == 0:
                    groups.append(GroupStore(mode=StoreMode.VECTOR, value=value, at=where(cc), guard=_cond(full)))
                else:
                    groups.append(GroupStore(mode=StoreMode.VECTOR_OR_LANES, value=value, at=where(cc), guard=full,
                                             lanes=tuple(lane_stores)))
        base = None
        if deltas is not None:
            base = tuple(c_text(a) for a in address(dest, index | {"c": block}, bounds))
        residual = _residual(op.residual, index, block, vectors, width, out_c, bounds) if op.residual else ()
        out.append(PixelStore(pixel=p, inside=_cond(inside), base=base, groups=tuple(groups), residual=residual))
    return tuple(out)


def _residual(source: GpuTensor, index: dict, block: E.Expr, vectors: int, width: int, out_c: int,
              bounds: dict) -> tuple[tuple[Address | None, ...], ...]:
    """Per accumulator: where the input holds its channels at this pixel (texels of 4, or lanes)."""
    per_vector = []
    for v in range(vectors):
        step = 4 if source.kind == "image" else 1
        items: list[Address | None] = []
        for lane in range(0, width, step):
            channel = E.add(block, E.Const(v * width + lane))
            if when([(channel, "<", out_c)], bounds) is False:
                items.append(None)  # past the channels: 0 (a texel of zeros, a zero lane)
                continue
            items.append(Address(tuple(c_text(a) for a in address(source, index | {"c": channel}, bounds))))
        per_vector.append(tuple(items))
    return tuple(per_vector)


def _cond(proved: str | bool) -> str | None:
    """A `when` answer that is not False: None when proved, else the C condition."""
    assert proved is not False
    return None if proved is True else proved


def _channel_deltas(dest: GpuTensor, channels: list[int], base: E.Expr, bounds: dict) -> dict[int, tuple[int, ...]] | None:
    """Address of channel base + cc minus that of channel base, per cc, when the same for every pixel.

    True for layouts whose channel terms involve no other dim (NHWC, blocked, the texture
    maps): each pixel then needs one base address and its stores add constants.
    """
    shape = dest.layout.logical_shape
    generic = address(dest, {d: E.Var(d) for d in "nhwc"}, {d: (0, e - 1) for d, e in zip("nhwc", shape)})
    for component in generic:
        for term in component.terms if isinstance(component, E.Add) else (component,):
            if "c" in E.variables(term) and len(E.variables(term)) > 1:
                return None
    origin = {"n": E.Const(0), "h": E.Const(0), "w": E.Const(0)}
    start = address(dest, origin | {"c": base}, bounds)
    deltas = {}
    for cc in channels:
        here = address(dest, origin | {"c": E.add(base, E.Const(cc))}, bounds)
        diff = [E.simplify(E.add(a, E.mul(b, -1)), bounds) for a, b in zip(here, start)]
        if not all(isinstance(d, E.Const) for d in diff):
            return None
        deltas[cc] = tuple(d.value for d in diff)
    return deltas
