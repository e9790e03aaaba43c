"""A channel-vector depthwise tile's epilogue on its accumulators. Pure.

register_epilogue.py does this for dense tiles. A depthwise tile (microkernel._depthwise) sums a group of channel
vectors of each of its pixels at a time, then stored them into tile[] for the planner's per-pixel store to read back
and finish, a pixel's channel blocks one after another. Here each pixel's group is finished where it is, after the
group's taps: + bias and the clamps on each accumulator vector, stored into the op's destination. The same
operations on the same values (register_epilogue's vector statements): the same bits.

It applies where the planner's store is that simple (register_epilogue.store_steps: consecutive channels, a per-
channel bias, no channel test) and every vector of the tile is summed (no channel stripe past the op's channels).
112x112x96 + bias + relu6 on Zen 4, its output streamed (`kernelgen bench`, 8-pixel tiles): 0.73 -> 0.58 ms cold,
0.44 -> 0.33 warm."""
from __future__ import annotations

import math
import re
from dataclasses import replace

from ...plan_types import Block, Guard, Loop, Node, Stmt
from .microkernel import LANES, Tile, tile_nodes
from .register_epilogue import pixel_position, store_steps, vector_statements


def depthwise_register_epilogue(t: Tile, init: Loop, reduction: Node, stores: Loop, col_guard: str | None,
                                cols: int) -> Loop | None:
    """The tiled row (owb loop) with each pixel's group finished on its accumulators, or None where the store is
    not one this spells (the caller keeps the tile[] path)."""
    block = t.k_block // t.k_split  # the planner's channel block: what its store's ki counts
    if not t.depthwise or t.columns or t.present or t.rows != 1 or stores.var != "ki" or stores.extent != block:
        return None
    if block % t.lanes or (t.live_vectors and t.live_vectors * LANES != t.k_block):
        return None
    if len(init.body) != 1 or not isinstance(init.body[0], Stmt) or init.body[0].code != "acc[ki] = 0;":
        return None
    position = reduction.cond if isinstance(reduction, Guard) else ""
    steps = store_steps(stores.body, position)
    if steps is None or re.search(r"\bki\b", position):
        return None
    pixels = {f"KG_STORE{t.suffix}(tile + {p * t.k_block} + (kv + ": p for p in range(t.pixels)}

    def finished(node: Node) -> Node:
        if isinstance(node, Stmt):
            p = next((p for prefix, p in pixels.items() if node.code.startswith(prefix)), None)
            return node if p is None else _pixel(t, p, block, steps, position, col_guard, cols)
        if isinstance(node, (Loop, Guard, Block)):
            return replace(node, body=tuple(finished(n) for n in node.body))
        return node

    return Loop(var="owb", extent=math.ceil(cols / t.pixels), comment=f"tiles of {t.pixels} pixels, epilogue in "
                f"registers", body=tuple(finished(n) for n in tile_nodes(t)))


def _pixel(t: Tile, p: int, block: int, steps: tuple[Node, ...], position: str, col_guard: str | None,
           cols: int) -> Block:
    """Pixel p's vectors of the group (kv on): each one's epilogue and store, under the planner's guards."""
    def vectors(inside: str) -> tuple[Node, ...]:
        out: list[Node] = []
        for i in range(0, t.groups, t.lanes // LANES):
            channel = f"(kv + {i}) * {LANES}"  # of the stripe: the planner's block ko_inner, its channel ki
            # ki as the channel less its block's start, not `% block`: the store's ko_inner * block + ki then folds
            # to the channel, where gcc kept the division's masks and adds on every vector (12 a tile of 8-float)
            out.append(Block(label=f"channels {channel} on", body=(
                Stmt(code=f"const int ko_inner = {channel} / {block};", summary="ko_inner = the vector's block"),
                *vector_statements(t, p, i, f"{channel} - ko_inner * {block}", steps, position, inside))))
        return tuple(out)

    body = ((Guard(cond=f"KG_LIKELY({position})", body=vectors("1")), Guard(cond=f"!({position})", body=vectors("0")))
            if position else vectors(""))
    if col_guard:
        body = (Guard(cond=col_guard, body=body),)
    if cols % t.pixels:
        body = (Guard(cond=f"ow < {cols}", body=body),)
    return Block(label=f"pixel {p}: epilogue and store", body=(*pixel_position(t, p), *body))
