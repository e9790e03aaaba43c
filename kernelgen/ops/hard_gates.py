"""ONNX's piecewise-linear gates: HardSigmoid g = min(1, max(0, alpha * v + beta)) and HardSwish v * g (alpha 1/6,
beta 1/2, fixed by the operator). uint8 applies them as a byte table (the gate bends inside the byte range)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import Field

from .activation import Activation, Number, Params, Problem, float32_params
from .statements import Assign, Lit, Var, op

V, G = Var("v"), Var("g")


class HardSigmoidModel(Params):
    alpha: Number = Field(default=0.2, description="a number: the slope (ONNX's default 0.2; PyTorch's "
                                                   "Hardsigmoid exports 1/6)")
    beta: Number = Field(default=0.5, description="a number: the offset (default 0.5)")


@dataclass(frozen=True, slots=True, kw_only=True)
class HardSigmoid(Activation):
    """g = min(1, max(0, alpha * v + beta)) (HardSigmoid), and v * g when `times_value` (HardSwish). Kernels
    compute them in float32 in this order, the gate rounded to float32 before its clamp."""

    alpha: float
    beta: float
    times_value: bool = False  # hardswish
    KEY: ClassVar[str] = "hardsigmoid"
    DOC: ClassVar[str] = ("'hardswish' (x * min(1, max(0, x / 6 + 1 / 2))), 'hardsigmoid' or {hardsigmoid: {alpha: a, "
                          "beta: b}} (min(1, max(0, a * x + b)), ONNX's defaults a 0.2, b 0.5)")
    SPEC: ClassVar[type] = HardSigmoidModel
    SPEC_DOC: ClassVar[str] = "{alpha: ..., beta: ...}: min(1, max(0, alpha * x + beta))"
    ONNX: ClassVar[tuple[str, ...]] = ("HardSigmoid", "HardSwish")

    @property
    def name(self) -> str:
        return "hardswish" if self.times_value else "hardsigmoid"

    def statements(self) -> tuple[Assign, ...]:
        return (Assign("g", op("muladd", V, Lit(self.alpha), Lit(self.beta)), declare=True),
                Assign("g", op("max", G, Lit(0.0))), Assign("g", op("min", G, Lit(1.0))),
                Assign("v", op("mul", V, G) if self.times_value else G))

    def lipschitz(self) -> float:
        """hardsigmoid: |alpha|; hardswish: g + v * alpha inside the linear part, at most |alpha| * |v| + 1 with
        |alpha * v + beta| <= 1."""
        if not self.times_value:
            return abs(self.alpha)
        if self.alpha == 0:
            return min(1.0, max(0.0, self.beta))
        reach = (abs(self.beta) + 1) / abs(self.alpha)  # the largest |v| in the linear part
        return 1.0 + abs(self.alpha) * reach

    def own_error(self, size: np.ndarray, unit_roundoff: float, underflow: float) -> np.ndarray:
        """alpha * v + beta: two roundings of |alpha v| + |beta| (the gate then within 1); for hardswish the
        product v * g: one rounding of |v|, plus |v| times the gate's error."""
        gate_error = 2 * unit_roundoff * (abs(self.alpha) * size + abs(self.beta)) + 2 * underflow
        return (size * (gate_error + unit_roundoff) + underflow) if self.times_value else gate_error

    @classmethod
    def from_params(cls, problem: Problem, keys: tuple, params: HardSigmoidModel) -> tuple[Activation, str]:
        alpha, beta = float(params.alpha), float(params.beta)
        float32_params(problem, keys, "alpha and beta", alpha, beta)
        return cls(alpha=alpha, beta=beta), f"hardsigmoid[{alpha:g}, {beta:g}]"

    @classmethod
    def from_onnx(cls, op_type: str, attributes: dict) -> str | dict | None:
        if op_type == "HardSwish":
            return "hardswish"
        alpha, beta = float(attributes.get("alpha", 0.2)), float(attributes.get("beta", 0.5))
        if not (math.isfinite(alpha) and math.isfinite(beta)):
            return None  # not a gate a config can hold: onnxruntime runs it (a host step)
        return {"hardsigmoid": {"alpha": alpha, "beta": beta}}


# ONNX HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 1/2 (fixed by the operator); HardSigmoid's defaults.
HARDSWISH = HardSigmoid(alpha=1 / 6, beta=0.5, times_value=True)
HARDSIGMOID = HardSigmoid(alpha=0.2, beta=0.5)
HardSigmoid.SPELLINGS = {"hardswish": HARDSWISH, "hardsigmoid": HARDSIGMOID}
