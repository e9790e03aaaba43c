"""Which ONNX op types `kernelgen import` converts, and how: one entry per op type with its float form (an op of a
float chain: layers.py) and its QDQ form (an op of a uint8 chain: quant.py, qlayers.py) side by side, as
onnxruntime's quantization registry and TVM's ONNX frontend map op types to converters. Adding an op's import is one
entry in CONVERTERS plus its converter functions; an activation a conv folds in is one entry in
activations.ACTIVATIONS."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import layers, qlayers
from .graph import Graph
from .layers import FloatOp
from .quant import QConv, qdq_conv, qlinear_conv

FloatForm = Callable[[Graph, int, "str | None"], "FloatOp | str | None"]  # (graph, node, the tensor it must read)
QuantForm = Callable[[Graph, int], "QConv | str | None"]


@dataclass(frozen=True, slots=True)
class Converter:
    """An op type's forms: each returns the op the node starts, why kernelgen cannot take it, or None when the node
    is not that op after all (a Mul by a constant, a Conv on float activations for the QDQ form)."""

    float: FloatForm | None = None
    quantized: QuantForm | None = None
    # A convolution: what the command line counts and chooses targets by. Its QDQ form's refusal is final (read as
    # a float conv it would misread the bytes); another op's refused QDQ form is left to onnxruntime unexplained.
    conv: bool = False


CONVERTERS: dict[str, Converter] = {
    "Conv": Converter(float=layers.conv_op, quantized=qdq_conv, conv=True),
    "QLinearConv": Converter(quantized=qlinear_conv, conv=True),
    "MaxPool": Converter(float=layers.pool_op, quantized=qlayers.qpool),
    "AveragePool": Converter(float=layers.pool_op, quantized=qlayers.qpool),
    "GlobalAveragePool": Converter(float=layers.pool_op, quantized=qlayers.qpool),
    "ReduceMean": Converter(float=layers.pool_op, quantized=qlayers.qpool),  # over rows and columns: a global pool
    "Flatten": Converter(float=layers.flatten_op),  # a classifier's lead node; its QDQ form starts at the Gemm
    "Gemm": Converter(float=layers.gemm_op, quantized=qlayers.qgemm),
    "Mul": Converter(float=layers.channel_scale, quantized=qlayers.qmul),
    # one no conv before it absorbed (DenseNet's); quantized: between DequantizeLinear and QuantizeLinear
    "BatchNormalization": Converter(float=layers.batch_norm_op, quantized=qlayers.qbatch_norm),
}


def is_conv(graph: Graph, index: int) -> bool:
    converter = CONVERTERS.get(graph.nodes[index].op_type)
    return converter is not None and converter.conv


def float_op(graph: Graph, index: int, source: str | None = None) -> FloatOp | str | None:
    """The float op a node starts, as (the nodes before the op's own, its node, the op); why not, for such a node
    kernelgen refuses; None for any other node. `source`: the tensor the op must read (the chain's last result)."""
    node = graph.nodes[index]
    converter = CONVERTERS.get(node.op_type)
    if converter is None or converter.float is None:
        return None
    if source is not None and (not node.input or node.input[0] != source):
        return None
    if not converter.conv and node.input and _dequantized(graph, node.input[0]):
        return None  # between DequantizeLinear and QuantizeLinear: a quantized model's op (uint8 pools: host steps)
    return converter.float(graph, index, source)


def quantized_op(graph: Graph, index: int) -> QConv | str | None:
    """The quantized op whose own node is `index` (a conv, a pool, a Gemm, a Mul); why kernelgen cannot take it;
    None when the node is no quantized op."""
    converter = CONVERTERS.get(graph.nodes[index].op_type)
    return None if converter is None or converter.quantized is None else converter.quantized(graph, index)


def _dequantized(graph: Graph, tensor: str) -> bool:
    return tensor in graph.producers and graph.nodes[graph.producers[tensor]].op_type == "DequantizeLinear"
