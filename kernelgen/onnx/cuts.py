"""Where `kernelgen import` cuts a chain (fchain.py, qchain.py) into groups: by cost (fusion.choose over the
coster's estimate of each candidate group, a GroupConfig record) within the user's limits, or the whole chain as one
group without a coster."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import ConfigError
from .fchain import ChainOp, ffusable, float_group, side_sources, sub
from .fusion import DEFAULT_MAX_OPS, Group, GroupCost, Grouping, choose, unplannable
from .graph import Graph, node_id
from .group_config import GroupConfig
from .qchain import qfusable, quant_group
from .quant import QConv

GroupCoster = Callable[[GroupConfig], GroupCost]  # a candidate group (schedule: auto) -> its cost


@dataclass(frozen=True)
class Fusion:
    """How `kernelgen import` cuts float chains: by cost (`coster` plans a candidate group's config), within
    the user's limits. coster None: each chain the graph allows is one group (the older behaviour)."""

    coster: GroupCoster | None = None
    max_ops: int = DEFAULT_MAX_OPS
    cut_after: frozenset[str] = frozenset()  # node names (or first outputs) a group must end at
    quant_coster: GroupCoster | None = None  # quantized chains: their (hvx) configs' cost
    # without a coster: a candidate group -> why the planner rejects it ("" : it plans), so that an op it rejects
    # alone still ends its chain and is left to onnxruntime
    check: Callable[[GroupConfig], str] | None = None
    progress: Callable[[int], None] | None = None  # told each graph node index the import reaches (a progress bar)
    # every float target computes channels innermost (TargetInfo.channels_last_caches): tensors passed only between
    # float kernels are NHWC in the network (layouts.py)
    channels_last: bool = False
    filter_layout: str = ""  # named on the float dense convs (fchain.float_group): what the targets read in place
    # the activation kinds every float target computes (TargetInfo.activations; None: all): others stay host steps
    activations: frozenset[str] | None = None


@dataclass(frozen=True)
class Whole:
    """A chain as one group, not costed (no coster)."""

    start: int
    stop: int
    cost: None = None
    not_fused_with_next: str = ""
    despite: str = ""


def float_cost(graph: Graph, chain: list[ChainOp], model_path: str, targets: tuple[str, ...], fusion: Fusion):
    """(start, stop) -> the cost of ops start..stop-1 of the chain as one config, each planned once (None: no
    coster); a group the planner rejects costs fusion.unplannable(its first problem)."""
    if fusion.coster is None:
        return None
    costs: dict[tuple[int, int], GroupCost] = {}

    def cost(start: int, stop: int) -> GroupCost:
        if (start, stop) not in costs:
            try:
                group = float_group(graph, "group", sub(chain, start, stop), model_path, (), targets, "auto",
                                    fusion.filter_layout)
                costs[(start, stop)] = fusion.coster(group)
            except ConfigError as error:
                costs[(start, stop)] = _unplannable(error)
        return costs[(start, stop)]
    return cost


def first_unplannable(graph: Graph, chain: list[ChainOp], model_path: str, targets: tuple[str, ...],
                      fusion: Fusion) -> tuple[int, str] | None:
    """Without a coster (one group per chain): the first op the planner rejects even alone, and why; None when each
    plans (or there is no fusion.check)."""
    if fusion.check is None:
        return None
    alone = (k for k, op in enumerate(chain) if op.residual is None or op.residual >= k or op.side)
    return next(((k, why) for k in alone
                 for why in (fusion.check(float_group(graph, "group", sub(chain, k, k + 1), model_path, (), targets,
                                                       filter_layout=fusion.filter_layout)),)
                 if why), None)


def float_groups(graph: Graph, chain: list[ChainOp], fusion: Fusion, cost) -> tuple[Group, ...] | list[Whole]:
    """The chain's groups: chosen by cost (fusion.choose) when the caller can cost them, else the whole chain."""
    if cost is None:
        return [Whole(0, len(chain))]
    return choose(len(chain), lambda start, stop: ffusable(chain, start, stop),
                  Grouping(cost=cost, max_ops=fusion.max_ops, cuts=_cut_ops(graph, chain, fusion),
                           reached=_reached(fusion, [op.node for op in chain]),
                           needs=lambda start, stop: side_sources(chain, start, stop)))


def quant_groups(graph: Graph, chain: list[QConv], model_path: str, fusion: Fusion, targets: tuple[str, ...]
                 ) -> tuple[Group, ...] | list[Whole]:
    """A quantized chain's groups, chosen by cost on hvx like a float chain's (the whole chain without a coster).
    A folded residual adds the chain's own input: its op's group must start the chain."""
    if fusion.quant_coster is None:
        return [Whole(0, len(chain))]

    def cost(start: int, stop: int) -> GroupCost:
        try:
            return fusion.quant_coster(quant_group(graph, "group", chain[start:stop], model_path, (), targets))
        except ConfigError as error:  # never a group of several ops (fusion.choose); one op alone is left out
            return _unplannable(error)

    return choose(len(chain), lambda start, stop: qfusable(chain, start, stop),
                  Grouping(cost=cost, max_ops=fusion.max_ops, cuts=_cut_ops(graph, chain, fusion),
                           reached=_reached(fusion, [op.start for op in chain])))


def _reached(fusion: Fusion, nodes: list[int]) -> Callable[[int], None] | None:
    """The chain's op index -> its graph node, for fusion.progress."""
    progress = fusion.progress
    return None if progress is None else lambda k: progress(nodes[k])


def group_notes(name: str, group: Group | Whole) -> list[str]:
    notes = []
    if group.despite:
        notes.append(f"{name}: one kernel although {group.despite}: no other cut keeps each residual with its source")
    if group.not_fused_with_next:
        notes.append(f"{name}: not fused with the next group: {group.not_fused_with_next}")
    return notes


def _cut_ops(graph: Graph, chain: list[ChainOp] | list[QConv], fusion: Fusion) -> frozenset[int]:
    """The ops (0-based) a group must end after: those holding a node --cut names."""
    return frozenset(k for k, op in enumerate(chain) if any(node_id(graph.nodes[m]) in fusion.cut_after
                                                            for m in op.members))


def _unplannable(error: ConfigError) -> GroupCost:
    """A candidate group whose config cannot be one, at its first problem."""
    problem = error.problems[0]
    return unplannable(f"{problem.key}: {problem.message}" if problem.key else problem.message)
