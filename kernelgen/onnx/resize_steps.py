"""The host Resize nodes of an imported network that kernelgen computes itself (network.yaml's `resize:` steps,
network/resize.py): a float32 NCHW image's rows and columns resized, linear or nearest, under a coordinate
transformation onnxruntime's CPU Resize shares with kernelgen, with static shapes. Segmentation heads end so
(torchvision's LRASPP and DeepLabV3 upsample their 28x28 logits to the 224x224 image). The nodes that only work out
the sizes (Shape, Slice, Concat of the shape, read by nothing else) join the step. In a quantized model the Resize
sits between a DequantizeLinear and a QuantizeLinear (onnxruntime keeps the three nodes and runs the float resize):
both join the step, which then reads and writes uint8 tensors. A cubic resize, one with a region of interest, or a
dequantized one not so wrapped stays with onnxruntime."""
from __future__ import annotations

import numpy as np

from ..network.resize import COORDINATES, MODES, ROUNDINGS
from .channel_moves import FLOAT32, UINT8, ChannelMove, qdq_parameters
from .graph import Graph, _attributes


def resize_steps(graph: Graph, host: set[int], types: dict[str, int]) -> dict[tuple[int, ...], ChannelMove]:
    """The resize steps among the host nodes, by their nodes (the Resize and what works out its sizes; a quantized
    one's DequantizeLinear and QuantizeLinear too)."""
    steps = {}
    for i in sorted(host):
        node = graph.nodes[i]
        key = resize_key(graph, i, types) if node.op_type == "Resize" else None
        if key is None:
            continue
        sizes = _size_nodes(graph, i, host)
        nodes = {i, *sizes}
        source, result = node.input[0], node.output[0]
        wrapped = _qdq_around(graph, i, host, types, sizes)
        if wrapped is not None:  # uint8 bytes in and out: dequantized, resized, quantized (network/resize.py)
            before, after = wrapped
            nodes |= {before, after}
            source, result = graph.nodes[before].input[0], graph.nodes[after].output[0]
        elif graph.producers.get(source) is not None and \
                graph.nodes[graph.producers[source]].op_type == "DequantizeLinear":
            continue  # a quantized model's float resize whose bytes kernelgen cannot take: onnxruntime runs it
        steps[tuple(sorted(nodes))] = ChannelMove("resize", tuple(sorted(nodes)), key, inputs=(source,),
                                                  output=result)
    return steps


def _qdq_around(graph: Graph, i: int, host: set[int], types: dict[str, int], sizes: set[int]
                ) -> tuple[int, int] | None:
    """(the DequantizeLinear before Resize i, the QuantizeLinear after it), each a uint8 tensor's at one constant
    scale and zero point and read by nothing else (but the Shape working out the sizes: `sizes`); None when the
    Resize is not so wrapped."""
    node = graph.nodes[i]
    before, after = graph.producers.get(node.input[0]), graph.sole_consumer(node.output[0])
    if before is None or after is None or before not in host or after not in host:
        return None
    dq, q = graph.nodes[before], graph.nodes[after]
    if dq.op_type != "DequantizeLinear" or q.op_type != "QuantizeLinear" or q.input[0] != node.output[0]:
        return None
    if qdq_parameters(graph, dq) is None or qdq_parameters(graph, q) is None:
        return None
    if types.get(dq.input[0]) != UINT8 or types.get(q.output[0]) != UINT8 or node.output[0] in graph.outputs:
        return None
    if not set(graph.consumers.get(dq.output[0], ())) <= {i} | sizes or dq.output[0] in graph.outputs:
        return None
    return before, after


def resize_key(graph: Graph, i: int, types: dict[str, int]) -> str | None:
    """The manifest's step line for Resize node i ("resize: {mode: linear, ...}"), None when kernelgen leaves it to
    onnxruntime."""
    node = graph.nodes[i]
    source, result = node.input[0], node.output[0]
    attributes = {k: v.decode() if isinstance(v, bytes) else v for k, v in _attributes(node).items()}
    mode = attributes.get("mode", "nearest")
    coordinates = attributes.get("coordinate_transformation_mode", "half_pixel")
    rounding = attributes.get("nearest_mode", "round_prefer_floor")
    in_shape, out_shape = graph.shapes.get(source), shape_after(graph, result)
    if (mode not in MODES or coordinates not in COORDINATES or rounding not in ROUNDINGS
            or attributes.get("antialias", 0) or "axes" in attributes
            or attributes.get("keep_aspect_ratio_policy", "stretch") != "stretch"
            or types.get(source) != FLOAT32 or types.get(result, FLOAT32) != FLOAT32
            or in_shape is None or out_shape is None or len(in_shape) != 4 or len(out_shape) != 4
            or in_shape[:2] != out_shape[:2] or min(out_shape) < 1):
        return None
    scales = _scales(graph, node, in_shape, out_shape)
    if scales is None:
        return None
    keys = [f"mode: {mode}", f"coordinates: {coordinates}"]
    keys += [f"rounding: {rounding}"] if mode == "nearest" else []
    keys += [f"scales: [{scales[0]!r}, {scales[1]!r}]"]
    return f"resize: {{{', '.join(keys)}}}"


def shape_after(graph: Graph, tensor: str) -> tuple[int, ...] | None:
    """A Resize output's static shape: its own, or where sizes computed at run time left it unknown, that of the
    QuantizeLinear -> DequantizeLinear after it (a quantized model's network output, whose shape the model states)."""
    while graph.shapes.get(tensor) is None:
        reader = graph.sole_consumer(tensor)
        if reader is None or graph.nodes[reader].op_type not in ("QuantizeLinear", "DequantizeLinear"):
            return None
        tensor = graph.nodes[reader].output[0]
    return graph.shapes[tensor]


def _scales(graph: Graph, node, in_shape: tuple[int, ...], out_shape: tuple[int, ...]
            ) -> tuple[float, float] | None:
    """What the coordinate transformation divides by, as onnxruntime takes it: the model's constant scales (batch
    and channels 1), or given sizes, each output size over its input size in float32."""
    given = graph.constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if given is not None and given.size:
        values = [float(np.float32(v)) for v in np.asarray(given).reshape(-1)]
        if len(values) != 4 or values[:2] != [1.0, 1.0] or min(values) <= 0:
            return None
        return values[2], values[3]
    if len(node.input) < 4 or not node.input[3]:
        return None
    return tuple(float(np.float32(out_shape[a]) / np.float32(in_shape[a])) for a in (2, 3))


def _size_nodes(graph: Graph, i: int, host: set[int]) -> set[int]:
    """The host nodes that work out Resize i's roi, scales and sizes and feed nothing else (Shape -> Slice ->
    Concat): the step runs them (their values are static)."""
    taken: set[int] = set()
    stack = [graph.producers.get(t) for t in graph.nodes[i].input[1:] if t]
    while stack:
        j = stack.pop()
        if j is None or j not in host or j in taken:
            continue
        readers = {r for t in graph.nodes[j].output for r in graph.consumers.get(t, ())}
        if not readers <= taken | {i} or any(t in graph.outputs for t in graph.nodes[j].output):
            continue
        taken.add(j)
        stack += [graph.producers.get(t) for t in graph.nodes[j].input if t]
    return taken
