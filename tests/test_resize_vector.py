"""The integer form of a uint8 linear resize (targets/hvx/resize_vector.py) against onnxruntime's float32 arithmetic
(network/resize.quantized_resized, bit-exact with onnxruntime in test_resize_steps.py): every lane it does not flag
is onnxruntime's byte, the flagged ones are few, and steps whose weights or scales it cannot hold stay scalar."""
from __future__ import annotations

import numpy as np
import pytest

from kernelgen.network.resize import Resize, axis_taps, quantized_resized
from kernelgen.targets.hvx.resize_vector import model, vector_plan

SCALES = {  # (input scale, zero point), (output scale, zero point)
    "equal": ((0.00154, 0), (0.00154, 0)),
    "DeepLabV3-like": ((0.05, 120), (0.043, 131)),
    "output twice as coarse": ((0.01, 7), (0.02, 250)),
    "output 3x finer": ((0.03, 128), (0.01, 128)),
}


def _case(factor: int, in_hw: tuple[int, int]):
    resize = Resize("linear", "half_pixel", "round_prefer_floor", (float(factor), float(factor)))
    out_hw = (in_hw[0] * factor, in_hw[1] * factor)
    return resize, out_hw, axis_taps(resize, 0, in_hw[0], out_hw[0]), axis_taps(resize, 1, in_hw[1], out_hw[1])


@pytest.mark.parametrize("factor", [2, 4, 8, 16])
@pytest.mark.parametrize("scales", list(SCALES))
def test_unflagged_lanes_are_onnxruntimes_bytes(factor, scales):
    source, result = SCALES[scales]
    resize, out_hw, rows, cols = _case(factor, (6, 5))
    plan = vector_plan(rows, cols, source, result)
    assert plan is not None and plan.row_bits == plan.col_bits == {2: 2, 4: 3, 8: 4, 16: 5}[factor]
    rng = np.random.default_rng(factor)
    q = rng.integers(0, 256, (2, 21, 6, 5), dtype=np.uint8)
    q[0, 0] = rng.integers(0, 2, (6, 5)) * 255  # saturating extremes next to each other
    expected = quantized_resized(resize, q, (2, 21, *out_hw), source, result)
    got, flagged = model(plan, rows, cols, q)
    assert np.array_equal(got[~flagged], expected[~flagged])
    # the tie zone holds about 2 x 5 / 2^14 of the lanes at generic scales; where the scales' ratio is a small
    # rational, Y falls on halves exactly in about one result of 2^(2 x bits - 1) (x2, equal scales: 1 in 8)
    assert flagged.mean() < (0.01 if scales == "DeepLabV3-like" else 0.11), flagged.mean()
    if scales == "equal":  # S / 2^bits on a half exactly: ties the float arithmetic rounds to even
        assert flagged.any() and not np.array_equal(got, expected)


def test_the_tie_zone_is_the_float_error_plus_the_fixed_points():
    """Equal scales, x16: the float pipeline is within 8 units in the last place of its largest term (255 x s_in)
    of Y, 255 * 8 * 2^-24 = 1.2e-4 of an output step, 1.99 in units of 2^-14; the fixed point adds its two
    truncations (2), and M is exact (Y = S / 2^10): a zone of ceil(3.99) + 1."""
    _, _, rows, cols = _case(16, (14, 14))
    plan = vector_plan(rows, cols, (0.00154, 0), (0.00154, 0))
    assert plan.tie == 5 and (plan.shift_high, plan.shift_low) == (7, 19)


def test_a_one_pixel_axis_takes_finer_units():
    """From one pixel (DeepLabV3's pooled branch, 1 x 1 -> 14 x 14) every tap is that pixel, half and half: weights of
    one bit, which at equal scales put M's 24 bits 1 bit too high for the shifts; in units of 2^-2 and 2^-1 they fit,
    and every lane is onnxruntime's byte (the float sum of four quarters is the byte's value again, so none is near
    a tie)."""
    resize, out_hw, rows, cols = _case(14, (1, 1))
    plan = vector_plan(rows, cols, (0.00154, 0), (0.00154, 0))
    assert (plan.row_bits, plan.col_bits, plan.shift_high) == (2, 1, 0)
    assert set(plan.row_first + plan.row_second) == {2} and set(plan.col_first + plan.col_second) == {1}
    q = np.arange(256, dtype=np.uint8).reshape(1, 256, 1, 1)
    got, flagged = model(plan, rows, cols, q)
    assert np.array_equal(got, quantized_resized(resize, q, (1, 256, *out_hw), (0.00154, 0), (0.00154, 0)))
    assert not flagged.any() and np.array_equal(got[0, :, 5, 9], np.arange(256))


def test_steps_the_integers_cannot_hold_stay_scalar():
    # by 3 and 14 (DeepLabV3's pooled branch): weights k/6 and k/28 have no few-bit binary form
    for factor in (3, 14):
        _, _, rows, cols = _case(factor, (4, 4))
        assert vector_plan(rows, cols, (0.05, 120), (0.05, 120)) is None
    # an output 100x finer than the input: Y reaches 25,500 output steps, past what 14 fractional bits leave
    _, _, rows, cols = _case(2, (4, 4))
    assert vector_plan(rows, cols, (0.1, 128), (0.001, 3)) is None
