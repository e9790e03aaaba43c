"""The activations a conv folds in, by ONNX op type: what each node means as kernelgen's `activation` (relu, relu6,
[lo, hi], hardswish, {hardsigmoid: {alpha, beta}}). A clamp (Relu, Clip) folds into a uint8 conv's store as well;
a gate (HardSwish, HardSigmoid) into a uint8 conv only as DequantizeLinear -> gate -> QuantizeLinear (a table of
bytes: quant.with_gate). Adding an activation's import is one entry in ACTIVATIONS and its function."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .graph import Graph, _attributes

# The largest finite float32: a Clip with no upper (lower) bound clamps at +-this, which changes no value.
FLOAT32_MAX = 3.4028234663852886e38

Activation = str | list[float] | dict  # as a config's `activation` key holds it


def _relu(graph: Graph, node) -> Activation | None:
    return "relu"


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


def _hardswish(graph: Graph, node) -> Activation | None:
    return "hardswish"


def _hardsigmoid(graph: Graph, node) -> Activation | None:
    attrs = _attributes(node)
    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        return None  # not a gate a config can hold: onnxruntime runs it (a host step)
    return {"hardsigmoid": {"alpha": alpha, "beta": beta}}


@dataclass(frozen=True, slots=True)
class ActivationForm:
    convert: Callable[[Graph, object], Activation | None]  # the node's activation; None: not one a config holds
    gate: bool = False  # uint8: folded only between DequantizeLinear and QuantizeLinear (not a clamp of the bytes)


ACTIVATIONS: dict[str, ActivationForm] = {
    "Relu": ActivationForm(_relu),
    "Clip": ActivationForm(_clip),
    "HardSwish": ActivationForm(_hardswish, gate=True),
    "HardSigmoid": ActivationForm(_hardsigmoid, gate=True),
}


def activation(graph: Graph, index: int, gates: bool = True) -> Activation | None:
    """The node at `index` as kernelgen's activation, or None when it is none a config can hold; with gates False
    only the clamps (what a uint8 conv's store folds in)."""
    node = graph.nodes[index]
    form = ACTIVATIONS.get(node.op_type)
    if form is None or (form.gate and not gates):
        return None
    return form.convert(graph, node)


def is_gate(op_type: str) -> bool:
    """A gate activation: folded into a uint8 conv as DequantizeLinear -> gate -> QuantizeLinear."""
    form = ACTIVATIONS.get(op_type)
    return form is not None and form.gate
