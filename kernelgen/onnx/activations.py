"""The activations a conv folds in, by ONNX op type: what each node means as kernelgen's `activation` (relu, relu6,
[lo, hi], hardswish, {hardsigmoid: {alpha, beta}}). A clamp (Relu, Clip) folds into a uint8 conv's store as well;
a gate (HardSwish, HardSigmoid, Sigmoid) into a uint8 conv only as DequantizeLinear -> gate -> QuantizeLinear (a
table of bytes: quant.with_gate). Every kind of kernelgen/ops brings its own ONNX form (its ONNX op types and
from_onnx): an activation added there is imported with no line here; only Clip, whose bounds are graph inputs, is
read here, and SiLU, which PyTorch exports as two nodes (a Sigmoid of the conv's result and a Mul of the result by
it; quantized, with a QuantizeLinear -> DequantizeLinear between: quant.with_silu)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import kernelgen.ops as ops
from .graph import Graph, _attributes

# The largest finite float32: a Clip with no upper (lower) bound clamps at +-this, which changes no value.
FLOAT32_MAX = 3.4028234663852886e38

Activation = str | list[float] | dict  # as a config's `activation` key holds it


def _clip(graph: Graph, node) -> Activation | None:
    attrs = _attributes(node)
    bounds = []
    for position, name, default in ((1, "min", -FLOAT32_MAX), (2, "max", FLOAT32_MAX)):
        if len(node.input) > position and node.input[position]:  # opset 11+: optional constant inputs
            value = graph.constants.get(node.input[position])
            if value is None or value.size != 1:
                return None
            bounds.append(float(value.reshape(-1)[0]))
        else:  # opset 6: attributes
            bounds.append(float(attrs.get(name, default)))
    if any(math.isnan(b) for b in bounds):
        return None
    lo, hi = max(bounds[0], -FLOAT32_MAX), min(bounds[1], FLOAT32_MAX)
    if (lo, hi) == (0.0, 6.0):
        return "relu6"
    if lo == 0.0 and hi == FLOAT32_MAX:
        return "relu"
    return [lo, hi]


@dataclass(frozen=True, slots=True)
class ActivationForm:
    convert: Callable[[Graph, object], Activation | None]  # the node's activation; None: not one a config holds
    gate: bool = False  # uint8: folded only between DequantizeLinear and QuantizeLinear (not a clamp of the bytes)
    float_only: bool = False  # never folded into a uint8 conv
    kind: str = "clamp"  # its kind (kernelgen/ops ACTIVATIONS key): what a target may not compute


def _of_kind(kind: type[ops.Activation]) -> ActivationForm:
    """An activation kind's own ONNX form (kernelgen/ops: Relu, the gates, LeakyRelu): its attributes are all it
    reads; uint8 folds it as a clamp of the bytes or, for a table kind, only between DequantizeLinear and
    QuantizeLinear."""
    return ActivationForm(lambda graph, node: kind.from_onnx(node.op_type, _attributes(node)),
                          gate=kind.UINT8 == "table", float_only=not kind.UINT8, kind=kind.KEY)


ACTIVATIONS: dict[str, ActivationForm] = {
    **{op_type: _of_kind(kind) for op_type, kind in ops.BY_ONNX.items()},
    "Clip": ActivationForm(_clip),  # its bounds may be constant inputs of the graph, not attributes
}


def activation(graph: Graph, index: int, gates: bool = True, kinds: frozenset[str] | None = None
               ) -> Activation | None:
    """The node at `index` as kernelgen's activation, or None when it is none a config can hold; with gates False
    only the clamps (what a uint8 conv's store folds in); `kinds`: the kinds the targets compute (None: all)."""
    node = graph.nodes[index]
    form = ACTIVATIONS.get(node.op_type)
    if form is None or (not gates and (form.gate or form.float_only)) or (kinds is not None and form.kind not in kinds):
        return None
    return form.convert(graph, node)


def silu(graph: Graph, tensor: str) -> tuple[int, int] | None:
    """(the Sigmoid, the Mul) when `tensor` is read by exactly a Sigmoid and a Mul of `tensor` by that Sigmoid's
    result, which nothing else reads: x * sigmoid(x), SiLU as PyTorch exports it. None otherwise."""
    readers = graph.consumers.get(tensor, ())
    if len(readers) != 2 or tensor in graph.outputs:
        return None
    sigmoid = next((r for r in readers if graph.nodes[r].op_type == "Sigmoid"), None)
    if sigmoid is None:
        return None
    gate = graph.nodes[sigmoid].output[0]
    mul = next(r for r in readers if r != sigmoid)
    if (graph.nodes[mul].op_type != "Mul" or sorted(graph.nodes[mul].input) != sorted([tensor, gate])
            or tuple(graph.consumers.get(gate, ())) != (mul,) or gate in graph.outputs):
        return None
    return sigmoid, mul


def is_gate(op_type: str) -> bool:
    """A gate activation: folded into a uint8 conv as DequantizeLinear -> gate -> QuantizeLinear."""
    form = ACTIVATIONS.get(op_type)
    return form is not None and form.gate and not form.float_only
