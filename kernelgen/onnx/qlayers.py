"""The quantized ops between a QDQ model's convs, as the QConv records a uint8 chain holds: a MaxPool, an
AveragePool or a GlobalAveragePool between DequantizeLinear and QuantizeLinear (onnxruntime runs the first on the
bytes, the others as QLinear(Global)AveragePool), a BatchNormalization there (DenseNet's, as a 1x1 depthwise conv
on int8 weights: qbatch_norm), and the classifier, DequantizeLinear -> [Flatten -> QuantizeLinear ->
DequantizeLinear ->] Gemm on int8 weights -> QuantizeLinear, as a conv over the flattened image's whole window (1x1
after a global pool). converters.py says which op type each one converts; qnext finds the op that reads a uint8
tensor."""
from __future__ import annotations

import numpy as np

from ..ops import OPS
from . import layers
from .graph import ConvNode, Graph, _attributes
from .quant import QConv, _requantized, _scalar, _weight_parts


def qnext(graph: Graph, tensor: str) -> tuple[int, tuple[int, ...]] | None:
    """The node of the quantized op reading uint8 `tensor` (through its DequantizeLinear; a Flatten of a 1x1 image
    re-quantized on the way to a Gemm is passed through) and the nodes passed on the way that are not its own
    pattern's; None when no single op reads it. Other readers of the dequantized tensor may only be Adds (a later
    op's residual)."""
    dq = graph.sole_consumer(tensor)
    if dq is None:
        return None
    if graph.nodes[dq].op_type != "DequantizeLinear":  # an op reading the bytes themselves: a QLinearConv
        return dq, ()
    readers = [r for r in graph.consumers.get(graph.nodes[dq].output[0], ()) if graph.nodes[r].op_type != "Add"]
    if len(readers) != 1 or graph.nodes[dq].output[0] in graph.outputs:
        return None
    reader = readers[0]
    if graph.nodes[reader].op_type != "Flatten":
        return reader, ()
    gemm = _through_flatten(graph, reader)
    return None if gemm is None else (gemm[0], (reader, *gemm[1]))


def _through_flatten(graph: Graph, flatten: int) -> tuple[int, tuple[int, ...]] | None:
    """Flatten of [N, C, 1, 1] -> QuantizeLinear -> DequantizeLinear -> Gemm: the Gemm and the two nodes between."""
    node = graph.nodes[flatten]
    shape = graph.shapes.get(node.input[0])
    if shape is None or len(shape) != 4 or shape[2:] != (1, 1) or int(_attributes(node).get("axis", 1)) != 1:
        return None
    q = graph.sole_consumer(node.output[0])
    dq = graph.sole_consumer(graph.nodes[q].output[0]) if q is not None else None
    gemm = graph.sole_consumer(graph.nodes[dq].output[0]) if dq is not None else None
    if gemm is None or (graph.nodes[q].op_type, graph.nodes[dq].op_type, graph.nodes[gemm].op_type) != (
            "QuantizeLinear", "DequantizeLinear", "Gemm"):
        return None
    return gemm, (q, dq)


def _dequantized_input(graph: Graph, tensor: str) -> tuple[int, float, int] | None:
    """The DequantizeLinear computing `tensor` and its scale and zero point (scalar constants), or None."""
    dq = graph.producers.get(tensor)
    if dq is None or graph.nodes[dq].op_type != "DequantizeLinear":
        return None
    node = graph.nodes[dq]
    scale, zero_point = _scalar(graph, node.input[1]), _scalar(graph, node.input[2]) if len(node.input) > 2 else 0
    return None if None in (scale, zero_point) else (dq, scale, int(zero_point))


