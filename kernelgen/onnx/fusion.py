"""Where a chain of convs is cut into kernels: a cost question the importer asks the planner.

The importer's graph says where a chain MAY be cut (every op boundary whose tensors a later op does not need
from before the cut); this module says where it SHOULD be. Each candidate group [j, i) is planned as its own
config (`schedule: auto` under the target's budget), giving its executed and useful FLOPs, the bytes it moves
to and from main memory and its workspace; its time is estimated from the target's compute and bandwidth roofs
as max(executed / peak, traffic / bandwidth). Dynamic programming over the cut points then picks the groups
with the least total time, among groups that fit the budget and recompute at most MAX_RECOMPUTE of their
useful work (a fused chain recomputes the halo rows its stripes share). `max_ops` and forced cuts narrow the
choice.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..roofs import Roofs

# A fused group may execute at most this many times its useful FLOPs (halo recompute between stripes).
MAX_RECOMPUTE = 1.15
# Longest group tried: every candidate is planned, and the gain of fusing fades long before this.
DEFAULT_MAX_OPS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCost:
    useful_flops: int
    executed_flops: int
    traffic_bytes: int  # main memory <-> caches, the whole group
    workspace_bytes: int
    budget_bytes: int | None  # what schedule: auto fitted it to (None: the default schedule, no budget)
    seconds: float  # the roofline estimate
    refused: str = ""  # why the group may not be a kernel ("" : it may)
    activation_bytes: int = 0  # the group's input and output through memory (halo and stripe reloads included)
    unfused_activation_bytes: int = 0  # its ops run one by one: each op's input and output once
    error: str = ""  # the planner rejects the group's config: it cannot be a kernel at all (seconds: inf)

    @property
    def recompute(self) -> float:
        return self.executed_flops / max(self.useful_flops, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    start: int  # first op, 0-based
    stop: int  # one past the last op
    cost: GroupCost
    not_fused_with_next: str = ""  # why [start, next group's stop) was not chosen instead
    despite: str = ""  # the rule this group breaks, when no cover keeps them all (a residual pins its ops)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cover:
    """A cover of the chain's first ops by groups: the ops of groups breaking a soft rule, the estimated time, and
    the op counts where its groups end (0 and the last included)."""

    violations: int
    seconds: float
    bounds: frozenset[int]

    def key(self) -> tuple[int, float]:
        return self.violations, self.seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class Grouping:
    """What the caller knows: how to cost a group, and the user's limits."""

    cost: Callable[[int, int], GroupCost]  # (start, stop) -> the group planned as its own config
    max_ops: int = DEFAULT_MAX_OPS
    cuts: frozenset[int] = field(default_factory=frozenset)  # op indices (0-based) a group must end after
    reached: Callable[[int], None] | None = None  # told each op index (0-based) as the search reaches it (progress)
    # (start, stop) -> the op counts at which an earlier group must end for this one: a residual it reads as a side
    # input is an op's result, in memory only where that op ends its group
    needs: Callable[[int, int], tuple[int, ...]] | None = None


def estimate(useful: int, executed: int, traffic: int, workspace: int, budget: int | None, roofs: Roofs,
             activations: tuple[int, int] = (0, 0), dtype: str = "float32", at_peak: int = 0) -> GroupCost:
    """at_peak: the FLOPs the FMA units could run at their peak in the time the group's tiles take (its target's tile
    speed, planner/tile_speed.py): the tiles' time and the traffic's then add up, as the budget search adds them (a
    stripe's caches are filled, then computed), and the kernel's call; 0: its executed FLOPs at the one roof, overlapped
    with the traffic."""
    compute, moving = (at_peak or executed) / roofs.ops_per_second(dtype), traffic / roofs.bytes_per_second
    seconds = compute + moving + roofs.tile_speed.call_seconds if at_peak and roofs.tile_speed else max(compute, moving)
    refused = ""
    if executed > MAX_RECOMPUTE * useful:
        refused = f"it would execute {executed / useful:.2f}x its useful FLOPs (at most {MAX_RECOMPUTE})"
    return GroupCost(useful_flops=useful, executed_flops=executed, traffic_bytes=traffic, workspace_bytes=workspace,
                     budget_bytes=budget, seconds=seconds, refused=refused, activation_bytes=activations[0],
                     unfused_activation_bytes=activations[1])


def unplannable(why: str) -> GroupCost:
    """The cost of a group the planner rejects (a value kernelgen's configs cannot hold): never chosen when
    another cover exists; a single op's is chosen and its error set, for the caller to leave the op out."""
    return GroupCost(useful_flops=0, executed_flops=0, traffic_bytes=0, workspace_bytes=0, budget_bytes=None,
                     seconds=float("inf"), refused=why, error=why)


