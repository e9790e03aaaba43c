"""How a language spells an epilogue's statements (statements.py: + bias, + residual, the activation): one small
record per dialect, which the one shared macro (templates/_common/epilogue.j2) reads. A dialect is data: its
literal, its type for a temporary, and a format per operation kind over the operands' text ({0}, {1}, ...)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from .statements import ARITY, BASE_KINDS


@dataclass(frozen=True, slots=True, kw_only=True)
class Dialect:
    literal: Callable[[float], str]  # a float literal (or the name of a constant holding it)
    decl: str  # the type a temporary is declared with: float, float4, vec4, HVX_Vector
    forms: dict[str, str] = field(default_factory=dict)  # operation kind -> its spelling

    def __post_init__(self) -> None:
        assert BASE_KINDS <= set(self.forms) <= set(ARITY), sorted(set(ARITY) ^ set(self.forms))

    def with_type(self, decl: str, literal: Callable[[float], str] | None = None) -> "Dialect":
        """The same spelling over another vector type (an OpenCL kernel's float4, GLSL's f16vec4)."""
        return replace(self, decl=decl, literal=literal or self.literal)


def c_float(value: float) -> str:
    """A C float literal that round-trips (repr keeps every digit): 0.1 -> 0.1f, 6 -> 6.0f."""
    text = repr(float(value))
    return f"{text}f" if "e" in text or "." in text else f"{text}.0f"


# C and OpenCL C: operators, and min/max as selects (gcc vectorizes a select; fmin/fmax are calls); OpenCL
# replaces min/max by its builtins (opencl/code.py).
C = Dialect(literal=c_float, decl="float", forms={
    "mul": "{0} * {1}", "add": "{0} + {1}", "muladd": "{0} * {1} + {2}",
    "max": "{0} > {1} ? {0} : {1}", "min": "{0} < {1} ? {0} : {1}", "select_gt": "{0} > {1} ? {2} : {3}",
    "exp": "kg_expf({0})", "div": "{0} / {1}",  # kg_expf: templates/c/expf.h.j2
})