def qpool(graph: Graph, index: int) -> QConv | str | None:
    node = graph.nodes[index]
    dq = _dequantized_input(graph, node.input[0])
    if dq is None:
        return None
    pooled = layers.pool(graph, index)
    if isinstance(pooled, str):
        return pooled
    quantized = _requantized(graph, node.output[0])
    if quantized is None:
        return f"a {node.op_type} on dequantized bytes whose result is not quantized again (QuantizeLinear)"
    tail, activation, q, y_scale, y_zp = quantized
    if activation != "none" or None in (y_scale, y_zp):
        return f"a quantized {node.op_type} followed by an activation, or with scales that are not constants"
    dq_x, x_scale, x_zp = dq
    if OPS[pooled.kind].KEEPS_QUANT and (y_scale, int(y_zp)) != (x_scale, x_zp):
        return ("a quantized MaxPool whose output scale or zero point is not its input's (kernelgen's uint8 max "
                "pool keeps the bytes' quantization, as onnxruntime does when they agree)")
    return QConv(start=index, conv=pooled, members=(index, *tail, dq_x), in_q=graph.nodes[dq_x].input[0],
                 out_q=q.output[0], x_scale=x_scale, x_zero_point=x_zp, weights=None, weight_scales=(),
                 weight_zero_point=0, bias=None, y_scale=y_scale, y_zero_point=int(y_zp))


def qgemm(graph: Graph, index: int) -> QConv | str | None:
    node = graph.nodes[index]
    dq = _dequantized_input(graph, node.input[0])
    if dq is None:
        return None
    dq_x, x_scale, x_zp = dq
    lead: tuple[int, ...] = ()
    window = (1, 1)  # the flattened image's: the conv's kernel covers it whole (VGG's 7x7, AlexNet's 6x6)
    in_q = graph.nodes[dq_x].input[0]
    q_flat = graph.producers.get(in_q)
    if q_flat is not None and graph.nodes[q_flat].op_type == "QuantizeLinear":  # after a Flatten of an image
        flatten = graph.producers.get(graph.nodes[q_flat].input[0])
        if flatten is not None and graph.nodes[flatten].op_type == "Flatten":
            inner = _dequantized_input(graph, graph.nodes[flatten].input[0])
            image = graph.shapes.get(graph.nodes[flatten].input[0])
            if inner is not None and inner[1:] == (x_scale, x_zp) and image is not None and len(image) == 4 and \
                    int(_attributes(graph.nodes[flatten]).get("axis", 1)) == 1:
                lead, in_q, window = (inner[0], flatten, q_flat), graph.nodes[inner[0]].input[0], tuple(image[2:])
    attrs = _attributes(node)
    if float(attrs.get("alpha", 1.0)) != 1.0 or float(attrs.get("beta", 1.0)) != 1.0 or int(attrs.get("transA", 0)):
        return "a quantized Gemm with alpha or beta other than 1, or transA 1"
    dq_w = graph.producers.get(node.input[1])
    if dq_w is None or graph.nodes[dq_w].op_type != "DequantizeLinear":
        return "a Gemm on dequantized activations whose weights are not a DequantizeLinear of constants"
    w = graph.nodes[dq_w]
    b = graph.constants.get(w.input[0])
    trans_b = bool(int(attrs.get("transB", 0)))
    if b is None or b.ndim != 2:
        return f"its weights {w.input[0]!r} are not a constant matrix of the model ({graph.made_by(w.input[0])})"
    axis = int(_attributes(w).get("axis", 1))
    scales = graph.constants.get(w.input[1])
    if scales is not None and scales.size > 1 and axis != (0 if trans_b else 1):
        return "per-channel weight scales along the Gemm's input channels (one per output only)"
    columns = b.shape[1] if trans_b else b.shape[0]
    channels = graph.shapes[in_q][1] if in_q in graph.shapes else columns
    if columns != channels * window[0] * window[1]:
        return f"its weights {list(b.shape)} do not take the {channels}x{window[0]}x{window[1]} values it is given"
    filters = layers.gemm_filter(b, trans_b, window)
    parts = _weight_parts(filters, scales, graph.constants.get(w.input[2]) if len(w.input) > 2 else None)
    if isinstance(parts, str):
        return parts
    members = [index, dq_w]
    bias = None
    if len(node.input) > 2 and node.input[2]:
        dq_b = graph.producers.get(node.input[2])
        if dq_b is not None and graph.nodes[dq_b].op_type == "DequantizeLinear":
            bias, members = graph.constants.get(graph.nodes[dq_b].input[0]), members + [dq_b]
        elif node.input[2] in graph.constants:  # a float bias: quantized at x_scale * w_scale, as the quantizers do
            bias = np.rint(graph.constants[node.input[2]].astype(np.float64).reshape(-1)
                           / (np.array(parts[0]) * x_scale)).astype(np.int64)
        if bias is None or layers.gemm_bias_problem(np.shape(bias), int(filters.shape[0])):
            return "its bias is neither one constant per output ([K] or [1, K]) nor a DequantizeLinear of one"
    quantized = _requantized(graph, node.output[0])
    if quantized is None:
        return "a Gemm on dequantized activations whose result is not quantized again (QuantizeLinear)"
    tail, activation, q, y_scale, y_zp = quantized
    if None in (y_scale, y_zp):
        return "its activation scales and zero points are not scalar constants"
    conv = ConvNode(weight=w.input[0], bias=None, out_channels=int(filters.shape[0]), kernel=window, stride=(1, 1),
                    pad=(0, 0, 0, 0), dilation=(1, 1), groups=1, trans_b=trans_b)
    return QConv(start=index, conv=conv, members=(*members, *tail, dq_x, *lead), in_q=in_q, out_q=q.output[0],
                 x_scale=x_scale, x_zero_point=x_zp, weights=filters, weight_scales=parts[0],
                 weight_zero_point=parts[1], bias=None if bias is None else np.asarray(bias).astype(np.int32).reshape(-1),
                 y_scale=y_scale, y_zero_point=int(y_zp), activation=activation)


