"""Fit the splits a config leaves open to a memory budget (seed 001: tile to fit local memory). Pure.

Candidates are (k_split, h_split, w_split) triples. For each count of stripes along a
dimension only the smallest split giving that count is tried (a larger one moves the same
bytes in a bigger cache), so a 2048-row image has about 2 * sqrt(256) row choices, not 256.
Among the candidates whose caches fit, the winner moves the fewest bytes between memory and
caches; ties go to less recomputed work, then the smaller workspace. Where the target says how
fast its micro-kernel runs each tile shape (Schedule.speed: c), the time the tiles take is added to
the traffic's (tile_speed.py: loads per FMA of each op's tile, the tiles' idle tail pixels, a channel
block of part vectors), so a wider channel block or stripe wins where its tiles are faster than the
bytes it moves cost. The report keeps the runners-up and why each lost, and why the winner won.

Where the config runs more than one thread (a target option `threads`, the c target's) the threads share out
whole stripes (targets/c/stripe_team.py), so a candidate's cost is what its busiest thread does: ceil(S / T) of its
S stripes' share. One stripe then costs T times what T would: a 14x14 MobileNetV3 block in one row stripe runs on
one thread, in two (recomputing the halo rows of its earlier ops) on both. With one thread nothing changes.

For a chain whose order is open (`schedule: auto`, `order: auto`) both loop orders compete,
each with its own grid: under rows_outer the channel stripe changes neither traffic nor work,
so k_split stays 1 and, when the config left k_block open, the channel block is halved until
the filter cache fits (the widest that fits wins), a block below one vector charged for its idle
lanes (narrow_cost).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import NamedTuple

from ..config import Config
from ..errors import NoScheduleFits
from ..plan_types import Halo, LoopOrder, Pipeline, StripeGeometry, Stripes
from .geometry import ELEMENT_BYTES, lone_channelwise_op, shapes, stripe_geometry, stripes, windows, workspace_of
from .tile_speed import computed_share, peak_flops, tiles_text, transpose_flops, transposed_bytes
from .work import Work, count_work

SHOWN_RUNNERS_UP = 4  # fitting candidates listed after the winner
SHOWN_TOO_BIG = 3  # larger schedules that would move fewer bytes but do not fit
# Each candidate's caches and counts are worked out (about 40 us, 80 us while a chain's windows are first bound:
# seed 001's 2048 x 2048 image has 961); larger problems are sampled down to this many.
MAX_CANDIDATES = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    k_split: int
    h_split: int
    w_split: int
    c_split: int
    stripes: int
    workspace_bytes: int
    traffic_bytes: int
    executed_flops: int
    verdict: str  # "chosen", or why it lost
    order: LoopOrder = LoopOrder.CHANNELS_OUTER
    k_block: int = 0
    h_block: int = 0
    compute_bytes: int = 0  # its tiles' time in bytes of traffic (0: the target gives no tile speed)

    @property
    def fits(self) -> bool:
        return not self.verdict.startswith("needs")


class Key(NamedTuple):
    """A candidate as the search ranks it: the least traffic (with a lowered channel block's slower compute added,
    see narrow_cost), then the least executed work, fewer input-channel chunks (each rereads the partial sums), a
    wider channel block (rows_outer's only lever: more accumulators per pixel), a taller row block (fewer halo rows
    recomputed), the smaller workspace, seed 000's order, the smaller splits."""

    cost: int  # traffic, plus narrow_cost
    traffic: int
    executed: int
    c: int
    neg_k_block: int
    neg_h_block: int
    workspace: int
    order_rank: int
    k: int
    h: int
    w: int
    count: int
    compute: int  # the tiles' time as bytes of traffic, in cost (0: no tile speed)

    @property
    def order(self) -> LoopOrder:
        return list(LoopOrder)[self.order_rank]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSearch:
    budget: int
    budget_source: str  # "schedule.budget", "hvx VTCM (v73 default)"
    fitted: tuple[str, ...]  # what the search chose: ("k_split", "h_split", "w_split"), "order", "k_block"
    tried: int
    chosen: Candidate
    runners_up: tuple[Candidate, ...]
    too_big: tuple[Candidate, ...]
    why: str = ""  # why the winner won, its compute side (with a tile speed)


def _split_choices(blocks: int) -> list[int]:
    """For every stripe count c that some split gives, the smallest split giving exactly c stripes.
    About 2 sqrt(blocks) of them, found without trying every split."""
    choices, split = [], 1
    while split <= blocks:
        count = math.ceil(blocks / split)
        choices.append(math.ceil(blocks / count))
        if count == 1:
            break
        split = math.ceil(blocks / (count - 1))  # the smallest split with fewer stripes
    return sorted(set(choices))


