"""What an op onnxruntime kept in float32 may differ by (kernelgen/measure/kept_float.py): one rounding, the whole
steps of its float32 sum's rounding bound, and a residual add's rescaling of the conv's bytes."""
from dataclasses import replace
from pathlib import Path

import numpy as np

from kernelgen.api import load_config
from kernelgen.measure.kept_float import kept_float_allowance
from kernelgen.quant import ResidualAdd, op_quants, requantization

CONFIG = load_config(Path(__file__).resolve().parents[1] / "configs" / "hvx_seed000_3x3_u8.yaml")
OP, OQ = CONFIG.ops[0], op_quants(CONFIG)[0]  # 3x3 over 128 channels, no padding: 1,152 products a sum
# every product as large as uint8 x int8 makes it: |255 - 128| * |127 - 0|
X = np.full((1, 5, 5, 128), 255, np.uint8)
W = np.full((128, 128, 3, 3), 127, np.int8)


def _bound_steps(s_out: float) -> int:
    """Higham's gamma_n over n = 1,152 products + 4 roundings, times the sum of the products' magnitudes."""
    n = 1152 + 4
    gamma = n * 2.0 ** -24 / (1 - n * 2.0 ** -24)
    return int(np.floor(gamma * 1152 * 127 * 127 * OQ.s_in * OQ.s_w[0] / s_out))


def test_a_conv_whose_float32_sum_stays_within_a_step_is_allowed_one():
    assert (OQ.s_in, OQ.s_w[0], OQ.s_out) == (0.05, 0.01, 2.3)
    assert _bound_steps(OQ.s_out) == 0
    allowed = kept_float_allowance(OP, OQ, X, W, None)
    assert allowed.shape == (1, 3, 3, 128) and np.all(allowed == 1)


def test_a_deep_sum_of_large_terms_is_allowed_its_bounds_whole_steps():
    """At s_out 0.1 the products sum to 9,290 real units, which float32 may miss by 0.64: six whole steps."""
    fine = replace(OQ, s_out=0.1, s_conv=0.1)  # a plain conv's own step is its output's
    assert _bound_steps(0.1) == 6
    assert np.all(kept_float_allowance(OP, fine, X, W, None) == 7)
    # a bias is one more term of the magnitude: 2^24 of it (at s_in * s_w = 5e-4) adds 8,389 real units
    bias = np.full(128, 1 << 24, np.int32)
    assert np.all(kept_float_allowance(OP, fine, X, W, bias) == 1 + 12)
    # half the inputs at the zero point halve the magnitude of the sums
    half = X.copy()
    half[..., ::2] = 128
    assert np.all(kept_float_allowance(OP, fine, half, W, None) == 1 + 3)


def test_a_residual_add_after_the_float_conv_scales_its_steps_into_the_output():
    """onnxruntime's QLinearAdd reads the float conv's bytes at s_conv: one step of them moves the output by
    s_conv / s_out, and the add rounds once more (ResNet50's block ends, where the bytes part by two)."""
    rq = requantization(0.25, "quant", CONFIG)
    add = ResidualAdd(z_a=128, z_b=128, rq_a=rq, rq_b=rq, rq_out=rq)
    for ratio, allowed in ((0.8, 1), (1.5, 2), (2.0, 3)):
        with_add = replace(OQ, add=add, s_conv=OQ.s_out * ratio)
        assert np.all(kept_float_allowance(OP, with_add, X, W, None) == allowed), ratio


def test_a_pool_has_no_sum_to_stray():
    assert kept_float_allowance(replace(OP, kind="maxpool"), OQ, X, None, None) is None


def test_a_table_after_the_float_conv_moves_its_steps_as_far_as_the_table_does():
    """A gate's table that doubles its bytes (up to 255): one conv step apart is two output steps apart."""
    steep = replace(OQ, table=tuple(min(255, 2 * q) for q in range(256)))
    assert np.all(kept_float_allowance(OP, steep, X, W, None) == 2)
    flat = replace(OQ, table=(7,) * 256, table_slack=1)  # a table that moves nothing: its slack alone
    assert np.all(kept_float_allowance(OP, flat, X, W, None) == 1)