def qmul(graph: Graph, index: int) -> QConv | str | None:
    """A Mul of a dequantized image by dequantized factors of shape [N, C, 1, 1] (squeeze-excite's scaling), quantized
    again: a `mul` op whose factors are a side input."""
    node = graph.nodes[index]
    found = layers.channel_factors(graph, index)
    if found is None:
        return None
    image, factor = found
    dq_x, dq_f = _dequantized_input(graph, node.input[image]), _dequantized_input(graph, node.input[factor])
    if dq_x is None or dq_f is None:
        return None
    quantized = _requantized(graph, node.output[0])
    if quantized is None or quantized[1] != "none" or None in quantized[3:]:
        return "a quantized Mul whose result is not quantized again (QuantizeLinear) without an activation"
    tail, _, q, y_scale, y_zp = quantized
    channels = graph.shapes[node.input[image]][1]
    conv = ConvNode(weight="", bias=None, out_channels=channels, kernel=(1, 1), stride=(1, 1), pad=(0, 0, 0, 0),
                    dilation=(1, 1), groups=channels, kind="mul", scale_by=graph.nodes[dq_f[0]].input[0])
    return QConv(start=index, conv=conv, members=(index, *tail, dq_x[0], dq_f[0]), in_q=graph.nodes[dq_x[0]].input[0],
                 out_q=q.output[0], x_scale=dq_x[1], x_zero_point=dq_x[2], weights=None, weight_scales=(),
                 weight_zero_point=0, bias=None, y_scale=y_scale, y_zero_point=int(y_zp), by_scale=dq_f[1],
                 by_zero_point=dq_f[2])


# the int8 weight each channel's BatchNormalization factor becomes: its sign times this, at scale |factor| / this
BN_WEIGHT = 127
# the nodes that hand a BatchNormalization its constants in a QDQ model (its scale quantized like a weight; an
# exporter shares equal vectors through Identity nodes)
_CONSTANT_CHAIN = ("Identity", "DequantizeLinear", "QuantizeLinear")


