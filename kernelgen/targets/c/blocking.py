"""The c target's kernel: the plan's stripe loop nest with each dense or depthwise conv's compute replaced by a
register-blocked micro-kernel (microkernel.py) and its filter cache read repacking into the micro-kernel's layout.

Everything else is the planner's, verbatim: the stripe loops (plain or pipelined, rows_outer), the input and
write-back copies, pools, squeeze-excite multiplies, and each conv's per-pixel store (init of chunked partial
sums, the epilogue, the consumer-padding zeros, the trace), which now reads `acc` from the tile. A conv the
micro-kernel does not fit (grouped but not depthwise, k_block not a multiple of the vector width, a source layout
whose axes mix dims, a filter cache too small for the repacked block) keeps the planner's loops; `notes` says so.
Two exceptions, for a first depthwise conv over an input with consecutive channels (memory bound: every byte
counts): it reads the input in place, without the input cache copy, and when it also stores into the output
directly, each output row runs across the column stripes (no cache bounds them).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import kernelgen.expr as E
from ...config import Config
from ...plan import Block, Function, Guard, Halo, Loop, Node, Phase, Pipeline, Plan, Section, Step, Stmt
from ...planner import compose_stripes, fitted_config
from ...planner.geometry import reduction_channels, temp_names, unproven
from .rowcopy import row_reads
from .microkernel import (ACCUMULATORS, DEPTHWISE_ACCUMULATORS, GROUP, HALF, LANES, LINE_FLOATS, PREFETCH_TILES, Direct,
                          Tile, channels_contiguous, column_step, columns_contiguous, fresh_rows, part, separable, tile_nodes)


@dataclass(frozen=True, slots=True, kw_only=True)
class CKernel:
    """The c target plan: the kernel function it emits, and per op how its compute runs."""

    kernel: Function
    tiles: tuple[Tile | None, ...]  # per op: its micro-kernel, or None (the planner's loops)
    notes: tuple[str, ...]


def c_kernel(config: Config, plan: Plan, threads: int = 1) -> CKernel:
    cfg = fitted_config(config, plan)
    geo = plan.geometry
    shape_list, cut = list(geo.shapes), geo.stripes
    filter_room = next((c.elements for c in plan.caches if c.name == "filter"), 0)
    tiles, notes = [], []
    parts = plan.stripe
    reads_input = _reads_input(cfg, plan)
    for j in range(1, len(cfg.ops) + 1):
        tile, why = _tile(cfg, plan, j, shape_list, cut, geo, filter_room, reads_input and j == 1)
        tiles.append(tile)
        op = plan.ops[j - 1]
        if tile is not None:
            channels = GROUP if tile.columns else LANES * tile.groups if tile.depthwise else tile.width
            kind = " (depthwise, pixel vectors)" if tile.columns else " (depthwise)" if tile.depthwise else ""
            notes.append(f"{op.label}: micro-kernel, {tile.pixels} pixels x {channels} channels in registers{kind}")
        elif why:
            notes.append(f"{op.label}: the planner's loops ({why})")
    if plan.dtype != "float32" or not any(tiles):
        return CKernel(kernel=plan.kernel, tiles=tuple(tiles), notes=tuple(notes))
    load = parts.load
    if tiles[0] is not None and tiles[0].direct is not None:
        load = tuple(n for n in load if not (isinstance(n, Section) and n.step == Step(Phase.INPUT_READ)))
        notes.append(f"{plan.ops[0].label}: reads the input directly (no input cache: zeros for the padding taps)")
    rewritten = replace(parts, load=_unswitch(row_reads(_rewrite(load, tiles, cut, geo, threads))),
                        compute=_rewrite(parts.compute, tiles, cut, geo, threads),
                        store=_rewrite(parts.store, tiles, cut, geo, threads))
    written = _write_back_index(parts.store + parts.compute)
    direct = tiles[-1] is not None and parts.pipeline is Pipeline.NONE and parts.chunks == 1 and bool(written)
    if direct:
        # the last conv stores its epilogue straight into the output: no pass through the output cache
        index = re.sub(r"\bok\b", f"(ko_inner*{cfg.schedule.k_block}+ki)", written)
        rewritten = replace(rewritten, compute=_direct(rewritten.compute, index), store=_direct(rewritten.store, index))
        notes.append(f"{plan.ops[-1].label}: stores into the output directly (no write-back of the output cache)")
    if direct and tiles[0] is not None and tiles[0].direct is not None:
        rows = _whole_rows(rewritten)
        if rows is not rewritten:
            notes.append(f"{plan.ops[0].label}: each output row runs across the column stripes (no cache bounds them)")
        rewritten = rows
    rest = plan.kernel.body[len(compose_stripes(parts)):]  # after the stripes: layout padding fills
    unused = ("(void)output_cache; /* the last conv stores into the output directly */",) if direct else ()
    if tiles[0] is not None and tiles[0].direct is not None:
        unused += ("(void)input_cache; /* the first conv reads the input directly */",)
    kernel = replace(plan.kernel, body=(*compose_stripes(rewritten), *rest), prologue=plan.kernel.prologue + unused,
                     doc=plan.kernel.doc + "; register-blocked micro-kernels")
    return CKernel(kernel=kernel, tiles=tuple(tiles), notes=tuple(notes))


def _whole_rows(parts):
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
        return bool(re.search(rf"\b{var}\b", node.code))
    if isinstance(node, Guard) and re.search(rf"\b{var}\b", node.cond):
        return True
    return isinstance(node, (Loop, Guard, Block, Section)) and any(_mentions(n, var) for n in node.body)


def _reads_input(cfg: Config, plan: Plan) -> bool:
    """Whether op 1 may read the kernel's input in place of the input cache: the cache is the whole window, read
    once per stripe by op 1 alone (no ring of rows, pipeline or channel chunks), of an input whose channels are
    consecutive elements. Whether op 1 is a channel-vector depthwise conv, _tile decides."""
    s, parts = cfg.schedule, plan.stripe
    reads = [n for n in parts.load if isinstance(n, Section) and n.step is not None
             and n.step.phase in (Phase.INPUT_READ, Phase.INPUT_READ_KEPT, Phase.INPUT_READ_NEW)]
    if len(reads) != 1 or reads[0].step != Step(Phase.INPUT_READ) or s.halo is Halo.REUSE or s.c_block:
        return False
    if parts.pipeline is not Pipeline.NONE or parts.chunks != 1:
        return False
    full = cfg.input_layout.bind(tuple(plan.ops[0].in_shape))
    channels = full.logical_shape[3]
    bounds = {"c": (0, channels - 1)}
    offset = full.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(0), "c": E.Var("c")}, bounds)
    return all(E.evaluate(offset, {"c": c}) == c for c in range(channels))


def _groups(vectors: int, cols: int, channel_offset) -> tuple[int, int]:
    """(channel vectors per group, pixels) of a channel-vector depthwise tile: the largest group of at most
    DEPTHWISE_ACCUMULATORS vectors that divides the stripe's, whose vectors lie at the same offsets from the
    group's first in every group; as many pixels as fill the accumulators (at most the row's)."""
    for g in range(min(vectors, DEPTHWISE_ACCUMULATORS), 0, -1):
        if vectors % g:
            continue
        steps = {tuple(channel_offset(k + i) - channel_offset(k) for i in range(g)) for k in range(0, vectors, g)}
        if len(steps) == 1:
            return g, max(1, min(DEPTHWISE_ACCUMULATORS // g, cols))
    return 1, min(DEPTHWISE_ACCUMULATORS, cols)


def _tile(cfg: Config, plan: Plan, j: int, shape_list: list, cut, geo, filter_room: int, direct: bool = False
          ) -> tuple[Tile | None, str]:
    op, n = cfg.ops[j - 1], len(cfg.ops)
    last = j == n
    if op.kind != "conv2d" or plan.dtype != "float32":
        return None, ""
    s = cfg.schedule
    out_k = shape_list[j][3]
    reduce = reduction_channels(cfg, shape_list)[j - 1] // op.groups
    depthwise = op.groups > 1 and reduce == 1 and op.groups == out_k == shape_list[j - 1][3]
    if op.groups > 1 and not depthwise:
        return None, "a grouped conv that is not depthwise"
    if s.k_block % HALF:
        return None, f"k_block {s.k_block} is not a multiple of {HALF}"
    layout = cfg.input_layout if j == 1 else cfg.ops[j - 2].output_layout
    channels = s.c_block if j == 1 and s.c_block else max(reduce, shape_list[j - 1][3])
    src = layout.bind((1, geo.rows[j - 1], geo.cols[j - 1], channels))
    if not separable(src):
        return None, f"its source layout {layout.name} mixes dims in one axis"
    columns = depthwise and not channels_contiguous(src)
    if depthwise and not columns and s.k_block % LANES:
        return None, f"depthwise channel vectors need a k_block that is a multiple of {LANES}, not {s.k_block}"
    if columns and (s.c_block or out_k % GROUP or not columns_contiguous(src)):
        return None, (f"depthwise over a source layout ({layout.name}) with neither {LANES} consecutive channels "
                      f"nor consecutive columns (or channels not a multiple of {GROUP})")
    taps = op.kernel[0] * op.kernel[1]
    vectors = 2 if s.k_block % (2 * LANES) == 0 and not depthwise else 1
    lanes = LANES if s.k_block % LANES == 0 or depthwise else HALF
    if cut.channels * taps * (1 if depthwise else reduce) > filter_room:
        return None, "the filter cache cannot hold the repacked block"
    cols = geo.cols[j]
    most = ACCUMULATORS // vectors
    pixels = LANES if columns else math.ceil(cols / math.ceil(cols / most))
    ko_var = "ko_outer" if last else f"ko_outer_{j}"
    produced = out_k if last else max(out_k, reduction_channels(cfg, shape_list)[j])
    width = vectors * lanes
    bounds = {"ko_outer": (0, cut.ko_extent - 1), "ho_outer": (0, cut.ho_extent - 1), "wo_outer": (0, cut.wo_extent - 1),
              "nb": (0, shape_list[0][0] - 1), "ci_outer": (0, max(s.c_split, 1) - 1),
              ko_var: (0, math.ceil(produced / cut.channels) - 1), "ko_inner": (0, s.k_split - 1),
              "oh": (0, geo.rows[j] - 1), "rh": (0, op.kernel[0] - 1), "rw": (0, op.kernel[1] - 1),
              "rc": (0, reduce - 1), "kv": (0, s.k_block // width - 1), "owb": (0, math.ceil(cols / pixels) - 1)}
    in_row = E.add(E.mul(E.Var("oh"), op.stride[0]), E.mul(E.Var("rh"), op.dilation[0]))
    if j == 1 and s.halo is Halo.REUSE and geo.halo_rows > 0:  # the ring of input rows (planner.builder.ring_row)
        in_row = E.floormod(E.add(E.mul(E.Var("ho_outer"), geo.row_step), in_row), geo.rows[0],
                            bounds | {"ih": (0, geo.rows[0] - 1)})
    col_base = E.add(E.mul(E.add(geo.col_start[j], E.mul(E.Var("owb"), pixels)), op.stride[1]), E.Const(-op.pad[1]),
                     E.mul(geo.col_start[j - 1], -1))
    count = (pixels - 1) * op.stride[1] + (op.kernel[1] - 1) * op.dilation[1] + 1 if depthwise and not columns else (
        0 if columns else pixels)
    bounds |= {f"xc{i}": (0, geo.cols[j - 1] - 1) for i in range(count)}
    k_first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("ko_inner"), s.k_block), E.mul(E.Var("kv"), LANES))
    k_block, k_split = s.k_block, 1
    groups, vector_channels, loaded, live = 1, ("0",), None, 0
    if depthwise and not columns:  # the tile holds the stripe's channels: ko_inner runs per pixel store
        k_block, k_split, live = cut.channels, s.k_split, cut.channels // LANES
        bounds["kv"] = (0, live - 1)
        k_first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("kv"), LANES))
        present = unproven([(k_first, "<", out_k)], bounds)
        if present and last and bounds[ko_var] == (0, 0) and out_k % LANES == 0:
            # one channel stripe wider than the op (144 channels in 5 blocks of 32): only the op's vectors are
            # summed; the store's channel test reads no others
            live = out_k // LANES
            bounds["kv"] = (0, live - 1)
            present = unproven([(k_first, "<", out_k)], bounds)

        def offset(kv: int) -> int:
            return E.evaluate(src.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(0),
                                               "c": E.Const(kv * LANES)}, {}), {})
        groups, pixels = _groups(live, cols, offset) if not present else (1, min(8, cols))
        vector_channels = tuple(str(offset(i) - offset(0)) for i in range(groups))
        loaded = (pixels - 1) * op.stride[1] + (op.kernel[1] - 1) * op.dilation[1] + 1
        bounds["owb"] = (0, math.ceil(cols / pixels) - 1)
        bounds |= {f"xc{i}": (0, geo.cols[j - 1] - 1) for i in range(loaded)}
    group: tuple[str, ...] = ()
    inside = ""
    if columns:  # GROUP channels per step of kv
        k_first = E.add(E.mul(E.Var(ko_var), cut.channels), E.mul(E.Var("ko_inner"), s.k_block),
                        E.mul(E.Var("kv"), GROUP))
        bounds["kv"] = (0, s.k_block // GROUP - 1)
        group = tuple(part(src, "c", E.add(k_first, E.Const(c)), bounds) for c in range(GROUP))
        channel, block, tap = "", f"ko_inner * {s.k_block} + kv * {GROUP}", cut.channels
        present = unproven([(k_first, "<", out_k)], bounds)
        reach = (LANES - 1) * op.stride[1] + (op.kernel[1] - 1) * op.dilation[1]
        inside = f"xb >= 0 && xb + {reach} <= {geo.cols[j - 1] - 1}"
    elif depthwise:
        channel, block, tap = part(src, "c", k_first, bounds), f"kv * {LANES}", cut.channels
        present = unproven([(k_first, "<", out_k)], bounds)
    else:
        channel, block, present = part(src, "c", E.Var("rc"), bounds), "", []
        tap = reduce * width
        block = f"(ko_inner * {s.k_block // width} + kv) * {taps * tap}"
    found = None
    if direct and depthwise and not columns and not present:  # op 1 reads the input: positions in the input
        full = cfg.input_layout.bind(tuple(plan.ops[0].in_shape))
        wide = bounds | {"ih": (-op.pad[0], shape_list[0][1] - 1), "iw": (-op.pad[1], shape_list[0][2] - 1)}
        found = Direct(row=E.to_c(E.simplify(E.add(geo.row_start[0], in_row), bounds)),
                       col=E.to_c(E.simplify(geo.col_start[0], bounds)), rows=shape_list[0][1], cols=shape_list[0][2],
                       row_offset=part(full, "h", E.Var("ih"), wide) + (
                           f" + {part(full, 'n', E.Var('nb'), bounds)}" if shape_list[0][0] > 1 else ""),
                       col_offset=part(full, "w", E.Var("iw"), wide), fresh_rows=fresh_rows(op),
                       ahead=PREFETCH_TILES * pixels * op.stride[1], lines=-(-live * LANES // LINE_FLOATS),
                       channel=part(full, "c", E.mul(E.Var(ko_var), cut.channels), bounds), col_step=column_step(full))
        channel = part(full, "c", k_first, bounds)
    col_base = E.add(E.mul(E.add(geo.col_start[j], E.mul(E.Var("owb"), pixels)), op.stride[1]), E.Const(-op.pad[1]),
                     E.mul(geo.col_start[j - 1], -1))
    if loaded is not None:
        count = loaded
    return Tile(depthwise=depthwise, pixels=pixels, vectors=vectors, k_block=k_block, k_split=k_split, kernel=op.kernel,
                stride=op.stride[1], dilation=op.dilation[1], reduce=reduce, src=(["input_cache", *temp_names(len(cfg.ops))])[j - 1],
                row=part(src, "h", in_row, bounds), col_base=E.to_c(E.simplify(col_base, bounds)),
                col_limit=geo.cols[j - 1] - 1, col=tuple(part(src, "w", E.Var(f"xc{i}"), bounds) for i in range(count)),
                channel=channel, filter_block=block, filter_tap=tap, present=present[0] if present else "",
                columns=columns, channels=group, inside=inside, lanes=lanes, groups=groups,
                vector_channels=vector_channels, direct=found, live_vectors=live), ""


# ---------------------------------------------------------------- rewriting the planner's sections

def _rewrite(nodes: tuple[Node, ...], tiles: list, cut, geo, threads: int) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Section) and node.step is not None and node.step.op and tiles[node.step.op - 1]:
            tile = tiles[node.step.op - 1]
            if node.step.phase is Phase.FILTER_READ:
                out.append(replace(node, label=node.label + ", repacked for the micro-kernel",
                                   body=_repack(node.body, tile, cut.channels)))
                continue
            if node.step.phase is Phase.CONV:
                out.append(replace(node, label=node.label + " (register-blocked micro-kernel)",
                                   body=_blocked(node.body, tile, geo.cols[node.step.op], threads)))
                continue
        if isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=_rewrite(node.body, tiles, cut, geo, threads)))
        else:
            out.append(node)
    return tuple(out)


def _write_back_index(nodes: tuple[Node, ...]) -> str:
    """The output index of the planner's write-back copy (in oh, ow, ok and the stripe indices), "" if none."""
    for node in nodes:
        if isinstance(node, Stmt) and node.code.startswith("output[") and "] = output_cache[" in node.code:
            return node.code[len("output["):node.code.index("] = output_cache[")]
        if isinstance(node, (Loop, Guard, Block, Section)):
            found = _write_back_index(node.body)
            if found:
                return found
    return ""


