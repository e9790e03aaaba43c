"""The uint8 mul's integer form on hvx (kernelgen/targets/hvx/mulrq.py) against onnxruntime's float32 QLinearMul
rounding (ops/mul.py's qlinear_mul, the numpy reference): on all 65,536 byte pairs in numpy for the QDQ
MobileNetV3-small's scales and for random ones, and on all of them at once in a kernel under qemu-hexagon."""
from __future__ import annotations

import numpy as np
import pytest
from builders import Case, make_config, toolchain

import kernelgen
from conftest import requires_tool
from kernelgen.ops.mul import qlinear_mul
from kernelgen.quant import op_quants
from kernelgen.quant_float import of_scale
from kernelgen.targets.hvx.mulrq import MulRequant, all_products

TOOLS = toolchain("hvx")
# (S, za, zf, z_out) of the squeeze-excite Muls of MobileNetV3-small quantized by quantize_static's defaults
NETWORK = [(0.00442690122872591, 97, 0, 100), (0.004327762871980667, 96, 0, 96), (0.004425629507750273, 0, 0, 0),
           (0.004386844113469124, 126, 0, 124), (0.004188348073512316, 100, 0, 99),
           (0.004316307138651609, 108, 0, 102), (0.004432274028658867, 100, 0, 99),
           (0.004110253881663084, 107, 0, 108), (0.004285222385078669, 96, 0, 90)]


def _exact(scale: float, za: int, zf: int, zo: int) -> MulRequant:
    found = MulRequant.of(of_scale(scale), za, zf, zo)
    assert isinstance(found, MulRequant), found
    products = all_products(za, zf)
    assert products.shape == (65536,)
    assert (found.emulate(products) == qlinear_mul(products, of_scale(scale).scale, zo)).all()
    return found


@pytest.mark.parametrize("scale, za, zf, zo", NETWORK)
def test_the_networks_muls_are_exact_on_every_byte_pair(scale, za, zf, zo):
    assert _exact(scale, za, zf, zo).fixes == ()  # no tie made by the two roundings on these scales


def test_random_scales_are_exact_and_their_made_ties_corrected():
    """S formed as onnxruntime forms it, f32(f32(s_in * s_f) / s_out), from random scales and zero points."""
    rng = np.random.default_rng(0)
    fixed = 0
    for _ in range(300):
        s_in, s_f, s_out = (np.float32(rng.uniform(*span)) for span in ((1e-3, 0.05), (1e-3, 0.05), (1e-4, 0.02)))
        scale = float(np.float32(np.float32(s_in * s_f) / s_out))
        za, zf, zo = (int(v) for v in rng.integers(0, 256, 3))
        fixed += len(_exact(scale, za, zf, zo).fixes)
    assert fixed > 0  # some scales do make ties, and the form corrects them


def test_a_made_tie_is_rounded_to_even_as_float32_does():
    """S = f32(f32(0.02 * 0.0031) / 0.013), za 7, zf 3, z 120: the product 3250 is 15.49999... * 2^0 away from
    the half below 136, float32 makes it 135.5 and rounds to 136; round half up of the exact value says 135."""
    scale = float(np.float32(np.float32(np.float32(0.02) * np.float32(0.0031)) / np.float32(0.013)))
    found = _exact(scale, 7, 3, 120)
    assert found.fixes == ((3250, 1), (16250, 1))
    exact = 3250 * scale + 120
    assert exact < 135.5 and int(qlinear_mul(np.array([3250]), scale, 120)[0]) == 136


def test_scales_out_of_reach_keep_the_scalar_loop():
    assert "outside" in MulRequant.of(of_scale(2.0 ** -20), 0, 0, 0)


@requires_tool(*TOOLS)
def test_every_byte_pair_through_the_hvx_mul():
    """A 16x16 image of 256 channels: pixel (h, w) holds byte 16h + w in every channel, channel c's factor is c, so
    the kernel multiplies each of the 65,536 pairs once; every output byte is onnxruntime's float32 one."""
    case = Case((), (), input_layout="nhwc-8h8w32c", output_layout="nhwc-8h8w32c", schedule=None, dtype="uint8",
                targets="[hvx]").with_(
        shape=[1, 16, 16, 256], ops=["mul: {by: scale, quant: {output_scale: 0.013, output_zero_point: 120}}"],
        side_inputs="{scale: {shape: [1, 1, 1, 256], layout: nhwc-8h8w32c, scale: 0.0031, zero_point: 3}}")
    config = make_config("m", case.with_block("quant", "{input_scale: 0.02, input_zero_point: 7, "
                                                       "requantization: float32}"))
    (oq,) = op_quants(config)
    job = kernelgen.jobs(config, ("hvx",))["hvx"]
    assert job.target_plan.ops[0].vector_mul.fixes == ((3250, 1), (16250, 1))  # the corrections are in the kernel
    a = np.broadcast_to(np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1), (1, 16, 16, 256))
    f = np.arange(256, dtype=np.uint8).reshape(1, 1, 1, 256)
    out = kernelgen.run(config, "hvx", {"input": np.ascontiguousarray(a), "side_scale": f})["output"]
    product = (a.astype(np.int64) - 7) * (f.astype(np.int64) - 3)
    assert out.shape == (1, 16, 16, 256)
    assert (out == qlinear_mul(product, oq.float_requants[0].scale, 120)).all()
