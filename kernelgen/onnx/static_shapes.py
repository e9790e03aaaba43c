"""Shape arithmetic of a model with static shapes, computed once: a `Shape` of a tensor whose shape is known, and every
node after it that reads only constants (Gather, Add, Div, Mul, Concat, Unsqueeze, ... of those numbers), become
`Constant` nodes holding their values, so that ONNX shape inference sees the `Slice`, `Reshape` or `Split` sizes
they feed and the tensors after them get static shapes.

PyTorch exports `x.chunk(2, dim=1)` (ShuffleNetV2's split) as `Shape -> Gather -> Add -> Div -> Mul -> Slice`: without
this, shape inference leaves every tensor after the first split unknown, and no conv there can be imported. Each
folded node keeps its name and output, so host steps, `source.nodes` and onnxruntime's runs of the model agree (a
Constant computes what the node did for the model's one input shape). Values come from ONNX's reference evaluator,
node by node; a node it cannot evaluate stays as it was.
"""
from __future__ import annotations

from typing import Any

import numpy as np

MAX_FOLDED_ELEMENTS = 4096  # shape arithmetic is a handful of int64s; a large constant result is not this


def fold_static_shapes(model: Any, shapes: dict[str, tuple[int, ...]]) -> int:
    """Folds `model`'s shape arithmetic in place (`shapes`: static shapes by tensor, as inferred so far); the
    number of nodes made Constant (0: the model is unchanged)."""
    from onnx import helper, numpy_helper

    graph = model.graph
    known = stored_constants(graph)
    folded = 0
    derived: set[str] = set()  # tensors computed from a Shape: only their arithmetic is folded (not, say, a
    for index, node in enumerate(graph.node):  # quantized model's DequantizeLinear of its int8 weights)
        if node.op_type == "Constant" or len(node.output) != 1:
            continue
        if node.op_type != "Shape" and not derived & set(node.input):
            continue
        value = _value(node, known, shapes, model)
        if value is None:
            continue
        known[node.output[0]] = value
        derived.add(node.output[0])
        constant = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                    value=numpy_helper.from_array(value, node.output[0]))
        graph.node[index].CopyFrom(constant)
        folded += 1
    return folded


def stored_constants(graph: Any) -> dict[str, np.ndarray]:
    """The values a graph stores: its initializers and its Constant nodes' tensors, by name."""
    from onnx import numpy_helper

    known = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            value = next((a for a in node.attribute if a.name == "value"), None)
            if value is not None:
                known[node.output[0]] = numpy_helper.to_array(value.t)
    return known


def _value(node: Any, known: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], model: Any
           ) -> np.ndarray | None:
    if node.op_type == "Shape":
        shape = shapes.get(node.input[0])
        if shape is None or len(node.attribute):  # start/end attributes: left to the evaluator's rules below
            return None if shape is None else _evaluated(node, {node.input[0]: np.zeros(shape, np.float32)}, model)
        return np.array(shape, np.int64)
    inputs = [t for t in node.input if t]
    if not inputs or any(t not in known for t in inputs):
        return None
    if any(known[t].size > MAX_FOLDED_ELEMENTS for t in inputs):
        return None
    return _evaluated(node, {t: known[t] for t in inputs}, model)


def _evaluated(node: Any, feeds: dict[str, np.ndarray], model: Any) -> np.ndarray | None:
    from onnx.reference import ReferenceEvaluator

    try:
        (value,) = ReferenceEvaluator(node, opsets={d.domain: d.version for d in model.opset_import}).run(None, feeds)
    except Exception:  # an op the evaluator does not know, or a value it refuses: the node stays
        return None
    value = np.asarray(value)
    return value if value.size <= MAX_FOLDED_ELEMENTS and value.dtype != object else None
