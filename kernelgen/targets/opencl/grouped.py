"""The reduction of a grouped or depthwise conv2d kernel: values for templates/opencl/conv.cl.j2. Pure.

Output channel k reads only the C/G input channels of its group, k // (K/G) * (C/G) + rc. So there is
no input value shared by all of a work-item's output channels (the dense kernel's broadcast of one
input lane against a vector of filter channels): per tap and per group channel rc, each accumulator
vector is multiplied lane by lane with an input vector of the same width. That vector is one vload
(or one texel) where its lanes are adjacent channels (depthwise, channel multiplier 1), one broadcast
load where all lanes read the same channel (groups wider than an accumulator), else one load per lane.
A depthwise 3x3 is then 9 vector fmas per output vector: memory-bound, as it should be.
"""
from __future__ import annotations

import kernelgen.expr as E
from ...layout import TensorLayout
from .addressing import address, c_text, conditions, contiguous4, split
from .model import Address, ConvOp, GroupedLoad, GroupedMode, GroupedStep, LaneLoad

RC = "rc"


def grouped_step(op: ConvOp, pixels: list[tuple[int, int]], rows: dict[int, str], cols: dict[int, str],
                 n_var: E.Expr, ko_var: E.Expr, per_item: int, width: int, vectors: int, bounds: dict,
                 masked: set[int]) -> tuple[GroupedStep, tuple[str, ...]]:
    """(the rc loop's body, the filter base fb per tap)."""
    geo = op.geo
    in_h, in_w, in_c = geo.in_shape[1:]
    out_c = geo.out_channels
    per_group_in, per_group_out = in_c // geo.groups, out_c // geo.groups
    bounds = bounds | {RC: (0, per_group_in - 1)} | {v: (0, in_h - 1) for v in rows.values()} | {
        v: (0, in_w - 1) for v in cols.values()}
    rc = E.Var(RC) if per_group_in > 1 else E.Const(0)  # depthwise: one channel per group, lanes known here

    # filter: fb per tap, fc moving with rc, a constant per accumulator vector
    def f_address(v: int) -> E.Expr | tuple[E.Expr, ...]:
        return address(op.filter, {"o": E.add(E.mul(ko_var, per_item), E.Const(v * width)), "i": rc,
                                   "h": E.Var("kh"), "w": E.Var("kw")}, bounds)

    f_parts = [split(a, RC) for a in f_address(0)]
    assert all(f_parts), "the target's own filter packings are separable in rc"
    deltas = []
    for v in range(vectors):
        d = [E.simplify(E.add(a, E.mul(b, -1), E.mul(m, -1)), bounds) for a, (b, m) in zip(f_address(v), f_parts)]
        assert all(isinstance(x, E.Const) for x in d), [E.to_text(x) for x in d]
        deltas.append(tuple(x.value for x in d))

    src = op.source
    loads = []
    for p, (ty, tx) in enumerate(pixels):
        index = {"n": n_var, "h": E.Var(rows[ty]), "w": E.Var(cols[tx])}
        for v in range(vectors):
            lanes = []
            for lane in range(width):
                k = E.add(E.mul(ko_var, per_item), E.Const(v * width + lane))
                channel = E.add(E.mul(E.floordiv(k, per_group_out, bounds), per_group_in), rc)
                exists = conditions([(k, "<", out_c)], bounds)
                if E.interval(k, bounds)[0] >= out_c:
                    lanes.append(None)  # past the tensor in every block: 0
                    continue
                lanes.append((channel, exists[0] if exists else None))
            loads.append(_load(src, index, lanes, width, bounds, p, v, p in masked,
                               depthwise_run=per_group_in == 1 and per_group_out == 1))
    step = GroupedStep(channels=per_group_in, filter_moving=tuple(c_text(m) for _, m in f_parts),
                       filter_deltas=tuple(deltas), loads=tuple(loads))
    return step, tuple(c_text(b) for b, _ in f_parts)


def _load(src, index: dict, lanes: list, width: int, bounds: dict, p: int, v: int, masked: bool,
          depthwise_run: bool) -> GroupedLoad:
    """The input vector accumulator v of pixel p multiplies: a vector, a broadcast, or lane by lane."""
    image = src.kind == "image"
    if all(lane is not None and lane[1] is None for lane in lanes):  # every lane exists, unguarded
        addresses = [address(src, index | {"c": channel}, bounds) for channel, _ in lanes]
        first = addresses[0]
        at = Address(tuple(c_text(x) for x in first))
        offsets = [_offset(a, first, bounds) for a in addresses]
        if image:
            exprs = [_component(src.layout, index | {"c": channel}, bounds) for channel, _ in lanes]
            components = [_const(c) for c in exprs]
            if offsets == [0] * width and all(c == exprs[0] for c in exprs):  # one texel lane for all
                return GroupedLoad(pixel=p, vector=v, mode=GroupedMode.BROADCAST, masked=masked, at=at,
                                   lane=LaneLoad(at=at, guard=None, component=components[0],
                                                 component_at=None if components[0] is not None else c_text(exprs[0])))
            if width == 4 and offsets == [0] * 4 and None not in components:  # one texel, its lanes swizzled
                return GroupedLoad(pixel=p, vector=v, mode=GroupedMode.VECTOR, masked=masked, at=at,
                                   swizzle="" if components == [0, 1, 2, 3] else "".join(map(str, components)))
        elif offsets == [0] * width:
            return GroupedLoad(pixel=p, vector=v, mode=GroupedMode.BROADCAST, masked=masked, at=at,
                               lane=LaneLoad(at=at, guard=None))
        elif offsets == list(range(width)) or (depthwise_run and contiguous4(src.layout, width)):
            # adjacent channels: provably, or because a depthwise vector's lanes are channels k0..k0+width-1
            # with k0 a multiple of width, and the layout keeps every aligned run of width channels together
            return GroupedLoad(pixel=p, vector=v, mode=GroupedMode.VECTOR, masked=masked, at=at)
    out = []
    for lane in lanes:
        if lane is None:
            out.append(None)
            continue
        channel, guard = lane
        at = Address(tuple(c_text(x) for x in address(src, index | {"c": channel}, bounds)))
        component = _component(src.layout, index | {"c": channel}, bounds) if image else None
        out.append(LaneLoad(at=at, guard=guard, component=_const(component) if image else None,
                            component_at=c_text(component) if image and _const(component) is None else None))
    return GroupedLoad(pixel=p, vector=v, mode=GroupedMode.LANES, masked=masked, lanes=tuple(out))


def _component(layout: TensorLayout, index: dict, bounds: dict) -> E.Expr:
    """The RGBA lane of a texel holding this element (image storages)."""
    _, col = layout.offsets(index, bounds)
    return E.simplify(E.floormod(col, 4), bounds)


def _const(expr: E.Expr) -> int | None:
    return expr.value if isinstance(expr, E.Const) else None


def _offset(a: tuple[E.Expr, ...], b: tuple[E.Expr, ...], bounds: dict) -> int | None:
    """A buffer offset's constant distance a - b; for image texels 0 when they are the same texel;
    None when the distance is not a constant."""
    diffs = [E.simplify(E.add(x, E.mul(y, -1)), bounds) for x, y in zip(a, b)]
    if not all(isinstance(d, E.Const) for d in diffs):
        return None
    if len(diffs) == 1:
        return diffs[0].value
    return 0 if all(d.value == 0 for d in diffs) else None
