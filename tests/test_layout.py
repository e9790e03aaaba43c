"""Layout engine: seed 004's worked examples, seed 000's index expressions, round trips."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelgen import expr as E
from kernelgen.layout import (ACTIVATION_DIMS, FILTER_DIMS, LayoutError, PadKind, TensorLayout, padding_cover,
                              parse_layout)

V, C = E.Var, E.Const


def test_nhwc_8h8w32c_physical_shape_matches_seed_000():
    bound = parse_layout("nhwc-8h8w32c", ACTIVATION_DIMS).bind((1, 64, 64, 128))
    assert bound.layout.name == "NHWC8h8w32c"
    assert bound.physical_shape == (1, 8, 8, 4, 8, 8, 32)


def test_oihw_8i32o4i_physical_shape_matches_seed_000():
    bound = parse_layout("oihw-8i32o4i", FILTER_DIMS).bind((128, 128, 3, 3))
    assert bound.physical_shape == (4, 4, 3, 3, 8, 32, 4)


def test_seed_000_flattened_index_expressions():
    # Seed 000's input cache read: placeholder_8[ho.outer*65536 + hi*8192 + wo*1024 + wi*128 + co*32 + ci]
    index = {"n": C(0), "h": E.add(E.mul(V("ho"), 8), V("hi")), "w": E.add(E.mul(V("wo"), 8), V("wi")),
             "c": E.add(E.mul(V("co"), 32), V("ci"))}
    bounds = {"ho": (0, 7), "hi": (0, 7), "wo": (0, 7), "wi": (0, 7), "co": (0, 3), "ci": (0, 31)}
    flat = parse_layout("NHWC", ACTIVATION_DIMS).bind((1, 64, 64, 128))
    assert flat.offset_c(index, bounds) == "((ho*65536)+(hi*8192)+(wo*1024)+(wi*128)+(co*32)+ci)"
    packed = parse_layout("nhwc-8h8w32c", ACTIVATION_DIMS).bind((1, 64, 64, 128))
    assert packed.offset_c(index, bounds) == "((ho*65536)+(wo*8192)+(co*2048)+(hi*256)+(wi*32)+ci)"


def test_seed_004_nchwc_flat_element():
    # NHWC [16,64,64,128] -> NCHW4c, element (11, 37, 23, 101), flattened to 1-D.
    bound = parse_layout("n, h, w, c -> n, c // 4, h, w, c % 4", ACTIVATION_DIMS).bind((16, 64, 64, 128))
    assert bound.physical_shape == (16, 32, 64, 64, 4)
    offset = bound.offsets({"n": C(11), "h": C(37), "w": C(23), "c": C(101)}, {})
    assert offset == (C(32 * 64 * 64 * 4 * 11 + 64 * 64 * 4 * 25 + 64 * 4 * 37 + 4 * 23 + 101 % 4),)


def test_seed_004_texture_with_axis_separator():
    bound = parse_layout("n, h, w, c -> n, c // 4, h, |, w, c % 4", ACTIVATION_DIMS).bind((16, 64, 64, 128))
    assert bound.layout.physical_rank == 2
    assert bound.flat_shape == (16 * (128 // 4) * 64, 64 * 4)
    offsets = bound.offsets({"n": C(11), "h": C(37), "w": C(23), "c": C(101)}, {})
    assert offsets == (C((128 // 4) * 64 * 11 + 64 * (101 // 4) + 37), C(4 * 23 + 101 % 4))


def test_pack_matches_numpy_reshape_transpose():
    # Seed 004: a layout transform is reshape (split) + transpose (reorder) + reshape (flatten).
    x = np.arange(2 * 16 * 8 * 64, dtype=np.float32).reshape(2, 16, 8, 64)
    bound = parse_layout("nhwc-8h8w32c", ACTIVATION_DIMS).bind(x.shape)
    expected = x.reshape(2, 2, 8, 1, 8, 2, 32).transpose(0, 1, 3, 5, 2, 4, 6).ravel()
    np.testing.assert_array_equal(bound.pack(x), expected)


@pytest.mark.parametrize("spec,shape", [
    ("nhwc-8h8w32c", (1, 13, 9, 37)),
    ("nchw-4c", (2, 3, 5, 7)),
    ("NHWC", (1, 1, 1, 1)),
    ("nhwc-4h2w8c", (3, 7, 3, 5)),
    ("n, h, w, c -> n, c // 4, h, |, w, c % 4", (2, 5, 7, 6)),
    ("n, h, w, c -> h, |, n, w, c", (2, 3, 4, 5)),
])
def test_round_trip_on_odd_shapes(spec, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    bound = parse_layout(spec, ACTIVATION_DIMS).bind(shape)
    physical = bound.pack(x)
    assert physical.shape == bound.flat_shape
    np.testing.assert_array_equal(bound.unpack(physical), x)
    # Padding holds the sentinel when no pad_value is declared, and is exactly the unused slots.
    assert int(np.isnan(physical).sum()) == bound.padding == int(bound.padding_mask().sum())


def test_filter_round_trip_with_padding():
    w = np.random.default_rng(1).standard_normal((20, 12, 3, 3)).astype(np.float32)
    bound = parse_layout("oihw-8i32o4i", FILTER_DIMS).bind(w.shape)
    assert bound.physical_shape == (1, 1, 3, 3, 8, 32, 4)
    np.testing.assert_array_equal(bound.unpack(bound.pack(w)), w)


def test_pad_value_fills_padding_and_cover_reaches_it():
    layout = parse_layout("n, h, w, c -> n, c // 4, h, |, w, c % 4", ACTIVATION_DIMS, pad=0)
    assert layout.pad_kind is PadKind.VALUE
    bound = layout.bind((1, 2, 3, 6))
    physical = bound.pack(np.ones((1, 2, 3, 6), dtype=np.float32))
    assert physical.shape == (1 * 2 * 2, 3 * 4)
    assert int((physical == 0).sum()) == bound.padding == 12
    assert padding_cover(bound) == (1, 2, 3, 8)


def test_undef_pad_kind():
    assert parse_layout("nchw-4c", ACTIVATION_DIMS, pad="undef").pad_kind is PadKind.UNDEF


@pytest.mark.parametrize("spec,message", [
    ("nhw-4c", "names dims n,h,w"),
    ("nhwc-4q", "unknown dim 'q'"),
    ("nhwc-", "not a layout string"),
    ("n, h, w, c -> n, h, x, c", "unknown dim 'x'"),
    ("n, h, w -> n, h, w", "has 3 input dims"),
    ("n, h, w, c -> n, h, w // , c", "incomplete expression"),
    ("n, h, w, c -> n, |, |, h, w, c", "'|' must separate"),
    ("n, h, w, c -> n, h, w, c * c", "only multiplication by a constant"),
])
def test_bad_layouts(spec, message):
    with pytest.raises(LayoutError, match=message):
        parse_layout(spec, ACTIVATION_DIMS).bind((1, 4, 4, 4))


def test_non_injective_map_is_rejected():
    bound = parse_layout("n, h, w, c -> n, h, w // 2, c", ACTIVATION_DIMS).bind((1, 4, 4, 4))
    with pytest.raises(LayoutError, match="not injective"):
        bound.check_injective()


def test_negative_index_is_rejected():
    with pytest.raises(LayoutError, match="can be negative"):
        TensorLayout(layout=parse_layout("n, h, w, c -> n, h - 1, w, c", ACTIVATION_DIMS), logical_shape=(1, 4, 4, 4))


def test_simplifier_splits_blocked_index():
    bounds = {"ho": (0, 7), "hi": (0, 7)}
    h = E.add(E.mul(V("ho"), 8), V("hi"))
    assert E.floordiv(h, 8, bounds) == V("ho")
    assert E.floormod(h, 8, bounds) == V("hi")
    # Without a bound on hi, nothing can be split.
    assert isinstance(E.floordiv(h, 8), E.FloorDiv)


def test_simplifier_keeps_a_vec4_of_a_32_channel_block_whole():
    """(4*q + r) // 32 and % 32 with 0 <= r < 4: q // 8 and 4 * (q % 8) + r (the common factor rule), so vulkan's
    vec_ok sees nhwc-8h8w32c's 4 channels as one aligned vec4; k*d*(x // d) + k*(x % d) flattens back to k*x."""
    bounds = {"q": (0, 31), "r": (0, 3)}
    c = E.add(E.mul(V("q"), 4), V("r"))
    assert E.floordiv(c, 32, bounds) == E.FloorDiv(V("q"), 8)
    assert E.floormod(c, 32, bounds) == E.add(E.mul(E.FloorMod(V("q"), 8), 4), V("r"))
    assert E.add(E.mul(E.FloorDiv(V("c"), 4), 12), E.mul(E.FloorMod(V("c"), 4), 3)) == E.mul(V("c"), 3)
    assert E.to_c(E.floormod(c, 32, bounds), shifts=True) == "(((q&7)*4)+r)"
    assert E.to_c(E.floordiv(c, 32, bounds)) == "(q/8)"


@given(coefs=st.lists(st.integers(1, 64), min_size=1, max_size=3), highs=st.lists(st.integers(0, 40), min_size=3,
                                                                                  max_size=3),
       const=st.integers(0, 100), divisor=st.sampled_from([2, 3, 4, 6, 8, 12, 16, 32, 96]))
def test_simplified_division_and_modulo_and_their_c_text_mean_the_floor(coefs, highs, const, divisor):
    """Every rule of the simplifier, and the C text with and without shifts, agree with Python's floor division
    and modulo over the whole (non-negative) domain."""
    names = ("a", "b", "d")[:len(coefs)]
    bounds = {n: (0, h) for n, h in zip(names, highs)}
    expr = E.add(*(E.mul(V(n), k) for n, k in zip(names, coefs)), E.Const(const))
    grid = np.meshgrid(*(np.arange(bounds[n][1] + 1) for n in names), indexing="ij")
    values = dict(zip(names, grid))
    whole = E.evaluate(expr, values)
    for op, expect in ((E.floordiv, whole // divisor), (E.floormod, whole % divisor)):
        simple = op(expr, divisor, bounds)
        assert np.array_equal(np.broadcast_to(E.evaluate(simple, values), whole.shape), expect)
        for shifts in (False, True):
            text = E.to_c(simple, shifts).replace("/", "//")
            assert np.array_equal(np.broadcast_to(eval(text, {}, dict(values)), whole.shape), expect), text
