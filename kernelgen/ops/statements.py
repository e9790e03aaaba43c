"""An epilogue's arithmetic as data (+ bias, + residual, the activation): short three-address statements over
names, literals and loads, which every dialect spells (templates/_common/epilogue.j2) and numpy evaluates (the
float reference in float64, the uint8 byte table in float32): one description, so the kernels, the reference and
the table cannot drift apart."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping, Union

import numpy as np


@dataclass(frozen=True, slots=True)
class Lit:
    """A float literal; kernels hold it rounded to float32 (0.1 -> 0.100000001...), and so does numpy here."""

    value: float
    kind: ClassVar[str] = "lit"


@dataclass(frozen=True, slots=True)
class Var:
    """`v`: the value the epilogue works on (the dialect's accumulator); any other name a temporary."""

    name: str
    kind: ClassVar[str] = "var"


@dataclass(frozen=True, slots=True)
class Load:
    """A value read from memory at the output position (`bias`: the output channel's, `residual`: the tensor the
    config names): the target spells it, as its read or the name of a value it loaded before."""

    name: str
    kind: ClassVar[str] = "load"


Leaf = Union[Lit, Var, Load]

# operation kind -> operand count; a dialect spells each as a format of its operands ({0}, {1}, ...)
ARITY = {"mul": 2, "add": 2, "muladd": 3, "max": 2, "min": 2, "select_gt": 4, "exp": 1, "div": 2}
# what every dialect spells; the others (exp, div) only where the target computes a kind that uses them
# (Target info's activations: HVX qf32 has neither an exp nor a divide)
BASE_KINDS = frozenset({"mul", "add", "muladd", "max", "min", "select_gt"})


@dataclass(frozen=True, slots=True)
class Op:
    """One operation on leaves: mul a*b, add a+b, muladd a*b+c (two roundings, never fused), max, min, select_gt
    (a > b ? x : y), exp e^a (the target's library exp: not correctly rounded), div a/b. Operands are leaves only,
    so no dialect needs parentheses or precedence."""

    kind: str
    args: tuple[Leaf, ...]

    def __post_init__(self) -> None:
        assert ARITY.get(self.kind) == len(self.args), self
        assert all(isinstance(a, (Lit, Var, Load)) for a in self.args), self


@dataclass(frozen=True, slots=True)
class Assign:
    """target = value; `declare`: the target is a new temporary of the value's type (a dialect declares it)."""

    target: str
    value: Union[Op, Leaf]
    declare: bool = False


def op(kind: str, *args: Leaf) -> Op:
    return Op(kind, args)


# the adds onto the conv's sum, before the activation (ResNet's and MobileNetV2's order)
BIAS = Assign("v", op("add", Var("v"), Load("bias")))
RESIDUAL = Assign("v", op("add", Var("v"), Load("residual")))


def uses(statements: tuple[Assign, ...], kind: str) -> bool:
    """Whether any statement is an operation of `kind` (what a dialect may spell as a helper it must declare)."""
    return any(isinstance(s.value, Op) and s.value.kind == kind for s in statements)


def loaded(statement: Assign) -> tuple[str, ...]:
    """The load leaves a statement reads, by name: what its target must spell for it."""
    value = statement.value
    return tuple(leaf.name for leaf in (value.args if isinstance(value, Op) else (value,)) if isinstance(leaf, Load))


def literals(statements: tuple[Assign, ...]) -> tuple[float, ...]:
    """Every literal the statements use, once each in order of use: what a dialect that hoists constants
    (hvx's splatted vectors) declares before its loops."""
    found: dict[float, None] = {}
    for s in statements:
        for leaf in s.value.args if isinstance(s.value, Op) else (s.value,):
            if isinstance(leaf, Lit):
                found.setdefault(leaf.value)
    return tuple(found)


def evaluate(statements: tuple[Assign, ...], value: np.ndarray, dtype: type = np.float64,
             loads: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """The statements on `value` (bound to `v`) in `dtype`, each operation rounded to it as a kernel rounds it:
    float64 for the reference (the literals still float32, as the kernels hold them), float32 for a byte table as
    onnxruntime computes one. `loads`: what each load leaf reads (bias, residual), broadcast against `value`."""
    names = {"v": np.asarray(value).astype(dtype)}
    read = {name: np.asarray(array).astype(dtype) for name, array in (loads or {}).items()}
    with np.errstate(all="ignore"):
        for s in statements:
            names[s.target] = _value(s.value, names, read, dtype)
    return names["v"]


def _value(node: Union[Op, Leaf], names: dict, read: dict, dtype: type) -> np.ndarray:
    if isinstance(node, Lit):
        return dtype(np.float32(node.value))
    if isinstance(node, Var):
        return names[node.name]
    if isinstance(node, Load):
        return read[node.name]
    a = [_value(arg, names, read, dtype) for arg in node.args]
    if node.kind == "mul":
        return (a[0] * a[1]).astype(dtype)
    if node.kind == "add":
        return (a[0] + a[1]).astype(dtype)
    if node.kind == "muladd":
        return ((a[0] * a[1]).astype(dtype) + a[2]).astype(dtype)
    if node.kind == "max":
        return np.maximum(a[0], a[1]).astype(dtype)
    if node.kind == "min":
        return np.minimum(a[0], a[1]).astype(dtype)
    if node.kind == "exp":
        return np.exp(a[0]).astype(dtype)
    if node.kind == "div":
        return (a[0] / a[1]).astype(dtype)
    return np.where(a[0] > a[1], a[2], a[3]).astype(dtype)  # select_gt
