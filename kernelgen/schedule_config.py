"""Meaning checks of the keys that depend on the config's targets: the budget `auto` asks for, the stripe loop order
(`schedule.order`) the targets can render and the filter layout an op naming none takes. Split from config.py, which
calls these with its problem reporter and the catalog of targets (the core never imports a target)."""
from __future__ import annotations

from typing import Any, Callable

from .config_model import Catalog, TargetInfo
from .plan import LoopOrder

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
