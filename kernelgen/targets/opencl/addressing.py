"""Addresses of the opencl target's tensors as index expressions (from the layout engine,
TensorLayout.offsets, seed 004), simplified against the loop bounds; the guards those bounds
cannot prove (seed 000's halo guards, seed 003's tails). Pure.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

import kernelgen.expr as E
from ...layout import TensorLayout
from .model import Storage

C4 = "c4"


def flat(layout: TensorLayout, index: dict[str, E.Expr], bounds: dict) -> E.Expr:
    """Row-major offset across every flattened group: the element index into a buffer."""
    return E.simplify(layout.flat_offset(index, bounds), bounds)


def address(s: Storage, index: dict[str, E.Expr], bounds: dict) -> tuple[E.Expr, ...]:
    """(x, y) texel of an image, (element offset,) of a buffer."""
    return _address(s, tuple(sorted(index.items())), tuple(sorted(bounds.items())))


@lru_cache(maxsize=4096)  # the fp32 and fp16 kernels of a config ask for the same addresses
def _address(s: Storage, index_items: tuple, bounds_items: tuple) -> tuple[E.Expr, ...]:
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


EXHAUSTIVE_LIMIT = 1 << 20  # elements a non-separable layout is checked at, one by one


@lru_cache(maxsize=64)
def contiguous4(layout: TensorLayout, n: int = 4) -> bool:
    """Does every channel c sit (c % 4) elements after channel c - c % 4 of the same pixel, so that
    a group of 4 (or the partial last group) is one vload4/vstore4 or base + lane offsets?

    Every channel counts, the partial last group included: a tensor with 2 channels stored NCHW
    has no full group, and its lanes are still far apart. Exact when each term of the offset
    depends on one dim at most (only the channel terms matter); otherwise checked element by
    element up to EXHAUSTIVE_LIMIT elements, and answered False past it (lane by lane addressing
    is always correct, only slower). `n`: the same for groups of n channels (a float8/16 vload).
    """
    shape = layout.logical_shape
    bounds = {d: (0, e - 1) for d, e in zip("nhwc", shape)}
    offset = flat(layout, {d: E.Var(d) for d in "nhwc"}, bounds)
    terms = offset.terms if isinstance(offset, E.Add) else (offset,)
    if all(len(E.variables(t)) <= 1 for t in terms):
        channel = np.arange(shape[3])
        values = np.broadcast_to(np.asarray(E.evaluate(E.add(*(t for t in terms if "c" in E.variables(t)),
                                                                E.Const(0)), {"c": channel})), channel.shape)
        return bool(np.array_equal(values - channel % n, values[channel - channel % n]))
    if layout.logical_size > EXHAUSTIVE_LIMIT:
        return False
    grid = np.meshgrid(*(np.arange(e) for e in shape), indexing="ij")
    values = np.broadcast_to(np.asarray(E.evaluate(offset, dict(zip("nhwc", grid)))), grid[0].shape)
    channel = np.arange(shape[3])
    return bool(np.array_equal(values - channel % n, values[..., channel - channel % n]))


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


def c_text(expr: E.Expr) -> str:
    """C text of an expression, without one pair of outer parentheses."""
    text = E.to_c(expr)
    return text[1:-1] if text.startswith("(") and text.endswith(")") and text.count("(") == 1 else text


