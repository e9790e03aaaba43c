"""The c target's rewrites of the planner's loop nest: each micro-kernel op's filter read repacked and its
conv section register-blocked (tiles.py chose the tiles), the last conv's stores sent straight into the output,
the input row copies unswitched, and a conv that streams whole rows moved inside the row loop."""
from __future__ import annotations

import math
import re
from dataclasses import replace

from ...plan_types import Block, Guard, Loop, Node, Phase, Section, Step, Stmt
from .microkernel import LANES, Tile, tile_nodes
from .depthwise_epilogue import depthwise_register_epilogue
from .register_epilogue import direct_store, pixel_position, register_epilogue, tile_shape
from .team import shared_rows
from .writeback import column_bound


def whole_rows(parts):
    """A conv that reads the input in place and stores into the output directly uses no cache a column stripe must
    fit: each output row then runs across every column stripe (the wo_outer loop moved inside the row loop), so
    the input and the output stream through whole rows, which the prefetchers follow (24-column stripes of a
    112x112x96 depthwise: runs of 10 KB; whole rows: 43 KB; ~10% less time). Anything else keeps the stripes."""
    if parts.wo_extent == 1 or parts.store or any(_mentions(n, "wo_outer") for n in parts.load):
        return parts
    rows = _wrapped_rows(parts.compute, Loop(var="wo_outer", extent=parts.wo_extent, body=(),
                                             comment=f"output-column stripes of {parts.cols}, inside each row"))
    return parts if rows is None else replace(parts, compute=rows, wo_extent=1)


def _wrapped_rows(nodes: tuple[Node, ...], around: Loop) -> tuple[Node, ...] | None:
    """`nodes` with the body of the one conv section's row loop (oh) inside `around`, None if there is not one."""
    convs = [n for n in nodes if isinstance(n, Section) and n.step is not None and n.step.phase is Phase.CONV]
    if len(convs) != 1 or any(_mentions(n, "wo_outer") for n in nodes if n is not convs[0]):
        return None
    conv = convs[0]
    if len(conv.body) != 1 or not isinstance(conv.body[0], Loop) or conv.body[0].var != "oh":
        return None
    oh = conv.body[0]
    if len(oh.body) != 1:
        return None
    inner = oh.body[0]
    if isinstance(inner, Guard) and not re.search(r"\bwo_outer\b", inner.cond):  # the row's test stays outside
        inner = replace(inner, body=(replace(around, body=inner.body),))
    else:
        inner = replace(around, body=oh.body)
    return tuple(replace(conv, body=(replace(oh, body=(inner,)),)) if n is conv else n for n in nodes)


def _mentions(node: Node, var: str) -> bool:
    if isinstance(node, Stmt):
        return bool(re.search(rf"\b{var}\b", node.text))
    if isinstance(node, Guard) and re.search(rf"\b{var}\b", node.cond):
        return True
    return isinstance(node, (Loop, Guard, Block, Section)) and any(_mentions(n, var) for n in node.body)


def rewrite(nodes: tuple[Node, ...], tiles: list, cut, geo, threads: int) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Section) and node.step is not None and node.step.op and tiles[node.step.op - 1]:
            tile = tiles[node.step.op - 1]
            if node.step.phase is Phase.FILTER_READ:
                if tile.filter_in_place:  # the tile reads the filter tensor in place: no copy
                    continue
                out.append(replace(node, label=node.label + ", repacked for the micro-kernel",
                                   body=_repack(node.body, tile, cut.channels)))
                continue
            if node.step.phase is Phase.CONV:
                out.append(replace(node, label=node.label + " (register-blocked micro-kernel)",
                                   body=_blocked(node.body, tile, geo.cols[node.step.op], threads,
                                                 geo.rows[node.step.op])))
                continue
        if isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=rewrite(node.body, tiles, cut, geo, threads)))
        else:
            out.append(node)
    return tuple(out)


def write_back_index(nodes: tuple[Node, ...]) -> str:
    """The output index of the planner's write-back copy (in oh, ow, ok and the stripe indices), "" if none."""
    for node in nodes:
        if isinstance(node, Stmt) and node.code.startswith("output[") and "] = output_cache[" in node.code:
            return node.code[len("output["):node.code.index("] = output_cache[")]
        if isinstance(node, (Loop, Guard, Block, Section)):
            found = write_back_index(node.body)
            if found:
                return found
    return ""


