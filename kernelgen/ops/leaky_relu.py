"""ONNX LeakyRelu: v where v > 0, alpha * v elsewhere (alpha 0.01 by default). uint8 applies it as a byte table
(alpha * v is not a clamp of bytes)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import Field

from .activation import Activation, Number, Params, Problem, float32_params
from .statements import Assign, Lit, Var, op

V, A = Var("v"), Var("a")


class LeakyReluModel(Params):
    alpha: Number = Field(default=0.01, description="a number: the slope below zero (ONNX's default 0.01)")


@dataclass(frozen=True, slots=True, kw_only=True)
class LeakyRelu(Activation):
    alpha: float = 0.01
    KEY: ClassVar[str] = "leaky_relu"
    DOC: ClassVar[str] = "'leaky_relu' or {leaky_relu: {alpha: a}} (x > 0 ? x : a * x, ONNX's default a 0.01)"
    SPEC: ClassVar[type] = LeakyReluModel
    SPEC_DOC: ClassVar[str] = "{alpha: ...}: x where x > 0, else alpha * x"
    ONNX: ClassVar[tuple[str, ...]] = ("LeakyRelu",)

    def statements(self) -> tuple[Assign, ...]:
        # the product is computed on every lane and selected where v <= 0: onnxruntime's float32 order
        return (Assign("a", op("mul", V, Lit(self.alpha)), declare=True),
                Assign("v", op("select_gt", V, Lit(0.0), V, A)))

    def lipschitz(self) -> float:
        return max(1.0, abs(self.alpha))

    def own_error(self, size: np.ndarray, unit_roundoff: float, underflow: float) -> np.ndarray:
        """One rounding of alpha * v (below zero)."""
        return unit_roundoff * abs(self.alpha) * size + underflow

    @classmethod
    def from_params(cls, problem: Problem, keys: tuple, params: LeakyReluModel) -> tuple[Activation, str]:
        alpha = float(params.alpha)
        float32_params(problem, (*keys, "alpha"), "alpha", alpha)
        return cls(alpha=alpha), f"leaky_relu[{alpha:g}]"

    @classmethod
    def from_onnx(cls, op_type: str, attributes: dict) -> str | dict | None:
        alpha = float(attributes.get("alpha", 0.01))
        return {"leaky_relu": {"alpha": alpha}} if math.isfinite(alpha) else None


LeakyRelu.SPELLINGS = {"leaky_relu": LeakyRelu()}
