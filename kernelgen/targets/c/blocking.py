"""The c target's kernel: the plan's stripe loop nest with each dense or depthwise conv's compute replaced by a
register-blocked micro-kernel (microkernel.py) and its filter cache read repacking into the micro-kernel's layout.

Everything else is the planner's, verbatim: the stripe loops (plain or pipelined, rows_outer), the input and
write-back copies, pools, squeeze-excite multiplies (a first one folded into the input read: gate_fold.py), and
each conv's per-pixel store (init of chunked partial sums, the epilogue, the consumer-padding zeros, the trace),
which now reads `acc` from the tile. A conv the
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

from ...config import Config
from ...plan_types import Function, Phase, Pipeline, Plan, Section, Step, Stmt
from ...planner import compose_stripes, fitted_config
from .direct_pool import direct_max_pool
from .microkernel import GROUP, LANES, Tile
from .gate_fold import fold
from .rewrite import direct_stores, rewrite, unswitch, whole_rows, write_back_index
from .streaming import streamed, streams
from .rowcopy import row_reads
from .stripe_team import StripeTeam, stripe_team
from .team import barriers, blocks_shared, one_team, pays, solo
from .tiles import READ_PAST_CHANNELS, op_tile, reads_input
from .options import c_options
from .winograd import winograd_fits, winograd_kernel
from .writeback import transposed_write_backs


@dataclass(frozen=True, slots=True, kw_only=True)
class CKernel:
    """The c target plan: the kernel function it emits, and per op how its compute runs."""

    kernel: Function
    threads: int  # the team's size unless <kernel>_set_threads says otherwise (team.py, stripe_team.py)
    tiles: tuple[Tile | None, ...]  # per op: its micro-kernel, or None (the planner's loops)
    notes: tuple[str, ...]
    workspace_elements: int  # what the caller provides: the plan's, or each thread's copy of it (stripe_team.py)
    thread_elements: int = 0  # one thread's copy when threads share out whole stripes; 0: the caches are shared

    @property
    def streams(self) -> bool:
        """Whether the kernel streams its output past the caches (streaming.py: kg_stream in vector.h.j2)."""
        return any("kg_stream(" in line or "KG_STREAM" in line for line in _lines(self.kernel.body))

    @property
    def vectors(self) -> bool:
        """Whether the kernel uses the vector macros (vector.h.j2): a micro-kernel, or a blocked copy of a cache."""
        return any(self.tiles) or any(re.search(r"\bkg_vf|\bKG_(LOAD|STORE|SET|LANE)", line)
                                          for line in _lines(self.kernel.body))


def c_kernel(config: Config, plan: Plan, threads: int = 1) -> CKernel:
    cfg = fitted_config(config, plan)
    geo = plan.geometry
    shape_list, cut = list(geo.shapes), geo.stripes
    filter_room = next((c.elements for c in plan.caches if c.name == "filter"), 0)
    tiles, notes = [], []
    parts = plan.stripe
    in_place = reads_input(cfg, plan)
    for j in range(1, len(cfg.ops) + 1):
        tile, why = op_tile(cfg, plan, j, shape_list, cut, geo, filter_room, in_place and j == 1)
        tiles.append(tile)
        op = plan.ops[j - 1]
        if tile is not None:
            channels = GROUP if tile.columns else LANES * tile.groups if tile.depthwise else \
                tile.k_block if tile.dot else tile.width
            kind = " (depthwise, pixel vectors)" if tile.columns else " (depthwise)" if tile.depthwise else \
                " (dot products: a matrix-vector product)" if tile.dot else \
                f" (groups of {tile.lane_group}: each lane its group's inputs)" if tile.lane_group else ""
            notes.append(f"{op.label}: micro-kernel, {tile.pixels} pixels x {channels} channels in registers{kind}")
            if tile.wide is not None:
                wide = LANES * tile.groups if tile.depthwise else tile.wide.width
                notes.append(f"{op.label}: where the compiler targets AVX-512F, {tile.wide.pixels} pixels x "
                             f"{wide} channels in 16-float vectors (KG_VF16)")
        elif why:
            notes.append(f"{op.label}: the planner's loops ({why})")
    if any(t is not None and t.reads_past for t in tiles):  # a short last vector's reach past the last cache
        plan = replace(plan, workspace_elements=plan.workspace_elements + READ_PAST_CHANNELS)
    if plan.dtype != "float32":
        return CKernel(kernel=plan.kernel, threads=1, tiles=tuple(tiles), notes=tuple(notes),
                       workspace_elements=plan.workspace_elements)
    if c_options(config).winograd and winograd_fits(plan) is None:
        return _winograd(plan, notes, threads)
    pool = direct_max_pool(plan)
    if pool is not None:
        return CKernel(kernel=pool, threads=1, tiles=tuple(tiles), workspace_elements=plan.workspace_elements,
                       notes=(*notes, f"{plan.ops[0].label}: reads its windows from the input and stores into the "
                                      f"output in place (no caches)"))
    # below, a kernel without micro-kernels (pools alone) too: its cache reads and write-backs are the blocked
    # copies (rowcopy.py, writeback.py), not a select per element (ResNet18's maxpool, NCHW: 0.81 -> 0.62 ms)
    load = parts.load
    if tiles[0] is not None and tiles[0].direct is not None:
        load = tuple(n for n in load if not (isinstance(n, Section) and n.step == Step(Phase.INPUT_READ)))
        notes.append(f"{plan.ops[0].label}: reads the input directly (no input cache: zeros for the padding taps)")
    rewritten = replace(parts, load=unswitch(row_reads(rewrite(load, tiles, cut, geo, threads))),
                        compute=rewrite(parts.compute, tiles, cut, geo, threads),
                        store=rewrite(parts.store, tiles, cut, geo, threads))
    written = write_back_index(parts.store + parts.compute)
    direct = tiles[-1] is not None and parts.pipeline is Pipeline.NONE and parts.chunks == 1 and bool(written)
    if direct:
        # the last conv stores its epilogue straight into the output: no pass through the output cache
        index = re.sub(r"\bok\b", f"(ko_inner*{cfg.schedule.k_block}+ki)", written)
        rewritten = replace(rewritten, compute=direct_stores(rewritten.compute, index), store=direct_stores(rewritten.store, index))
        notes.append(f"{plan.ops[-1].label}: stores into the output directly (no write-back of the output cache)")
        output_bytes = math.prod(plan.ops[-1].out_shape) * plan.element_bytes
        compute = streamed(rewritten.compute, vectors=tiles[-1].groups % 2 == 0) \
            if tiles[-1].depthwise and streams(output_bytes) else rewritten.compute
        if compute != rewritten.compute:  # an NCHW output, stored a lane at a time, keeps its plain stores
            rewritten = replace(rewritten, compute=compute)
            notes.append(f"{plan.ops[-1].label}: streams its {output_bytes:,}-byte output past the caches "
                         f"(whole lines of each pixel's channels; streaming.py)")
    else:  # an output cache with a pixel's channels together, an output with channel planes: a blocked transpose
        rewritten = replace(rewritten, compute=transposed_write_backs(rewritten.compute),
                            store=transposed_write_backs(rewritten.store))
    folded = fold(cfg, plan, rewritten, output_cache_live=not direct)
    if folded is not None:
        rewritten = replace(rewritten, load=folded.load, compute=folded.compute, store=folded.store)
        notes.append(folded.note)
    if direct and tiles[0] is not None and tiles[0].direct is not None:
        rows = whole_rows(rewritten)
        if rows is not rewritten:
            notes.append(f"{plan.ops[0].label}: each output row runs across the column stripes (no cache bounds them)")
        rewritten = rows
    rest = plan.kernel.body[len(compose_stripes(parts)):]  # after the stripes: layout padding fills
    unused = ("(void)output_cache; /* the last conv stores into the output directly */",) if direct else ()
    if tiles[0] is not None and tiles[0].direct is not None:
        unused += ("(void)input_cache; /* the first conv reads the input directly */",)
    if folded is not None:
        unused += (folded.unused,)
    if any(t is not None and t.filter_rows for t in tiles):
        unused += ("(void)filter_cache; /* a dot tile reads its filter tensor in place */",)
        notes.append("dot products read the filter tensor in place (no filter cache copy)")
    elif filter_room and any(t is not None and t.filter_in_place for t in tiles):
        unused += ("(void)filter_cache; /* a tile reads its filter tensor in place */",)
    for t, op in zip(tiles, plan.ops):
        if t is not None and t.filter_in_place and not t.filter_rows:
            notes.append(f"{op.label}: reads its filter tensor in place (its layout is the tiles' order: no filter "
                         f"cache copy)")
    stripes = compose_stripes(rewritten)
    shared = stripe_team(solo(stripes), plan.kernel.prologue + unused, plan, threads)
    if shared is not None and pays(plan.executed_flops, 1) and not _reads_caches(rest, plan):
        return _stripes_shared(plan, shared, rest, unused, threads, tiles, notes)
    stripes = blocks_shared(stripes, threads)
    teamed = one_team(stripes)
    meetings = barriers(teamed) if teamed is not stripes else 0
    if meetings and not pays(plan.executed_flops, meetings):
        notes.append(f"one thread: {plan.executed_flops // meetings:,} FLOPs between the {meetings:,} barriers a team "
                     f"would meet (too few for a team to pay)")
        teamed = stripes = solo(stripes)
    elif meetings:
        notes.append(f"one OpenMP team per call: {meetings:,} barriers, {plan.executed_flops // meetings:,} FLOPs "
                     f"between them")
    kernel = replace(plan.kernel, body=(*teamed, *rest), prologue=plan.kernel.prologue + unused,
                     doc=plan.kernel.doc + "; register-blocked micro-kernels")
    return CKernel(kernel=kernel, threads=threads if teamed is not stripes else 1, tiles=tuple(tiles),
                   notes=tuple(notes), workspace_elements=plan.workspace_elements)


def _winograd(plan: Plan, notes: list[str], threads: int) -> CKernel:
    kernel, cut = winograd_kernel(plan, LANES, threads)
    block = cut.block_rows * cut.tile_cols
    notes = [n for n in notes if not n.startswith(plan.ops[0].label)]  # no micro-kernel: the products are its own
    notes.append(f"{plan.ops[0].label}: Winograd F(2x2, 3x3): {cut.tile_rows} x {cut.tile_cols} tiles of 2x2 outputs "
                 f"in blocks of {block}, 16 products over the input channels each; the filter transformed each call, "
                 + ("whole, at its start" if cut.whole_u else "a panel of 2 output-channel vectors at a time"))
    if threads > 1:
        split = ("each thread its share of each block's tiles through every panel" if cut.whole_u else
                 "the input tiles, then the panels split between them, each panel on its thread's own U and M")
        notes.append(f"one OpenMP team per call, up to {threads} threads: {split}")
    return CKernel(kernel=kernel, threads=threads, tiles=(None,) * len(plan.ops), notes=tuple(notes),
                   workspace_elements=cut.workspace_elements)


def _stripes_shared(plan: Plan, shared: StripeTeam, rest: tuple, unused: tuple[str, ...], threads: int,
                    tiles: list, notes: list[str]) -> CKernel:
    """The kernel whose threads share out whole stripes: its caches' pointers move into the region (each thread's
    own), and the workspace holds `threads` copies of them."""
    notes.append(f"one OpenMP team per call: {shared.shared} shared out, each thread on its own caches "
                 f"(workspace + thread x {shared.thread_elements} elements, up to {threads} threads)")
    tiled = "; register-blocked micro-kernels" if any(tiles) else ""
    kernel = replace(plan.kernel, body=(*shared.body, *rest), prologue=(),
                     doc=f"{plan.kernel.doc} per thread, up to {threads} threads{tiled}")
    return CKernel(kernel=kernel, threads=threads, tiles=tuple(tiles), notes=tuple(notes),
                   workspace_elements=shared.workspace_elements, thread_elements=shared.thread_elements)


def _reads_caches(nodes: tuple, plan: Plan) -> bool:
    """Whether code after the stripes names a cache (whose pointers the region keeps to itself)."""
    names = "|".join(re.escape(c.c_name) for c in plan.caches)
    return bool(names) and any(re.search(rf"\b({names})\b", line) for line in _lines(nodes))


def _lines(nodes: tuple):
    for node in nodes:
        if isinstance(node, Stmt):
            yield node.text
        else:
            yield getattr(node, "cond", "")
            yield from _lines(node.body)
