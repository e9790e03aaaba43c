"""The float32 requantization's fast form on hvx (targets/hvx/float_screen.py): one product, the lanes near a half
screened and their tiles requantized again by the exact form."""
from __future__ import annotations

import numpy as np
import pytest

from kernelgen.quant_float import of_scale, requantize_float
from kernelgen.targets.hvx.float_screen import MAX_SCREENED, FloatScreen


def _check_every_accumulator(floats, bound: int) -> tuple[int, float]:
    """Every accumulator in [-bound, bound]: unscreened lanes equal onnxruntime's rint(f32(acc * S)) (both clipped
    to +-256: past it every byte saturates); returns the double roundings met and the screened share."""
    screen = FloatScreen.of(tuple(floats))
    assert screen is not None
    acc = np.arange(-bound, bound + 1, dtype=np.int64)[:, None]
    acc = np.broadcast_to(acc, (acc.shape[0], len(floats)))
    want = np.clip(requantize_float(acc, tuple(floats)), -256, 256)
    got, screened = screen.emulate(acc)
    got = np.clip(got, -256, 256)
    wrong = ~screened & (got != want)
    assert not wrong.any(), (acc[wrong][:5], got[wrong][:5], want[wrong][:5])
    scales = np.array([f.scale for f in floats])
    double = int(np.sum(want != np.clip(np.rint(acc * scales), -256, 256)))
    return double, float(screened.mean())


@pytest.mark.slow  # every accumulator up to 300 / S for 14 scales: tens of millions of values
def test_the_fast_form_is_onnxruntimes_rounding_wherever_it_does_not_screen():
    rng = np.random.default_rng(51)
    double_roundings = 0
    for exponent in np.linspace(-16, -2, 14):
        fr = of_scale(2.0 ** (exponent + rng.uniform(0, 0.99)))
        double, share = _check_every_accumulator([fr], min(int(300 / fr.scale), 2 ** 24))
        double_roundings += double
        assert share < 2.0 ** -13, (fr, share)  # a scale not made of round decimals: about 2^-15
    assert double_roundings > 50  # lanes where float32's double rounding shows were met, and were screened


def test_per_channel_scales_share_one_shift_and_are_exact_where_unscreened():
    rng = np.random.default_rng(52)
    floats = [of_scale(0.004 * 2.0 ** rng.uniform(-5, 0)) for _ in range(6)]
    screen = FloatScreen.of(tuple(floats))
    assert max(f.exponent for f in floats) - min(f.exponent for f in floats) >= 4
    assert all(m < 2 ** 31 for m in screen.mults)
    double, share = _check_every_accumulator(floats, 2 ** 17)
    assert share < 2.0 ** -12


def test_scales_whose_exponents_spread_past_7_keep_the_exact_form_alone():
    assert FloatScreen.of((of_scale(0.2917), of_scale(0.2917 * 2.0 ** -7))) is not None
    assert FloatScreen.of((of_scale(0.2917), of_scale(0.2917 * 2.0 ** -9))) is None


def test_round_decimal_scales_that_screen_too_many_lanes_keep_the_exact_form_alone():
    # acc * 0.01 is within 2^-16 of a half for every acc = 50 mod 100: 1% of the lanes
    assert FloatScreen.of((of_scale(0.01),)) is None
    assert FloatScreen.of((of_scale(0.0100123),)) is not None
    sample = np.arange(-4096, 4097)[:, None]
    _, screened = FloatScreen._fitted((of_scale(0.01),)).emulate(sample)
    assert screened.mean() > MAX_SCREENED


@pytest.mark.parametrize("scale", [2.0 ** -16, 0.00123, 0.0431, 0.4999])
def test_clamped_and_extreme_accumulators_saturate_without_being_screened(scale):
    screen = FloatScreen.of((of_scale(scale),))
    acc = np.array([[screen.clamp], [-screen.clamp], [2 ** 31 - 1], [-2 ** 31], [screen.clamp + 1]])
    got, screened = screen.emulate(acc)
    assert not screened.any()  # a relu layer's clamped lanes must not send every tile to the exact form
    assert np.all(np.abs(got) >= 256) and np.array_equal(np.sign(got), np.sign(acc))
    assert screen.clamp * scale >= 257
    assert screen.clamp << screen.left < 2 ** 31