def _thinned(options: list[list[int]], limit: int = MAX_CANDIDATES) -> list[list[int]]:
    """At most `limit` combinations: the longest choice lists keep every other entry (the smallest
    and largest split stay) until the product fits, so planning time does not grow with the tensor."""
    options = [list(o) for o in options]
    while math.prod(len(o) for o in options) > limit:
        longest = max(options, key=len)
        longest[:] = longest[::2] + ([longest[-1]] if len(longest) % 2 == 0 else [])
    return options


class _Trials:
    """The config with a candidate's schedule. The config's and its schedule's fields are read once per search, not
    once per candidate as dataclasses.replace would (a network's import tries tens of thousands of candidates)."""

    def __init__(self, config: Config):
        self.config, self.config_type = {f.name: getattr(config, f.name) for f in fields(config)}, type(config)
        self.schedule = {f.name: getattr(config.schedule, f.name) for f in fields(config.schedule)}
        self.schedule_type = type(config.schedule)
        self.channel_block = config.input_layout.block_factor("c") or 1
        self.channels = config.input_shape[3]

    def __call__(self, k: int, h: int, w: int, c: int = 1, order: LoopOrder | None = None,
                 k_block: int | None = None, h_block: int | None = None) -> Config:
        block = 0
        if c > 1:  # chunks of whole channel blocks of the input layout
            block = math.ceil(self.channels / self.channel_block) // c * self.channel_block
        s = self.schedule
        order = order or s["order"] or LoopOrder.CHANNELS_OUTER
        schedule = self.schedule_type(**{**s, "k_split": k, "h_split": h, "w_split": w, "c_split": c,
                                         "c_block": block, "order": order, "orders": (order,),
                                         "k_block": k_block or s["k_block"], "h_block": h_block or s["h_block"]})
        return self.config_type(**{**self.config, "schedule": schedule})


MAX_CHUNK_CHOICES = 8  # c_split candidates: the smallest divisors (each extra chunk rereads the partial sums)


def _channel_choices(config: Config) -> list[int]:
    """c_split values: the smallest divisors of the input's channel blocks (each chunk whole blocks)."""
    blocks = math.ceil(config.input_shape[3] / (config.input_layout.block_factor("c") or 1))
    return [d for d in range(1, blocks + 1) if blocks % d == 0][:MAX_CHUNK_CHOICES]


def _measure(config: Config, shape_list: list, budget: int | None = None) -> tuple[int, int, int, int, int]:
    """(workspace, traffic, executed FLOPs, stripes, the tiles' time in bytes of traffic (0 without a tile speed));
    traffic and work are not counted (-1) for a workspace over `budget` (given when the caller keeps only the
    fitting schedules)."""
    cut = stripes(config, shape_list)
    geo = stripe_geometry(config, shape_list, cut)
    ebytes = ELEMENT_BYTES[config.dtype]
    workspace = workspace_of(config, windows(config, shape_list, geo, cut)) * ebytes
    rows_outer = config.schedule.order is LoopOrder.ROWS_OUTER  # its stripes are rows x columns
    count = cut.count // cut.ko_extent if rows_outer else cut.count
    if budget is not None and workspace > budget:
        return workspace, -1, -1, count, 0
    work = count_work(config, shape_list, geo, cut, ebytes)
    return workspace, work.traffic.total, work.executed_flops, count, compute_bytes(config, geo, cut, work)


def compute_bytes(config: Config, geo: StripeGeometry, cut: Stripes, work: Work) -> int:
    """The time the schedule's tiles take at its target's tile speed, in bytes its memory moves meanwhile (0 when
    the schedule carries no tile speed)."""
    roofs = config.schedule.speed
    if roofs is None or roofs.tile_speed is None:
        return 0
    at_peak = peak_flops(roofs.tile_speed, config, geo, cut, work) + transpose_flops(roofs.tile_speed, config, geo, work)
    return round(at_peak * roofs.bytes_per_second / roofs.flops_per_second)


