"""The period argument behind layout checks on huge extents agrees with a point-by-point check."""
from __future__ import annotations


import numpy as np
import pytest
from conftest import count_calls
from hypothesis import given, settings, strategies as st

from kernelgen import expr as E
from kernelgen import injective
from kernelgen.layout import ACTIVATION_DIMS, LayoutError, TensorLayout, padding_cover, parse_layout

X = E.Var("x")


def _terms(draw) -> E.Expr:
    kind = draw(st.sampled_from(["div", "mod", "mul", "divmod"]))
    a, b = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    if kind == "div":
        return E.floordiv(E.mul(X, draw(st.integers(1, 3))), a, {"x": (0, 10 ** 6)})
    if kind == "mod":
        return E.floormod(X, a, {"x": (0, 10 ** 6)})
    if kind == "mul":
        return E.mul(X, draw(st.integers(0, 3)))
    return E.floormod(E.floordiv(X, a, {"x": (0, 10 ** 6)}), b, {"x": (0, 10 ** 6)})


@st.composite
def slices(draw):
    return tuple(_terms(draw) for _ in range(draw(st.integers(1, 3))))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(outputs=slices(), extent=st.integers(1, 2500))
def test_period_argument_matches_brute_force(outputs, extent):
    rows = injective.values(outputs, "x", np.arange(extent, dtype=np.int64))
    brute = np.unique(rows, axis=0).shape[0] == extent
    assert injective.by_period(outputs, "x", extent) == brute, [E.to_text(o) for o in outputs]


def test_huge_extents_are_decided_without_visiting_them():
    """2^31 rows or channels: decided with the work of a small extent (the period, not the elements)."""
    split = parse_layout("n, h, w, c -> n, c // 4, h, |, w, c % 4", ACTIVATION_DIMS)
    folded = parse_layout("n, h, w, c -> n, h % 8, w, c", ACTIVATION_DIMS)

    def decide(rows: int, channels: int) -> None:
        TensorLayout(layout=split, logical_shape=(1, rows, 1, 1)).check_injective()
        TensorLayout(layout=split, logical_shape=(1, 1, 1, channels)).check_injective()
        with pytest.raises(LayoutError, match="not injective"):
            TensorLayout(layout=folded, logical_shape=(1, rows // 2 + 16, 1, 1)).check_injective()

    _, small = count_calls(lambda: decide(64, 64))
    _, huge = count_calls(lambda: decide(2 ** 31 - 1, 2 ** 31 - 2))
    assert huge < 2 * small, (huge, small)
    assert padding_cover(TensorLayout(layout=parse_layout("n, h, w, c -> n, h, w, c // 4, c % 4", ACTIVATION_DIMS,
                                                          pad=0.0), logical_shape=(1, 1, 1, 2 ** 30 + 3))) == \
        (1, 1, 1, 2 ** 30 + 4)


def test_a_divisor_beyond_any_packing_is_a_layout_error():
    huge = parse_layout("n, h, w, c -> n, h, w, c // 2147483647, c % 2147483647", ACTIVATION_DIMS)
    with pytest.raises(LayoutError, match="cannot check"):
        TensorLayout(layout=huge, logical_shape=(1, 2, 2, 2 ** 21)).check_injective()
    # a constant no 32-bit index can hold is refused when the map is read
    with pytest.raises(LayoutError, match="constant 18446744073709551617 is larger than 2147483647"):
        parse_layout("n, h, w, c -> n, h, w, c // 18446744073709551617", ACTIVATION_DIMS)
