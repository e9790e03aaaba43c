"""`kernelgen import`: an ONNX model -> one config per fused group of Conv nodes.

A group starts at a Conv whose weights are constants and follows the graph while each conv's result
feeds only the next conv: Relu and Clip after a conv fold into its `activation`, an Add whose other
operand is the group's input or an earlier conv's result folds into `residual` (an activation after
that Add folds in after it: conv, + bias, + residual, activation). Quantized convs (QLinearConv, or QDQ) become
uint8 configs. Every other node is returned as not imported, with its name, op type and, for a conv, why.
Configs are named by names.py.

This module walks the model; converters.py says which op types become which ops (float and QDQ forms), fchain.py
and qchain.py follow float and uint8 chains and make their groups' configs (group_config.GroupConfig), cuts.py
cuts chains into groups by cost, and config_text.py writes the files.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from .config_text import config_text
from .converters import float_op, is_conv, quantized_op
from .cuts import Fusion, GroupCoster, float_cost, first_unplannable, float_groups, group_notes, quant_groups
from .fchain import ChainOp, cut_escapes, fchain, float_group, fsides, group_input, sub
from .fusion import GroupCost
from .graph import Graph, OnnxError, node_id, read_graph
from .group_config import GroupConfig
from .layouts import relaid
from .names import Namer
from .network_writer import network_yaml
from .qchain import QUANT_LAYOUT, cut_quantized_escapes, own_nodes, qchain, qsides, quant_group
from .quant import QConv

__all__ = ["Fusion", "GroupCoster", "Imported", "ImportedConfig", "conv_dtypes", "import_graph", "import_model"]


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
    layout: str = "NCHW"  # how it holds its input and output (a float network's NHWC tensors: config's own)
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
    copied: tuple[str, ...] = ()  # Concat nodes the network's concat steps run
    resized: tuple[str, ...] = ()  # Resize nodes (and their sizes' nodes) the network's resize steps run


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
        if fusion.progress is not None:
            fusion.progress(index)
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
            _take(graph, fchain(graph, start, taken, fusion.activations), path, out_dir, targets, fusion, namer,
                  taken, configs, notes, why_not)
    skipped = tuple((node_id(n), n.op_type, why_not.get(i, "")) for i, n in enumerate(graph.nodes)
                    if i not in taken and not graph.computes_constant(i))
    manifest = network_yaml(graph, configs, os.path.relpath(Path(path).resolve(), Path(out_dir).resolve()),
                            fusion.channels_last)
    if manifest.why:
        notes.append(f"no network.yaml: {manifest.why}")
    configs = [replace(c, config=relaid(c, manifest.channels_last)) for c in configs]
    ran = {*manifest.converted, *manifest.copied, *manifest.resized}
    skipped = tuple(s for s in skipped if s[0] not in ran)  # kernelgen runs those: conversions, copies, resizes
    return Imported(configs=tuple(configs), skipped=skipped, notes=tuple(notes), manifest=manifest.text,
                    converted=manifest.converted, copied=manifest.copied, resized=manifest.resized)


def _take(graph: Graph, chain: list[ChainOp], path: Path, out_dir: str | Path, targets: tuple[str, ...], fusion: Fusion,
          namer: Namer, taken: set[int], configs: list[ImportedConfig], notes: list[str],
          why_not: dict[int, str]) -> None:
    """A float chain's configs, cut where the cost model says, appended to `configs`; its nodes marked taken. An op
    the planner rejects even alone (a value kernelgen's configs cannot hold) ends the chain before it: it is left
    to onnxruntime with the planner's reason (why_not), and the nodes after it start chains of their own."""
    model_path = os.path.relpath(Path(path).resolve(), Path(out_dir).resolve())
    cost = float_cost(graph, chain, model_path, targets, fusion)
    if cost is None:  # no cost search (one group): each op alone must plan
        why = first_unplannable(graph, chain, model_path, targets, fusion)
        if why is not None:
            why_not[chain[why[0]].node] = f"it cannot be a kernel ({why[1]})"
            chain = cut_escapes(graph, chain[:why[0]])
    while chain:
        groups = float_groups(graph, chain, fusion, cost)
        bad = next((g for g in groups if g.cost is not None and g.cost.error), None)
        if bad is None:
            break
        why_not[chain[bad.start].node] = f"it cannot be a kernel ({bad.cost.error})"
        chain = cut_escapes(graph, chain[:bad.start]) if bad.start else []
    taken.update(m for op in chain for m in op.members)
    for group in groups if chain else ():
        ops = sub(chain, group.start, group.stop)
        name = namer.name([op.node for op in ops])
        members = _members(op.members for op in ops)
        ids = tuple(node_id(graph.nodes[m]) for m in members)
        schedule = "auto" if group.cost is not None and group.cost.budget_bytes is not None else None
        configs.append(ImportedConfig(name=name, config=float_group(graph, name, ops, model_path, ids, targets,
                                                                      schedule, fusion.filter_layout),
                                      nodes=ids, group=group.cost, input=group_input(graph, ops), output=ops[-1].out,
                                      members=members, ops=_op_types(graph, members), sides=tuple(fsides(ops))))
        notes += group_notes(name, group)


def _take_quantized(graph: Graph, first: QConv, path: Path, out_dir: str | Path, targets: tuple[str, ...],
                    fusion: Fusion, namer: Namer, taken: set[int], configs: list[ImportedConfig],
                    notes: list[str], why_not: dict[int, str]) -> None:
    """The uint8 chain from `first` (qchain.py), cut where the cost model says on hvx: its configs appended. An op
    the planner rejects even alone ends the chain before it, as in _take."""
    chain = qchain(graph, first, taken)
    model_path = os.path.relpath(Path(path).resolve(), Path(out_dir).resolve())
    while chain:
        groups = quant_groups(graph, chain, model_path, fusion, targets)
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
        notes += group_notes(name, group)


def _members(per_op) -> tuple[int, ...]:
    """The nodes a group computes, each once (a DequantizeLinear may feed two of its ops), in graph order."""
    return tuple(sorted({m for members in per_op for m in members}))


def _op_types(graph: Graph, members: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(graph.nodes[m].op_type for m in members)