def direct_stores(nodes: tuple[Node, ...], index: str) -> tuple[Node, ...]:
    """The last conv's stores into output[index] instead of the output cache, and no write-back section."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Section) and node.step == Step(Phase.WRITE_BACK):
            continue
        if isinstance(node, Stmt) and direct_store(node.code, index):  # an epilogue in registers' vector store
            out.append(replace(node, code=direct_store(node.code, index)))
        elif isinstance(node, Stmt) and node.code.startswith("output_cache["):
            value = node.code[node.code.index("] = ") + 4:]
            out.append(Stmt(code=f"output[{index}] = {value}", summary=node.summary.replace("output_cache", "output")))
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=direct_stores(node.body, index)))
        else:
            out.append(node)
    return tuple(out)


def unswitch(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """The input cache read with its bounds test taken out of the channel loop when it does not depend on the
    channel (conv padding, stripe tails): two plain copy loops gcc vectorizes instead of a select per element."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Loop) and node.var == "ic" and len(node.body) == 1 and isinstance(node.body[0], Stmt):
            stmt = node.body[0]
            target, _, value = stmt.code.partition(" = ")
            cond, sep, rest = value.partition(" ? input[")
            if sep and cond.startswith("(") and rest.endswith(" : 0.0f;") and "ic" not in re.findall(r"\w+", cond):
                read = Stmt(code=f"{target} = input[{rest[:-len(' : 0.0f;')]};", summary=stmt.summary)
                zero = Stmt(code=f"{target} = 0.0f;", summary=stmt.summary)
                out += [Guard(cond=cond, body=(replace(node, body=(read,)),)),
                        Guard(cond=f"!{cond}", body=(replace(node, body=(zero,)),))]
                continue
        out.append(replace(node, body=unswitch(node.body)) if isinstance(node, (Loop, Guard, Block, Section)) else node)
    return tuple(out)


def _repack(nodes: tuple[Node, ...], t: Tile, channels: int) -> tuple[Node, ...]:
    """The filter read with its store moved to the micro-kernel's layout: depthwise [tap][k], dense
    [k / width][tap][c][k % width] (output channels innermost, unit stride), a dot tile's [k][c]. Where output
    channels are innermost the output-channel loop (fk) runs innermost too, so the stores are consecutive: in the
    planner's order (fk outermost) each store lands `width` floats past the last, a new cache line every other
    store, and 512x512x3x3 repacked in blocks of 8 took 4.9 ms in a C harness against 1.1 ms with fk innermost
    (ResNet18's layer4_1 repacks two such filters per call)."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Loop) and node.var == "fk" and not t.dot:
            node = _innermost(node)
        if isinstance(node, Stmt) and node.code.startswith("filter_cache["):
            value = node.code[node.code.index("] = ") + 4:]
            kw = t.kernel[1]
            if t.dot:  # the planner's own order: each output channel's row of input channels
                index = f"fk * {t.reduce} + fc"
            elif t.depthwise:
                index = f"(fh * {kw} + fw) * {channels} + fk"
            else:
                index = (f"(fk / {t.width}) * {t.kernel[0] * kw * t.reduce * t.width} + ((fh * {kw} + fw) * "
                         f"{t.reduce} + fc) * {t.width} + fk % {t.width}")
            out.append(Stmt(code=f"filter_cache[{index}] = {value}", summary=node.summary))
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=_repack(node.body, t, channels)))
        else:
            out.append(node)
    return tuple(out)


def _innermost(fk: Loop) -> Loop:
    """The perfect nest fk { fc { fh { fw { store } } } } as fc { fh { fw { fk { store } } } } (unchanged if the
    nest is not perfect)."""
    chain, node = [fk], fk
    while len(node.body) == 1 and isinstance(node.body[0], Loop):
        node = node.body[0]
        chain.append(node)
    if len(chain) == 1 or not all(isinstance(n, Stmt) for n in node.body):
        return fk
    nest: Node = replace(fk, body=node.body)
    for loop in reversed(chain[1:]):
        nest = replace(loop, body=(nest,))
    return nest


def _blocked(nodes: tuple[Node, ...], t: Tile, cols: int, threads: int, rows: int = 0) -> tuple[Node, ...]:
    """The conv section with its pixel loop (ow) cut into tiles: the micro-kernel sums a tile, then the planner's
    store runs for each of its pixels with `acc` pointing at that pixel's sums. `rows`: the stripe's output rows
    (the row loop's extent where a wide tile spans several, Tile.over_rows)."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Loop) and node.var == "oh" and _stacks(node, t, rows):
            out += _stacked(node, t, cols, threads)
        elif isinstance(node, Loop) and node.var == "ow" and t.wide is not None:
            # both variants in the source, the preprocessor picks (the same bytes on every host): WIDE-float
            # vectors where the compiler targets AVX-512F, the 8-float tile everywhere else. The #else and #endif
            # name their #if: team.py takes a bare #endif for its own (_OPENMP) and drops it from a one-thread call
            out += [Stmt(code="#if KG_VF16", summary="where the compiler targets AVX-512F: 16-float vectors"),
                    _tiled_row(node, t.wide, cols), Stmt(code="#else /* !KG_VF16 */", summary="elsewhere: 8-float"),
                    _tiled_row(node, t, cols), Stmt(code="#endif /* KG_VF16 */", summary="")]
        elif isinstance(node, Loop) and node.var == "ow":
            out.append(_tiled_row(node, t, cols))
        elif isinstance(node, Loop) and node.var == "ko_inner" and t.folded:
            out += _blocked(node.body, t, cols, threads)  # its channels are the tile's: ko_inner runs per pixel
        elif isinstance(node, Loop) and node.var == "oh" and threads > 1:
            # rows of one conv are independent: each writes its own destination rows (tile, acc are per row)
            # (team.py puts the kernel's one parallel region around them)
            out += [*shared_rows(), replace(node, body=_blocked(node.body, t, cols, threads))]
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=_blocked(node.body, t, cols, threads, rows)))
        else:
            out.append(node)
    return tuple(out)


