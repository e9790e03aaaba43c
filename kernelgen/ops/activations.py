"""The clamps: none, relu ([0, inf]), relu6 ([0, 6]) and clamp [lo, hi]. A clamp is exact: it moves no value
further from the reference than it was, and uint8 applies it as TFLite does, a range of the output bytes."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar

from .activation import Activation
from .statements import Assign, Lit, Var, op

V = Var("v")


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity(Activation):
    """No activation: the stored value is the biased (and residual-added) sum."""

    KEY: ClassVar[str] = "none"

    def describe(self, literal: Callable[[float], str]) -> str:
        return "no activation"
    DOC: ClassVar[str] = "'none'"
    UINT8: ClassVar[str] = "range"


@dataclass(frozen=True, slots=True, kw_only=True)
class Clamp(Activation):
    """min(hi, max(lo, v)); a bound at infinity is no step at all."""

    lo: float = -math.inf
    hi: float = math.inf
    KEY: ClassVar[str] = "clamp"
    DOC: ClassVar[str] = "'relu', 'relu6', [lo, hi] (a clamp)"
    UINT8: ClassVar[str] = "range"

    def __post_init__(self) -> None:
        assert self.lo <= self.hi, self

    @property
    def name(self) -> str:
        return f"clamp to [{self.lo:g}, {self.hi:g}]"

    def describe(self, literal: Callable[[float], str]) -> str:
        return (f"clamp to [{literal(self.lo) if self.lo > -math.inf else '-inf'}, "
                f"{literal(self.hi) if self.hi < math.inf else 'inf'}]")

    @property
    def bounds(self) -> tuple[float, float]:
        return self.lo, self.hi

    def statements(self) -> tuple[Assign, ...]:
        return ((Assign("v", op("max", V, Lit(self.lo))),) if self.lo > -math.inf else ()) + (
            (Assign("v", op("min", V, Lit(self.hi))),) if self.hi < math.inf else ())

    @classmethod
    def from_onnx(cls, op_type: str, attributes: dict) -> str | dict | None:
        return "relu" if op_type == "Relu" else None


IDENTITY = Identity()
Identity.SPELLINGS = {"none": IDENTITY}
Clamp.SPELLINGS = {"relu": Clamp(lo=0.0), "relu6": Clamp(lo=0.0, hi=6.0)}
Clamp.ONNX = ("Relu",)  # Clip's bounds are constant inputs: onnx/graph.py reads them
