"""An op is one unit: each kind is one record registered in one table. Today the epilogue's activations
(activation.py says what a kind holds); a new one is its own module and one line in ACTIVATIONS."""
from __future__ import annotations

from pydantic import Field, create_model

from .activation import FLOAT32_MAX, Activation, OneKind
from .activations import IDENTITY, Clamp, Identity
from .hard_gates import HardSigmoid
from .leaky_relu import LeakyRelu

# Every activation kind, by its config spelling: the one place the config schema, the importer and the uint8
# check look a kind up.
ACTIVATIONS: dict[str, type[Activation]] = {
    "none": Identity,
    "clamp": Clamp,
    "hardsigmoid": HardSigmoid,
    "leaky_relu": LeakyRelu,
}

# the plain spellings ("relu", "hardswish") and the record each means
NAMED: dict[str, Activation] = {name: record for kind in ACTIVATIONS.values()
                                for name, record in kind.SPELLINGS.items()}
# the {kind: {params}} forms as one schema: each parametrised kind an optional key
Parameters = create_model("ActivationParameters", __base__=OneKind, **{
    key: (kind.SPEC, Field(default=None, description=kind.SPEC_DOC))  # None when absent (OneKind checks)
    for key, kind in ACTIVATIONS.items() if kind.SPEC})
# ONNX op type -> the kind it folds into a conv as
BY_ONNX: dict[str, type[Activation]] = {t: kind for kind in ACTIVATIONS.values() for t in kind.ONNX}

__all__ = ["ACTIVATIONS", "BY_ONNX", "FLOAT32_MAX", "IDENTITY", "NAMED", "Parameters", "Activation", "Clamp",
           "HardSigmoid", "Identity", "LeakyRelu"]
