"""Float chains of `kernelgen import`: ops (convs, pools, the classifier, a Mul by channel factors: converters.py)
linked through float tensors, each conv with the Add (residual) and the activation it folds in, which groups of them
one kernel may compute, and the float config of a group (NCHW tensors as ONNX stores them)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..layout import FILTER_DIMS, parse_layout
from . import layers
from .activations import Activation, activation as fused_activation, silu
from .converters import float_op
from .graph import ConvNode, Graph, _attributes
from .group_config import GroupConfig, Op, Side


@dataclass
class ChainOp:
    conv: ConvNode
    members: list[int]  # node indices folded into this op: [a Flatten,] the Conv, then an Add, then an activation
    node: int = -1  # the op's own node (the Conv, pool or Gemm): what names it
    out: str = ""  # the tensor this op's result is in the graph (after the folded nodes)
    residual: int | None = None  # 0: the group's input, K: op K's result
    side: str | None = None  # or the residual is this tensor from outside the group (a side input)
    # the residual's tensor in the graph: what a group cut after its source reads as a side input instead
    residual_tensor: str = ""
    activation: Activation = "none"


def fchain(graph: Graph, start: tuple[list[int], int, ConvNode], taken: set[int],
           activations: frozenset[str] | None = None) -> list[ChainOp]:
    """The chain of ops from `start` ((lead nodes, the op's node, the op)), each conv with the Add and the activation
    it folds in (nodes an earlier group took stay its: the other branch of a two-branch add meets an Add its partner
    branch already folded); `activations`: the kinds every target computes (None: all), others stay host steps."""
    lead, index, conv = start
    # tensor j of the group: its input, then each op's result
    chain = [graph.nodes[lead[0]].input[0] if lead else layers.op_input(graph, index, conv)]
    ops: list[ChainOp] = []
    while True:
        op = ChainOp(conv=conv, members=[*lead, index], node=index)
        tensor = graph.nodes[index].output[0]
        reader = graph.sole_consumer(tensor)
        pool = conv.kind != "conv2d"  # a pool adds nothing and has no activation
        if not pool and reader is not None and graph.nodes[reader].op_type == "Add" and reader not in taken:
            source = _residual_source(graph, reader, tensor, chain, ops, conv)
            if source is not None:
                op.residual, op.side = (None, source) if isinstance(source, str) else (source, None)
                op.residual_tensor = source if isinstance(source, str) else chain[source]
                tensor = graph.nodes[reader].output[0]
                op.members.append(reader)
                reader = graph.sole_consumer(tensor)
        folded = None if pool or reader is None else fused_activation(graph, reader, kinds=activations)
        if folded is not None:
            op.activation = folded
            op.members.append(reader)
            tensor = graph.nodes[reader].output[0]
        elif not pool and (activations is None or "sigmoid" in activations) and (swish := silu(graph, tensor)):
            # x * Sigmoid(x): two readers of the result
            op.activation = "silu"
            op.members.extend(swish)
            tensor = graph.nodes[swish[1]].output[0]
        flatten = _trailing_flatten(graph, tensor)
        if flatten is not None:  # the last op's [N, C, 1, 1] as the [N, C] the model goes on with: the same bytes
            op.members.append(flatten)
            tensor = graph.nodes[flatten].output[0]
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
    return cut_escapes(graph, ops)


def _trailing_flatten(graph: Graph, tensor: str) -> int | None:
    """The Flatten (axis 1) that alone reads a 1x1 image and leads to no classifier (SqueezeNet's last node, after its
    global pool): folded into the op before it, whose [N, C, 1, 1] result it reshapes to [N, C] without moving a
    byte. A Flatten before a Gemm stays the classifier's lead node (layers.flatten_op)."""
    reader = graph.sole_consumer(tensor)
    shape = graph.shapes.get(tensor)
    if reader is None or tensor in graph.outputs or shape is None or len(shape) != 4 or shape[2:] != (1, 1):
        return None
    node = graph.nodes[reader]
    if node.op_type != "Flatten" or int(_attributes(node).get("axis", 1)) != 1:
        return None
    return reader if layers.flattened_gemm(graph, reader) is None else None


def _residual_source(graph: Graph, add: int, tensor: str, chain: list[str], ops: list[ChainOp], conv: ConvNode
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


def cut_escapes(graph: Graph, ops: list[ChainOp]) -> list[ChainOp]:
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


def sub(chain: list[ChainOp], start: int, stop: int) -> list[ChainOp]:
    """Ops start..stop-1 of a chain as a group of their own: residual sources counted from its input, and a
    residual from before it (a basic block's second conv cut from its first) read as a side input, as an Add's
    other branch is."""
    def moved(op: ChainOp) -> ChainOp:
        if op.residual is None:
            return op
        if op.residual < start:
            return replace(op, residual=None, side=op.residual_tensor)
        return replace(op, residual=op.residual - start)

    return [moved(op) for op in chain[start:stop]]


def ffusable(chain: list[ChainOp], start: int, stop: int) -> str:
    """Why ops start..stop-1 of a float chain cannot be one kernel ("" when they can). Any run can: a residual
    from before the group's input becomes a side input (sub), provided its source ends a group (side_sources)."""
    return ""


def side_sources(chain: list[ChainOp], start: int, stop: int) -> tuple[int, ...]:
    """Where groups before ops start..stop-1 must end for the residuals it reads from before its input: after
    op r for a residual from op r's result (the chain's input, r = 0, is always in memory)."""
    return tuple(sorted({op.residual for op in chain[start:stop]
                         if op.residual is not None and 0 < op.residual < start}))


def float_group(graph: Graph, name: str, ops: list[ChainOp], model_path: str, nodes: tuple[str, ...],
                  targets: tuple[str, ...], schedule: str | None = None, filter_layout: str = "") -> GroupConfig:
    """`filter_layout`: what the targets' dense-conv kernels read in place (TargetInfo.dense_filter_layout), named
    on each conv that is one: groups 1, more than one output pixel or a window wider than 1x1 (a 1x1 classifier's
    GEMV reads OIHW rows in place; VGG's over a 7x7 window would gather each row from 16 filters a copy, 2.8x slower
    on AlexNet's 151 MB one), output channels in whole blocks of it."""
    sides = fsides(ops)
    block = parse_layout(filter_layout, FILTER_DIMS).block_factor("o") or 1 if filter_layout else 1
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
        pixels = math.prod((*graph.shapes[op.out], 1, 1)[2:4])
        dense = filter_layout and cv.groups == 1 and (pixels > 1 or cv.kernel != (1, 1)) and \
            cv.out_channels % block == 0
        keys += [("filter_layout", filter_layout)] if dense else []
        keys += [("bias", True)] if cv.bias else []
        keys += [("residual", "input" if op.residual == 0 else op.residual)] if op.residual is not None else []
        keys += [("residual", sides[op.side])] if op.side else []
        keys += [("activation", op.activation)] if op.activation != "none" else []
        entries.append(Op(kind="conv2d", keys=tuple(keys)))
    return GroupConfig(name=name, model=model_path, input_shape=graph.shapes[group_input(graph, ops)], layout="NCHW",
                       ops=tuple(entries), targets=targets, schedule=schedule, nodes=nodes,
                       sides=tuple(Side(name=side, tensor=tensor, shape=graph.shapes[tensor])
                                   for tensor, side in sides.items()))


def fsides(ops: list[ChainOp]) -> dict[str, str]:
    """A group's side inputs, ONNX tensor -> config name, in the order the config declares them: a mul's factors
    (scale, scale_2, ...) and the other branch of an Add (shortcut, shortcut_2, ...)."""
    out: dict[str, str] = {}
    for op in ops:
        for tensor, word in ((op.conv.scale_by, "scale"), (op.side, "shortcut")):
            if tensor and tensor not in out:
                taken = sum(name.startswith(word) for name in out.values())
                out[tensor] = word if not taken else f"{word}_{taken + 1}"
    return out


def group_input(graph: Graph, ops: list[ChainOp]) -> str:
    """The tensor a group reads: its first op's input."""
    first = ops[0]
    lead = first.members[0] if first.members[0] != first.node else None
    return graph.nodes[lead].input[0] if lead is not None else layers.op_input(graph, first.node, first.conv)
