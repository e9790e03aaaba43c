"""The host nodes of an imported network that only move channels, which kernelgen copies itself rather than hand to
onnxruntime (network.yaml's `concat: channels`, `slice: {start, stop}` and `shuffle: {groups}` steps): a Concat along
axis 1, a Slice of a channel range, and the channel shuffle PyTorch exports as Reshape [N, g, C/g, H, W], Transpose
(0, 2, 1, 3, 4), Reshape [N, C, H, W] (ShuffleNetV2's). Float32 NCHW images with static shapes only, and only where
each input comes from a kernel, another such step or the caller. In a quantized model the nodes sit between a
DequantizeLinear of each input and one QuantizeLinear of the result (the QDQ form): those join the step, which then
moves uint8 tensors and requantizes each input whose scale or zero point differs from the output's (as onnxruntime
does when it fuses them into one QLinearConcat)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .graph import Graph, _attributes

FLOAT32 = 1  # ONNX TensorProto.FLOAT
UINT8 = 2  # ONNX TensorProto.UINT8


@dataclass(frozen=True, slots=True)
class ChannelMove:
    kind: str  # concat, slice, shuffle
    nodes: tuple[int, ...]  # graph order
    key: str  # the manifest's step line: "concat: channels", "slice: {start: 0, stop: 24}", "shuffle: {groups: 2}"
    inputs: tuple[str, ...] = ()  # the tensors it reads (a QDQ move's: the uint8 ones its DequantizeLinear read)
    output: str = ""  # the tensor it writes


def channel_moves(graph: Graph, host: set[int], types: dict[str, int],
                  computed: dict[tuple[int, ...], ChannelMove] | None = None) -> dict[tuple[int, ...], ChannelMove]:
    """The channel steps among the host nodes, by their nodes, and the `computed` steps kernelgen also runs
    (resize_steps.py: their nodes are no channel move's)."""
    computed = computed or {}
    found: list[ChannelMove] = []
    for i in sorted(host - {j for nodes in computed for j in nodes}):
        move = _concat(graph, i, types) or _slice(graph, i, types) or _shuffle(graph, i, host, types)
        if move is not None and not any(set(move.nodes) & set(m.nodes) for m in found):
            found.append(move)
    readers: dict[int | None, list[ChannelMove]] = {}  # a node -> the moves reading what it computes
    for move in found:
        for tensor in _inputs(graph, move.nodes):
            readers.setdefault(graph.producers.get(tensor), []).append(move)
    owned: set[int] = set()
    moves = dict(computed)
    for move in found:
        move = _quantized(graph, move, host, types, readers, owned)
        moves[move.nodes] = move
    while True:  # a step fed by ONNX nodes onnxruntime runs is not one either
        inside = {i for nodes in moves for i in nodes}
        dropped = [nodes for nodes, move in moves.items() if any(graph.producers.get(t) in host - inside
                                                                 for t in move.inputs)]
        if not dropped:
            return moves
        for nodes in dropped:
            del moves[nodes]


def _inputs(graph: Graph, nodes: tuple[int, ...]) -> list[str]:
    produced = {o for i in nodes for o in graph.nodes[i].output}
    return [t for i in nodes for t in graph.nodes[i].input if t and t not in produced and t not in graph.constants]


def _quantized(graph: Graph, move: ChannelMove, host: set[int], types: dict[str, int],
               readers: dict[int | None, list[ChannelMove]], owned: set[int]) -> ChannelMove:
    """The move over uint8 tensors when a quantized model wraps it: a DequantizeLinear before each input (uint8,
    one constant scale and zero point, read by channel moves alone: ShuffleNet's two Slices of one tensor share it;
    the first move to read it takes the node), one QuantizeLinear after its result, and any QuantizeLinear ->
    DequantizeLinear pair inside it at the input's scale and zero point (a shuffle's, between its Reshape and
    Transpose: each gives back the bytes). Else the float move as it is."""
    inputs = _inputs(graph, move.nodes)
    before = [graph.producers.get(t) for t in inputs]
    result = graph.nodes[move.nodes[-1]].output[0]
    after = graph.sole_consumer(result)
    plain = replace(move, inputs=tuple(dict.fromkeys(inputs)), output=result)
    if not before or after not in host or not _qdq(graph, after, "QuantizeLinear", types):
        return plain
    for i in before:
        if i not in host or not _qdq(graph, i, "DequantizeLinear", types):
            return plain
        out = graph.nodes[i].output[0]
        moving = {j for m in readers.get(i, ()) for j in m.nodes}
        if out in graph.outputs or not set(graph.consumers.get(out, ())) <= moving:
            return plain
    pairs = [j for j in move.nodes if graph.nodes[j].op_type in ("QuantizeLinear", "DequantizeLinear")]
    if pairs and len({_parameters(graph, j) for j in (*before, *pairs)}) > 1:
        return plain  # a requantization inside: not one table of bytes
    taken = [i for i in dict.fromkeys(before) if i not in owned]
    owned.update(taken)
    return ChannelMove(move.kind, tuple(sorted({*taken, *move.nodes, after})), move.key,
                       inputs=tuple(dict.fromkeys(graph.nodes[i].input[0] for i in before)),
                       output=graph.nodes[after].output[0])


def qdq_parameters(graph: Graph, node) -> tuple[float, int] | None:
    """A QuantizeLinear's or DequantizeLinear's scale and zero point, when both are scalar constants."""
    if len(node.input) < 3:
        return None
    scale, zero = graph.constants.get(node.input[1]), graph.constants.get(node.input[2])
    if scale is None or scale.size != 1 or zero is None or zero.size != 1:
        return None
    return float(scale.reshape(-1)[0]), int(zero.reshape(-1)[0])


def _parameters(graph: Graph, i: int) -> tuple[float, int] | None:
    return qdq_parameters(graph, graph.nodes[i])


def _qdq(graph: Graph, i: int, op_type: str, types: dict[str, int]) -> bool:
    """A QuantizeLinear (or DequantizeLinear) between float32 and uint8 at one constant scale and zero point."""
    node = graph.nodes[i]
    uint8 = node.output[0] if op_type == "QuantizeLinear" else node.input[0]
    return node.op_type == op_type and qdq_parameters(graph, node) is not None and types.get(uint8) == UINT8


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
    split_to, pair1 = _through_pair(graph, first.output[0], host, types)
    middle = graph.sole_consumer(split_to)
    if middle is None or middle not in host or graph.nodes[middle].op_type != "Transpose" or \
            list(_attributes(graph.nodes[middle]).get("perm", ())) != [0, 2, 1, 3, 4]:
        return None
    swapped, pair2 = _through_pair(graph, graph.nodes[middle].output[0], host, types)
    last = graph.sole_consumer(swapped)
    if last is None or last not in host or graph.nodes[last].op_type != "Reshape" or \
            graph.shapes.get(graph.nodes[last].output[0]) != (n, c, h, w):
        return None
    return ChannelMove("shuffle", tuple(sorted((i, *pair1, middle, *pair2, last))), f"shuffle: {{groups: {split[1]}}}")


def _through_pair(graph: Graph, tensor: str, host: set[int], types: dict[str, int]) -> tuple[str, tuple[int, ...]]:
    """Past a QuantizeLinear -> DequantizeLinear pair of one scale and zero point that alone reads `tensor` (a
    quantized model's, between a shuffle's Reshape and Transpose): the pair's float result and its nodes; else
    `tensor` and no nodes."""
    q = graph.sole_consumer(tensor)
    if q is None or q not in host or not _qdq(graph, q, "QuantizeLinear", types):
        return tensor, ()
    dq = graph.sole_consumer(graph.nodes[q].output[0])
    if dq is None or dq not in host or not _qdq(graph, dq, "DequantizeLinear", types) or \
            _parameters(graph, q) != _parameters(graph, dq):
        return tensor, ()
    return graph.nodes[dq].output[0], (q, dq)
