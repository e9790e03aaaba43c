"""ONNX's Sigmoid, g = 1 / (1 + exp(-v)), and SiLU (swish) v * g, which PyTorch exports as a Sigmoid and a Mul of
the conv's result by it (EfficientNet's and RegNetY's activation; their squeeze-excite gate is a Sigmoid alone).
Float only: a uint8 table of it would be exact only as far as onnxruntime's own logistic approximation agrees with
a correctly rounded one, so quantized networks keep it in onnxruntime."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .activation import Activation
from .statements import Assign, Lit, Var, op

V, G = Var("v"), Var("g")
# The exp the kernels call is their library's, not correctly rounded: within 3 + 2|x| ulps in Vulkan's precision
# rules (GLSL exp), 3 ulps in OpenCL's full profile, under 1 in glibc's expf. Its error reaches the gate scaled by
# 1 - g, and e^-|v| (3 + 2|v|) is at most 3, so with the add's and the divide's roundings (a divide within 2.5 ulps
# in Vulkan's rules) the gate is within this many units of roundoff of 1 / (1 + exp(-v)), with room to spare.
GATE_ROUNDOFFS = 8.0
# The largest slope of v * sigmoid(v) (at v ~ 2.40), rounded up; sigmoid's own is 1/4 (at 0).
SILU_SLOPE = 1.1


@dataclass(frozen=True, slots=True, kw_only=True)
class Sigmoid(Activation):
    """g = 1 / (1 + exp(-v)) (Sigmoid), and v * g when `times_value` (SiLU). Kernels compute them in float32 in this
    order: -v, its exp, + 1, 1 / that, and the product."""

    times_value: bool = False  # silu
    KEY: ClassVar[str] = "sigmoid"
    DOC: ClassVar[str] = "'sigmoid' (1 / (1 + exp(-x))), 'silu' (x * sigmoid(x), also called swish)"
    ONNX: ClassVar[tuple[str, ...]] = ("Sigmoid",)
    UINT8: ClassVar[str] = ""  # float only (the module's docstring)

    @property
    def name(self) -> str:
        return "silu" if self.times_value else "sigmoid"

    def statements(self) -> tuple[Assign, ...]:
        return (Assign("g", op("mul", V, Lit(-1.0)), declare=True), Assign("g", op("exp", G)),
                Assign("g", op("add", G, Lit(1.0))), Assign("g", op("div", Lit(1.0), G)),
                Assign("v", op("mul", V, G) if self.times_value else G))

    def lipschitz(self) -> float:
        return SILU_SLOPE if self.times_value else 0.25

    def own_error(self, size: np.ndarray, unit_roundoff: float, underflow: float) -> np.ndarray:
        """The gate within GATE_ROUNDOFFS units of roundoff (it is at most 1); silu's product: |v| times that, and
        one rounding of |v * g| <= |v|."""
        gate_error = GATE_ROUNDOFFS * unit_roundoff + underflow
        if not self.times_value:
            return np.full_like(np.asarray(size, dtype=np.float64), gate_error)
        return size * (gate_error + unit_roundoff) + underflow

    @classmethod
    def from_onnx(cls, op_type: str, attributes: dict) -> str | dict | None:
        return "sigmoid"


SIGMOID = Sigmoid()
SILU = Sigmoid(times_value=True)
Sigmoid.SPELLINGS = {"sigmoid": SIGMOID, "silu": SILU}