def _stacks(oh: Loop, t: Tile, rows: int) -> bool:
    """Whether the wide tile's rows of the row loop `oh` run on its tile over several rows: the loop runs the
    stripe's rows the tile was made for, and its body is the pixel loop alone, every pixel summed (no row or column
    test: a consumer's padding, stripe tails)."""
    if t.wide is None or t.wide.over_rows is None or oh.extent != rows or len(oh.body) != 1:
        return False
    ow = oh.body[0]
    return isinstance(ow, Loop) and ow.var == "ow" and len(ow.body) == 4 and not isinstance(ow.body[2], Guard)


def _stacked(oh: Loop, t: Tile, cols: int, threads: int) -> list[Node]:
    """The row loop as a loop over row tiles: where the compiler targets AVX-512F, tiles of several rows, then the
    rows left over on one-row tiles; elsewhere the 8-float tile's rows, the same rows in each row tile. One loop for
    both, so a team splits the row tiles (rows two threads share: 4 tiles of 7 rows, 2 each). The #else and #endif
    name their #if (see _blocked)."""
    stacked, one_row = t.wide.over_rows
    count = stacked.rows
    runs, left = divmod(oh.extent, count)
    # row tile ohs >= runs: row runs * count + (ohs - runs)
    first = f"ohs < {runs} ? ohs * {count} : ohs + {runs * (count - 1)}" if left else f"ohs * {count}"
    wide: list[Node] = [Guard(cond=f"ohs < {runs}", body=(
        Stmt(code=f"const int oh_first = ohs * {count}, oh = oh_first;", summary="oh = the tile's first row"),
        *_blocked(oh.body, stacked, cols, 1)))]
    if left:
        wide.append(Guard(cond=f"ohs >= {runs}", body=(
            Stmt(code=f"const int oh = ohs + {runs * (count - 1)};", summary="oh = a row left over"),
            *_blocked(oh.body, one_row, cols, 1))))
    rows = Loop(var="ohr", extent=count, body=(Guard(cond=f"ohs < {runs} || ohr == 0", body=(
        Stmt(code="const int oh = oh_first + ohr;", summary="oh = the row"),
        *_blocked(oh.body, replace(t, wide=None), cols, 1))),))
    return [*(shared_rows() if threads > 1 else ()), Loop(
        var="ohs", extent=runs + left, comment=f"row tiles: {runs} of {count} rows" + (
            f", then {left} of one" if left else ""), body=(
            Stmt(code="#if KG_VF16", summary="where the compiler targets AVX-512F: 16-float vectors"),
            *wide,
            Stmt(code="#else /* !KG_VF16 */", summary="elsewhere: 8-float"),
            Stmt(code=f"const int oh_first = {first};", summary="oh_first = the row tile's first row"),
            rows,
            Stmt(code="#endif /* KG_VF16 */", summary="")))]


