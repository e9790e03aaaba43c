"""A network input's QuantizeLinear on HVX in integers (targets/hvx/quantize_vector.py): every lane it does not flag
is onnxruntime's byte (numpy's rint(x / s) + z, saturated, NaN to 0, as onnxruntime computes it), including
quotients a hair off a half, infinities, subnormals and values past the byte's range; and the hvx program quantizes
such an input as the step-by-step run does, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import requires_tool

import kernelgen
from kernelgen.network import execute
from kernelgen.targets.hvx.quantize_vector import model, quantize_plan

ONNX = ("py:onnx", "py:onnxruntime")


def _onnxruntime(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        v = np.rint(x.astype(np.float32) / np.float32(scale)) + np.float32(zero_point)
    return np.clip(np.nan_to_num(v, nan=0.0), 0, 255).astype(np.uint8)


def _hard_values(scale: float, size: int, seed: int) -> np.ndarray:
    """Quotients on a half and one unit in the last place either side, over and past the byte's range; random
    normal values at 100 steps; zeros, subnormals, infinities, a NaN, the largest floats."""
    s = np.float32(scale)
    halves = ((np.arange(-300, 300) + np.float32(0.5)) * s).astype(np.float32)
    special = np.array([0.0, -0.0, 1e-45, -1e-40, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38], np.float32)
    rng = np.random.default_rng(seed)
    return np.concatenate([halves, np.nextafter(halves, np.float32(np.inf)), np.nextafter(halves, np.float32(-np.inf)),
                           special, (rng.standard_normal(size) * 100 * s).astype(np.float32)])


@pytest.mark.parametrize("scale, zero_point", [(0.0359436683, 128), (0.03, 0), (0.5, 7), (1 / 256, 255), (3.7, 128),
                                               (1e-5, 100), (2.0 ** -20, 0), (1000.0, 128)])
def test_unflagged_lanes_are_onnxruntimes_bytes(scale, zero_point):
    plan = quantize_plan(scale)
    x = _hard_values(scale, 100_000, 3)
    got, flagged = model(plan, x, zero_point)
    expected = _onnxruntime(x, scale, zero_point)
    assert np.array_equal(got[~flagged], expected[~flagged])
    assert flagged[-100_000:].mean() < 0.002, flagged[-100_000:].mean()  # random values: the tie zone's 11 / 2^14
    # the rest the scalar code computes: without it, quotients a hair off a half round wrongly
    assert not np.array_equal(got, expected) and np.isnan(x[flagged]).any()


def test_scales_outside_the_integers_range_stay_scalar():
    assert quantize_plan(2.0 ** -101) is None and quantize_plan(2.0 ** 100) is None
    assert quantize_plan(2.0 ** -100) is not None


@requires_tool(*ONNX, "clang-19", "ld.lld-19", "qemu-hexagon", "make")
@pytest.mark.parametrize("channels, width", [(8, 40), (3, 72), (1, 40), (4, 32)])
def test_the_program_quantizes_hard_inputs_as_the_step_by_step_run(tmp_path, channels, width):
    """Vectors of 32 columns and a scalar tail (40: one and 8, 72: two and 8), over 6 rows: quotients on halves and
    either side, infinities, a NaN, subnormals, and the rest random; the program under qemu-hexagon against the
    step-by-step run (numpy's QuantizeLinear, then the kernels one by one), whose bytes are onnxruntime's. Up to 4
    channels (an image) a pixel's bytes are one word widened to its 32-byte block; 8 are stored channel by channel."""
    import onnx_models
    from hvx_programs import driver_source, imported, program_bit_exact

    network = imported(onnx_models.qdq_resize_network(16, (6, width), (12, 2 * width), (0.05, 120), (0.043, 131),
                                                      in_channels=channels), tmp_path)
    scale = network.tensors[network.steps[0].outputs[0]].scale
    validation = kernelgen.validate_network(network, "hvx", seed=4)
    size = channels * 6 * width
    hard = _hard_values(scale, size, 5)
    rng = np.random.default_rng(6)
    x = np.concatenate([hard[np.isnan(hard) | np.isinf(hard)], rng.choice(hard, size - 3, replace=False)])
    rng.shuffle(x)
    validation.feeds = {"x": x.reshape(1, channels, 6, width)}
    validation.expected = execute.reference(network, validation.feeds, validation.oracle, validation.fallbacks)
    program_bit_exact(validation)
    assert ("Q6_W_vshuff_VVR(fill, words, -4)" in driver_source(tmp_path)) is (channels <= 4)
