"""Integer index expressions: parse, simplify, bound, evaluate (numpy) and print as C.

The layout engine keeps every layout as an index map built from these expressions. All
variables are non-negative loop or tensor indices, so C's `/` and `%` equal floor
division and floor modulo wherever kernelgen prints them.

Simplification works on an affine normal form (constant + sum of coefficient * atom,
atoms being variables or irreducible floordiv/floormod terms) and knows the one rule
that turns TIR's `floordiv((ho*8 + hi), 8)` into `ho`: split the terms whose coefficient
is a multiple of the divisor from a remainder whose range fits inside [0, divisor).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Union

import numpy as np

Bounds = Mapping[str, tuple[int, int]]  # inclusive [lo, hi] per variable


@dataclass(frozen=True, slots=True)
class Var:
    name: str


@dataclass(frozen=True, slots=True)
class Const:
    value: int


@dataclass(frozen=True, slots=True)
class Add:
    terms: tuple["Expr", ...]


@dataclass(frozen=True, slots=True)
class Mul:
    expr: "Expr"
    factor: int


@dataclass(frozen=True, slots=True)
class FloorDiv:
    expr: "Expr"
    divisor: int


@dataclass(frozen=True, slots=True)
class FloorMod:
    expr: "Expr"
    divisor: int


Expr = Union[Var, Const, Add, Mul, FloorDiv, FloorMod]


class ExprSyntaxError(ValueError):
    """An index expression that does not parse; the message says where."""


MAX_CONSTANT = 2**31 - 1  # a constant in an index map is an extent or a stride of a 32-bit index
MAX_NESTING = 64  # parentheses and unary minus signs inside one another


# ---------------------------------------------------------------- parsing

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*%()]))")


def parse(text: str) -> Expr:
    """Parse `c // 4 + h * 2` style integer expressions (+, -, *, //, %, parentheses)."""
    tokens: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise ExprSyntaxError(f"unexpected {text[pos:].strip()[:1]!r} in {text.strip()!r}")
        tokens.append(match.group(match.lastindex or 0))
        pos = match.end()
    parser = _Parser(tokens, text.strip())
    expr = parser.sum()
    if parser.pos != len(tokens):
        raise ExprSyntaxError(f"unexpected {tokens[parser.pos]!r} in {text.strip()!r}")
    return expr


class _Parser:
    def __init__(self, tokens: list[str], text: str) -> None:
        self.tokens, self.text, self.pos, self.depth = tokens, text, 0, 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ExprSyntaxError(f"incomplete expression {self.text!r}")
        self.pos += 1
        return token

    def sum(self) -> Expr:
        expr = self.product()
        while self.peek() in ("+", "-"):
            sign = self.take()
            rhs = self.product()
            expr = add(expr, rhs if sign == "+" else mul(rhs, -1))
        return expr

    def product(self) -> Expr:
        expr = self.atom()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            rhs = self.atom()
            if op == "*":
                if isinstance(rhs, Const):
                    expr = mul(expr, rhs.value)
                elif isinstance(expr, Const):
                    expr = mul(rhs, expr.value)
                else:
                    raise ExprSyntaxError(f"only multiplication by a constant is affine, in {self.text!r}")
                continue
            if not isinstance(rhs, Const) or rhs.value <= 0:
                raise ExprSyntaxError(f"'{op}' needs a positive constant on its right, in {self.text!r}")
            expr = floordiv(expr, rhs.value) if op == "//" else floormod(expr, rhs.value)
        return expr

    def atom(self) -> Expr:
        token = self.take()
        if token in ("(", "-"):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise ExprSyntaxError(f"more than {MAX_NESTING} nested parentheses or signs in {self.text[:80]!r}")
        if token == "(":
            expr = self.sum()
            if self.take() != ")":
                raise ExprSyntaxError(f"missing ')' in {self.text!r}")
            self.depth -= 1
            return expr
        if token == "-":
            expr = mul(self.atom(), -1)
            self.depth -= 1
            return expr
        if token.isdigit():
            if len(token) > 10 or int(token) > MAX_CONSTANT:
                raise ExprSyntaxError(f"constant {token[:20]}{'...' if len(token) > 20 else ''} is larger than "
                                      f"{MAX_CONSTANT} in {self.text!r}")
            return Const(int(token))
        if token[0].isalpha() or token[0] == "_":
            return Var(token)
        raise ExprSyntaxError(f"unexpected {token!r} in {self.text!r}")


# ---------------------------------------------------------------- affine normal form

def _affine(expr: Expr) -> tuple[int, dict[Expr, int]]:
    """(constant, {atom: coefficient}) for any expression."""
    if isinstance(expr, Const):
        return expr.value, {}
    if isinstance(expr, Add):
        const, terms = 0, {}
        for term in expr.terms:
            c, t = _affine(term)
            const += c
            for atom, coef in t.items():
                terms[atom] = terms.get(atom, 0) + coef
        return const, {a: k for a, k in terms.items() if k != 0}
    if isinstance(expr, Mul):
        c, t = _affine(expr.expr)
        return c * expr.factor, {a: k * expr.factor for a, k in t.items() if k * expr.factor != 0}
    return 0, {expr: 1}


def _from_affine(const: int, terms: Mapping[Expr, int]) -> Expr:
    parts: list[Expr] = [atom if coef == 1 else Mul(atom, coef) for atom, coef in terms.items()]
    if const or not parts:
        parts.append(Const(const))
    return parts[0] if len(parts) == 1 else Add(tuple(parts))


def add(*exprs: Expr) -> Expr:
    const, terms = _affine(Add(tuple(exprs)))
    return _from_affine(const, _rejoin_divmod(terms))


def _rejoin_divmod(terms: dict[Expr, int]) -> dict[Expr, int]:
    """k*d*(x // d) + k*(x % d) is k*x: a channel padded to 4 (`c // 4, c % 4`) flattens back to c."""
    for atom, coef in list(terms.items()):
        if isinstance(atom, FloorDiv) and coef % atom.divisor == 0:
            rest = FloorMod(atom.expr, atom.divisor)
            if terms.get(rest) == coef // atom.divisor:
                c, inner = _affine(mul(atom.expr, coef // atom.divisor))
                merged = {a: k for a, k in terms.items() if a not in (atom, rest)}
                for a, k in inner.items():
                    merged[a] = merged.get(a, 0) + k
                if c == 0:
                    return _rejoin_divmod({a: k for a, k in merged.items() if k})
    return terms


def mul(expr: Expr, factor: int) -> Expr:
    const, terms = _affine(Mul(expr, factor))
    return _from_affine(const, terms)


def floordiv(expr: Expr, divisor: int, bounds: Bounds | None = None) -> Expr:
    return _divmod(expr, divisor, bounds or {})[0]


def floormod(expr: Expr, divisor: int, bounds: Bounds | None = None) -> Expr:
    return _divmod(expr, divisor, bounds or {})[1]


def _divmod(expr: Expr, divisor: int, bounds: Bounds) -> tuple[Expr, Expr]:
    if divisor == 1:
        return expr, Const(0)
    const, terms = _affine(expr)
    quotient = {a: k // divisor for a, k in terms.items() if k % divisor == 0}
    rest = {a: k for a, k in terms.items() if k % divisor != 0}
    q_const, r_const = divmod(const, divisor)
    remainder = _from_affine(r_const, rest)
    try:
        lo, hi = interval(remainder, bounds)
    except KeyError:  # an unbounded variable: nothing can be proven
        lo, hi = -1, divisor
    if 0 <= lo and hi < divisor:
        return _from_affine(q_const, quotient), remainder
    blocked = _divmod_common_factor(const, terms, divisor, bounds)
    if blocked is not None:
        return blocked
    if lo >= 0 and (quotient or q_const):
        # floor((d*A + B) / d) = A + floor(B / d) for integer A; B >= 0 keeps C's `/` a floor division.
        return add(_from_affine(q_const, quotient), FloorDiv(remainder, divisor)), FloorMod(remainder, divisor)
    # The remainder may cross a multiple of the divisor: keep the operation whole.
    return FloorDiv(expr, divisor), FloorMod(expr, divisor)


def _divmod_common_factor(const: int, terms: Mapping[Expr, int], divisor: int,
                          bounds: Bounds) -> tuple[Expr, Expr] | None:
    """(g*A + B) // d and % d with g dividing d and 0 <= B < g: A // (d/g) and g * (A % (d/g)) + B. The vec4
    chunk 4*q + r of a channel blocked by 32 (nhwc-8h8w32c) is then chunk q % 8 of its block, lane r, which
    keeps 4 channels one aligned vec4 (vulkan's vec_ok) and the index free of a division per lane."""
    for g in sorted({math.gcd(k, divisor) for k in terms.values()} - {1, divisor}, reverse=True):
        big = {a: k // g for a, k in terms.items() if k % g == 0}
        small = {a: k for a, k in terms.items() if k % g != 0}
        if not big:
            continue
        part = _from_affine(const % g, small)
        whole = _from_affine(const // g, big)
        try:
            lo, hi = interval(part, bounds)
            whole_lo, _ = interval(whole, bounds)
        except KeyError:
            return None
        if 0 <= lo and hi < g and whole_lo >= 0:
            div, mod = _divmod(whole, divisor // g, bounds)
            return div, add(mul(mod, g), part)
    return None


def simplify(expr: Expr, bounds: Bounds | None = None) -> Expr:
    """Rebuild bottom-up so every floordiv/floormod gets the splitting rule."""
    bounds = bounds or {}
    if isinstance(expr, (Var, Const)):
        return expr
    if isinstance(expr, Add):
        return add(*(simplify(t, bounds) for t in expr.terms))
    if isinstance(expr, Mul):
        return mul(simplify(expr.expr, bounds), expr.factor)
    inner = simplify(expr.expr, bounds)
    div, mod = _divmod(inner, expr.divisor, bounds)
    return div if isinstance(expr, FloorDiv) else mod


def substitute(expr: Expr, values: Mapping[str, Expr]) -> Expr:
    if isinstance(expr, Var):
        return values.get(expr.name, expr)
    if isinstance(expr, Const):
        return expr
    if isinstance(expr, Add):
        return Add(tuple(substitute(t, values) for t in expr.terms))
    if isinstance(expr, Mul):
        return Mul(substitute(expr.expr, values), expr.factor)
    return type(expr)(substitute(expr.expr, values), expr.divisor)


def variables(expr: Expr) -> set[str]:
    if isinstance(expr, Var):
        return {expr.name}
    if isinstance(expr, Const):
        return set()
    if isinstance(expr, Add):
        return set().union(*(variables(t) for t in expr.terms))
    return variables(expr.expr)


# ---------------------------------------------------------------- bounds and evaluation

def interval(expr: Expr, bounds: Bounds) -> tuple[int, int]:
    """Inclusive [lo, hi] of the expression over the variables' bounds (sound, maybe loose)."""
    if isinstance(expr, Const):
        return expr.value, expr.value
    if isinstance(expr, Var):
        if expr.name not in bounds:
            raise KeyError(expr.name)
        return bounds[expr.name]
    if isinstance(expr, Add):
        lo = hi = 0
        for term in expr.terms:
            a, b = interval(term, bounds)
            lo, hi = lo + a, hi + b
        return lo, hi
    if isinstance(expr, Mul):
        a, b = interval(expr.expr, bounds)
        return (a * expr.factor, b * expr.factor) if expr.factor >= 0 else (b * expr.factor, a * expr.factor)
    a, b = interval(expr.expr, bounds)
    if isinstance(expr, FloorDiv):
        return a // expr.divisor, b // expr.divisor
    # A modulo of a non-negative index is a position inside a block: the block has
    # `divisor` slots even when the tensor fills fewer of them (minimal padding, seed 003).
    return 0, expr.divisor - 1


def evaluate(expr: Expr, values: Mapping[str, np.ndarray | int]) -> np.ndarray | int:
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        return values[expr.name]
    if isinstance(expr, Add):
        total: np.ndarray | int = 0
        for term in expr.terms:
            total = total + evaluate(term, values)
        return total
    if isinstance(expr, Mul):
        return evaluate(expr.expr, values) * expr.factor
    inner = evaluate(expr.expr, values)
    return inner // expr.divisor if isinstance(expr, FloorDiv) else inner % expr.divisor


# ---------------------------------------------------------------- printing

def to_c(expr: Expr, shifts: bool = False) -> str:
    """C source text in TIR's fully parenthesised style: ((wo*8192)+(co*2048)+ci). With `shifts`, a division or
    modulo by a power of two prints as `>>` / `&`: the floor the expression means, also below zero, and one
    instruction where a GPU compiler (Mali's Valhall) expands a signed `/ 8` into five."""
    if isinstance(expr, Const):
        return str(expr.value) if expr.value >= 0 else f"({expr.value})"
    if isinstance(expr, Var):
        return expr.name
    if isinstance(expr, Mul):
        return f"({to_c(expr.expr, shifts)}*{expr.factor})"
    if isinstance(expr, (FloorDiv, FloorMod)):
        inner, d = to_c(expr.expr, shifts), expr.divisor
        if shifts and d & (d - 1) == 0:
            return f"({inner}>>{d.bit_length() - 1})" if isinstance(expr, FloorDiv) else f"({inner}&{d - 1})"
        return f"({inner}/{d})" if isinstance(expr, FloorDiv) else f"({inner}%{d})"
    return "(" + "+".join(to_c(t, shifts) for t in expr.terms) + ")"


def to_text(expr: Expr) -> str:
    """Human notation used in index maps and reports: `c // 4`, `h * 8 + hi`."""
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, Var):
        return expr.name
    if isinstance(expr, Mul):
        return f"{_wrap(expr.expr)} * {expr.factor}"
    if isinstance(expr, FloorDiv):
        return f"{_wrap(expr.expr)} // {expr.divisor}"
    if isinstance(expr, FloorMod):
        return f"{_wrap(expr.expr)} % {expr.divisor}"
    return " + ".join(to_text(t) for t in expr.terms).replace("+ -", "- ")


def _wrap(expr: Expr) -> str:
    return f"({to_text(expr)})" if isinstance(expr, Add) else to_text(expr)
