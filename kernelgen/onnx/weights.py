"""A config's weights as its model holds them: each conv2d op's filter<j> (OIHW, as ONNX stores a Conv's weight; a
Gemm's B as the 1x1 conv it is, transposed by its transB) and bias<j>, with the names of the initializers each was
read from. The one mapping from a config's `source.nodes` to the model's constants: validation feeds the kernels
from it (measure/tensors.py), the onnxruntime oracle gives them back to the model (oracle.py), and the weights
file a build writes (network/weights.py) packs it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Config
from ..layout import ACTIVATION_DIMS, listed_of_logical, listed_order
from .converters import quantized_op
from .graph import Graph, OnnxError, _attributes, node_id
from .layers import batch_norm_affine, gemm_filter
from .live_taps import sliced
from .quant import QConv

# the nodes that give a conv2d op its filter (a Gemm: the 1x1 conv it is; a BatchNormalization: the 1x1 depthwise one)
WEIGHTED = ("Conv", "Gemm", "BatchNormalization")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelWeight:
    """One argument's logical values and where in the model they come from."""

    values: np.ndarray  # float32 (a float config); int8/uint8 filters and int32 biases (uint8)
    initializers: tuple[str, ...]  # the ONNX constants read to make it (a QDQ filter: its int8 initializer)


def model_path(config: Config) -> Path:
    return Path(config.file or config.path).parent / config.source.onnx


def graph_of_config(config: Config) -> Graph:
    """The model, read once per process (shared with the network's host steps: subgraph.graph_of)."""
    from .subgraph import graph_of

    try:
        return graph_of(model_path(config))
    except OnnxError as error:
        raise config.problem("source.onnx", str(error)) from None


def config_nodes(config: Config, graph: Graph) -> list:
    """The config's source.nodes, in graph order."""
    by_id = {node_id(n): n for n in graph.nodes}
    missing = [i for i in config.source.nodes if i not in by_id]
    if missing:
        raise config.problem("source.nodes", f"expected nodes of {config.source.onnx}; it has no node {missing[0]!r}")
    wanted = set(config.source.nodes)
    nodes = [n for n in graph.nodes if node_id(n) in wanted]  # graph order
    if config.dtype != "uint8":
        _check_shapes(config, graph, nodes)
    return nodes


def _check_shapes(config: Config, graph: Graph, nodes: list) -> None:
    """A float config's input and side inputs have its model's shapes: the model is the truth an imported config
    is read against (a config whose file lists an NCHW tensor in another order would be a different kernel). A
    config written by kernelgen import before shapes followed the layout's letters (NHWC shapes with layout NCHW)
    is refused here, where the model is read, with what to do."""
    sides = {config.source.sides[s.name]: s for s in config.side_inputs if s.name in config.source.sides}
    chain = next((t for t in nodes[0].input if t and t not in sides), None) if nodes else None
    tensors = ([(chain, "input", config.input_shape, config.input_layout)] if chain else []) + [
        (tensor, f"side_inputs.{side.name}", side.shape, side.layout) for tensor, side in sides.items()]
    for tensor, key, (n, h, w, c), layout in tensors:
        model = (*graph.shapes.get(tensor, ()), 1, 1)[:4] if len(graph.shapes.get(tensor, ())) >= 2 else None
        if model is None or model == (n, c, h, w):
            continue
        order = listed_order(layout.source)
        mn, mc, mh, mw = model
        want, got = listed_of_logical((mn, mh, mw, mc), order), listed_of_logical((n, h, w, c), order)
        hint = ""
        if got == (mn, mh, mw, mc) and order != ACTIVATION_DIMS:
            hint = ("; kernelgen import listed shapes in NHWC order before they followed the layout's letters: "
                    "import the model again, or list the shape as the layout names it")
        raise config.problem(f"{key}.shape", f"expected {list(want)} (in the layout's order, "
                                             f"{''.join(order).upper()}: the model's tensor {tensor!r} is "
                                             f"{list(graph.shapes[tensor])}), got {list(got)}{hint}")


def weights(config: Config) -> dict[str, np.ndarray]:
    """filter<j> and bias<j> of each op, from the model (the values of model_weights)."""
    return {name: w.values for name, w in model_weights(config).items()}


def model_weights(config: Config) -> dict[str, ModelWeight]:
    """filter1, bias1, filter2, ... (ops without a bias or a filter skipped), in that order."""
    graph = graph_of_config(config)
    if config.dtype == "uint8":
        return _quantized_weights(config, graph)
    convs = [n for n in config_nodes(config, graph) if n.op_type in WEIGHTED]
    indices = conv_ops(config)
    if len(convs) != len(indices):
        raise config.problem("source.nodes", f"expected {len(indices)} Conv or Gemm nodes (one per conv2d op), got "
                                             f"{len(convs)}")
    out = {}
    for j, node in zip(indices, convs):
        op = config.ops[j - 1]
        if node.op_type == "BatchNormalization":
            out |= _batch_norm_weights(config, graph, node, j)
            continue
        w = graph.constants.get(node.input[1]) if len(node.input) > 1 else None
        want = filter_shape(config, j - 1)
        if node.op_type == "Conv" and w is not None and w.shape != want:  # outer taps that read padding alone
            w = _live_filter(graph, node, w)
        if node.op_type == "Gemm" and w is not None and w.ndim == 2:  # the classifier: a conv over its window
            w = gemm_filter(w, bool(_attributes(node).get("transB", 0)), want[2:])
        if w is None or w.shape != want:
            raise config.problem("source.nodes", f"Conv {node_id(node)!r} has weights of shape "
                                                 f"{None if w is None else list(w.shape)}; ops[{j - 1}] expects "
                                                 f"{list(want)}")
        out[f"filter{j}"] = ModelWeight(values=w.astype(np.float32), initializers=(node.input[1],))
        if op.bias:
            if len(node.input) < 3 or node.input[2] not in graph.constants:
                raise config.problem(f"ops[{j - 1}].conv2d.bias", f"Conv {node_id(node)!r} has no bias")
            bias = graph.constants[node.input[2]]
            if node.op_type == "Gemm" and bias.shape == (1, op.out_channels):  # C broadcast to [N, K]: one per output
                bias = bias.reshape(-1)
            if bias.shape != (op.out_channels,):
                raise config.problem("source.nodes", f"Conv {node_id(node)!r} has a bias of shape {list(bias.shape)}; "
                                                     f"ops[{j - 1}] expects [{op.out_channels}]")
            out[f"bias{j}"] = ModelWeight(values=bias.astype(np.float32), initializers=(node.input[2],))
    return out