def _unswitched_channels(stores: Loop, block: int, tail: int = 0) -> list[Node]:
    """The per-pixel store with its channel test (k < the channels stored) taken out of the ki loop when the block's
    last channel passes it (KG_LIKELY: else gcc deems that loop cold): a loop gcc vectorizes. Kept inside, the
    test made the epilogue scalar and its relu a branch on the sum's sign, mispredicted half the time (144
    channels in blocks of 32: 0.3 GB/s). `tail`: the channels of the one block that does not pass it, when that is
    known (a single channel stripe): its loop then runs over them alone, without the test, vectorized too."""
    (guard,) = stores.body if len(stores.body) == 1 else (None,)
    if not isinstance(guard, Guard) or len(re.findall(r"\bki\b", guard.cond)) != 1 or \
            not re.search(r"\+ki\) < \d+\)?$", guard.cond):
        return [stores]
    whole = re.sub(r"\bki\b", str(block - 1), guard.cond)
    test = guard.cond[1:-1] if guard.cond.startswith("(") and guard.cond.endswith(")") else guard.cond
    inside = _substituted(guard.body, test, "1")  # the same test on a bias or residual read: true here
    partial, first = f"!({whole})", re.sub(r"\bki\b", "0", guard.cond)
    if not tail and _block_tail(guard.cond, block):  # and a block wholly past the channels stores none
        tail, partial = _block_tail(guard.cond, block), f"{partial} && {first}"
    if tail:  # KG_LIKELY here too: a branch gcc deems cold it leaves scalar (144x56: 0.75 -> 0.38 ms)
        return [Guard(cond=f"KG_LIKELY({whole})", body=(replace(stores, body=inside),)),
                Guard(cond=f"KG_LIKELY({partial})", body=(replace(stores, extent=tail, body=inside),))]
    return [Guard(cond=f"KG_LIKELY({whole})", body=(replace(stores, body=inside),)),
            Guard(cond=f"!({whole})", body=(stores,))]


def _block_tail(cond: str, block: int) -> int:
    """The channels of a store's one partial block, where its channel test `(... + ki) < N` counts from multiples
    of `block` alone (terms `(var*C)`, C a multiple of it): N % block; else 0 (not known). MobileNetV2's
    features_2_conv_2 (1x1 96->24 on 56x56, k_block 32): its 24 channels stored one by one behind the test, 0.26 ms
    in the network program; in a loop of 24, 0.20."""
    found = re.fullmatch(r"\(*((?:\(\w+\*\d+\)\+)*)ki\) < (\d+)\)?", cond)
    if not found:
        return 0
    steps = [int(c) for c in re.findall(r"\*(\d+)\)", found.group(1))]
    return int(found.group(2)) % block if all(c % block == 0 for c in steps) else 0


def _vector_loops(nodes: list[Node]) -> list[Node]:
    """Each channel loop (ki) of a pixel's stores after KG_VECTOR_LOOP (vector.h.j2: gcc vectorizes it whole)."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Loop) and node.var == "ki":
            out += [Stmt(code="KG_VECTOR_LOOP", summary=""), node]
        elif isinstance(node, Guard):
            out.append(replace(node, body=tuple(_vector_loops(list(node.body)))))
        else:
            out.append(node)
    return out


def _unswitched_position(cond: str, zero: Loop, pixel: list[Node]) -> list[Node]:
    """A pixel's stores with its position test (inside the image, not a consumer's padding) taken out of the ki
    loop: each store selects `(test) ? v : 0.0f`, a test of the pixel that gcc neither hoists nor if-converts,
    so the epilogue ran scalar with its activation's clamps as branches (MobileNetV3-small: a quarter of its
    time in epilogues). Inside, the test is 1 and the loop vectorizes; outside (the padding's few pixels) the
    sums are zeroed first, as the planner's code does, and the test is 0."""
    return [Guard(cond=f"KG_LIKELY({cond})", body=_substituted(tuple(pixel), cond, "1")),
            Guard(cond=f"!({cond})", body=(zero, *_substituted(tuple(pixel), cond, "0")))]


def _substituted(nodes: tuple[Node, ...], text: str, by: str) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Stmt):
            out.append(replace(node, code=node.code.replace(text, by),
                               loads=tuple((name, read.replace(text, by)) for name, read in node.loads)))
        elif isinstance(node, Guard):
            out.append(replace(node, cond=node.cond.replace(text, by), body=_substituted(node.body, text, by)))
        elif isinstance(node, (Loop, Block, Section)):
            out.append(replace(node, body=_substituted(node.body, text, by)))
        else:
            out.append(node)
    return tuple(out)


