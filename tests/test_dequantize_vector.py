"""A network output's DequantizeLinear on HVX in integers (targets/hvx/dequantize_vector.py): every float's bits are
numpy's float32 (q - z) * s for every byte, zero point and a spread of scales (products rounded half to even at
every bit length, |d| = 1, d = 0, negative d); and the hvx program dequantizes as the step-by-step run does, bit for
bit, over channel blocks with padding channels, whole and partial rows of 32 pixels."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import requires_tool

import kernelgen
from kernelgen.targets.hvx.dequantize_vector import dequantize_plan, model

ONNX = ("py:onnx", "py:onnxruntime")
SCALES = [0.043, 0.0359436683, (1 + 3 * 2.0 ** -23) / 32, 1.0, 0.5, 3.0, 2.0 ** -126, 1.9 * 2.0 ** 119, 1 / 255, 7.5e-6,
          float(np.nextafter(np.float32(1), np.float32(2)))]


@pytest.mark.parametrize("scale", SCALES + list(np.random.default_rng(3).uniform(1e-5, 2, 40)))
def test_the_integer_form_is_numpys_float32_product_for_every_byte(scale):
    plan = dequantize_plan(scale)
    q = np.arange(256)
    for zero_point in (0, 1, 128, 200, 255):
        want = ((q - zero_point).astype(np.float32) * np.float32(scale)).view(np.uint32)
        assert (model(plan, q, zero_point) == want).all(), (scale, zero_point)


def test_scales_whose_products_leave_the_normal_floats_stay_scalar():
    assert dequantize_plan(2.0 ** 120) is None  # 255 times it past float32's largest exponent
    assert dequantize_plan(2.0 ** -130) is None  # subnormal
    assert dequantize_plan(-0.5) is None
    assert dequantize_plan(2.0 ** 119) is not None


@requires_tool(*ONNX, "clang-19", "ld.lld-19", "qemu-hexagon", "make")
@pytest.mark.parametrize("channels, out_hw, resized", [
    (40, (8, 64), (0.043, 131)),  # two rows of 32 pixels, a second block of 8 channels
    # one vector and a tail of 12 pixels, 5 of 32 channels; the scale (1 + 3 * 2^-23) / 32, whose significand
    # 2^23 + 3 puts |d| = 3, 6, 12 and 24 on a rounding tie with an even neighbour below: half to even rounds down
    (5, (6, 44), ((1 + 3 * 2.0 ** -23) / 32, 128)),
])
def test_the_program_dequantizes_as_the_step_by_step_run(tmp_path, channels, out_hw, resized):
    import onnx_models
    from hvx_programs import driver_source, imported, program_bit_exact

    in_hw = (out_hw[0] // 2, out_hw[1] // 2)
    network = imported(onnx_models.qdq_resize_network(channels, in_hw, out_hw, (0.05, 120), resized), tmp_path)
    program_bit_exact(kernelgen.validate_network(network, "hvx", seed=12))
    assert "_dequantize_output0_floats(t & 1 ?" in driver_source(tmp_path)