def choose(n: int, fusable: Callable[[int, int], str], grouping: Grouping) -> tuple[Group, ...]:
    """The groups covering ops 0..n-1 with the least estimated time. fusable(j, i): "" when the graph lets ops
    j..i-1 be one kernel, else why not (an op whose residual comes from before j cannot start a kernel, even
    alone). A single op is never refused for its cost: it is a kernel either way. A group of several ops the
    planner rejects (cost.error) is never one: the graph's rule is as hard."""
    costs: dict[tuple[int, int], GroupCost] = {}

    def hard(j: int, i: int) -> str:
        return fusable(j, i) or (cost(j, i).error if i - j > 1 else "")

    def why_not(j: int, i: int) -> str:
        """Why ops j..i-1 should not be one group ("" : they may)."""
        if i - j > grouping.max_ops:
            return f"more than --max-group-ops {grouping.max_ops} ops"
        cut = next((k for k in sorted(grouping.cuts) if j <= k < i - 1), None)
        if cut is not None:
            return f"a cut was asked for after op {cut + 1}"
        return "" if i - j == 1 else cost(j, i).refused

    def cost(j: int, i: int) -> GroupCost:
        if (j, i) not in costs:
            costs[(j, i)] = grouping.cost(j, i)
        return costs[(j, i)]

    def needs(j: int, i: int) -> frozenset[int]:
        return frozenset(grouping.needs(j, i)) if grouping.needs else frozenset()

    def extend(cover: Cover | None, j: int, i: int) -> Cover | None:
        """`cover` (of ops 0..j-1) and the group [j, i), or None where that group may not follow it."""
        if cover is None or hard(j, i) or not needs(j, i) <= cover.bounds:
            return None
        return Cover(violations=cover.violations + (i - j) * bool(why_not(j, i)),
                     seconds=cover.seconds + cost(j, i).seconds, bounds=cover.bounds | {i})

    def through(best: list[Cover | None], j: int, boundaries: frozenset[int], window: int) -> Cover | None:
        """The best cover of ops 0..j-1 that ends a group at each of `boundaries` (a side residual's source): the
        best cover up to the last of them, then the best run of groups from there to j. best[j] alone missed it
        where a cheaper cover fused across that boundary (ResNeXt50's layer2.1: its conv1 fused with layer2.0's
        conv3, so conv2..conv3 could not read the block's input, and the three convs were one kernel that
        recomputed 1.43x its FLOPs)."""
        last = max(boundaries)
        runs: dict[int, Cover | None] = {last: best[last]}
        for k in range(last + 1, j + 1):
            found = [extend(runs[m], m, k) for m in range(max(last, k - window), k)]
            runs[k] = min((c for c in found if c is not None), key=Cover.key, default=None)
        cover = runs[j]
        return cover if cover is not None and boundaries <= cover.bounds else None

    # The graph's rule is hard (a residual's kernel holds its source); the others count as violations (the ops of
    # groups breaking them), fewest first, then time: the user's limits and the cost refusals bend only where the
    # graph leaves no other cover.
    # Groups longer than max_ops are tried only when the shorter ones cover nothing.
    for window in (grouping.max_ops, n):
        best: list[Cover | None] = [Cover(violations=0, seconds=0.0, bounds=frozenset({0}))] + [None] * n
        for i in range(1, n + 1):
            if grouping.reached is not None:
                grouping.reached(i - 1)
            for j in range(max(0, i - window), i):
                if best[j] is None or hard(j, i):
                    continue
                before = best[j] if needs(j, i) <= best[j].bounds else through(best, j, needs(j, i), window)
                total = extend(before, j, i)
                if total is not None and (best[i] is None or total.key() < best[i].key()):
                    best[i] = total
        if best[n] is not None:
            break
    cuts = sorted(best[n].bounds) if best[n] is not None else [0, n]  # no cover at all: the chain as one group
    bounds = list(zip(cuts, cuts[1:]))
    groups = []
    for k, (j, i) in enumerate(bounds):
        reason = ""
        if k + 1 < len(bounds):
            stop = bounds[k + 1][1]
            reason = hard(j, stop) or why_not(j, stop)
            if not reason:
                merged, apart = cost(j, stop).seconds, cost(j, i).seconds + cost(i, stop).seconds
                slower = round(merged * 1e6) > round(apart * 1e6)  # as printed: equal estimates are no gain
                reason = (f"{'slower' if slower else 'no faster'} fused: {merged * 1e6:.0f} us estimated "
                          f"against {apart * 1e6:.0f} us apart")
        groups.append(Group(start=j, stop=i, cost=cost(j, i), not_fused_with_next=reason, despite=why_not(j, i)))
    return tuple(groups)
