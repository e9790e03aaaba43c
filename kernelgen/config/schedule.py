"""Meaning checks of the `schedule` keys (splits, blocks, budget, pipeline, halo, loop order, input-channel chunks)
into the checked `Schedule`, and of the keys that depend on the config's targets: the budget `auto` asks for, the
loop order the targets can render and the filter layout an op naming none takes. Split from config.py, which calls
these with its checker (problem reporting, the model, the catalog of targets: the core never imports a target)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import kernelgen.config.model as M
from .model import Catalog, TargetInfo
from ..roofs import Roofs
from ..layout import Layout
from ..plan_types import Halo, LoopOrder, Pipeline

Problem = Callable[[tuple, str], None]


def default_budget(catalog: Catalog, model: Any) -> tuple[int | None, str]:
    """`auto`'s budget: from the config's own targets that run the stripe caches and define one (hvx: its VTCM
    size; c: a CPU core's L2), the smallest when there are several; the source names the target it came
    from. A config none of whose targets runs the caches (opencl, vulkan: a kernel per conv) keeps its splits
    as given."""
    budgets = [(info.name, *info.default_budget(getattr(model, info.name, None)))
               for info in catalog if info.default_budget is not None and info.name in model.targets]
    if not budgets:
        return None, ""
    name, budget, source = min(budgets, key=lambda b: b[1])
    others = [f"{n} {b}" for n, b, _ in budgets if n != name]
    return budget, source + (f"; the smallest of the targets' budgets ({', '.join(others)} bytes)" if others else "")


def tile_roofs(catalog: Catalog, model: Any) -> Roofs | None:
    """The roofs the budget search weighs tiles with: those of the config's one target that runs the stripe caches
    (c, hvx), if they carry a tile speed; None when several run them (a tile fast on one may not be on another)."""
    runners = [info for info in catalog if info.default_budget is not None and info.name in model.targets]
    roofs = runners[0].roofs if len(runners) == 1 else None
    return roofs if roofs is not None and roofs.tile_speed is not None else None


def target_filter_layout(catalog: Catalog, model: Any) -> tuple[str, str] | None:
    """(layout, the targets that read it) for an op that names no filter_layout: the one layout the config's targets
    read for its dtype (hvx uint8: OIHW8i32o4i); None when none of them needs one, or they need different ones (the
    op keeps OIHW and each target names the layout it needs)."""
    needs = {info.name: dict(info.filter_layouts)[model.dtype] for info in catalog
             if info.name in model.targets and model.dtype in dict(info.filter_layouts)}
    layouts = set(needs.values())
    return (layouts.pop(), ", ".join(needs)) if len(layouts) == 1 else None


def loop_order(problem: Problem, spec: str, auto: bool, budget: int | None, targets: list[str], catalog: Catalog,
               n_ops: int) -> tuple[LoopOrder | None, tuple[LoopOrder, ...], tuple[str, ...]]:
    """(the order, or None when the budget search picks it; the orders it may pick; the targets that run no stripe
    loops and so ignore the order). `schedule: auto` and `order: auto` let the search choose among the orders every
    target that runs the stripe loops renders; rows_outer only for a chain (a single op has no earlier op to stop
    recomputing)."""
    infos: list[TargetInfo] = [t for t in catalog if t.name in targets]
    ignoring = tuple(t.name for t in infos if t.loop_orders is None)
    renderers = [t for t in infos if t.loop_orders is not None]
    allowed = tuple(o for o in LoopOrder if all(o.value in t.loop_orders for t in renderers))
    if auto or spec == "auto":
        if budget is None:
            if not auto:
                problem(("schedule", "order"), "expected a budget with order: auto (the budget search picks the "
                                               "order): set schedule.budget, or choose channels_outer or rows_outer")
            return LoopOrder.CHANNELS_OUTER, (), ignoring
        options = tuple(o for o in allowed if n_ops > 1 or o is LoopOrder.CHANNELS_OUTER) or (LoopOrder.CHANNELS_OUTER,)
        return (options[0] if len(options) == 1 else None), options, ignoring
    order = LoopOrder(spec)
    refusing = [f"target {t.name!r} renders only {' and '.join(t.loop_orders)} stripe loops" for t in renderers
                if order.value not in t.loop_orders]
    if refusing:
        problem(("schedule", "order"), f"expected an order every target renders ({'; '.join(refusing)}), got {spec!r}")
    return order, (order,), ignoring


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    k_split: int | None  # None: the planner fits it to the budget (or uses 1)
    h_split: int | None
    k_block: int
    h_block: int
    w_split: int | None = None  # None: the whole width (or fitted to the budget)
    w_block: int = 8
    budget: int | None = None  # bytes the caches may use; None: splits as given
    budget_source: str = ""  # where the budget came from: "schedule.budget", "hvx VTCM (v73 default)"
    pipeline: Pipeline = Pipeline.NONE
    halo: Halo = Halo.RELOAD
    # input-channel chunks of a single op (None: fitted to the budget, or 1); c_block channels per chunk
    c_split: int | None = 1
    c_block: int = 0  # 0: the whole input
    # the stripe loop order (None: the budget search picks one of `orders`); the targets that ignore it (a kernel
    # per conv); k_block_open: no k_block given nor a channel block in the output layout, so the search may lower
    # it for rows_outer, where the channel block sizes only the filter cache
    order: LoopOrder | None = LoopOrder.CHANNELS_OUTER
    orders: tuple[LoopOrder, ...] = (LoopOrder.CHANNELS_OUTER,)
    order_ignored_by: tuple[str, ...] = ()
    k_block_open: bool = False
    h_block_open: bool = False  # the same for h_block (no h_block given, no row block in the output layout)
    # which schedule this is and why, for the plan report: "explicit (x.yaml:7)", "auto (no schedule given: ...)";
    # not part of the schedule's identity (it names the file), as Config.file is not the config's
    origin: str = field(default="", compare=False)
    # under `schedule: auto`, the roofs of the one target that runs the stripe caches when they say how fast its
    # micro-kernel runs each tile (c): the budget search then weighs compute by tile shape beside traffic; None:
    # traffic alone (an explicit schedule's budget, as seed 001's, is fitted by traffic)
    speed: Roofs | None = None


def schedule_kind(checker: Any) -> tuple[str, str]:
    """("auto" | "fixed" | "explicit", what the plan report says of it): the config's `schedule:` and its line, or,
    where it gives none, the default of its targets: auto when one of them plans with it by default (c), else fixed
    (opencl, vulkan: a kernel per conv, no stripe caches to fit; hvx: the seed cases' one block per stripe)."""
    given = checker.model.schedule
    if given is None:
        auto_by_default = [t.name for t in checker.catalog if t.default_schedule == "auto"]
        defaults = [name for name in auto_by_default if name in checker.model.targets]
        if defaults:
            return "auto", (f"auto (no schedule given: the {' and '.join(defaults)} target's default; "
                            f"`schedule: fixed` keeps one block per stripe)")
        return "fixed", (f"fixed (no schedule given: the default without the {' or '.join(auto_by_default)} "
                         f"target; `schedule: auto` fits the splits to a budget)")
    where = f"{Path(checker.path).name}:{checker.document.mark(('schedule',)).line}"
    kind = given if isinstance(given, str) else "explicit"
    return kind, f"{kind} ({where})"


def schedule(checker: Any, ops: list, out_hw: tuple[int, int]) -> Schedule | None:
    """The schedule keys checked and completed, through the config's checker (problem, positive, model, catalog)."""
    kind, origin = schedule_kind(checker)
    auto = kind == "auto"
    s = checker.model.schedule if kind == "explicit" else M.ScheduleModel()
    fields = M.ScheduleModel.model_fields

    def optional(key: str) -> int | None:
        value = getattr(s, key)
        return None if value is None else checker.positive(("schedule", key), value, fields[key].description)[0]

    k_split, h_split, w_split = optional("k_split"), optional("h_split"), optional("w_split")
    budget, source = None, ""
    if auto or s.budget == "auto":
        budget, source = default_budget(checker.catalog, checker.model)
    elif s.budget is not None:
        budget = checker.positive(("schedule", "budget"), int(s.budget), fields["budget"].description)[0]
        source = "schedule.budget"
    if not ops:
        return None
    out_layout = ops[-1].output_layout
    out_channels = ops[-1].out_channels
    widest = max(op.out_channels for op in ops)
    blocks = {}
    for key, dim, default, extent, what in (("k_block", "c", 32, widest, "output channels of the widest op"),
                                            ("h_block", "h", 8, out_hw[0], "output rows"),
                                            ("w_block", "w", 8, out_hw[1], "output columns")):
        fallback = _block_factor(out_layout, dim, default)
        blocks[key] = optional(key) or fallback
        # A block past the extent (and the default block) only computes guards, and its index
        # arithmetic (block * stripes) must stay within 32 bits.
        largest = max(extent, fallback, default)
        if blocks[key] > largest:
            checker.problem(("schedule", key), f"expected at most {largest} (the {extent} {what}, or the default "
                                            f"block {max(fallback, default)}), got {blocks[key]}")
            blocks[key] = fallback
    k_block, h_block, w_block = blocks["k_block"], blocks["h_block"], blocks["w_block"]
    for key, split, extent, block, what in (("h_split", h_split, out_hw[0], h_block, "output rows"),
                                            ("w_split", w_split, out_hw[1], w_block, "output columns")):
        count = math.ceil(extent / block)
        if split is not None and split > count:
            checker.problem(("schedule", key), f"expected at most {count} (the {extent} {what} make {count} "
                                            f"block{'s' if count > 1 else ''} of {block}), got {split}")
    # A stripe that is wider than the whole tensor by a full block only ever computes guards.
    k_blocks = math.ceil(out_channels / k_block)
    if k_split is not None and k_split > k_blocks:
        checker.problem(("schedule", "k_split"), f"expected at most {k_blocks} (the last op's {out_channels} output "
                                              f"channels make {k_blocks} blocks of {k_block}), got {k_split}")
    for index, op in enumerate(ops[:-1]):
        blocks = math.ceil(op.out_channels / k_block)
        if k_split is not None and k_split > blocks:
            checker.problem(("schedule", "k_split"), f"expected at most {blocks} (ops[{index}] has "
                                                  f"{op.out_channels} output channels = {blocks} blocks of "
                                                  f"{k_block}), got {k_split}")
    if s.pipeline == "double_buffer" and s.halo == "reuse":
        checker.problem(("schedule", "halo"), "expected 'reload' with pipeline: double_buffer (the prefetch of "
                                           "stripe i+1 would overwrite the ring rows stripe i still reads); "
                                           "choose one of the two")
    order, orders, ignored = loop_order(checker.problem, s.order, auto, budget, checker.model.targets,
                                                        checker.catalog, len(ops))
    c_split, c_block = channel_split(checker, optional("c_split"), ops, s, budget is not None, order)
    if budget is None:
        k_split, h_split = k_split or 1, h_split or 1
    return Schedule(k_split=k_split, h_split=h_split, k_block=k_block, h_block=h_block, w_split=w_split,
                    w_block=w_block, budget=budget, budget_source=source, pipeline=Pipeline(s.pipeline), halo=Halo(s.halo),
                    c_split=c_split, c_block=c_block, order=order, orders=orders, order_ignored_by=ignored,
                    k_block_open=optional("k_block") is None and out_layout.block_factor("c") is None,
                    h_block_open=optional("h_block") is None and out_layout.block_factor("h") is None,
                    origin=origin, speed=tile_roofs(checker.catalog, checker.model) if auto else None)

def channel_split(checker: Any, c_split: int | None, ops: list, s: Any, fitted: bool, order: LoopOrder | None) -> tuple[int | None, int]:
    """(c_split, channels per chunk): chunks of whole channel blocks of the input layout, c_split of them
    exactly. Only a single op without a pipeline or halo ring splits (None: the search may), in channels_outer
    order (rows_outer's channel blocks take turns in the output cache that holds a chunk's partial sums)."""
    layout = checker.model_input_layout
    channels, block = checker.shapes[0][3], _block_factor(layout, "c", 1) if layout is not None else 1
    blocks = math.ceil(channels / block)
    alone = (len(ops) == 1 and s.pipeline == "none" and s.halo == "reload" and ops[0].groups == 1
             and order is LoopOrder.CHANNELS_OUTER)
    if c_split is None:
        return (None if fitted and alone else 1), 0
    if c_split > 1 and not alone:
        checker.problem(("schedule", "c_split"), "expected 1: input channels split only for a single dense op "
                                              "without pipeline or halo reuse, in order channels_outer")
    elif blocks % c_split:
        checker.problem(("schedule", "c_split"), f"expected a divisor of the input's {blocks} channel blocks of "
                                              f"{block}, got {c_split}")
    return c_split, (blocks // c_split * block if c_split > 1 and not blocks % c_split else 0)


def _block_factor(layout: Layout, dim: str, default: int) -> int:
    """The output layout's block along dim (8h8w32c -> h: 8, c: 32), else the default."""
    factor = layout.block_factor(dim)
    return factor if factor is not None else default