def _tiled_row(ow: Loop, t: Tile, cols: int) -> Loop:
    body, col_guard = ow.body, None
    if len(body) == 1 and isinstance(body[0], Guard):
        col_guard, body = body[0].cond, body[0].body
    assert len(body) == 4 and isinstance(body[1], Loop) and isinstance(body[3], Loop), body  # decl, init, sum, store
    _, init, reduction, stores = body
    in_registers = (register_epilogue(t, init, reduction, stores, col_guard, cols)
                    or depthwise_register_epilogue(t, init, reduction, stores, col_guard, cols))
    if in_registers is not None:
        return _inside_tiles(in_registers, col_guard, t)
    block = t.k_block // t.k_split  # the planner's k_block: what acc[ki] indexes
    pixel: list[Node] = []
    (start,) = init.body
    assert isinstance(start, Stmt) and start.code.startswith("acc[ki] = "), start
    if start.code != "acc[ki] = 0;":  # a partial sum of earlier input-channel chunks: added to this chunk's
        pixel.append(Loop(var="ki", extent=block, body=(
            Stmt(code="acc[ki] += " + start.code[len("acc[ki] = "):], summary=start.summary),)))
    tail, live = 0, t.live_vectors * LANES
    if t.folded and 0 < live < t.k_block and -(-live // block) == t.k_split:  # one partial block, the last
        tail = live - (t.k_split - 1) * block
    pixel += _vector_loops(_unswitched_channels(stores, block, tail))
    if isinstance(reduction, Guard):  # a position the planner does not sum (a consumer's padding) holds 0
        zero = Loop(var="ki", extent=block, body=(Stmt(code="acc[ki] = 0.0f;", summary="acc[ki] = 0"),))
        pixel = _unswitched_position(reduction.cond, zero, pixel)
    sums = f"tile + pb * {t.k_block}" + (" + ko_inner * " + str(block) if t.folded else "")
    pixel = [Stmt(code=f"float *const acc = {sums};", summary="acc = its sums"), *pixel]
    if t.folded:  # the planner's channel blocks of this pixel, each stored as the planner stores it
        pixel = [Loop(var="ko_inner", extent=t.k_split, body=tuple(pixel))]
    here: tuple[Node, ...] = (*pixel_position(t, "pb"),
                              *((Guard(cond=col_guard, body=tuple(pixel)),) if col_guard else pixel))
    if cols % t.pixels and t.rows == 1:  # a stacked tile spans whole rows
        here = (Guard(cond=f"owb * {t.pixels} + pb < {cols}", body=here),)
    sums_nodes = tile_nodes(t)
    row = _row_test(reduction.cond) if isinstance(reduction, Guard) else ""
    if row:  # a row of the consumer's padding: every pixel's stores zero its sums first, the tile is not summed
        sums_nodes = (Guard(cond=f"KG_LIKELY({row})", body=sums_nodes),)
    return _inside_tiles(Loop(var="owb", extent=math.ceil(cols / (t.pixels // t.rows)),
                              comment=f"tiles of {tile_shape(t)}", body=(
        Stmt(code=f"float tile[{t.pixels * t.k_block}];", summary=f"tile[{t.pixels}][{t.k_block}]"),
        *sums_nodes,
        Loop(var="pb", extent=t.pixels, body=here))), col_guard, t)


def _inside_tiles(row: Loop, col_guard: str | None, t: Tile) -> Loop:
    """The tiled row with each tile skipped whose first pixel lies past the output's columns: where the planner's
    column stripes overrun the image (`col_guard`, e.g. 112 columns in stripes of 24), the last stripe's trailing
    tiles summed pixels that no store keeps, each on the border path (its input columns past the image read
    zeros). 112x112x96 depthwise, stripes of 24: 2 of 30 16-float tiles a row (Zen 4, C harness, warm, min of 150:
    0.30 -> 0.27 ms with depthwise_epilogue's ki spelled without `%`), 1 of 20 8-float ones (-march=haswell
    0.40 -> 0.38). A guard that is not `(S + ow) < n` (ow added once, so the first pixel is the leftmost) is left."""
    bound = column_bound(col_guard) if col_guard else None
    if not bound:
        return row
    first = re.sub(r"\bow\b", f"(owb * {t.pixels // t.rows})", bound[0])
    return replace(row, body=(Guard(cond=f"({first}) < {bound[1]}", body=row.body),))


def _row_test(cond: str) -> str:
    """The part of a position test that names the output row and no column (its row lies in the image), "" when
    there is none or the test is not a plain conjunction. A producer fused before a padded conv computes the
    consumer's whole window, its padding rows too (a 1x1 before a 5x5 depthwise on 7x7: 11 rows of 11 pixels, 4
    of them padding); their sums were computed and then dropped for zeros."""
    parts = [p.strip() for p in cond.split(" && ")]
    if any(p.count("(") != p.count(")") for p in parts):
        return ""
    rows = [p for p in parts if re.search(r"\boh\b", p) and not re.search(r"\b(ow|owb|pb|ki|kv|xb)\b", p)]
    return " && ".join(rows)
