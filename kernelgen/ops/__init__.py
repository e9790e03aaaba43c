"""An op is one unit: each kind is one record registered in one table. The chain's ops (op.py says what a kind
holds): conv2d, the pools and the squeeze-excite mul, each a module and one line in OPS; the epilogue's
activations (activation.py), each a module and one line in activation_kinds.py's ACTIVATIONS."""
from __future__ import annotations

from .activation import FLOAT32_MAX, Activation
from .activation_kinds import ACTIVATIONS, BY_ONNX, NAMED, Parameters
from .activations import IDENTITY, Clamp, Identity
from .conv2d import Conv2dOp
from .hard_gates import HardSigmoid
from .leaky_relu import LeakyRelu
from .mul import MulOp
from .op import OpKind, Window
from .pools import AvgPoolOp, GlobalAvgPoolOp, MaxPoolOp

# Every op kind, by its config key: the one place the config's schema and check, the references and the planner's
# work count look a kind up (a chain op's `kind` is one of these keys).
OPS: dict[str, OpKind] = {
    "conv2d": Conv2dOp(),
    "maxpool": MaxPoolOp(),
    "avgpool": AvgPoolOp(),
    "global_avgpool": GlobalAvgPoolOp(),
    "mul": MulOp(),
}

__all__ = ["ACTIVATIONS", "BY_ONNX", "FLOAT32_MAX", "IDENTITY", "NAMED", "OPS", "Parameters", "Activation", "Clamp",
           "HardSigmoid", "Identity", "LeakyRelu", "OpKind", "Window"]
