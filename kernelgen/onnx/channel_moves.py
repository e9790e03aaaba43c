"""The host nodes of an imported network that only move channels, which kernelgen copies itself rather than hand to
onnxruntime (network.yaml's `concat: channels`, `slice: {start, stop}` and `shuffle: {groups}` steps): a Concat along
axis 1, a Slice of a channel range, and the channel shuffle PyTorch exports as Reshape [N, g, C/g, H, W], Transpose
(0, 2, 1, 3, 4), Reshape [N, C, H, W] (ShuffleNetV2's). Float32 NCHW images with static shapes only, and only where
each input comes from a kernel, another such step or the caller. In a quantized model the nodes sit between a
DequantizeLinear of each input and one QuantizeLinear of the result (the QDQ form): those join the step, which then
moves uint8 tensors and requantizes each input whose scale or zero point differs from the output's (as onnxruntime
does when it fuses them into one QLinearConcat)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .graph import Graph, _attributes

FLOAT32 = 1  # ONNX TensorProto.FLOAT
UINT8 = 2  # ONNX TensorProto.UINT8


@dataclass(frozen=True, slots=True)
class ChannelMove:
    kind: str  # concat, slice, shuffle
    nodes: tuple[int, ...]  # graph order
    key: str  # the manifest's step line: "concat: channels", "slice: {start: 0, stop: 24}", "shuffle: {groups: 2}"


def channel_moves(graph: Graph, host: set[int], types: dict[str, int]) -> dict[tuple[int, ...], ChannelMove]:
    """The channel steps among the host nodes, by their nodes."""
    moves = {}
    for i in sorted(host):
        found = _concat(graph, i, types) or _slice(graph, i, types) or _shuffle(graph, i, host, types)
        found = found and _quantized(graph, found, host, types)
        if found is not None and not any(set(found.nodes) & set(m) for m in moves):
            moves[found.nodes] = found
    while True:  # a step fed by ONNX nodes onnxruntime runs is not one either
        inside = {i for nodes in moves for i in nodes}
        dropped = [nodes for nodes in moves if any(graph.producers.get(t) in host - inside
                                                   for t in _inputs(graph, nodes))]
        if not dropped:
            return moves
        for nodes in dropped:
            del moves[nodes]


def _inputs(graph: Graph, nodes: tuple[int, ...]) -> list[str]:
    produced = {o for i in nodes for o in graph.nodes[i].output}
    return [t for i in nodes for t in graph.nodes[i].input if t and t not in produced and t not in graph.constants]


def _quantized(graph: Graph, move: ChannelMove, host: set[int], types: dict[str, int]) -> ChannelMove:
    """The move with the DequantizeLinear before each input and the QuantizeLinear after its result when a quantized
    model wraps it so (each read by the move alone, uint8, one constant scale and zero point); else as it is."""
    before = [graph.producers.get(t) for t in _inputs(graph, move.nodes)]
    result = graph.nodes[move.nodes[-1]].output[0]
    after = graph.sole_consumer(result)
    wrapped = all(i in host and _qdq(graph, i, "DequantizeLinear", types) and
                  graph.sole_consumer(graph.nodes[i].output[0]) in move.nodes for i in before)
    if not before or not wrapped or after not in host or not _qdq(graph, after, "QuantizeLinear", types):
        return move
    return ChannelMove(move.kind, tuple(sorted({*before, *move.nodes, after})), move.key)


def _qdq(graph: Graph, i: int, op_type: str, types: dict[str, int]) -> bool:
    """A QuantizeLinear (or DequantizeLinear) between float32 and uint8 at one constant scale and zero point."""
    node = graph.nodes[i]
    if node.op_type != op_type or len(node.input) != 3:
        return False
    scale, zero = (graph.constants.get(t) for t in node.input[1:3])
    uint8 = node.output[0] if op_type == "QuantizeLinear" else node.input[0]
    return scale is not None and scale.size == 1 and zero is not None and zero.size == 1 and types.get(uint8) == UINT8


def _image(graph: Graph, tensor: str, types: dict[str, int]) -> tuple[int, ...] | None:
    shape = graph.shapes.get(tensor)
    return shape if shape is not None and len(shape) == 4 and types.get(tensor) == FLOAT32 else None


def _concat(graph: Graph, i: int, types: dict[str, int]) -> ChannelMove | None:
    node = graph.nodes[i]
    if node.op_type != "Concat" or not node.input or len(node.output) != 1:
        return None
    if any(_image(graph, t, types) is None for t in (*node.input, node.output[0])):
        return None
    if _attributes(node).get("axis") not in (1, -3) or any(t in graph.constants for t in node.input):
        return None
    return ChannelMove("concat", (i,), "concat: channels")


def _slice(graph: Graph, i: int, types: dict[str, int]) -> ChannelMove | None:
    """A Slice of channels start..stop-1 (opset 10's inputs: axes [1] or [-3], steps 1), batch, rows and columns
    whole."""
    node = graph.nodes[i]
    if node.op_type != "Slice" or len(node.input) < 4 or len(node.output) != 1:
        return None
    shape, out = _image(graph, node.input[0], types), _image(graph, node.output[0], types)
    bounds = [graph.constants.get(t) for t in node.input[1:4]]  # starts, ends, axes
    stride = graph.constants.get(node.input[4]) if len(node.input) > 4 and node.input[4] else np.ones(1, np.int64)
    if shape is None or out is None or any(v is None for v in (*bounds, stride)):
        return None
    starts, ends, axes = (v.reshape(-1).tolist() for v in bounds)
    steps = stride.reshape(-1).tolist()
    if len(axes) != 1 or axes[0] not in (1, -3) or steps != [1] or len(starts) != 1 or len(ends) != 1:
        return None
    channels = shape[1]
    start, stop = (min(max(v + channels if v < 0 else v, 0), channels) for v in (starts[0], ends[0]))
    if stop <= start or out != (shape[0], stop - start, *shape[2:]):
        return None
    return ChannelMove("slice", (i,), f"slice: {{start: {start}, stop: {stop}}}")


def _shuffle(graph: Graph, i: int, host: set[int], types: dict[str, int]) -> ChannelMove | None:
    """Reshape [N, C, H, W] -> [N, g, C/g, H, W], Transpose (0, 2, 1, 3, 4), Reshape back: each read by the next
    alone."""
    first = graph.nodes[i]
    if first.op_type != "Reshape" or _image(graph, first.input[0], types) is None:
        return None
    n, c, h, w = graph.shapes[first.input[0]]
    split = graph.shapes.get(first.output[0])
    if split is None or len(split) != 5 or split[0] != n or split[3:] != (h, w) or split[1] * split[2] != c:
        return None
    middle = graph.sole_consumer(first.output[0])
    if middle is None or middle not in host or graph.nodes[middle].op_type != "Transpose" or \
            list(_attributes(graph.nodes[middle]).get("perm", ())) != [0, 2, 1, 3, 4]:
        return None
    last = graph.sole_consumer(graph.nodes[middle].output[0])
    if last is None or last not in host or graph.nodes[last].op_type != "Reshape" or \
            graph.shapes.get(graph.nodes[last].output[0]) != (n, c, h, w):
        return None
    return ChannelMove("shuffle", (i, middle, last), f"shuffle: {{groups: {split[1]}}}")