def _direct(nodes: tuple[Node, ...], index: str) -> tuple[Node, ...]:
    """The last conv's stores into output[index] instead of the output cache, and no write-back section."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Section) and node.step == Step(Phase.WRITE_BACK):
            continue
        if isinstance(node, Stmt) and node.code.startswith("output_cache["):
            value = node.code[node.code.index("] = ") + 4:]
            out.append(Stmt(code=f"output[{index}] = {value}", summary=node.summary.replace("output_cache", "output")))
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=_direct(node.body, index)))
        else:
            out.append(node)
    return tuple(out)


def _unswitch(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
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
        out.append(replace(node, body=_unswitch(node.body)) if isinstance(node, (Loop, Guard, Block, Section)) else node)
    return tuple(out)


def _repack(nodes: tuple[Node, ...], t: Tile, channels: int) -> tuple[Node, ...]:
    """The filter read with its store moved to the micro-kernel's layout: depthwise [tap][k], dense
    [k / width][tap][c][k % width] (output channels innermost, unit stride)."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Stmt) and node.code.startswith("filter_cache["):
            value = node.code[node.code.index("] = ") + 4:]
            kw = t.kernel[1]
            if t.depthwise:
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


def _blocked(nodes: tuple[Node, ...], t: Tile, cols: int, threads: int) -> tuple[Node, ...]:
    """The conv section with its pixel loop (ow) cut into tiles: the micro-kernel sums a tile, then the planner's
    store runs for each of its pixels with `acc` pointing at that pixel's sums."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Loop) and node.var == "ow":
            out.append(_tiled_row(node, t, cols))
        elif isinstance(node, Loop) and node.var == "ko_inner" and t.folded:
            out += _blocked(node.body, t, cols, threads)  # its channels are the tile's: ko_inner runs per pixel
        elif isinstance(node, Loop) and node.var == "oh" and threads > 1:
            # rows of one conv are independent: each writes its own destination rows (tile, acc are per row)
            out += [Stmt(code="#ifdef _OPENMP", summary=""),
                    Stmt(code=f"#pragma omp parallel for num_threads({threads}) schedule(static)", summary=""),
                    Stmt(code="#endif", summary=""), replace(node, body=_blocked(node.body, t, cols, threads))]
        elif isinstance(node, (Loop, Guard, Block, Section)):
            out.append(replace(node, body=_blocked(node.body, t, cols, threads)))
        else:
            out.append(node)
    return tuple(out)


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
    if tail:  # KG_LIKELY here too: a branch gcc deems cold it leaves scalar (144x56: 0.75 -> 0.38 ms)
        return [Guard(cond=f"KG_LIKELY({whole})", body=(replace(stores, body=inside),)),
                Guard(cond=f"KG_LIKELY(!({whole}))", body=(replace(stores, extent=tail, body=inside),))]
    return [Guard(cond=f"KG_LIKELY({whole})", body=(replace(stores, body=inside),)),
            Guard(cond=f"!({whole})", body=(stores,))]


def _substituted(nodes: tuple[Node, ...], text: str, by: str) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Stmt):
            out.append(replace(node, code=node.code.replace(text, by)))
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
    block = t.k_block // t.k_split  # the planner's k_block: what acc[ki] indexes
    pixel: list[Node] = []
    if isinstance(reduction, Guard):  # a position the planner does not sum (a consumer's padding) holds 0
        pixel.append(Guard(cond=f"!({reduction.cond})", body=(
            Loop(var="ki", extent=block, body=(Stmt(code="acc[ki] = 0.0f;", summary="acc[ki] = 0"),)),)))
    (start,) = init.body
    assert isinstance(start, Stmt) and start.code.startswith("acc[ki] = "), start
    if start.code != "acc[ki] = 0;":  # a partial sum of earlier input-channel chunks: added to this chunk's
        pixel.append(Loop(var="ki", extent=block, body=(
            Stmt(code="acc[ki] += " + start.code[len("acc[ki] = "):], summary=start.summary),)))
    tail, live = 0, t.live_vectors * LANES
    if t.folded and 0 < live < t.k_block and -(-live // block) == t.k_split:  # one partial block, the last
        tail = live - (t.k_split - 1) * block
    pixel += _unswitched_channels(stores, block, tail)
    sums = f"tile + pb * {t.k_block}" + (" + ko_inner * " + str(block) if t.folded else "")
    pixel = [Stmt(code=f"float *const acc = {sums};", summary="acc = its sums"), *pixel]
    if t.folded:  # the planner's channel blocks of this pixel, each stored as the planner stores it
        pixel = [Loop(var="ko_inner", extent=t.k_split, body=tuple(pixel))]
    here: tuple[Node, ...] = (Stmt(code=f"const int ow = owb * {t.pixels} + pb;", summary="ow = tile pixel"),
                              *((Guard(cond=col_guard, body=tuple(pixel)),) if col_guard else pixel))
    if cols % t.pixels:
        here = (Guard(cond=f"owb * {t.pixels} + pb < {cols}", body=here),)
    return Loop(var="owb", extent=math.ceil(cols / t.pixels), comment=f"tiles of {t.pixels} pixels", body=(
        Stmt(code=f"float tile[{t.pixels * t.k_block}];", summary=f"tile[{t.pixels}][{t.k_block}]"),
        *tile_nodes(t),
        Loop(var="pb", extent=t.pixels, body=here)))