def _live_filter(graph: Graph, node, w: np.ndarray) -> np.ndarray:
    """A float Conv's filter as its config's op takes it: the taps the import kept (live_taps.py)."""
    taps = kept_taps(graph, node)
    return w if taps is None else sliced(w, taps)


def kept_taps(graph: Graph, node) -> tuple[int, int, int, int] | None:
    """The model filter's rows and columns a float Conv node keeps (live_taps.py; None: all of them)."""
    conv = graph.conv(next(i for i, n in enumerate(graph.nodes) if n is node))
    return None if isinstance(conv, str) else conv.taps


def _batch_norm_weights(config: Config, graph: Graph, node, j: int) -> dict[str, ModelWeight]:
    """filter<j> and bias<j> of a BatchNormalization's 1x1 depthwise conv, each from its four statistics."""
    want = filter_shape(config, j - 1)
    if any(t not in graph.constants for t in node.input[1:5]) or graph.constants[node.input[1]].shape != want[:1]:
        raise config.problem("source.nodes", f"BatchNormalization {node_id(node)!r} has no constant statistics of "
                                             f"{want[0]} channels; ops[{j - 1}] expects a filter of {list(want)}")
    if not config.ops[j - 1].bias:
        raise config.problem(f"ops[{j - 1}].conv2d.bias", f"BatchNormalization {node_id(node)!r} adds a bias: the "
                                                          f"op needs `bias: true`")
    factor, shift = batch_norm_affine(graph, node)
    read = tuple(node.input[1:5])
    return {f"filter{j}": ModelWeight(values=factor, initializers=read),
            f"bias{j}": ModelWeight(values=shift, initializers=read)}


def conv_ops(config: Config) -> list[int]:
    """The 1-based indices of the config's conv2d ops (the ones with a filter<j>; pools have none)."""
    return [j for j, op in enumerate(config.ops, start=1) if not op.pool]


def filter_shape(config: Config, index: int) -> tuple[int, int, int, int]:
    """Op `index`'s filter as ONNX stores it: [out channels, input channels / groups, kh, kw]."""
    op = config.ops[index]
    channels = config.input_shape[3] if index == 0 else config.ops[index - 1].out_channels
    return (op.out_channels, channels // op.groups, *op.kernel)


def quantized_ops(config: Config, graph: Graph) -> list[QConv]:
    """The config's quantized ops (convs, pools, Gemms) as the importer read them, one per op, in order."""
    wanted = set(config.source.nodes)
    found = [q for i, n in enumerate(graph.nodes) if node_id(n) in wanted
             for q in (quantized_op(graph, i),) if isinstance(q, QConv)]
    if len(found) != len(config.ops):
        raise config.problem("source.nodes", f"expected {len(config.ops)} quantized ops (one per op), got {len(found)}")
    return found


def _quantized_weights(config: Config, graph: Graph) -> dict[str, ModelWeight]:
    """filter<j> (int8 or uint8 OIHW) and bias<j> (int32) of each quantized conv (QLinearConv, QDQ, a Gemm)."""
    out = {}
    for j, (q, op) in enumerate(zip(quantized_ops(config, graph), config.ops), start=1):
        if op.pool:
            continue
        if q.weights is None or q.weights.shape != filter_shape(config, j - 1):
            raise config.problem("source.nodes", f"{node_id(graph.nodes[q.start])!r} has weights of shape "
                                                 f"{None if q.weights is None else list(q.weights.shape)}; ops[{j - 1}] "
                                                 f"expects {list(filter_shape(config, j - 1))}")
        read = _constants_read(graph, q.members)
        out[f"filter{j}"] = ModelWeight(values=q.weights, initializers=tuple(
            n for n in read if graph.constants[n].dtype in (np.int8, np.uint8) and graph.constants[n].ndim >= 2))
        if op.bias and q.bias is not None:
            out[f"bias{j}"] = ModelWeight(values=q.bias.astype(np.int32), initializers=tuple(
                n for n in read if graph.constants[n].dtype == np.int32 and graph.constants[n].ndim == 1))
    return out


def _constants_read(graph: Graph, members: tuple[int, ...]) -> tuple[str, ...]:
    """The model's constants the nodes of a quantized op read, in node order (a QDQ weight's int8 initializer is
    read by its DequantizeLinear, one of the members)."""
    return tuple(dict.fromkeys(name for i in sorted(members) for name in graph.nodes[i].input
                               if name and name in graph.constants))
