"""Is one dimension's slice of an index map injective over [0, extent)? In time and memory
that do not grow with the extent.

A slice is the tuple of the map's outputs that read one logical dim x (`c // 4, c % 4` for
c). Every output is quasi-affine in x: built from x, constants, +, * by constants, // and %
by constants. With P the lcm over its // and % nodes of (divisor x the divisors nested in
its operand), shifting x by P shifts every output by a constant: f(x + P) = f(x) + sigma.
So f on [0, extent) is f on one period [0, P) plus multiples of sigma, and two points
x0 + k P and y0 + l P collide exactly when f(x0) - f(y0) = (l - k) sigma. Values that
differ by a multiple of sigma share a representative r = f - q sigma (q = f_i // sigma_i
for a component i with sigma_i != 0), so only points of one period with equal
representatives can collide, and whether they do depends only on how many periods fit.
"""
from __future__ import annotations

import math

import numpy as np

import kernelgen.expr as E

# Extents up to this are checked point by point; the period argument serves larger ones.
POINTWISE_LIMIT = 1 << 20
# A period this long (a divisor near 2^20 or beyond) is not checked at all: such a layout
# describes no real packing, and the check would cost as much as the extent.
PERIOD_LIMIT = 1 << 20


class TooLargeToCheck(ValueError):
    """The slice's period is beyond PERIOD_LIMIT: injectivity cannot be decided cheaply."""


def period(outputs: tuple[E.Expr, ...], dim: str) -> int:
    """P such that every output shifts by a constant when `dim` grows by P."""
    result = 1
    for out in outputs:
        result = math.lcm(result, _node_period(out, dim))
        if result > PERIOD_LIMIT:
            raise TooLargeToCheck(f"the index map's divisors make a period of {result} along {dim!r}")
    return result


def _node_period(expr: E.Expr, dim: str) -> int:
    if isinstance(expr, (E.Var, E.Const)):
        return 1
    if isinstance(expr, E.Add):
        return math.lcm(*(_node_period(t, dim) for t in expr.terms))
    inner = _node_period(expr.expr, dim)
    if isinstance(expr, (E.FloorDiv, E.FloorMod)) and dim in E.variables(expr.expr):
        if expr.divisor > PERIOD_LIMIT:
            raise TooLargeToCheck(f"divisor {expr.divisor} along {dim!r}")
        return inner * expr.divisor
    return inner


def values(outputs: tuple[E.Expr, ...], dim: str, points: np.ndarray) -> np.ndarray:
    """Rows of output values, one row per point of `dim`."""
    if not outputs:
        return np.zeros((len(points), 0), dtype=np.int64)
    columns = [np.broadcast_to(np.asarray(E.evaluate(out, {dim: points}), dtype=np.int64), points.shape)
               for out in outputs]
    return np.stack(columns, axis=1)


def injective(outputs: tuple[E.Expr, ...], dim: str, extent: int) -> bool:
    if extent <= POINTWISE_LIMIT:
        rows = values(outputs, dim, np.arange(extent, dtype=np.int64))
        return np.unique(rows, axis=0).shape[0] == extent
    return by_period(outputs, dim, extent)


def by_period(outputs: tuple[E.Expr, ...], dim: str, extent: int) -> bool:
    """injective() from one period of the slice: the module docstring's argument."""
    p = period(outputs, dim)
    one = values(outputs, dim, np.arange(p, dtype=np.int64))
    sigma = values(outputs, dim, np.array([p], dtype=np.int64))[0] - one[0]
    shifted = values(outputs, dim, np.arange(p, 2 * p, dtype=np.int64))
    if not np.array_equal(shifted - one, np.broadcast_to(sigma, one.shape)):
        raise TooLargeToCheck(f"the index map is not quasi-affine along {dim!r}")  # cannot happen for // and %
    head = min(p, extent)
    if np.unique(one[:head], axis=0).shape[0] < head:
        return False  # two points of the first period already collide
    if extent <= p:
        return True
    nonzero = np.flatnonzero(sigma)
    if nonzero.size == 0:
        return False  # f(x + P) = f(x) and the extent holds more than one period
    i = int(nonzero[0])
    if sigma[i] < 0:
        one, sigma = -one, -sigma
    q = np.floor_divide(one[:, i], sigma[i])
    reps = one - q[:, None] * sigma[None, :]
    _, group = np.unique(reps, axis=0, return_inverse=True)
    order = np.argsort(group, kind="stable")
    sorted_groups = group.reshape(-1)[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    ends = np.r_[starts[1:], len(order)]
    for start, end in zip(starts, ends):
        members = order[start:end]
        for a_index, x0 in enumerate(members):
            for y0 in members[a_index + 1:]:
                delta = int(q[x0] - q[y0])  # f(x0 + kP) = f(y0 + lP) when l - k = delta
                k, l = max(-delta, 0), max(delta, 0)
                if x0 + k * p < extent and y0 + l * p < extent:
                    return False
    return True
