"""The host Resize nodes of an imported network that kernelgen computes itself (network.yaml's `resize:` steps,
network/resize.py): a float32 NCHW image's rows and columns resized, linear or nearest, under a coordinate
transformation onnxruntime's CPU Resize shares with kernelgen, with static shapes. Segmentation heads end so
(torchvision's LRASPP and DeepLabV3 upsample their 28x28 logits to the 224x224 image). The nodes that only work out
the sizes (Shape, Slice, Concat of the shape, read by nothing else) join the step. A Resize between a
DequantizeLinear and a QuantizeLinear, a cubic one, or one with a region of interest stays with onnxruntime."""
from __future__ import annotations

import numpy as np

from ..network.resize import COORDINATES, MODES, ROUNDINGS
from .channel_moves import FLOAT32, ChannelMove
from .graph import Graph, _attributes


def resize_steps(graph: Graph, host: set[int], types: dict[str, int]) -> dict[tuple[int, ...], ChannelMove]:
    """The resize steps among the host nodes, by their nodes (the Resize and what works out its sizes)."""
    steps = {}
    for i in sorted(host):
        node = graph.nodes[i]
        key = resize_key(graph, i, types) if node.op_type == "Resize" else None
        if key is None:
            continue
        nodes = tuple(sorted({i, *_size_nodes(graph, i, host)}))
        steps[nodes] = ChannelMove("resize", nodes, key, inputs=(node.input[0],), output=node.output[0])
    return steps


def resize_key(graph: Graph, i: int, types: dict[str, int]) -> str | None:
    """The manifest's step line for Resize node i ("resize: {mode: linear, ...}"), None when kernelgen leaves it to
    onnxruntime."""
    node = graph.nodes[i]
    source, result = node.input[0], node.output[0]
    attributes = {k: v.decode() if isinstance(v, bytes) else v for k, v in _attributes(node).items()}
    mode = attributes.get("mode", "nearest")
    coordinates = attributes.get("coordinate_transformation_mode", "half_pixel")
    rounding = attributes.get("nearest_mode", "round_prefer_floor")
    in_shape, out_shape = graph.shapes.get(source), graph.shapes.get(result)
    producer = graph.producers.get(source)
    if (mode not in MODES or coordinates not in COORDINATES or rounding not in ROUNDINGS
            or attributes.get("antialias", 0) or "axes" in attributes
            or attributes.get("keep_aspect_ratio_policy", "stretch") != "stretch"
            or types.get(source) != FLOAT32 or types.get(result) != FLOAT32
            or (producer is not None and graph.nodes[producer].op_type == "DequantizeLinear")
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