MIN_K_BLOCK = 4  # rows_outer's smallest channel block: fewer accumulators per pixel leave the FMA units idle
# A channel block narrower than this leaves vector lanes idle: the c micro-kernel's dense tile keeps 8-float vectors
# of output channels per pixel, and a block of 4 runs it on 4-float ones at half the width. Ranked by traffic alone,
# MobileNetV2's features_2 (1x1 16->96 on 112x112, depthwise, 1x1 -> 24) took k_block 4 for 2% fewer bytes than 16,
# and 7.5 against 4.1 ms of CPU (AVX-512 host, interleaved). A block of 8 (one vector) is not charged: ResNet18's
# 7x7x512 pair at 8 in one stripe took 28 ms, at 16 in three stripes (filters read 4x over) 48.
WIDE_K_BLOCK = 8
# FLOPs one core runs in the time it moves a byte from memory (116.7 GFLOP/s FMA peak over a 22.9 GB/s triad,
# targets/c's CPU_ROOFS): what turns the FLOPs a narrow block loses into bytes the traffic is ranked in.
FLOPS_PER_BYTE = 5


def narrow_cost(k_block: int, config_k_block: int, executed: int) -> int:
    """The time a channel block the search lowered below WIDE_K_BLOCK loses to unused vector lanes, in bytes of
    traffic: its executed FLOPs take WIDE_K_BLOCK / k_block times the full width's time, less that time."""
    if k_block >= min(WIDE_K_BLOCK, config_k_block):
        return 0
    return executed * (WIDE_K_BLOCK // k_block - 1) // FLOPS_PER_BYTE


def _k_blocks(config: Config, order: LoopOrder) -> list[int]:
    """Channel blocks to try: the config's, and when the config left it open its halvings down to MIN_K_BLOCK under
    rows_outer (where the block sizes only the filter and output caches, not the traffic) and for a lone channelwise
    op under channels_outer (where it sizes the input window too: a global pool over 112x112x32 has no row stripes,
    and 8 channels of it fit a 512 KiB budget where 32 do not)."""
    s = config.schedule
    striped = order is LoopOrder.CHANNELS_OUTER and lone_channelwise_op(config)
    if not s.k_block_open or (order is LoopOrder.CHANNELS_OUTER and not striped):
        return [s.k_block]
    blocks, block = [s.k_block], s.k_block
    while block // 2 >= MIN_K_BLOCK:
        block //= 2
        blocks.append(block)
    return blocks


def _h_blocks(config: Config, order: LoopOrder) -> list[int]:
    """Row blocks to try: the config's, and under rows_outer when the config left it open its halvings down to 1
    row: a chain's intermediate caches hold every channel of a stripe's rows there, and fewer rows are what makes a
    wide block (960 channels) fit, at the price of recomputing the halo rows between stripes."""
    s = config.schedule
    if order is LoopOrder.CHANNELS_OUTER or not s.h_block_open:
        return [s.h_block]
    blocks, block = [s.h_block], s.h_block
    while block // 2 >= 1:
        block //= 2
        blocks.append(block)
    return blocks


def fit_schedule(config: Config, report: bool = True) -> tuple[Config, ScheduleSearch | None]:
    """The config with the splits it left open fitted to its budget, and the search's report. report False: the
    same choice, but the schedules over the budget are not counted, so the report lists no runners-up and no
    larger schedules (a cost model that reads only the winner)."""
    s = config.schedule
    if s.budget is None:
        return config, None
    shape_list = shapes(config)
    _, out_h, out_w, _ = shape_list[-1]
    orders = (s.order,) if s.order is not None else s.orders

    def h_options(h_block: int) -> list[int]:
        return [s.h_split] if s.h_split is not None else _split_choices(math.ceil(out_h / h_block))
    w_blocks = math.ceil(out_w / s.w_block)
    w_options = [s.w_split] if s.w_split is not None else _split_choices(w_blocks)
    if config.dtype == "uint8" and s.w_split is None:
        w_options = [w_blocks]  # the quantized kernels keep full-width stripes
    grids = []  # per order: (order, [k_block, k_split, h_split, w_split options]), thinned to share MAX_CANDIDATES
    for order in orders:
        if s.k_split is not None:
            k_options = [s.k_split]
        elif order is LoopOrder.ROWS_OUTER:
            k_options = [1]  # traffic and work do not depend on the channel stripe: a wider one only costs cache
        else:
            k_options = _split_choices(min(math.ceil(k / s.k_block) for _, _, _, k in shape_list[1:]))
        h_blocks = _h_blocks(config, order)
        for h_block in h_blocks:
            grids.append((order, h_block, _thinned([_k_blocks(config, order), k_options, h_options(h_block),
                                                    w_options], MAX_CANDIDATES // len(orders) // len(h_blocks))))

    # input-channel chunks (a single op, c_split left open): tried only when no schedule fits with the whole
    # input in the caches, since every extra chunk rereads the partial sums
    c_open = s.c_split is None
    fits: list[Key] = []
    too_big: list[Key] = []
    smallest: Key | None = None
    tried = 0
    trial_config = _Trials(config)
    threads = _threads(config)
    for c in (_channel_choices(config) if c_open else [s.c_split]):
        if c > 1 and fits:
            break
        for order, hb, (kb_options, k_options, h_splits, w_options) in grids:
            for kb in kb_options:
                for k in k_options:
                    for h in h_splits:
                        for w in w_options:
                            tried += 1
                            trial = trial_config(k, h, w, c, order, kb, hb)
                            workspace, traffic, executed, count, compute = _measure(trial, shape_list,
                                                                                    None if report else s.budget)
                            slower = compute if s.speed is not None else narrow_cost(kb, s.k_block, executed)
                            cost = traffic + slower if traffic >= 0 else traffic
                            if threads > 1 and cost > 0 and s.halo is Halo.RELOAD and s.pipeline is Pipeline.NONE:
                                cost = cost * -(-count // threads) // count  # the busiest thread's stripes
                            key = Key(cost, traffic, executed, c, -kb, -hb, workspace, list(LoopOrder).index(order), k, h,
                                      w, count, compute)
                            if smallest is None or workspace < smallest.workspace:
                                smallest = key
                            (fits if workspace <= s.budget else too_big).append(key)
    chunked = any(key.c > 1 for key in fits + too_big) and c_open
    fitted = tuple(name for name in ("k_split", "h_split", "w_split") if getattr(s, name) is None) + (
        ("c_split",) if chunked else ()) + (("order",) if len(orders) > 1 else ()) + (
        ("k_block",) if any(len(grid[2][0]) > 1 for grid in grids) else ()) + (
        ("h_block",) if len({grid[1] for grid in grids}) > 1 else ())
    if not fits:
        assert smallest is not None
        error = config.problem("schedule.budget" if s.budget_source == "schedule.budget" else "schedule",
                               f"expected a budget of at least {smallest.workspace} bytes: the smallest schedule "
                               f"({_splits(smallest, fitted)}) needs that much for its caches, got {s.budget} "
                               f"({s.budget_source})")
        raise NoScheduleFits(error.problems, needed=smallest.workspace, budget=s.budget)
    fitting = len(fits)
    fits.sort()
    best = fits[0]
    chosen = _candidate(best, "chosen")
    timed = s.speed is not None
    runners = tuple(_candidate(c, _why_lost(c, best, s.speed) if timed else _why_lost(c, best))
                    for c in fits[1:1 + SHOWN_RUNNERS_UP] if report)
    better_but_big = sorted((c for c in too_big if c[:3] < best[:3] and report), key=lambda c: (c.workspace, c.traffic))
    big = tuple(_candidate(c, f"needs {c.workspace} bytes, over the {s.budget}-byte budget")
                for c in better_but_big[:SHOWN_TOO_BIG])
    search = ScheduleSearch(budget=s.budget, budget_source=s.budget_source, fitted=fitted, tried=tried,
                            chosen=chosen, runners_up=runners, too_big=big)
    winner = trial_config(best.k, best.h, best.w, best.c, best.order, -best.neg_k_block, -best.neg_h_block)
    if timed and report:
        search = replace(search, why=_why_won(winner, shape_list, best, fitting))
    return winner, search


def _threads(config: Config) -> int:
    """The threads the config's kernels share their stripes between (its targets' `threads` option: c), 1 when
    the search has no tile speed to weigh the stripes with."""
    if config.schedule.speed is None:
        return 1
    return max((getattr(options, "threads", 1) or 1 for options in config.options.values()), default=1)


def _splits(key: Key, fitted: tuple[str, ...]) -> str:
    """k_split=1, h_split=2, w_split=1 (and what else the search fitted)."""
    return (f"k_split={key.k}, h_split={key.h}, w_split={key.w}" + (f", c_split={key.c}" if "c_split" in fitted else "")
            + (f", order={key.order}" if "order" in fitted else "")
            + (f", k_block={-key.neg_k_block}" if "k_block" in fitted else "")
            + (f", h_block={-key.neg_h_block}" if "h_block" in fitted else ""))


def _candidate(key: Key, verdict: str) -> Candidate:
    return Candidate(k_split=key.k, h_split=key.h, w_split=key.w, c_split=key.c, stripes=key.count,
                     workspace_bytes=key.workspace, traffic_bytes=key.traffic, executed_flops=key.executed,
                     verdict=verdict, order=key.order, k_block=-key.neg_k_block, h_block=-key.neg_h_block,
                     compute_bytes=key.compute)


def _why_won(config: Config, shape_list: list, best: Key, fitting: int) -> str:
    """The compute side of the winner: its tiles op by op, their estimated time and the traffic's."""
    roofs = config.schedule.speed
    cut = stripes(config, shape_list)
    geo = stripe_geometry(config, shape_list, cut)
    work = count_work(config, shape_list, geo, cut, ELEMENT_BYTES[config.dtype])

    def op_text(j: int) -> str:
        share = computed_share(roofs.tile_speed, config, geo, cut, work, j)
        past = f", {share - 1:.0%} more pixels computed than kept" if share > 1.005 else ""
        return f"{config.ops[j - 1].kind} #{j} {tiles_text(roofs.tile_speed, config, j, geo.cols[j], geo.rows[j])}{past}"
    tiles = "; ".join(op_text(j) for j in range(1, len(config.ops) + 1))
    moved = transposed_bytes(config, geo, work) if roofs.tile_speed.transpose_flops_per_byte else 0
    transposing = round(transpose_flops(roofs.tile_speed, config, geo, work) * roofs.bytes_per_second
                        / roofs.flops_per_second)
    on_tiles = best.compute - transposing
    share = best.executed * roofs.bytes_per_second / roofs.flops_per_second / on_tiles if on_tiles > 0 else 0
    extra = (f"; transposing {moved} bytes between the tensors' layouts and the caches' {_us(transposing, roofs)} "
             f"us" if transposing else "")
    return (f"the least estimated time of {fitting} fitting: compute {_us(best.compute, roofs)} us (its tiles at "
            f"{share:.2f} of the FMA peak: {tiles}{extra}) + traffic {_us(best.traffic, roofs)} us "
            f"({roofs.tile_speed.source})")


def _us(traffic_bytes: int, roofs) -> str:
    return f"{traffic_bytes / roofs.bytes_per_second * 1e6:.1f}"


def _why_lost(key: Key, best: Key, roofs=None) -> str:
    if roofs is not None and key.cost > best.cost:  # time: its tiles' and its traffic's
        more, saved = key.compute - best.compute, best.traffic - key.traffic
        block = (f" (k_block {-key.neg_k_block} against {-best.neg_k_block})" if key.neg_k_block != best.neg_k_block
                 else "")
        if saved > 0:
            return (f"its tiles{block} take {_us(more, roofs)} us more, more than the {saved} bytes "
                    f"({_us(saved, roofs)} us) it saves")
        if saved == 0:
            return f"its tiles{block} take {_us(more, roofs)} us more at the same traffic"
        if more >= 0:
            return f"moves {-saved} more bytes ({_us(-saved, roofs)} us)" + (
                f" and its tiles take {_us(more, roofs)} us more" if more else "")
        return (f"moves {-saved} more bytes ({_us(-saved, roofs)} us), more than its faster tiles save "
                f"({_us(-more, roofs)} us)")
    if key.cost > best.cost and key.traffic <= best.traffic:
        return (f"a channel block of {-key.neg_k_block}, narrower than {WIDE_K_BLOCK}: its idle vector lanes cost "
                f"more than the {best.traffic - key.traffic} bytes it saves")
    if key.traffic > best.traffic:  # (with a narrow winner: more than its lanes cost)
        return f"moves {key.traffic - best.traffic} more bytes"
    if key.executed > best.executed:
        return f"recomputes {key.executed - best.executed} more FLOPs"
    if key.c > best.c:
        return f"splits the input channels into {key.c} chunks (partial sums reread {key.c - 1} more times)"
    if key.neg_k_block > best.neg_k_block:
        return f"a narrower channel block ({-key.neg_k_block} against {-best.neg_k_block}) at the same traffic and work"
    if key.neg_h_block > best.neg_h_block:
        return f"a shorter row block ({-key.neg_h_block} against {-best.neg_h_block} rows) at the same traffic and work"
    if key.workspace > best.workspace:
        return f"same traffic and work in a {key.workspace - best.workspace}-byte larger workspace"
    if key.order_rank > best.order_rank:
        return f"same traffic, work and workspace in order {key.order}; seed 000's order is kept"
    return "same traffic, work and workspace; the winner has smaller splits"
