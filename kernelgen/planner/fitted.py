"""A config's schedule fitted to its budget (search.py) and the stripes and caches of that schedule: the first half
of `plan`, shared with `plan_costs`, which counts the same schedule without building its kernel. Pure."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Config
from ..plan_types import Cache, Shape, StripeGeometry, Stripes
from ..quant import op_quants
from .geometry import Windows, allocate, shapes, stripe_geometry, stripes, windows, workspace_elements
from .search import ScheduleSearch, fit_schedule

# Kernels index the workspace with 32-bit ints (C int, OpenCL int, GLSL int).
WORKSPACE_LIMIT = 2 ** 31 - 1


@dataclass(frozen=True, slots=True)
class Fitted:
    config: Config  # with the splits, blocks and order the search chose
    search: ScheduleSearch | None  # None: no budget, the config's own schedule
    shapes: list[Shape]
    cut: Stripes
    geometry: StripeGeometry
    windows: Windows
    caches: tuple[Cache, ...]


def fit(config: Config, report: bool = True) -> Fitted:
    """report False: the search's report without runners-up (search.fit_schedule)."""
    if config.dtype == "uint8":  # each op's requantizations: scales that cannot be one fail here, at their keys,
        op_quants(config)        # so `plan` refuses what `build` would
    config, search = fit_schedule(config, report)
    shape_list = shapes(config)
    cut = stripes(config, shape_list)
    geo = stripe_geometry(config, shape_list, cut)
    win = windows(config, shape_list, geo, cut)
    caches = allocate(config, win)
    if workspace_elements(caches) > WORKSPACE_LIMIT:
        raise config.problem("schedule", f"expected caches that a 32-bit index can address: this schedule's "
                                         f"workspace holds {workspace_elements(caches)} elements, more than "
                                         f"{WORKSPACE_LIMIT}; lower k_split / h_split / w_split or set a budget")
    return Fitted(config, search, shape_list, cut, geo, win, caches)
