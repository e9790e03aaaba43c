"""Fit the splits a config leaves open to a memory budget (seed 001: tile to fit local memory). Pure.

Candidates are (k_split, h_split, w_split) triples. For each count of stripes along a
dimension only the smallest split giving that count is tried (a larger one moves the same
bytes in a bigger cache), so a 2048-row image has about 2 * sqrt(256) row choices, not 256.
Among the candidates whose caches fit, the winner moves the fewest bytes between memory and
caches; ties go to less recomputed work, then the smaller workspace. The report keeps the
runners-up and why each lost.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..config import Config
from .geometry import ELEMENT_BYTES, allocate, geometry, shapes, stripes, windows, workspace_elements
from .work import count_work

SHOWN_RUNNERS_UP = 4  # fitting candidates listed after the winner
SHOWN_TOO_BIG = 3  # larger schedules that would move fewer bytes but do not fit
# Each candidate is planned in full (about 1.5 ms): seed 001's 2048 x 2048 image has 961; larger
# problems are sampled down to this many.
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

    @property
    def fits(self) -> bool:
        return not self.verdict.startswith("needs")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSearch:
    budget: int
    budget_source: str  # "schedule.budget", "hvx VTCM (v73 default)"
    fitted: tuple[str, ...]  # the splits the search chose: ("k_split", "h_split", "w_split")
    tried: int
    chosen: Candidate
    runners_up: tuple[Candidate, ...]
    too_big: tuple[Candidate, ...]


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


def _thinned(options: list[list[int]]) -> list[list[int]]:
    """At most MAX_CANDIDATES combinations: the longest choice lists keep every other entry (the smallest
    and largest split stay) until the product fits, so planning time does not grow with the tensor."""
    options = [list(o) for o in options]
    while math.prod(len(o) for o in options) > MAX_CANDIDATES:
        longest = max(options, key=len)
        longest[:] = longest[::2] + ([longest[-1]] if len(longest) % 2 == 0 else [])
    return options


def _trial(config: Config, k: int, h: int, w: int, c: int = 1) -> Config:
    block = 0
    if c > 1:  # chunks of whole channel blocks of the input layout
        channel_block = config.input_layout.block_factor("c") or 1
        block = math.ceil(config.input_shape[3] / channel_block) // c * channel_block
    return replace(config, schedule=replace(config.schedule, k_split=k, h_split=h, w_split=w, c_split=c, c_block=block))


MAX_CHUNK_CHOICES = 4  # c_split candidates: the smallest divisors (each extra chunk rereads the partial sums)


def _channel_choices(config: Config) -> list[int]:
    """c_split values: the smallest divisors of the input's channel blocks (each chunk whole blocks)."""
    blocks = math.ceil(config.input_shape[3] / (config.input_layout.block_factor("c") or 1))
    return [d for d in range(1, blocks + 1) if blocks % d == 0][:MAX_CHUNK_CHOICES]


def _measure(config: Config, shape_list: list) -> tuple[int, int, int, int]:
    cut = stripes(config, shape_list)
    geo = geometry(config, shape_list, cut)
    ebytes = ELEMENT_BYTES[config.dtype]
    workspace = workspace_elements(allocate(config, windows(config, shape_list, geo, cut))) * ebytes
    work = count_work(config, shape_list, geo, cut, ebytes)
    return workspace, work.traffic.total, work.executed_flops, cut.count


def fit_schedule(config: Config) -> tuple[Config, ScheduleSearch | None]:
    s = config.schedule
    if s.budget is None:
        return config, None
    shape_list = shapes(config)
    _, out_h, out_w, _ = shape_list[-1]
    max_k = min(math.ceil(k / s.k_block) for _, _, _, k in shape_list[1:])
    k_options = [s.k_split] if s.k_split is not None else _split_choices(max_k)
    h_options = [s.h_split] if s.h_split is not None else _split_choices(math.ceil(out_h / s.h_block))
    w_blocks = math.ceil(out_w / s.w_block)
    w_options = [s.w_split] if s.w_split is not None else _split_choices(w_blocks)
    if config.dtype == "uint8" and s.w_split is None:
        w_options = [w_blocks]  # the quantized kernels keep full-width stripes

    # input-channel chunks (a single op, c_split left open): tried only when no schedule fits with the whole
    # input in the caches, since every extra chunk rereads the partial sums
    c_open = s.c_split is None
    k_options, h_options, w_options = _thinned([k_options, h_options, w_options])
    fits: list[tuple] = []
    too_big: list[tuple] = []
    smallest: tuple | None = None
    tried = 0
    for c in (_channel_choices(config) if c_open else [s.c_split]):
        if c > 1 and fits:
            break
        for k in k_options:
            for h in h_options:
                for w in w_options:
                    tried += 1
                    trial = _trial(config, k, h, w, c)
                    workspace, traffic, executed, count = _measure(trial, shape_list)
                    # fewer chunks first at equal traffic and work: each extra one rereads the partial sums
                    key = (traffic, executed, c, workspace, k, h, w, count)
                    if smallest is None or workspace < smallest[0]:
                        smallest = (workspace, k, h, w, c)
                    (fits if workspace <= s.budget else too_big).append(key)
    chunked = any(key[2] > 1 for key in fits + too_big) and c_open
    fitted = tuple(name for name in ("k_split", "h_split", "w_split") if getattr(s, name) is None) + (
        ("c_split",) if chunked else ())
    if not fits:
        assert smallest is not None
        raise config.problem("schedule.budget" if s.budget_source == "schedule.budget" else "schedule",
                             f"expected a budget of at least {smallest[0]} bytes: the smallest schedule "
                             f"(k_split={smallest[1]}, h_split={smallest[2]}, w_split={smallest[3]}"
                             f"{f', c_split={smallest[4]}' if chunked else ''}) needs that much "
                             f"for its caches, got {s.budget} ({s.budget_source})")
    fits.sort()
    best = fits[0]
    chosen = _candidate(best, "chosen")
    runners = tuple(_candidate(c, _why_lost(c, best)) for c in fits[1:1 + SHOWN_RUNNERS_UP])
    better_but_big = sorted((c for c in too_big if c[:2] < best[:2]), key=lambda c: (c[3], c[0]))
    big = tuple(_candidate(c, f"needs {c[3]} bytes, over the {s.budget}-byte budget")
                for c in better_but_big[:SHOWN_TOO_BIG])
    search = ScheduleSearch(budget=s.budget, budget_source=s.budget_source, fitted=fitted, tried=tried,
                            chosen=chosen, runners_up=runners, too_big=big)
    return _trial(config, best[4], best[5], best[6], best[2]), search


def _candidate(key: tuple, verdict: str) -> Candidate:
    traffic, executed, c, workspace, k, h, w, count = key
    return Candidate(k_split=k, h_split=h, w_split=w, c_split=c, stripes=count, workspace_bytes=workspace,
                     traffic_bytes=traffic, executed_flops=executed, verdict=verdict)


def _why_lost(key: tuple, best: tuple) -> str:
    if key[0] > best[0]:
        return f"moves {key[0] - best[0]} more bytes"
    if key[1] > best[1]:
        return f"recomputes {key[1] - best[1]} more FLOPs"
    if key[2] > best[2]:
        return f"splits the input channels into {key[2]} chunks (partial sums reread {key[2] - 1} more times)"
    if key[3] > best[3]:
        return f"same traffic and work in a {key[3] - best[3]}-byte larger workspace"
    return "same traffic, work and workspace; the winner has smaller splits"
