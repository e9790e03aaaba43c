"""A dense tile's epilogue on its accumulators: + bias, + residual and the clamps (relu, relu6, [lo, hi]) applied
to each accumulator vector where it is, and the finished vector stored into the op's destination, where the tile
otherwise stores its sums into tile[] and the planner's per-pixel loop reads them back, one channel block a pixel.
The same operations on the same values lane by lane (add, then max/min as the scalar a > b ? a : b): the same bits.

It applies where the planner's store is that simple: a pixel's channels consecutive in the destination and in
each load (a channels-innermost cache, NHWC output, a per-channel bias), no channel test (whole blocks), no partial
sums of earlier input-channel chunks; anything else (a hardswish's products, channel tails, NCHW) keeps the tile[]
path. MobileNetV2's features_2_conv_0_to_1 (1x1 16->96 on 112x112, then depthwise) in a C harness: 7-8% less time.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

from ...ops.dialect import c_float
from ...ops.statements import Assign, Lit, Load, Op, Var
from ...plan_types import Block, Guard, Loop, Node, Section, Stmt
from .microkernel import HALF, LANES, WIDE, Tile, tile_nodes

_KINDS = {"add": "KG_ADD", "max": "KG_MAX", "min": "KG_MIN"}  # the operations a vector epilogue spells
_READ = re.compile(r"(\w+)\[(.+)\]")
_STORE = re.compile(r"(\w+)\[(.+)\] = (.+);")


def register_epilogue(t: Tile, init: Loop, reduction: Node, stores: Loop, col_guard: str | None,
                      cols: int) -> Loop | None:
    """The tiled row (owb loop) with each pixel's epilogue on the accumulators, or None where the store is not
    one this spells (the caller then keeps the tile[] path)."""
    if t.depthwise or t.dot or t.columns or t.k_split != 1 or stores.var != "ki" or stores.extent != t.k_block:
        return None
    if len(init.body) != 1 or not isinstance(init.body[0], Stmt) or init.body[0].code != "acc[ki] = 0;":
        return None  # a partial sum of earlier input-channel chunks to add: the tile[] path adds it
    position = reduction.cond if isinstance(reduction, Guard) else ""
    if position and re.search(r"\bki\b", position):
        return None
    steps = store_steps(stores.body, position)
    if steps is None:
        return None
    xb, kv = tile_nodes(t)
    assert isinstance(kv, Loop) and kv.var == "kv", kv
    sums = tuple(n for n in kv.body if not (isinstance(n, Stmt) and n.code.startswith(f"KG_STORE{t.suffix}(tile + ")))
    assert len(sums) == len(kv.body) - t.pixels, "the tile's stores into tile[]: one statement per pixel"
    pixels = tuple(_pixel(t, p, steps, position, col_guard, cols) for p in range(t.pixels))
    return Loop(var="owb", extent=math.ceil(cols / (t.pixels // t.rows)), comment=f"tiles of {tile_shape(t)}, "
                f"epilogue in registers", body=(xb, replace(kv, body=(*sums, *pixels))))


def tile_shape(t: Tile) -> str:
    return f"{t.pixels} pixels" + (f" ({t.rows} rows of {t.pixels // t.rows})" if t.rows > 1 else "")


def pixel_position(t: Tile, p: int, owb: str = "owb") -> tuple[Stmt, ...]:
    """Tile pixel p's output row (where the tile spans rows: the first's, `oh_first`, plus p's) and column; `p` a
    number or C."""
    across = t.pixels // t.rows
    if t.rows == 1:
        return (Stmt(code=f"const int ow = {owb} * {t.pixels} + {p};", summary="ow = tile pixel"),)
    row, col = divmod(p, across) if isinstance(p, int) else (f"{p} / {across}", f"{p} % {across}")
    return (*((Stmt(code=f"const int oh = oh_first + {row};", summary="oh = the pixel's row"),) if row != 0 else ()),
            Stmt(code=f"const int ow = {owb} * {across} + {col};", summary="ow = the pixel's column"))


def store_steps(body: tuple[Node, ...], position: str) -> tuple[Node, ...] | None:
    """The store loop's statements if every one is of a form this spells: the read of the sum, the epilogue's
    adds and clamps, the store (of v, or of v where `position` holds and 0 elsewhere), comments and traces."""
    flat: list[Node] = []
    for n in body:  # the epilogue's section: its label a comment
        flat += [Stmt(code=f"/* {n.label} */", summary=""), *n.body] if isinstance(n, Section) else [n]
    body = tuple(flat)
    if not all(isinstance(n, Stmt) for n in body):
        return None
    read = [n for n in body if n.code == "float v = acc[ki];"]
    stored = [n for n in body if _STORE.fullmatch(n.code) and not n.code.startswith("float ")]
    if len(read) != 1 or len(stored) != 1 or body.index(read[0]) > body.index(stored[0]):
        return None
    index, value = _STORE.fullmatch(stored[0].code).group(2, 3)
    if value not in ("v", f"({position}) ? v : 0.0f") or not contiguous(index):
        return None
    for n in body:
        if n.assign is not None:
            a = n.assign
            if a.target != "v" or a.declare or not isinstance(a.value, Op) or a.value.kind not in _KINDS:
                return None
            if any(not _READ.fullmatch(r) or not contiguous(_READ.fullmatch(r).group(2)) for _, r in n.loads):
                return None
        elif n is not read[0] and n is not stored[0] and not n.code.startswith(("/*", "KG_TRACE(")):
            return None
    return body


def contiguous(index: str) -> bool:
    """Whether the C index is `ki` plus terms without it: consecutive channels, consecutive elements."""
    if "/" in index or "%" in index or len(re.findall(r"\bki\b", index)) != 1:
        return False
    names = sorted(set(re.findall(r"[A-Za-z_]\w*", index)) - {"ki"})
    for trial in (1, 7):
        env = {n: trial * (i + 3) for i, n in enumerate(names)}
        at = [eval(index, {}, env | {"ki": k}) for k in (0, 1, 5)]  # noqa: S307 (our own integer expression)
        if at[1] - at[0] != 1 or at[2] - at[0] != 5:
            return False
    return True


def _pixel(t: Tile, p: int, steps: tuple[Node, ...], position: str, col_guard: str | None, cols: int) -> Node:
    """Pixel p's vectors: each one's epilogue and store, under the planner's guards for the pixel."""
    def vectors(inside: str) -> tuple[Node, ...]:
        return tuple(Block(label=f"channels kv * {t.width} + {v * t.lanes} on", body=vector_statements(
            t, p, v, f"kv * {t.width} + {v * t.lanes}", steps, position, inside)) for v in range(t.vectors))
    if position:  # as the planner's store: its position test's 0 (a consumer's padding) stores zeros
        body: tuple[Node, ...] = (Guard(cond=f"KG_LIKELY({position})", body=vectors("1")),
                                  Guard(cond=f"!({position})", body=vectors("0")))
    else:
        body = vectors("")
    if col_guard:
        body = (Guard(cond=col_guard, body=body),)
    if cols % (t.pixels // t.rows):
        body = (Guard(cond=f"ow < {cols}", body=body),)
    return Block(label=f"pixel {p}: epilogue and store", body=(*pixel_position(t, p), *body))


def vector_statements(t: Tile, p: int, v: int, first: str, steps: tuple[Node, ...], position: str,
            inside: str) -> tuple[Node, ...]:
    """One accumulator vector's statements: the store loop's, spelled on the vector (ki: its first lane's)."""
    x = t.suffix

    def spelled(text: str) -> str:
        return text.replace(position, inside) if position else text

    out: list[Node] = [Stmt(code=f"const int ki = {first};", summary="ki = the vector's first channel")]
    for n in steps:
        if inside == "0" and (n.assign is not None or n.code == "float v = acc[ki];"):
            continue  # a position the planner zeroes: zeros stored, nothing computed
        if n.code == "float v = acc[ki];":
            out.append(Stmt(code=f"kg_vf{x} v = a{p}_{v};", summary=f"v = a{p}_{v}"))
        elif n.assign is not None:
            loads = {name: f"KG_LOAD{x}(&{spelled(read)})" for name, read in n.loads}
            out.append(Stmt(code=_assignment(n.assign, x, loads), summary=n.summary))
        elif n.code.startswith("KG_TRACE("):  # a lane at a time, after the store (nothing where it is not built)
            out.append(Loop(var="lane", extent=t.lanes, body=(
                replace(n, code=re.sub(r"\bki\b", "(ki + lane)", spelled(n.code))),)))
        elif _STORE.fullmatch(n.code):
            target, index, value = _STORE.fullmatch(spelled(n.code)).groups()
            stored = "v" if value in ("v", "(1) ? v : 0.0f") else f"KG_ZERO{x}"
            out.append(Stmt(code=f"KG_STORE{x}(&{target}[{index}], {stored});", summary=n.summary))
        else:
            out.append(n)
    return tuple(out)


def _assignment(a: Assign, x: str, loads: dict[str, str]) -> str:
    def leaf(e) -> str:
        if isinstance(e, Lit):
            return f"KG_SPLAT{x}({c_float(e.value)})"
        if isinstance(e, Load):
            return loads[e.name]
        assert isinstance(e, Var) and e.name == "v", e
        return "v"
    return f"v = {_KINDS[a.value.kind]}{x}({', '.join(leaf(e) for e in a.value.args)});"


_VECTOR_STORE = re.compile(r"KG_STORE(\d*)\(&output_cache\[(.+)\], (\w+)\);")


def direct_store(code: str, index: str) -> str | None:
    """A vector store of this module's into the output cache as a store into output[index] (the last op's store
    sent straight to the output, rewrite.direct_stores), None for any other statement. An output whose channels
    are not consecutive (NCHW) takes the vector a lane at a time."""
    found = _VECTOR_STORE.fullmatch(code)
    if not found:
        return None
    x, value = found.group(1), found.group(3)
    if contiguous(index):
        return f"KG_STORE{x}(&output[{index}], {value});"
    lanes = {"": LANES, "4": HALF, "16": WIDE}[x]
    at = re.sub(r"\bki\b", "(ki + lane)", index)
    return f"for (int lane = 0; lane < {lanes}; ++lane) output[{at}] = KG_LANE({value}, lane);"