def qbatch_norm(graph: Graph, index: int) -> QConv | str | None:
    """A BatchNormalization between DequantizeLinear and QuantizeLinear (DenseNet's after each Concat, which
    quantize_static leaves in float, its ReLU folded into the QuantizeLinear's range) as the 1x1 depthwise conv it
    is per channel: weight sign(f) * 127 at scale |f| / 127 (f = scale / sqrt(var + eps), as onnxruntime folds it:
    layers.batch_norm_affine), its bias B - mean * f as int32 at s_in * s_w. onnxruntime runs it in float32 (the
    oracle allows that a rounding); the bias's own rounding is at most half of s_in * s_w, 1/254 of f's step."""
    node = graph.nodes[index]
    dq = _dequantized_input(graph, node.input[0])
    if dq is None:
        return None
    channels = layers.batch_norm_channels(graph, node)
    if isinstance(channels, str):
        return channels
    folded = [_folded(graph, t) for t in node.input[1:5]]
    if any(f is None or f[0].shape != (channels,) for f in folded):
        return "its scale, bias, mean and variance are not constants (or their Q/DQ) of one value per channel"
    quantized = _requantized(graph, node.output[0])
    if quantized is None or None in quantized[3:]:
        return "a quantized BatchNormalization whose result is not quantized again (QuantizeLinear)"
    tail, activation, q, y_scale, y_zp = quantized
    dq_x, x_scale, x_zp = dq
    scale, bias, mean, var = (f[0].astype(np.float32) for f in folded)
    factor = (np.float32(1) / np.sqrt(var + np.float32(_attributes(node).get("epsilon", 1e-5)))) * scale
    shift = (bias - mean * factor).astype(np.float64)
    magnitude = np.abs(factor.astype(np.float64))
    floor = magnitude[magnitude > 0].min() if (magnitude > 0).any() else 1.0
    weight_scales = np.where(magnitude > 0, magnitude, floor) / BN_WEIGHT  # a zero factor: weight 0, any scale
    weights = (np.sign(factor) * BN_WEIGHT).astype(np.int8).reshape(channels, 1, 1, 1)
    q_bias = np.rint(shift / (x_scale * weight_scales))
    if np.abs(q_bias).max(initial=0) >= 2 ** 31:
        return "its bias does not fit an int32 at the input's scale times the weights'"
    conv = ConvNode(weight=node.input[1], bias=node.input[2], out_channels=channels, kernel=(1, 1), stride=(1, 1),
                    pad=(0, 0, 0, 0), dilation=(1, 1), groups=channels)
    constants = tuple(n for f in folded for n in f[1])
    return QConv(start=index, conv=conv, members=tuple(dict.fromkeys((index, *tail, dq_x, *constants))),
                 in_q=graph.nodes[dq_x].input[0], out_q=q.output[0], x_scale=x_scale, x_zero_point=x_zp,
                 weights=weights, weight_scales=tuple(float(s) for s in weight_scales), weight_zero_point=0,
                 bias=q_bias.astype(np.int32), y_scale=y_scale, y_zero_point=int(y_zp), activation=activation)


def _folded(graph: Graph, tensor: str) -> tuple[np.ndarray, tuple[int, ...]] | None:
    """A constant's value through the Identity, DequantizeLinear and QuantizeLinear nodes a QDQ model puts
    between it and its reader (ONNX's arithmetic: saturate(rint(x / s) + z), (q - z) * s in float32), and those
    nodes; None when a node on the way is anything else or reads something other than constants."""
    if tensor in graph.constants:
        return graph.constants[tensor], ()
    index = graph.producers.get(tensor)
    if index is None or graph.nodes[index].op_type not in _CONSTANT_CHAIN:
        return None
    node = graph.nodes[index]
    inputs = [_folded(graph, t) if t else None for t in node.input]
    if inputs[0] is None or any(i is None for i, t in zip(inputs, node.input) if t):
        return None
    x = inputs[0][0]
    nodes = (index, *(n for i in inputs if i is not None for n in i[1]))
    if node.op_type == "Identity":
        return x, nodes
    scale = inputs[1][0].astype(np.float32)
    zero = inputs[2][0] if len(inputs) > 2 and inputs[2] is not None else np.zeros((), np.uint8)
    if scale.size != 1 or zero.size != 1:
        return None  # per-axis: not one of these
    if node.op_type == "DequantizeLinear":
        return ((x.astype(np.int64) - zero.astype(np.int64)).astype(np.float32) * scale).astype(np.float32), nodes
    info = np.iinfo(zero.dtype)
    q = np.rint(x.astype(np.float32) / scale) + zero.astype(np.float32)
    return np.clip(q, info.min, info.max).astype(zero.dtype), nodes
