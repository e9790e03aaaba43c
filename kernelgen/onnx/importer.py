"""`kernelgen import`: an ONNX model -> one config per fused group of Conv nodes.

A group starts at a Conv whose weights are constants and follows the graph while each conv's result
feeds only the next conv: Relu and Clip after a conv fold into its `activation`, an Add whose other
operand is the group's input or an earlier conv's result folds into `residual` (an activation after
that Add folds in after it: conv, + bias, + residual, activation). Quantized convs (QLinearConv, or QDQ) become
uint8 configs. Every other node is returned as not imported, with its name, op type and, for a conv, why.
Configs are named by names.py.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable


from ..errors import ConfigError
from .fusion import DEFAULT_MAX_OPS, Group, GroupCost, Grouping, choose, unplannable
from . import layers
from .activations import activation as fused_activation
from .converters import float_op, is_conv, quantized_op
from .config_text import config_text
from .graph import ConvNode, Graph, OnnxError, node_id, read_graph
from .group_config import GroupConfig, Op, Side
from .names import Namer
from .network_writer import network_yaml
from .qchain import QUANT_LAYOUT, own_nodes, qchain, qfusable, qsides, quant_group
from .qchain import _cut_escapes as cut_quantized_escapes
from .quant import QConv


@dataclass
class _Op:
    conv: ConvNode
    members: list[int]  # node indices folded into this op: [a Flatten,] the Conv, then an Add, then a Relu or Clip
    node: int = -1  # the op's own node (the Conv, pool or Gemm): what names it
    out: str = ""  # the tensor this op's result is in the graph (after the folded nodes)
    residual: int | None = None  # 0: the group's input, K: op K's result
    side: str | None = None  # or the residual is this tensor from outside the group (a side input)
    activation: str | list[float] | dict = "none"


@dataclass(frozen=True, slots=True)
class ImportedConfig:
    name: str
    config: GroupConfig  # what its YAML file says (config_text)
    nodes: tuple[str, ...]  # source.nodes: each node once, graph order
    group: GroupCost | None = None  # a cost-chosen group's estimate (fusion.py)
    input: str = ""  # the ONNX tensor the kernel reads (a uint8 config: the quantized one)
    output: str = ""  # the ONNX tensor it writes
    sides: tuple[str, ...] = ()  # the ONNX tensors of its side inputs, in the config's order
    members: tuple[int, ...] = ()  # indices of the graph nodes it computes
    layout: str = "NCHW"  # how it holds its input and output
    ops: tuple[str, ...] = ()  # the op type of each node, parallel to nodes

    @property
    def text(self) -> str:
        """The YAML file."""
        return config_text(self.config)


@dataclass(frozen=True)
class Imported:
    configs: tuple[ImportedConfig, ...]
    skipped: tuple[tuple[str, str, str], ...]  # (node, op type, why)
    notes: tuple[str, ...] = field(default=())
    manifest: str = ""  # network.yaml (network.py); "" when the network cannot be described
    converted: tuple[str, ...] = ()  # QuantizeLinear / DequantizeLinear nodes the network's convert steps run


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


def conv_dtypes(graph: Graph) -> dict[str, tuple[str, ...]]:
    """The convs kernelgen can import, by the dtype of the configs they become: {"float32": node ids, "uint8": ...}
    (a dtype with none is left out). What the command line chooses targets by."""
    found: dict[str, list[str]] = {}
    for index, node in enumerate(graph.nodes):
        if not is_conv(graph, index):
            continue
        quantized = quantized_op(graph, index)
        if isinstance(quantized, QConv):
            found.setdefault("uint8", []).append(node_id(node))
        elif quantized is None and isinstance(float_op(graph, index), tuple):
            found.setdefault("float32", []).append(node_id(node))
    return {dtype: tuple(ids) for dtype, ids in found.items()}


def import_model(path: str | Path, out_dir: str | Path, targets: tuple[str, ...] = ("c",),
                 fusion: Fusion = Fusion(), quant_targets: tuple[str, ...] | None = None) -> Imported:
    """The model's configs and network manifest. `targets` go into the float32 configs, `quant_targets` (default:
    `targets`) into the uint8 ones: the caller chooses targets that take them (the command line does, from the
    registry)."""
    return import_graph(read_graph(path), out_dir, targets, fusion, targets if quant_targets is None else quant_targets)


def import_graph(graph: Graph, out_dir: str | Path, targets: tuple[str, ...], fusion: Fusion,
                 quant_targets: tuple[str, ...]) -> Imported:
    """import_model on a graph already read (the command line reads it once, to choose the targets first)."""
    path = graph.path
    namer = Namer(graph)
    unknown = sorted(fusion.cut_after - {node_id(n) for n in graph.nodes})
    if unknown:
        raise OnnxError(f"--cut {unknown[0]}: {Path(path).name} has no node of that name (a node's name, or its "
                        f"first output's when it has none)")
    taken: set[int] = set()
    why_not: dict[int, str] = {}
    configs: list[ImportedConfig] = []
    notes: list[str] = []
    for index in range(len(graph.nodes)):
        if index in taken or index in why_not:  # why_not: an op a chain before left out (it cannot be a kernel)
            continue
        conv = is_conv(graph, index)
        quantized = quantized_op(graph, index)  # QLinearConv, a QDQ conv, pool, Mul or Gemm: a uint8 chain
        if isinstance(quantized, QConv) and (conv or not taken & own_nodes(graph, quantized)):
            _take_quantized(graph, quantized, path, out_dir, quant_targets, fusion, namer, taken, configs, notes,
                            why_not)
            continue
        if isinstance(quantized, str) and conv:
            why_not[index] = quantized
            continue
        start = float_op(graph, index)
        if isinstance(start, str):
            why_not[index] = start
        elif start is not None and not taken & {*start[0], start[1]}:
            _take(graph, _group(graph, start, taken), path, out_dir, targets, fusion, namer, taken, configs,
                  notes, why_not)
    skipped = tuple((node_id(n), n.op_type, why_not.get(i, "")) for i, n in enumerate(graph.nodes)
                    if i not in taken and not graph.computes_constant(i))
    manifest, why, converted = network_yaml(graph, configs, os.path.relpath(Path(path).resolve(), Path(out_dir).resolve()))
    if why:
        notes.append(f"no network.yaml: {why}")
    skipped = tuple(s for s in skipped if s[0] not in converted)  # kernelgen runs those: the network's conversions
    return Imported(configs=tuple(configs), skipped=skipped, notes=tuple(notes), manifest=manifest,
                    converted=converted)


def _take(graph: Graph, chain: list[_Op], path: Path, out_dir: str | Path, targets: tuple[str, ...], fusion: Fusion,
          namer: Namer, taken: set[int], configs: list[ImportedConfig], notes: list[str],
          why_not: dict[int, str]) -> None:
    """A float chain's configs, cut where the cost model says, appended to `configs`; its nodes marked taken. An op
    the planner rejects even alone (a value kernelgen's configs cannot hold) ends the chain before it: it is left
    to onnxruntime with the planner's reason (why_not), and the nodes after it start chains of their own."""
    model_path = os.path.relpath(Path(path).resolve(), Path(out_dir).resolve())
    cost = _chain_cost(graph, chain, model_path, targets, fusion)
    if cost is None and fusion.check is not None:  # no cost search (one group): each op alone must plan
        alone = (k for k, op in enumerate(chain) if op.residual is None or op.residual >= k or op.side)
        why = next(((k, w) for k in alone for w in (fusion.check(_group_config(graph, "group", _sub(chain, k, k + 1),
                                                                                 model_path, (), targets)),) if w), None)
        if why is not None:
            why_not[chain[why[0]].node] = f"it cannot be a kernel ({why[1]})"
            chain = _cut_escapes(graph, chain[:why[0]])
    while chain:
        groups = _split(graph, chain, fusion, cost)
        bad = next((g for g in groups if g.cost is not None and g.cost.error), None)
        if bad is None:
            break
        why_not[chain[bad.start].node] = f"it cannot be a kernel ({bad.cost.error})"
        chain = _cut_escapes(graph, chain[:bad.start]) if bad.start else []
    taken.update(m for op in chain for m in op.members)
    for group in groups if chain else ():
        ops = _sub(chain, group.start, group.stop)
        name = namer.name([op.node for op in ops])
        members = _members(op.members for op in ops)
        ids = tuple(node_id(graph.nodes[m]) for m in members)
        schedule = "auto" if group.cost is not None and group.cost.budget_bytes is not None else None
        configs.append(ImportedConfig(name=name, config=_group_config(graph, name, ops, model_path, ids, targets,
                                                                      schedule),
                                      nodes=ids, group=group.cost, input=_input(graph, ops), output=ops[-1].out,
                                      members=members, ops=_op_types(graph, members), sides=tuple(_sides(ops))))
        notes += _group_notes(name, group)


def _take_quantized(graph: Graph, first: QConv, path: Path, out_dir: str | Path, targets: tuple[str, ...],
                    fusion: Fusion, namer: Namer, taken: set[int], configs: list[ImportedConfig],
                    notes: list[str], why_not: dict[int, str]) -> None:
    """The uint8 chain from `first` (qchain.py), cut where the cost model says on hvx: its configs appended. An op
    the planner rejects even alone ends the chain before it, as in _take."""
    chain = qchain(graph, first, taken)
    model_path = os.path.relpath(Path(path).resolve(), Path(out_dir).resolve())
    while chain:
        groups = _qsplit(graph, chain, model_path, fusion, targets)
        bad = next((g for g in groups if g.cost is not None and g.cost.error), None)
        if bad is None:
            break
        why_not[chain[bad.start].start] = f"it cannot be a kernel ({bad.cost.error})"
        chain = cut_quantized_escapes(graph, chain[:bad.start]) if bad.start else []
    taken.update(m for op in chain for m in op.members)
    for group in groups if chain else ():
        qops = chain[group.start:group.stop]
        members = _members(op.members for op in qops)
        name = namer.name([op.start for op in qops])
        ids = tuple(node_id(graph.nodes[m]) for m in members)
        configs.append(ImportedConfig(name=name, config=quant_group(graph, name, qops, model_path, ids, targets),
                                      nodes=ids, group=group.cost, input=qops[0].in_q, output=qops[-1].out_q,
                                      members=members, layout=QUANT_LAYOUT, ops=_op_types(graph, members),
                                      sides=tuple(qsides(qops))))
        notes += _group_notes(name, group)


def _members(per_op) -> tuple[int, ...]:
    """The nodes a group computes, each once (a DequantizeLinear may feed two of its ops), in graph order."""
    return tuple(sorted({m for members in per_op for m in members}))


def _op_types(graph: Graph, members: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(graph.nodes[m].op_type for m in members)


def _group(graph: Graph, start: tuple[list[int], int, ConvNode], taken: set[int]) -> list[_Op]:
    """The chain of ops from `start` ((lead nodes, the op's node, the op)), each conv with the Add and the activation
    it folds in (nodes an earlier group took stay its: the other branch of a two-branch add meets an Add its partner
    branch already folded)."""
    lead, index, conv = start
    # tensor j of the group: its input, then each op's result
    chain = [graph.nodes[lead[0]].input[0] if lead else layers.op_input(graph, index, conv)]
    ops: list[_Op] = []
    while True:
        op = _Op(conv=conv, members=[*lead, index], node=index)
        tensor = graph.nodes[index].output[0]
        reader = graph.sole_consumer(tensor)
        pool = conv.kind != "conv2d"  # a pool adds nothing and has no activation
        if not pool and reader is not None and graph.nodes[reader].op_type == "Add" and reader not in taken:
            source = _residual_source(graph, reader, tensor, chain, ops, conv)
            if source is not None:
                op.residual, op.side = (None, source) if isinstance(source, str) else (source, None)
                tensor = graph.nodes[reader].output[0]
                op.members.append(reader)
                reader = graph.sole_consumer(tensor)
        if not pool and reader is not None and fused_activation(graph, reader) is not None:
            op.activation = fused_activation(graph, reader)
            op.members.append(reader)
            tensor = graph.nodes[reader].output[0]
        op.out = tensor
        ops.append(op)
        chain.append(tensor)
        # the next op: the one conv, pool or classifier reading this result; other readers must be Adds a later
        # op folds in
        readers = graph.consumers.get(tensor, ())
        following = [(r, found) for r in readers for found in (float_op(graph, r, tensor),) if found is not None]
        if len(following) != 1 or tensor in graph.outputs or any(
                graph.nodes[r].op_type != "Add" for r in readers if r != following[0][0]):
            break
        if isinstance(following[0][1], str):
            break
        lead, index, conv = following[0][1]
    return _cut_escapes(graph, ops)


def _residual_source(graph: Graph, add: int, tensor: str, chain: list[str], ops: list[_Op], conv: ConvNode
                     ) -> int | str | None:
    """Which tensor of the group the Add's other operand is (0: the input, K: op K's result), or the tensor itself
    when it comes from outside the group (a side input: the other branch of a two-branch add), when kernelgen can
    fuse it: both of the sum's shape (no broadcast), not a constant, and (for op K) only stride-1 convs after op K."""
    inputs = list(graph.nodes[add].input)
    if len(inputs) != 2 or tensor not in inputs:
        return None
    other = inputs[1] if inputs[0] == tensor else inputs[0]
    if other == tensor:  # Add(c, c) is 2c: no other tensor to add (as a side input it would be the op's own result)
        return None
    out = graph.shapes.get(graph.nodes[add].output[0])
    if graph.shapes.get(other) != out or graph.shapes.get(tensor) != out or other in graph.constants:
        return None  # a broadcast (valid ONNX) is no residual: both operands have the sum's shape
    if other not in chain:
        return other
    source = chain.index(other)
    strides = [op.conv.stride for op in ops[source:]] + [conv.stride]
    if source and any(s != (1, 1) for s in strides):
        return None
    return source


def _group_notes(name: str, group: Group | _Whole) -> list[str]:
    notes = []
    if group.despite:
        notes.append(f"{name}: one kernel although {group.despite}: no other cut keeps each residual with its source")
    if group.not_fused_with_next:
        notes.append(f"{name}: not fused with the next group: {group.not_fused_with_next}")
    return notes


def _qsplit(graph: Graph, chain: list[QConv], model_path: str, fusion: Fusion, targets: tuple[str, ...]
            ) -> tuple[Group, ...] | list:
    """A quantized chain's groups, chosen by cost on hvx like a float chain's (the whole chain without a coster).
    A folded residual adds the chain's own input: its op's group must start the chain."""
    if fusion.quant_coster is None:
        return [_Whole(0, len(chain))]
    cut_ops = frozenset(k for k, op in enumerate(chain) if any(node_id(graph.nodes[m]) in fusion.cut_after
                                                                 for m in op.members))

    def fusable(start: int, stop: int) -> str:
        return qfusable(chain, start, stop)

    def cost(start: int, stop: int) -> GroupCost:
        try:
            return fusion.quant_coster(quant_group(graph, "group", chain[start:stop], model_path, (), targets))
        except ConfigError as error:  # never a group of several ops (fusion.choose); one op alone is left out
            problem = error.problems[0]
            return unplannable(f"{problem.key}: {problem.message}" if problem.key else problem.message)

    return choose(len(chain), fusable, Grouping(cost=cost, max_ops=fusion.max_ops, cuts=cut_ops))


def _sub(chain: list[_Op], start: int, stop: int) -> list[_Op]:
    """Ops start..stop-1 of a chain as a group of their own: residual sources counted from its input."""
    return [replace(op, residual=None if op.residual is None else op.residual - start) for op in chain[start:stop]]


def _chain_cost(graph: Graph, chain: list[_Op], model_path: str, targets: tuple[str, ...], fusion: Fusion):
    """(start, stop) -> the cost of ops start..stop-1 of the chain as one config, each planned once (None: no
    coster); a group the planner rejects costs fusion.unplannable(its first problem)."""
    if fusion.coster is None:
        return None
    costs: dict[tuple[int, int], GroupCost] = {}

    def cost(start: int, stop: int) -> GroupCost:
        if (start, stop) not in costs:
            try:
                group = _group_config(graph, "group", _sub(chain, start, stop), model_path, (), targets, "auto")
                costs[(start, stop)] = fusion.coster(group)
            except ConfigError as error:
                problem = error.problems[0]
                costs[(start, stop)] = unplannable(f"{problem.key}: {problem.message}" if problem.key
                                                   else problem.message)
        return costs[(start, stop)]
    return cost


def _split(graph: Graph, chain: list[_Op], fusion: Fusion, cost) -> tuple[Group, ...] | list:
    """The chain's groups: chosen by cost (fusion.choose) when the caller can cost them, else the whole chain."""
    if cost is None:
        return [_Whole(0, len(chain))]
    cut_ops = frozenset(k for k, op in enumerate(chain) if any(node_id(graph.nodes[m]) in fusion.cut_after
                                                                 for m in op.members))

    def fusable(start: int, stop: int) -> str:
        needs = next((k for k in range(start, stop) if chain[k].residual is not None and chain[k].residual < start
                      and chain[k].side is None), None)
        return "" if needs is None else (f"op {needs + 1} adds a tensor from before op {start + 1} (a kernel's "
                                         f"residual is its own input or one of its ops' results)")

    return choose(len(chain), fusable, Grouping(cost=cost, max_ops=fusion.max_ops, cuts=cut_ops))


@dataclass(frozen=True)
class _Whole:
    start: int
    stop: int
    cost: None = None
    not_fused_with_next: str = ""
    despite: str = ""


def _cut_escapes(graph: Graph, ops: list[_Op]) -> list[_Op]:
    """Ends the group at the first op whose result is read outside it (a fused chain keeps intermediates
    in caches only): that op's result becomes the group's output."""
    while True:
        members = {m for op in ops for m in op.members}
        escaping = next((j for j, op in enumerate(ops[:-1]) if op.out in graph.outputs or any(
            r not in members for r in graph.consumers.get(op.out, ()))), None)
        if escaping is None:
            return ops
        ops = ops[:escaping + 1]
        # a residual folded into a later op that was just cut off is gone with it; nothing else changes


def _group_config(graph: Graph, name: str, ops: list[_Op], model_path: str, nodes: tuple[str, ...],
                  targets: tuple[str, ...], schedule: str | None = None) -> GroupConfig:
    sides = _sides(ops)
    entries = []
    for op in ops:
        cv = op.conv
        if cv.kind == "mul":
            entries.append(Op(kind="mul", keys=(("by", sides[cv.scale_by]),)))
            continue
        if cv.kind != "conv2d":
            entries.append(layers.pool_entry(cv))
            continue
        keys = [("out_channels", cv.out_channels), ("kernel", cv.kernel), ("stride", cv.stride), ("pad", cv.pad),
                ("dilation", cv.dilation)]
        keys += [("groups", cv.groups)] if cv.groups > 1 else []
        keys += [("bias", True)] if cv.bias else []
        keys += [("residual", "input" if op.residual == 0 else op.residual)] if op.residual is not None else []
        keys += [("residual", sides[op.side])] if op.side else []
        keys += [("activation", op.activation)] if op.activation != "none" else []
        entries.append(Op(kind="conv2d", keys=tuple(keys)))
    return GroupConfig(name=name, model=model_path, input_shape=graph.shapes[_input(graph, ops)], layout="NCHW",
                       ops=tuple(entries), targets=targets, schedule=schedule, nodes=nodes,
                       sides=tuple(Side(name=side, tensor=tensor, shape=graph.shapes[tensor])
                                   for tensor, side in sides.items()))


def _sides(ops: list[_Op]) -> dict[str, str]:
    """A group's side inputs, ONNX tensor -> config name, in the order the config declares them: a mul's factors
    (scale, scale_2, ...) and the other branch of an Add (shortcut, shortcut_2, ...)."""
    out: dict[str, str] = {}
    for op in ops:
        for tensor, word in ((op.conv.scale_by, "scale"), (op.side, "shortcut")):
            if tensor and tensor not in out:
                taken = sum(name.startswith(word) for name in out.values())
                out[tensor] = word if not taken else f"{word}_{taken + 1}"
    return out


def _input(graph: Graph, ops: list[_Op]) -> str:
    """The tensor a group reads: its first op's input."""
    first = ops[0]
    lead = first.members[0] if first.members[0] != first.node else None
    return graph.nodes[lead].input[0] if lead is not None else layers.op_input(graph, first.node, first.conv)
