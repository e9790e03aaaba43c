"""Addresses of the opencl target's tensors as index expressions (from the layout engine,
TensorLayout.offsets, seed 004), simplified against the loop bounds; the guards those bounds
cannot prove (seed 000's halo guards, seed 003's tails). Pure.
"""
from __future__ import annotations

from functools import lru_cache

import kernelgen.expr as E
from ...layout import TensorLayout
from ..gpu.api import c_index as c_text  # noqa: F401 - the kernels' modules import it from here
from ..gpu.vectors import lanes_together as contiguous4  # noqa: F401 - likewise
from ..gpu.dispatch import GpuTensor

C4 = "c4"


def flat(layout: TensorLayout, index: dict[str, E.Expr], bounds: dict) -> E.Expr:
    """Row-major offset across every flattened group: the element index into a buffer."""
    return E.simplify(layout.flat_offset(index, bounds), bounds)


def address(s: GpuTensor, index: dict[str, E.Expr], bounds: dict) -> tuple[E.Expr, ...]:
    """(x, y) texel of an image, (element offset,) of a buffer."""
    return _address(s, tuple(sorted(index.items())), tuple(sorted(bounds.items())))


@lru_cache(maxsize=4096)  # the fp32 and fp16 kernels of a config ask for the same addresses
def _address(s: GpuTensor, index_items: tuple, bounds_items: tuple) -> tuple[E.Expr, ...]:
    index, bounds = dict(index_items), dict(bounds_items)
    if s.kind == "image":
        row, col = s.layout.offsets(index, bounds)
        return (E.simplify(E.floordiv(col, 4), bounds), E.simplify(row, bounds))
    return (flat(s.layout, index, bounds),)


def split(expr: E.Expr, var: str) -> tuple[E.Expr, E.Expr] | None:
    """expr = fixed + moving, moving depending on `var` alone; None when a term mixes both."""
    fixed, moving = [], []
    for term in expr.terms if isinstance(expr, E.Add) else (expr,):
        names = E.variables(term)
        if var in names and len(names) > 1:
            return None
        (moving if var in names else fixed).append(term)
    return E.add(*fixed, E.Const(0)), E.add(*moving, E.Const(0))


def conditions(checks: list[tuple[E.Expr, str, int]], bounds: dict) -> list[str]:
    """C comparisons the bounds cannot prove (as planner._cond)."""
    out = []
    for expr, op, limit in checks:
        lo, hi = E.interval(expr, bounds)
        if (op == ">=" and lo >= limit) or (op == "<" and hi < limit):
            continue
        out.append(f"{E.to_c(expr)} {op} {limit}")
    return out


def when(checks: list[tuple[E.Expr, str, int]], bounds: dict) -> str | bool:
    """True when the bounds prove every check, False when they refute one, else the C condition."""
    needed = conditions(checks, bounds)
    for expr, op, limit in checks:
        lo, hi = E.interval(expr, bounds)
        if (op == "<" and lo >= limit) or (op == ">=" and hi < limit):
            return False
    return " && ".join(needed) if needed else True
