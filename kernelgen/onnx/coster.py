"""What a candidate group of `kernelgen import` costs on a target (onnx/fusion.py's estimate over the planner's
counts, plan_costs): the cost model the grouping search asks, once per distinct candidate."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ..config.model import TargetInfo
from ..errors import ConfigError, NoScheduleFits
from ..planner import plan_costs
from .fusion import estimate
from .group_config import config_of


def group_coster(info: TargetInfo, catalog: Any) -> Callable | None:
    """A candidate group (group_config.py, schedule: auto) -> its cost on the target `info` describes; None when
    the target has no roofs or budget to estimate with. `catalog`: the targets the configs are checked against."""
    if info.roofs is None or info.default_budget is None:
        return None
    # A repeated block's candidates say what the first one's said (candidate groups carry no name nor nodes):
    # each distinct config is planned once, its cost or its error kept.
    known: dict[object, object] = {}

    def memoized(group):
        key = _content(group.data())
        if key not in known:
            try:
                known[key] = cost(group)
            except ConfigError as error:
                known[key] = error
        if isinstance(known[key], ConfigError):
            raise known[key]
        return known[key]

    def cost(group):
        config = config_of(group, catalog)
        try:
            planned, refused = plan_costs(config), ""
        except ConfigError as error:  # no schedule fits the budget: the default one, refused as a group
            planned = plan_costs(config_of(replace(group, schedule=None), catalog))
            why = (f"expected a budget of at least {error.needed} bytes" if isinstance(error, NoScheduleFits)
                   else error.problems[0].message)
            refused = f"no schedule fits the budget ({why})"
        budget = planned.search.budget if planned.search is not None else None
        activations = (planned.traffic.input_bytes + planned.traffic.output_bytes, planned.unfused_activation_bytes)
        result = estimate(planned.flops, planned.executed_flops, planned.traffic.total, planned.workspace_bytes,
                          budget, info.roofs, activations, config.dtype, planned.at_peak_flops)
        return result if not refused or result.refused else replace(result, refused=refused)

    return memoized


def _content(value):
    """A config's keys (GroupConfig.data()) as a hashable value: mappings and lists as tuples."""
    if isinstance(value, dict):
        return tuple((key, _content(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_content(item) for item in value)
    return value
