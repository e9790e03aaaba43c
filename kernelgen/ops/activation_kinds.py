"""Every activation kind, by its config spelling (activation.py says what a kind holds): a new one is its own module
and one line in ACTIVATIONS. The tables the config's schema, the importer and the uint8 check read are made from it,
as is the schema of a conv's `activation` key (ActivationSpec)."""
from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, conlist, create_model

from .activation import Activation, Number, OneKind
from .activations import Clamp, Identity
from .hard_gates import HardSigmoid
from .leaky_relu import LeakyRelu
from .sigmoid import Sigmoid

ACTIVATIONS: dict[str, type[Activation]] = {
    "none": Identity,
    "clamp": Clamp,
    "hardsigmoid": HardSigmoid,
    "leaky_relu": LeakyRelu,
    "sigmoid": Sigmoid,
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

# A conv's `activation`: each plain name, a clamp [lo, hi], or a parametrised kind's {kind: {...}} block.
ActivationSpec = Union[Literal[tuple(NAMED)], conlist(Number, min_length=2, max_length=2), Parameters]
ACTIVATION_DOC = ", ".join(kind.DOC for kind in ACTIVATIONS.values())
