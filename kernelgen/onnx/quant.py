"""Quantized convolutions in an ONNX graph, as QLinearConv nodes or as QDQ patterns (DequantizeLinear ->
Conv [-> Relu / Clip] -> QuantizeLinear): their weights, biases, scales and zero points in kernelgen's
terms, and the quantized residual add that may follow one (DequantizeLinear of the conv's result + a
DequantizeLinear of the block's input -> Add [-> Relu / Clip] -> QuantizeLinear). Read by `kernelgen import`
(uint8 configs) and by the onnxruntime oracle (the model's own weights).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .activations import activation as fused_activation, is_gate
from .graph import ConvNode, Graph
from .live_taps import sliced, trim


@dataclass(frozen=True, slots=True)
class QConv:
    start: int  # the node that computes the conv (QLinearConv or Conv)
    conv: ConvNode
    members: tuple[int, ...]  # every node of the pattern, the conv first
    in_q: str  # the uint8 tensor it reads
    out_q: str  # the uint8 tensor it writes
    x_scale: float
    x_zero_point: int
    weights: np.ndarray | None  # int8 or uint8, OIHW (a Gemm's B as a 1x1 conv's); None: a pool
    weight_scales: tuple[float, ...]  # one, or one per output channel
    weight_zero_point: int
    bias: np.ndarray | None  # int32 at x_scale * weight_scale[k]
    y_scale: float
    y_zero_point: int
    activation: str | list[float] = "none"
    # with a residual add folded in: y_* are the add's output, conv_* the conv's own quantized result
    residual: str | None = None  # the uint8 tensor the add dequantizes besides the conv's result
    residual_scale: float | None = None
    residual_zero_point: int | None = None
    conv_scale: float | None = None
    conv_zero_point: int | None = None
    # a QDQ SiLU folded in: the scale and zero point its Sigmoid's result is quantized to before the Mul
    gate_scale: float | None = None
    gate_zero_point: int | None = None
    # a mul: its factors' uint8 tensor is conv.scale_by, at this scale and zero point
    by_scale: float | None = None
    by_zero_point: int | None = None


def _scalar(graph: Graph, name: str) -> float | None:
    value = graph.constants.get(name)
    return None if value is None or value.size != 1 else value.reshape(-1)[0].item()


def qlinear_conv(graph: Graph, index: int) -> QConv | str | None:
    """The quantized conv a QLinearConv node is (converters.py's entry for the op type); a reason when kernelgen
    cannot take it."""
    return _qlinear(graph, index)


def qdq_conv(graph: Graph, index: int) -> QConv | str | None:
    """The quantized conv a Conv node starts in QDQ form (its input a DequantizeLinear's); a reason when kernelgen
    cannot take it; None for a conv on float activations (the float form's)."""
    producer = _producer(graph, graph.nodes[index].input[0])
    if producer is not None and graph.nodes[producer].op_type == "DequantizeLinear":
        return _qdq(graph, index, producer)
    return None


def _requantized(graph: Graph, tensor: str) -> tuple[list[int], str | list[float], object, float | None,
                                                    float | None] | None:
    """A float result's way back to uint8: [Relu | Clip] -> QuantizeLinear, as (those nodes, the activation, the
    QuantizeLinear node, its scale, its zero point); None when the result is not quantized again."""
    nodes, activation = [], "none"
    reader = graph.sole_consumer(tensor)
    if reader is not None and fused_activation(graph, reader, gates=False) is not None:  # uint8 stores clamp bytes
        activation = fused_activation(graph, reader, gates=False)
        nodes.append(reader)
        reader = graph.sole_consumer(graph.nodes[reader].output[0])
    if reader is None or graph.nodes[reader].op_type != "QuantizeLinear":
        return None
    q = graph.nodes[reader]
    zero_point = _scalar(graph, q.input[2]) if len(q.input) > 2 else 0
    return [*nodes, reader], activation, q, _scalar(graph, q.input[1]), zero_point


def _identities(graph: Graph, tensor: str) -> list[int]:
    """The Identity nodes between `tensor` and the node that computes it."""
    found, index = [], graph.producers.get(tensor)
    while index is not None and graph.nodes[index].op_type == "Identity":
        found.append(index)
        index = graph.producers.get(graph.nodes[index].input[0])
    return found


def _producer(graph: Graph, tensor: str) -> int | None:
    """The node computing `tensor`, looking through Identity nodes (exporters share one dequantized bias between
    layers through them)."""
    index = graph.producers.get(tensor)
    while index is not None and graph.nodes[index].op_type == "Identity":
        index = graph.producers.get(graph.nodes[index].input[0])
    return index


def _weight_parts(weights: np.ndarray | None, scales: np.ndarray | None, zero_points: np.ndarray | None
                  ) -> tuple[tuple[float, ...], int] | str:
    if weights is None or scales is None or weights.ndim != 4:
        return "its weights or their scales are not constants of the model"
    if weights.dtype not in (np.int8, np.uint8):
        return f"{weights.dtype} weights (int8 or uint8 only)"
    zps = np.zeros(1, dtype=np.int64) if zero_points is None else zero_points.reshape(-1).astype(np.int64)
    if len(set(zps.tolist())) != 1:
        return "per-channel weight zero points that differ (kernelgen takes one)"
    return tuple(float(s) for s in scales.reshape(-1)), int(zps[0])


def _live_taps(graph: Graph, source: str, conv: ConvNode, weights: np.ndarray) -> tuple[ConvNode, np.ndarray]:
    """A quantized conv without its outer taps that only ever read padding (live_taps.py), and its weights cut to
    match. Padding holds the input's zero point, so such a tap adds (z_x - z_x) * (w - z_w) = 0 to every sum: the
    smaller conv's integer sums are the model's, bit for bit. DeepLabV3's dilation-24 and -36 branches over 14x14
    become the 1x1 convs they compute (a ninth of their multiply-adds on the DSP)."""
    cut = trim(conv.kernel, conv.stride, conv.dilation, conv.pad, graph.shapes[source][2:4])
    if cut is None:
        return conv, weights
    return (replace(conv, kernel=cut.kernel, pad=cut.pad, dilation=cut.dilation, taps=cut.taps),
            sliced(weights, cut.taps))


def _qlinear(graph: Graph, index: int) -> QConv | str:
    node = graph.nodes[index]
    c = graph.constants
    x_scale, x_zp = _scalar(graph, node.input[1]), _scalar(graph, node.input[2])
    y_scale, y_zp = _scalar(graph, node.input[6]), _scalar(graph, node.input[7])
    if None in (x_scale, x_zp, y_scale, y_zp):
        return "its activation scales and zero points are not scalar constants"
    parts = _weight_parts(c.get(node.input[3]), c.get(node.input[4]), c.get(node.input[5]))
    if isinstance(parts, str):
        return parts
    geometry = graph.conv_geometry(index, node.input[0], node.input[3], node.input[8] if len(node.input) > 8 else None)
    if isinstance(geometry, str):
        return geometry
    geometry, weights = _live_taps(graph, node.input[0], geometry, c[node.input[3]])
    bias = c.get(node.input[8]) if len(node.input) > 8 and node.input[8] else None
    return QConv(start=index, conv=geometry, members=(index,), in_q=node.input[0], out_q=node.output[0],
                 x_scale=x_scale, x_zero_point=int(x_zp), weights=weights, weight_scales=parts[0],
                 weight_zero_point=parts[1], bias=None if bias is None else bias.astype(np.int32), y_scale=y_scale,
                 y_zero_point=int(y_zp))


def _qdq(graph: Graph, index: int, dq_x: int) -> QConv | str | None:
    node, c = graph.nodes[index], graph.constants
    dqx = graph.nodes[dq_x]
    dq_w = _producer(graph, node.input[1]) if len(node.input) > 1 else None
    if dq_w is None or graph.nodes[dq_w].op_type != "DequantizeLinear":
        return "a Conv on dequantized activations whose weights are not a DequantizeLinear of constants"
    dqw = graph.nodes[dq_w]
    x_scale, x_zp = _scalar(graph, dqx.input[1]), _scalar(graph, dqx.input[2]) if len(dqx.input) > 2 else 0
    parts = _weight_parts(c.get(dqw.input[0]), c.get(dqw.input[1]), c.get(dqw.input[2]) if len(dqw.input) > 2 else None)
    if isinstance(parts, str):
        return parts
    members = [index, dq_w]
    bias = None
    if len(node.input) > 2 and node.input[2]:
        dq_b = _producer(graph, node.input[2])
        if dq_b is not None and graph.nodes[dq_b].op_type == "DequantizeLinear":
            bias = c.get(graph.nodes[dq_b].input[0])
            members += [dq_b, *_identities(graph, node.input[2])]
        elif node.input[2] in c:  # a float bias: quantized at x_scale * w_scale, as the quantizers do
            scales = np.array(parts[0]) * x_scale
            bias = np.rint(c[node.input[2]].astype(np.float64) / scales).astype(np.int64)
        if bias is None:
            return "its bias is neither a constant nor a DequantizeLinear of one"
    quantized = _requantized(graph, node.output[0])
    if quantized is None:
        return "a Conv on dequantized activations whose result is not quantized again (QuantizeLinear)"
    tail, activation, q, y_scale, y_zp = quantized
    if None in (x_scale, x_zp, y_scale, y_zp):
        return "its activation scales and zero points are not scalar constants"
    members += [*tail, dq_x]  # the input's DequantizeLinear too: the oracle runs the conv from the uint8 tensor
    geometry = graph.conv_geometry(index, node.input[0], dqw.input[0], None)
    if isinstance(geometry, str):
        return geometry
    geometry, weights = _live_taps(graph, node.input[0], geometry, c[dqw.input[0]])
    return QConv(start=index, conv=geometry, members=tuple(members), in_q=dqx.input[0], out_q=q.output[0],
                 x_scale=x_scale, x_zero_point=int(x_zp), weights=weights, weight_scales=parts[0],
                 weight_zero_point=parts[1], bias=None if bias is None else np.asarray(bias).astype(np.int32),
                 y_scale=y_scale, y_zero_point=int(y_zp), activation=activation)


def with_residual(graph: Graph, op: QConv, taken: frozenset[int] | set[int] = frozenset()) -> QConv:
    """op with the quantized add that follows it folded in, when the graph has one: its result -> DequantizeLinear ->
    Add <- DequantizeLinear <- another uint8 tensor of the same shape (dequantized as it was quantized) -> [Relu |
    Clip] -> QuantizeLinear. Which tensor that is (the group's input, an earlier op's result, or a side input: the
    other branch of a two-branch add) the importer decides per group. op unchanged otherwise (an activation before
    the add, other scales, an Add an earlier group folded (`taken`): the add stays out, and the importer lists
    it)."""
    if op.activation != "none" or op.weights is None:
        return op
    dq_c = graph.sole_consumer(op.out_q)
    if dq_c is None or graph.nodes[dq_c].op_type != "DequantizeLinear":
        return op
    add = graph.sole_consumer(graph.nodes[dq_c].output[0])
    if add is None or add in taken or graph.nodes[add].op_type != "Add" or len(set(graph.nodes[add].input)) != 2:
        return op  # Add(c, c) too: 2c, no other tensor to add
    other = next(t for t in graph.nodes[add].input if t != graph.nodes[dq_c].output[0])
    dq_r = _producer(graph, other)
    if dq_r is None or graph.nodes[dq_r].op_type != "DequantizeLinear" or graph.nodes[dq_r].input[0] == op.out_q:
        return op
    r = graph.nodes[dq_r]
    scale, zero_point = _scalar(graph, r.input[1]), _scalar(graph, r.input[2]) if len(r.input) > 2 else 0
    made = _producer(graph, r.input[0])
    if made is not None and graph.nodes[made].op_type == "QuantizeLinear":  # dequantized as it was quantized
        q = graph.nodes[made]
        if (_scalar(graph, q.input[1]), _scalar(graph, q.input[2]) if len(q.input) > 2 else 0) != (scale, zero_point):
            return op
    if None in (scale, zero_point) or graph.shapes.get(r.input[0]) != graph.shapes.get(graph.nodes[add].output[0]):
        return op
    quantized = _requantized(graph, graph.nodes[add].output[0])
    if quantized is None or None in quantized[3:]:
        return op
    tail, activation, q, y_scale, y_zp = quantized
    return replace(op, members=op.members + tuple(m for m in (dq_c, add, dq_r, *tail) if m not in op.members),
                   out_q=q.output[0], y_scale=y_scale, y_zero_point=int(y_zp), activation=activation,
                   residual=r.input[0], residual_scale=scale, residual_zero_point=int(zero_point),
                   conv_scale=op.y_scale, conv_zero_point=op.y_zero_point)


def with_gate(graph: Graph, op: QConv, taken: frozenset[int] | set[int] = frozenset()) -> QConv:
    """op with a quantized table activation (kernelgen/ops: a hardswish, a hardsigmoid, a leaky_relu) that follows it
    folded in: its result -> DequantizeLinear -> the activation -> QuantizeLinear (onnxruntime runs it in float32
    between them: a table of bytes, the kind's byte_table). op unchanged otherwise."""
    if op.activation != "none" or op.residual is not None or op.weights is None:
        return op
    dq = graph.sole_consumer(op.out_q)
    if dq is None or graph.nodes[dq].op_type != "DequantizeLinear":
        return op
    gate = graph.sole_consumer(graph.nodes[dq].output[0])
    if gate is None or gate in taken or not is_gate(graph.nodes[gate].op_type):
        return op
    if not _is_dequantize_of(graph, dq, op.y_scale, op.y_zero_point):
        return op
    quantized = _quantized_once(graph, graph.nodes[gate].output[0])
    if quantized is None:
        return op
    q, y_scale, y_zp = quantized
    return replace(op, members=op.members + (dq, gate, q), out_q=graph.nodes[q].output[0], y_scale=y_scale,
                   y_zero_point=int(y_zp), activation=fused_activation(graph, gate), conv_scale=op.y_scale,
                   conv_zero_point=op.y_zero_point)


def with_silu(graph: Graph, op: QConv, taken: frozenset[int] | set[int] = frozenset()) -> QConv:
    """op with a QDQ SiLU that follows it folded in: its result -> DequantizeLinear (one, or one for each reader) ->
    Sigmoid -> QuantizeLinear -> DequantizeLinear -> Mul by the result -> QuantizeLinear, as quantize_static writes
    EfficientNet's activation (onnxruntime runs QLinearSigmoid and QLinearMul: a table of bytes, Sigmoid's
    byte_table with the gate's quantization). op unchanged otherwise."""
    if op.activation != "none" or op.residual is not None or op.weights is None or op.out_q in graph.outputs:
        return op
    dqs = graph.consumers.get(op.out_q, ())
    if not dqs or not all(_is_dequantize_of(graph, d, op.y_scale, op.y_zero_point) for d in dqs):
        return op
    values = {graph.nodes[d].output[0] for d in dqs}
    readers = {r for v in values for r in graph.consumers.get(v, ())}
    sigmoids = [r for r in readers if graph.nodes[r].op_type == "Sigmoid"]
    if len(readers) != 2 or len(sigmoids) != 1 or values & set(graph.outputs):
        return op
    (sigmoid,), (mul,) = sigmoids, readers - set(sigmoids)
    chain = _gate_chain(graph, sigmoid)
    if chain is None or graph.nodes[mul].op_type != "Mul":
        return op
    q_gate, dq_gate, s_gate, z_gate = chain
    factors, gate = list(graph.nodes[mul].input), graph.nodes[dq_gate].output[0]
    if len(factors) != 2 or gate not in factors or factors[1 - factors.index(gate)] not in values \
            or graph.sole_consumer(gate) != mul:
        return op
    quantized = _quantized_once(graph, graph.nodes[mul].output[0])
    if quantized is None:
        return op
    q, y_scale, y_zp = quantized
    members = (*dqs, sigmoid, q_gate, dq_gate, mul, q)
    if set(members) & set(taken):
        return op
    return replace(op, members=op.members + tuple(m for m in members if m not in op.members),
                   out_q=graph.nodes[q].output[0],
                   y_scale=y_scale, y_zero_point=int(y_zp), activation="silu", conv_scale=op.y_scale,
                   conv_zero_point=op.y_zero_point, gate_scale=s_gate, gate_zero_point=int(z_gate))


def _quantized_once(graph: Graph, tensor: str) -> tuple[int, float, int] | None:
    """The QuantizeLinear that alone reads `tensor`, with its scalar scale and zero point; None otherwise."""
    q = graph.sole_consumer(tensor)
    if q is None or graph.nodes[q].op_type != "QuantizeLinear":
        return None
    node = graph.nodes[q]
    scale, zero_point = _scalar(graph, node.input[1]), _scalar(graph, node.input[2]) if len(node.input) > 2 else 0
    return None if None in (scale, zero_point) else (q, scale, int(zero_point))


def _is_dequantize_of(graph: Graph, index: int, scale: float, zero_point: int) -> bool:
    """A DequantizeLinear at exactly this scale and zero point."""
    node = graph.nodes[index]
    return node.op_type == "DequantizeLinear" and (
        _scalar(graph, node.input[1]), _scalar(graph, node.input[2]) if len(node.input) > 2 else 0) == (scale,
                                                                                                         zero_point)


def _gate_chain(graph: Graph, sigmoid: int) -> tuple[int, int, float, int] | None:
    """A Sigmoid's result -> QuantizeLinear -> DequantizeLinear at the same scalar scale and zero point, nothing
    else reading either: (the Q, the DQ, the scale, the zero point); None otherwise."""
    quantized = _quantized_once(graph, graph.nodes[sigmoid].output[0])
    if quantized is None:
        return None
    q, scale, zero_point = quantized
    dq = graph.sole_consumer(graph.nodes[q].output[0])
    if dq is None or not _is_dequantize_of(graph, dq, scale, zero_point):
        return None
    return q, dq, scale, zero_point
