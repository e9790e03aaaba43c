"""What `plan` counts for a config (useful and executed FLOPs, memory traffic, workspace), without building its
kernel: `kernelgen import`'s cost model plans hundreds of candidate groups and reads only these. Pure."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import Config
from ..ops import OPS
from ..plan_types import Shape, Traffic
from .fitted import fit
from .geometry import ELEMENT_BYTES, workspace_elements
from .search import ScheduleSearch
from .tile_speed import peak_flops
from .work import count_work


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCosts:
    flops: int  # as Plan.flops
    executed_flops: int
    traffic: Traffic
    workspace_bytes: int
    search: ScheduleSearch | None
    unfused_activation_bytes: int  # its ops run one by one: each op's input and output once (report.py's)
    # the FLOPs the FMA units could run at their peak in the time its tiles take, by its target's tile speed
    # (tile_speed.py; 0: the schedule carries none)
    at_peak_flops: int = 0


def plan_costs(config: Config) -> PlanCosts:
    """plan(config)'s counts, and the same ConfigErrors. Its search chose the same schedule but lists no runners-up
    nor larger schedules: the schedules over the budget were not counted."""
    fitted = fit(config, report=False)
    config, shape_list = fitted.config, fitted.shapes
    ebytes = ELEMENT_BYTES[config.dtype]
    work = count_work(config, shape_list, fitted.geometry, fitted.cut, ebytes)
    ops = list(enumerate(config.ops, start=1))
    unfused = sum(math.prod(shape_list[j - 1]) + math.prod(shape_list[j]) * (2 if op.residual is not None else 1)
                  for j, op in ops)
    return PlanCosts(flops=sum(useful_flops(op, shape_list[j - 1], shape_list[j]) for j, op in ops),
                     executed_flops=work.executed_flops, traffic=work.traffic,
                     workspace_bytes=workspace_elements(fitted.caches) * ebytes, search=fitted.search,
                     unfused_activation_bytes=unfused * ebytes, at_peak_flops=_at_peak(config, fitted, work))


def _at_peak(config: Config, fitted, work) -> int:
    roofs = config.schedule.speed
    if roofs is None or roofs.tile_speed is None:
        return 0
    return peak_flops(roofs.tile_speed, config, fitted.geometry, fitted.cut, work)


def useful_flops(op, in_shape: Shape, out_shape: Shape) -> int:
    """An op's useful FLOPs: every output value's taps (a pool: one max or add per tap)."""
    return OPS[op.kind].flops(op, in_shape, out_shape)
