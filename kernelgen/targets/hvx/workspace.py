"""Where the hvx kernel's helper scratch sits in VTCM after the plan's caches, and whether it all fits. Split from
plan.py."""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Config
from ...plan_types import Plan

ALIGN = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class Workspace:
    bytes: int  # what the caller allocates (<= the VTCM): the plan's caches, then the scratch
    scratch_offset: int  # bytes: pixel sums (int32 per source pixel)
    wcorr_offset: int  # bytes: per-output-channel corrections, k_split x 32 int32
    grouped_offset: int  # bytes: a grouped conv's int16 weights (0: no grouped op)


def workspace(config: Config, plan: Plan, ops: tuple, vtcm: int, arch: str, explicit: bool) -> Workspace:
    """uint8 scratch after the plan's caches: int32 channel sums per source pixel, then the per-output-channel
    corrections of one stripe (k_split x 32 int32), then a grouped conv's int16 weights. `ops`: the hvx plan's
    OpGeo records; `explicit`: the VTCM size was configured (hvx.vtcm_bytes), not the arch's default."""
    uint8 = config.dtype == "uint8"
    scratch_offset = plan.workspace_bytes
    wcorr_offset = scratch_offset + _aligned(max((o.src_rows * o.src_cols * 4 for o in ops), default=0))
    # a grouped conv's weights, widened to int16 (w - zw) and doubled: k_split x taps x group channels x 128 bytes
    grouped_bytes = max((plan.k_split * o.kh * o.kw * o.group_in * 128 for o in ops if o.group_in), default=0)
    grouped_offset = wcorr_offset + _aligned(plan.k_split * 32 * 4) if uint8 and grouped_bytes else 0
    size = (wcorr_offset + _aligned(plan.k_split * 32 * 4) + _aligned(grouped_bytes) if uint8
            else plan.workspace_bytes)
    if size > vtcm:
        raise config.problem("hvx.vtcm_bytes",
                             f"the workspace needs {size} bytes of VTCM (caches {plan.workspace_bytes} + helper "
                             f"scratch), more than the {vtcm} bytes of {arch}" + ("" if explicit else " (default)")
                             + ": lower schedule.k_split / h_split or raise hvx.vtcm_bytes")
    return Workspace(bytes=size, scratch_offset=scratch_offset, wcorr_offset=wcorr_offset,
                     grouped_offset=grouped_offset)


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN
