"""ConvOp -> Kernel: the statements of one OpenCL conv2d kernel, as ready text. Pure.

Index expressions come from the layout engine (TensorLayout.offsets, seed 004) and are
simplified against the loop bounds, then split into a part fixed per filter tap (computed
once outside the channel loop) and a part that moves with the 4-channel group c4. Guards
are emitted only where the bounds cannot prove them (seed 000's halo guards, seed 003's
tails): a tile that divides the output and a conv without padding has none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ... import expr as E
from ...layout import PadKind, TensorLayout
from .model import ConvOp, Kernel, Storage
from ...planner.packing import c_float

LANES = "0123456789abcdef"
C4 = "c4"


@dataclass(frozen=True, slots=True)
class _Types:
    """fp32 arithmetic on float or half storage, or full fp16 arithmetic (cl_khr_fp16)."""

    half_math: bool
    half_storage: bool

    @property
    def scalar(self) -> str:
        return "half" if self.half_math else "float"

    def vec(self, n: int) -> str:
        return self.scalar if n == 1 else f"{self.scalar}{n}"

    def zero(self, n: int) -> str:
        return f"({self.vec(n)})(0)" if self.half_math else f"({self.vec(n)})(0.0f)"

    def literal(self, value: float) -> str:
        return f"(half){c_float(value)}" if self.half_math else c_float(value)

    def param(self, s: Storage, write: bool) -> str:
        if s.kind == "image":
            return f"__{'write' if write else 'read'}_only image2d_t {s.name}"
        element = "half" if self.half_storage else "float"
        return f"__global {'' if write else 'const '}{element} *restrict {s.name}"

    def read_image(self, name: str, coord: str) -> str:
        return f"read_image{'h' if self.half_math else 'f'}({name}, kg_sampler, {coord})"

    def write_image(self, name: str, coord: str, value: str) -> str:
        return f"write_image{'h' if self.half_math else 'f'}({name}, {coord}, {value});"

    def vload(self, n: int, name: str, offset: str) -> str:
        # half storage with fp32 math goes through vload_half, which needs no cl_khr_fp16
        if self.half_storage and not self.half_math:
            return f"vload_half{n if n > 1 else ''}(0, {name} + {offset})"
        return f"{name}[{offset}]" if n == 1 else f"vload{n}(0, {name} + {offset})"

    def vstore(self, n: int, value: str, name: str, offset: str) -> str:
        if self.half_storage and not self.half_math:
            return f"vstore_half{n if n > 1 else ''}({value}, 0, {name} + {offset});"
        return f"{name}[{offset}] = {value};" if n == 1 else f"vstore{n}({value}, 0, {name} + {offset});"


# ---------------------------------------------------------------- addresses

def flat(layout: TensorLayout, index: dict[str, E.Expr], bounds: dict) -> E.Expr:
    """Row-major offset across every flattened group: the element index into a buffer."""
    return E.simplify(layout.flat_offset(index, bounds), bounds)


def address(s: Storage, index: dict[str, E.Expr], bounds: dict) -> tuple[E.Expr, ...]:
    """(x, y) texel of an image, (element offset,) of a buffer."""
    return _address(s, tuple(sorted(index.items())), tuple(sorted(bounds.items())))


@lru_cache(maxsize=4096)  # the fp32 and fp16 kernels of a config ask for the same addresses
def _address(s: Storage, index_items: tuple, bounds_items: tuple) -> tuple[E.Expr, ...]:
    index, bounds = dict(index_items), dict(bounds_items)
    if s.kind == "image":
        row, col = s.layout.offsets(index, bounds)
        return (E.simplify(E.floordiv(col, 4), bounds), E.simplify(row, bounds))
    return (flat(s.layout, index, bounds),)


def split(expr: E.Expr, var: str) -> tuple[E.Expr, E.Expr] | None:
    """expr = fixed + moving, moving depending on `var` alone; None when a term mixes both."""
    fixed, moving = [], []
    for term in expr.terms if isinstance(expr, E.Add) else (expr,):
        names = E.variables(term)
        if var in names and len(names) > 1:
            return None
        (moving if var in names else fixed).append(term)
    return E.add(*fixed, E.Const(0)), E.add(*moving, E.Const(0))


@lru_cache(maxsize=64)
def contiguous4(layout: TensorLayout) -> bool:
    """Do channels 4*g .. 4*g+3 of every full group sit at consecutive offsets (vload4-able)?

    Exact: when every term of the offset depends on one dim at most, only the channel terms
    matter; otherwise every element of the full groups is checked, a million at a time.
    """
    n, h, w, c = layout.logical_shape
    full = c - c % 4
    if full == 0:
        return True
    bounds = {d: (0, e - 1) for d, e in zip("nhwc", layout.logical_shape)}
    offset = flat(layout, {d: E.Var(d) for d in "nhwc"}, bounds)
    terms = offset.terms if isinstance(offset, E.Add) else (offset,)
    if all(len(E.variables(t)) <= 1 for t in terms):
        channel = np.arange(full)
        values = np.broadcast_to(np.asarray(E.evaluate(E.add(*(t for t in terms if "c" in E.variables(t)),
                                                                E.Const(0)), {"c": channel})), channel.shape)
        return bool(np.array_equal(values - channel % 4, values[::4].repeat(4)))
    rows = max(1, (1 << 20) // (w * full))  # about a million elements per numpy evaluation
    for ni in range(n):
        for h0 in range(0, h, rows):
            hs, ws, cs = np.meshgrid(np.arange(h0, min(h0 + rows, h)), np.arange(w), np.arange(full), indexing="ij")
            values = np.broadcast_to(np.asarray(E.evaluate(offset, {"n": ni, "h": hs, "w": ws, "c": cs})), hs.shape)
            if not np.array_equal(values - cs % 4, values[..., ::4].repeat(4, axis=-1)):
                return False
    return True


def conditions(checks: list[tuple[E.Expr, str, int]], bounds: dict) -> list[str]:
    """C comparisons the bounds cannot prove (as planner._cond)."""
    out = []
    for expr, op, limit in checks:
        lo, hi = E.interval(expr, bounds)
        if (op == ">=" and lo >= limit) or (op == "<" and hi < limit):
            continue
        out.append(f"{E.to_c(expr)} {op} {limit}")
    return out


def when(checks: list[tuple[E.Expr, str, int]], bounds: dict) -> str | bool:
    """True when the bounds prove every check, False when they refute one, else the C condition."""
    needed = conditions(checks, bounds)
    for expr, op, limit in checks:
        lo, hi = E.interval(expr, bounds)
        if (op == "<" and lo >= limit) or (op == ">=" and hi < limit):
            return False
    return " && ".join(needed) if needed else True


def _guarded(cond: str | bool, statement: str) -> list[str]:
    return [] if cond is False else [statement] if cond is True else [f"if ({cond}) {statement}"]


def _c(expr: E.Expr) -> str:
    text = E.to_c(expr)
    return text[1:-1] if text.startswith("(") and text.endswith(")") and text.count("(") == 1 else text


# ---------------------------------------------------------------- the conv kernel

def conv_kernel(name: str, op: ConvOp, *, half: bool, half_storage: bool, tile: tuple[int, int, int],
                local: tuple[int, int, int], width: int, vectors: int) -> Kernel:
    """fp32 arithmetic (half=False) on float or half storage, or full fp16 arithmetic (half=True)."""
    t = _Types(half_math=half, half_storage=half_storage)
    n_batch, in_h, in_w, in_c = op.geo.in_shape
    th, tw, _ = tile
    per_item = width * vectors
    groups, tail = divmod(in_c, 4)
    owt, oht, _ = op.tiles
    glob = tuple(math.ceil(e / l) * l for e, l in zip(op.tiles, local))
    bounds = {"owt": (0, owt - 1), "oht": (0, oht - 1), "ko": (0, op.channel_blocks - 1), "n": (0, n_batch - 1),
              "kh": (0, op.geo.kernel[0] - 1), "kw": (0, op.geo.kernel[1] - 1), C4: (0, max(math.ceil(in_c / 4) - 1, 0))}
    n_var = E.Var("n") if n_batch > 1 else E.Const(0)
    ko_var = E.Var("ko") if op.channel_blocks > 1 else E.Const(0)

    prologue = ["const int owt = get_global_id(0), oht = get_global_id(1), nk = get_global_id(2);"]
    early = [f"{v} >= {e}" for v, e, g in zip(("owt", "oht", "nk"), op.tiles, glob) if g > e]
    if early:
        prologue.append(f"if ({' || '.join(early)}) return;")
    if n_batch > 1 and op.channel_blocks > 1:
        prologue.append(f"const int n = nk / {op.channel_blocks}, ko = nk % {op.channel_blocks};")
    elif n_batch > 1 or op.channel_blocks > 1:
        prologue.append(f"const int {'n' if n_batch > 1 else 'ko'} = nk;")
    pixels = [(ty, tx) for ty in range(th) for tx in range(tw)]
    acc = {(p, v): f"acc{p}_{v}" for p in range(len(pixels)) for v in range(vectors)}
    for p in range(len(pixels)):
        prologue.append(f"{t.vec(width)} " + ", ".join(f"{acc[p, v]} = {t.zero(width)}" for v in range(vectors)) + ";")

    setup, rows, cols, masked = _input_positions(op, pixels, tile, bounds)
    pixel_bounds = bounds | {v: (0, in_h - 1) for v in rows.values()} | {v: (0, in_w - 1) for v in cols.values()}

    src = op.source
    src_vec = src.kind == "image" or contiguous4(src.layout)

    def src_index(p: int, channel: E.Expr) -> dict[str, E.Expr]:
        ty, tx = pixels[p]
        return {"n": n_var, "h": E.Var(rows[ty]), "w": E.Var(cols[tx]), "c": channel}

    step, tail_lines = [], []
    group_channel = E.mul(E.Var(C4), 4)
    moving: dict[int, tuple[str, ...]] = {}
    for p in range(len(pixels)):
        addr = address(src, src_index(p, group_channel), pixel_bounds)
        parts = [split(a, C4) for a in addr]
        if groups and src_vec and all(parts):
            base = ", ".join(_c(b) for b, _ in parts)
            setup.append(f"const int{'2' if src.kind == 'image' else ''} xb{p} = "
                         f"{'(int2)(' + base + ')' if src.kind == 'image' else base};")
            moving[p] = tuple(_c(m) for _, m in parts)
    if moving:
        sample = next(iter(moving.values()))
        step.append(f"const int{'2' if src.kind == 'image' else ''} xc = "
                    f"{'(int2)(' + ', '.join(sample) + ')' if src.kind == 'image' else sample[0]};")

    def load_input(p: int, last_group: int | None) -> str:
        channel = group_channel if last_group is None else E.Const(4 * last_group)
        if src.kind == "image":
            if last_group is None and p in moving:
                return t.read_image(src.name, f"xb{p} + xc")
            x, y = address(src, src_index(p, channel), pixel_bounds)
            return t.read_image(src.name, f"(int2)({_c(x)}, {_c(y)})")
        if last_group is None and p in moving:
            return t.vload(4, src.name, f"xb{p} + xc")
        if last_group is None and src_vec:
            return t.vload(4, src.name, _c(address(src, src_index(p, channel), pixel_bounds)[0]))
        lanes = 4 if last_group is None else tail
        loads = [t.vload(1, src.name, _c(address(src, src_index(p, E.add(channel, E.Const(l))), pixel_bounds)[0]))
                 for l in range(lanes)]
        return f"({t.vec(4)})({', '.join(loads + [t.literal(0.0)] * (4 - lanes))})"

    # Filter: a base per tap, plus a part moving with c4 and a constant per (lane, vector).
    # One filter load is one accumulator's worth of output channels: a texel, or a float8/16.
    filt = op.filter

    def f_index(lane: E.Expr, v: int) -> dict[str, E.Expr]:
        return {"o": E.add(E.mul(ko_var, per_item), E.Const(v * width)), "i": lane, "h": E.Var("kh"),
                "w": E.Var("kw")}

    base_addr = address(filt, f_index(group_channel, 0), bounds)
    f_parts = [split(a, C4) for a in base_addr]
    assert all(f_parts), "the target's own filter packings are separable in c4"
    f_base = [b for b, _ in f_parts]
    if filt.kind == "image":
        setup.append(f"const int2 fb = (int2)({_c(f_base[0])}, {_c(f_base[1])});")
        step.append(f"const int2 fc = (int2)({_c(f_parts[0][1])}, {_c(f_parts[1][1])});")
    else:
        setup.append(f"const int fb = {_c(f_base[0])};")
        step.append(f"const int fc = {_c(f_parts[0][1])};")

    def delta(lane: int, v: int, last_group: int | None) -> list[int]:
        channel = E.add(group_channel if last_group is None else E.Const(4 * last_group), E.Const(lane))
        addr = address(filt, f_index(channel, v), bounds)
        out = []
        for a, b, (_, m) in zip(addr, f_base, f_parts):
            d = E.simplify(E.add(a, E.mul(b, -1), E.mul(m, -1) if last_group is None else E.Const(0)), bounds)
            assert isinstance(d, E.Const), E.to_text(d)
            out.append(d.value)
        return out

    def load_filter(lane: int, v: int, last_group: int | None) -> str:
        d = delta(lane, v, last_group)
        moving_part = "fc" if last_group is None else None
        if filt.kind == "image":
            coord = "fb" + (f" + {moving_part}" if moving_part else "") + (
                f" + (int2)({d[0]}, {d[1]})" if any(d) else "")
            return t.read_image(filt.name, coord)
        offset = "fb" + (f" + {moving_part}" if moving_part else "") + (f" + {d[0]}" if d[0] else "")
        return t.vload(width, filt.name, offset)

    def body(lanes: int, last_group: int | None) -> list[str]:
        lines = []
        for p in range(len(pixels)):
            value = load_input(p, last_group)
            if p in masked:
                value = f"m{p} ? {value} : {t.zero(4)}"
            lines.append(f"const {t.vec(4)} x{p} = {value};")
        for lane in range(lanes):
            for v in range(vectors):
                lines.append(f"const {t.vec(width)} w{lane}_{v} = {load_filter(lane, v, last_group)};")
            for p in range(len(pixels)):
                for v in range(vectors):
                    lines.append(f"{acc[p, v]} = fma(({t.vec(width)})(x{p}.s{lane}), w{lane}_{v}, {acc[p, v]});")
        return lines

    step += body(4, None)
    if tail:
        tail_lines = body(tail, groups)
    if groups == 0:
        step = []

    epilogue = _stores(t, op, pixels, acc, vectors, width, per_item, n_var, ko_var, bounds, tile)
    suffix = "_h" if half else ""
    doc = (f"conv2d #{op.geo.index}: {list(op.geo.in_shape)} -> {list(op.geo.out_shape)}, kernel {list(op.geo.kernel)}, stride "
           f"{list(op.geo.stride)}, pad {list(op.geo.pad)}, dilation {list(op.geo.dilation)}; NDRange {list(glob)} / "
           f"{list(local)}; work-item tile {th}x{tw} pixels x {per_item} channels "
           f"({vectors} x {t.vec(width)})" + ("; fp16 arithmetic" if half else ""))
    return Kernel(name=f"{name}_conv{op.geo.index}{suffix}", doc=doc,
                  params=(t.param(op.source, False), t.param(op.filter, False), t.param(op.dest, True)),
                  args=(op.source.name, op.filter.name, op.dest.name), global_size=glob, local_size=local,
                  prologue=tuple(prologue), taps=op.geo.kernel, tap_setup=tuple(setup), groups=groups,
                  step=tuple(step), tail=tuple(tail_lines), epilogue=tuple(epilogue))


def _input_positions(op: ConvOp, pixels: list[tuple[int, int]], tile: tuple[int, int, int],
                     bounds: dict) -> tuple[list[str], dict[int, str], dict[int, str], set[int]]:
    """Per tap: the input row of each tile row and the column of each tile column, and masks.

    A mask (zeros from the conv's padding) is needed only where an output pixel that exists
    reads outside the input; pixels past the output's edge read clamped, in-bounds data and
    are never stored. Returns (setup lines, row variables, column variables, masked pixels).
    """
    _, in_h, in_w, _ = op.geo.in_shape
    _, out_h, out_w, _ = op.geo.out_shape
    setup, masks, names = [], {}, {"h": {}, "w": {}}
    for axis, count, tiles_var, step, dil, taps, pad_before, extent, out_extent, tap in (
            ("h", tile[0], "oht", op.geo.stride[0], op.geo.dilation[0], op.geo.kernel[0], op.geo.pad[0], in_h, out_h, "kh"),
            ("w", tile[1], "owt", op.geo.stride[1], op.geo.dilation[1], op.geo.kernel[1], op.geo.pad[1], in_w, out_w, "kw")):
        for i in range(count):
            raw = E.add(E.mul(E.Var(tiles_var), count * step), E.Const(i * step - pad_before), E.mul(E.Var(tap), dil))
            var = f"i{axis}{i}"
            if conditions([(raw, ">=", 0), (raw, "<", extent)], bounds):
                setup.append(f"const int r{axis}{i} = {_c(raw)}, {var} = clamp(r{axis}{i}, 0, {extent - 1});")
            else:
                setup.append(f"const int {var} = {_c(raw)};")
            last = (out_extent - 1 - i) // count * count + i  # the last existing output index of this row/column
            checks = [f"r{axis}{i} >= 0"] if i * step - pad_before < 0 else []
            checks += [f"r{axis}{i} < {extent}"] if last * step + (taps - 1) * dil - pad_before >= extent else []
            if checks and last >= i:
                masks[axis, i] = " && ".join(checks)
            names[axis][i] = var
    masked = set()
    for p, (ty, tx) in enumerate(pixels):
        parts = [masks[k] for k in (("h", ty), ("w", tx)) if k in masks]
        if parts:
            setup.append(f"const int m{p} = {' && '.join(f'({x})' if '&&' in x else x for x in parts)};")
            masked.add(p)
    return setup, names["h"], names["w"], masked


def _lane(name: str, index: int, width: int) -> str:
    return f"{name}.s{LANES[index]}"


def _channel_deltas(dest: Storage, channels: list[int], base: E.Expr, bounds: dict) -> dict[int, tuple[int, ...]] | None:
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


def _plus(base: str, delta: tuple[int, ...]) -> str:
    if not any(delta):
        return base
    return f"{base} + {delta[0]}" if len(delta) == 1 else f"{base} + (int2)({delta[0]}, {delta[1]})"


def _stores(t: _Types, op: ConvOp, pixels, acc, vectors: int, width: int, per_item: int, n_var, ko_var,
            bounds: dict, tile) -> list[str]:
    """Write each pixel's accumulators: whole texels, vstore4 of 4 channels, or guarded lanes.

    Each pixel computes one base address (ob<p>) for the first channel of its block; the
    channel groups add constants (_channel_deltas), else each store gets its own address.
    """
    dest = op.dest
    _, out_h, out_w, out_c = op.geo.out_shape
    th, tw, _ = tile
    vec_store = dest.kind == "buffer" and contiguous4(dest.layout)
    lane_wise = dest.kind == "buffer" and not vec_store
    pad = dest.layout.layout.pad_value if dest.layout.layout.pad_kind is PadKind.VALUE else 0.0
    block = E.mul(ko_var, per_item)  # first output channel of this work-item
    deltas = _channel_deltas(dest, list(range(per_item)) if lane_wise else list(range(0, per_item, 4)), block,
                             bounds)
    image = dest.kind == "image"
    lines = []
    for p, (ty, tx) in enumerate(pixels):
        oh = E.add(E.mul(E.Var("oht"), th), E.Const(ty))
        ow = E.add(E.mul(E.Var("owt"), tw), E.Const(tx))
        inside = when([(oh, "<", out_h), (ow, "<", out_w)], bounds)
        if inside is False:
            continue  # this tile position never lands on the output
        index = {"n": n_var, "h": oh, "w": ow}

        def where(cc: int) -> str:  # the address of channel block + cc of this pixel, as text
            if deltas is not None:
                return _plus(f"ob{p}", deltas[cc])
            parts = address(dest, index | {"c": E.add(block, E.Const(cc))}, bounds)
            return f"(int2)({_c(parts[0])}, {_c(parts[1])})" if image else _c(parts[0])

        body = []
        if deltas is not None:
            parts = address(dest, index | {"c": block}, bounds)
            body.append(f"const int2 ob{p} = (int2)({_c(parts[0])}, {_c(parts[1])});" if image else
                        f"const int ob{p} = {_c(parts[0])};")
        for v in range(vectors):
            for q in range(width // 4):
                cc = v * width + 4 * q  # channel offset of this group inside the block
                channel = E.add(block, E.Const(cc))
                lanes = [_lane(acc[p, v], 4 * q + l, width) for l in range(4)]
                value = acc[p, v] if width == 4 else f"{acc[p, v]}.s{LANES[4 * q: 4 * q + 4]}"
                full = when([(E.add(channel, E.Const(3)), "<", out_c)], bounds)
                if image:
                    if full is not True and out_c % 4:  # the texel's padding lanes get pad_value
                        tail = lanes[:out_c % 4] + [t.literal(pad)] * (4 - out_c % 4)
                        value = (f"({t.vec(4)})({', '.join(tail)})" if full is False else
                                 f"{full} ? {value} : ({t.vec(4)})({', '.join(tail)})")
                    body += _guarded(when([(channel, "<", out_c)], bounds), t.write_image(dest.name, where(cc), value))
                    continue
                lane_stores = []
                for l in range(4):
                    offset = (_plus(f"ob{p}", (deltas[cc][0] + l,)) if vec_store and deltas is not None else
                              f"{where(cc)} + {l}" if vec_store and l else where(cc + l))
                    lane_stores += _guarded(when([(E.add(channel, E.Const(l)), "<", out_c)], bounds),
                                            t.vstore(1, lanes[l], dest.name, offset))
                if not vec_store or full is False:
                    body += lane_stores
                    continue
                whole = t.vstore(4, value, dest.name, where(cc))
                if full is True or out_c % 4 == 0:
                    body += _guarded(full, whole)
                else:
                    body += [f"if ({full}) {whole}", "else {"] + [f"  {s}" for s in lane_stores] + ["}"]
        if inside is True:
            lines += body
        elif body:
            lines += [f"if ({inside}) {{"] + [f"  {b}" for b in body] + ["}"]
    return lines


# ---------------------------------------------------------------- writing layout padding

def pad_kernel(name: str, s: Storage, grown: tuple[int, ...], local: int, half_storage: bool = False) -> Kernel:
    """Walks the logical domain grown to whole blocks; stores pad_value past the tensor's extents."""
    t = _Types(half_math=False, half_storage=half_storage)
    total = math.prod(grown)
    glob = math.ceil(total / local) * local
    dims = s.layout.layout.dims
    bounds = {d: (0, g - 1) for d, g in zip(dims, grown)}
    strides = [math.prod(grown[i + 1:]) for i in range(len(grown))]
    decode = ", ".join(f"{d} = i / {st} % {g}" if i else f"{d} = i / {st}"
                       for i, (d, st, g) in enumerate(zip(dims, strides, grown)))
    outside = " || ".join(f"{d} >= {e}" for d, e, g in zip(dims, s.layout.logical_shape, grown) if g > e)
    offset = flat(s.layout, {d: E.Var(d) for d in dims}, bounds)
    store = t.vstore(1, c_float(s.layout.layout.pad_value), s.name, _c(offset))
    prologue = ("const int i = get_global_id(0);", f"if (i >= {total}) return;", f"const int {decode};",
                f"if ({outside}) {store}")
    return Kernel(name=f"{name}_pad_{s.name}", doc=f"layout padding of {s.name} holds pad_value "
                                                   f"{s.layout.layout.pad_value:g}; NDRange [{glob}] / [{local}]",
                  params=(t.param(s, True),), args=(s.name,), global_size=(glob,), local_size=(local,),
                  prologue=prologue, taps=(0, 0), tap_setup=(), groups=0, step=(), tail=(), epilogue=())
