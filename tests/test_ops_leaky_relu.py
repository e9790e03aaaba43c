"""leaky_relu, the activation added as one module (kernelgen/ops/leaky_relu.py): its reference by hand and against
onnxruntime, its config errors, float32 on every target (odd shapes: channels off every vector width, batch 2, a
stride-2 depthwise conv, a residual before it, a negative alpha), the qf32 variant compiled, uint8 on hvx through
its byte table, and ONNX models (float and onnxruntime's QDQ) imported and validated end to end."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from builders import toolchain
from conftest import require_tools, requires_tool

import kernelgen
from kernelgen import api
from kernelgen.cli import main
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate as validate_job
from kernelgen.ops.leaky_relu import LeakyRelu
from kernelgen.targets import TARGETS

TOOLS = {name: toolchain(name) for name in TARGETS}  # each target's own list (`kernelgen targets`)

CHAIN = """\
name: leaky
input: {shape: [2, 9, 7, 6], layout: NHWC}
ops:
  - conv2d: {out_channels: 10, kernel: 1, bias: true, activation: leaky_relu}
  - conv2d: {out_channels: 10, kernel: 3, stride: 2, pad: 1, groups: 10, bias: true,
             activation: {leaky_relu: {alpha: 0.1}}}
  - conv2d: {out_channels: 5, kernel: 3, pad: 1, bias: true, activation: {leaky_relu: {alpha: -1.5}}}
  - conv2d: {out_channels: 5, kernel: 1, residual: 3, activation: leaky_relu}
output: {layout: NHWC}
schedule: {budget: 65536}
"""


def test_the_reference_by_hand():
    x = np.array([-2.0, -0.5, -0.0, 0.0, 0.5, 3.0])
    # alpha as the kernels hold it: float32 0.1 = 0.100000001490116..., 0.01 = 0.00999999977648258...
    np.testing.assert_array_equal(LeakyRelu(alpha=0.1).reference(x),
                                  [-0.20000000298023224, -0.05000000074505806, 0.0, 0.0, 0.5, 3.0])
    np.testing.assert_array_equal(LeakyRelu().reference(np.array([-1.0, 7.0])), [-0.009999999776482582, 7.0])
    np.testing.assert_array_equal(LeakyRelu(alpha=-1.5).reference(np.array([-2.0, 2.0])), [3.0, 2.0])


@requires_tool("py:onnxruntime", "py:onnx")
def test_the_reference_is_onnxruntimes_leaky_relu():
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = np.concatenate([np.linspace(-4, 4, 801), [-1e-30, 1e-30, 0]]).astype(np.float32)
    nodes = [helper.make_node("LeakyRelu", ["x"], ["d"]), helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.3)]
    graph = helper.make_graph(nodes, "leaky", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [x.size]) for n in "da"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    default, alpha = session.run(None, {"x": x})
    # onnxruntime rounds alpha * x to float32 once: the float64 reference is that product before its rounding
    for theirs, record in ((default, LeakyRelu()), (alpha, LeakyRelu(alpha=0.3))):
        ours = record.reference(x.astype(np.float64))
        np.testing.assert_array_equal(ours.astype(np.float32), theirs)
        assert np.all(np.abs(ours - theirs) <= 2.0 ** -24 * np.abs(ours))


@pytest.mark.parametrize("alpha, column, expected", [
    ("1.0e+39", 40, "expected alpha a float32 holds, got 1e+39"),
    ("fast", 40, "expected a number: the slope below zero (ONNX's default 0.01), got \"fast\""),
    (".nan", 40, "expected a number: the slope below zero (ONNX's default 0.01), got NaN"),
])
def test_a_bad_alpha_is_exit_2_at_its_key(tmp_path, alpha, column, expected):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ninput: {shape: [1, 4, 4, 4]}\nops:\n  - conv2d: {out_channels: 4,\n"
                    f"      activation: {{leaky_relu: {{alpha: {alpha}}}}}}}\n")
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:5:{column}: error: ops[0].conv2d.activation.leaky_relu.alpha: {expected}" in result.output


def test_the_c_kernel_spells_it_as_its_statements():
    text = "\n".join(api.generate(api.parse_config(CHAIN + "targets: [c]\n", "leaky.yaml"), "c").values())
    assert "float a = v * 0.1f;" in text and "float a = v * -1.5f;" in text and "float a = v * 0.01f;" in text
    assert "v = v > 0.0f ? v : a;" in text


@pytest.mark.parametrize("target", [
    "c", pytest.param("hvx", marks=pytest.mark.slow), pytest.param("opencl", marks=pytest.mark.slow),
    pytest.param("vulkan", marks=pytest.mark.slow)])
def test_every_target_matches_the_reference(target):
    require_tools(*TOOLS[target])
    result = api.validate(api.parse_config(CHAIN + f"targets: [{target}]\n", "leaky.yaml"), target, seed=7)
    assert result.passed, f"{result.detail} (seed {result.seed})"
    assert result.checked == "op-by-op" and result.bound_ratio <= 1.0


# op 2's alpha 0.1 read as 0.2: an error far above the bound
WRONG_ALPHA = {"c": ("0.1f", "0.2f"), "opencl": ("0.1f", "0.2f"), "vulkan": ("0.1", "0.2")}


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=pytest.mark.slow),
                                    pytest.param("vulkan", marks=pytest.mark.slow)])
def test_a_wrong_alpha_fails(target):
    require_tools(*TOOLS[target])
    job = api.jobs(api.parse_config(CHAIN + f"targets: [{target}]\n", "leaky.yaml"), (target,))[target]
    old, new = WRONG_ALPHA[target]
    name = next(n for n, text in job.files.items() if f"* {old};" in text)
    broken = replace(job, files={**job.files, name: job.files[name].replace(f"* {old};", f"* {new};")})
    assert validate_job(TARGETS[target], broken, seed=7).status is Status.FAIL


@requires_tool("clang-19")
def test_the_qf32_variant_compiles_it(tmp_path):
    """QEMU has no HVX float: the qf32 kernel is compiled (clang-19, v73), not run."""
    from kernelgen.targets.hvx.runtime import compile_program
    from test_activations import qf32_job

    job = qf32_job(CHAIN)
    text = "\n".join(job.files.values())
    assert text.count("v = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VsfVsf(v, act_c1), v, a);") == 4  # one select per op
    assert "HVX_Vector a = Q6_Vsf_equals_Vqf32(Q6_Vqf32_vmpy_VsfVsf(v, act_c0));" in text
    compile_program(job, tmp_path)


UINT8 = """\
name: q
dtype: uint8
input: {shape: [2, 9, 11, 40], layout: nhwc-8h8w32c}
quant: {input_scale: 0.02, input_zero_point: 7, weight_scale: 0.004, weight_dtype: int8, output_scale: 0.03,
        output_zero_point: 100, intermediate_scale: 0.021, intermediate_zero_point: 9, requantization: float32}
ops:
  - conv2d: {out_channels: 36, kernel: 3, pad: 1, bias: true, activation: {leaky_relu: {alpha: 0.2}},
             quant: {conv_scale: 0.05, conv_zero_point: 140}}
  - conv2d: {out_channels: 20, kernel: 1, activation: leaky_relu, quant: {conv_scale: 0.04, conv_zero_point: 128}}
output: {layout: nhwc-8h8w32c}
targets: [hvx]
"""


def test_uint8_applies_it_as_a_byte_table():
    from kernelgen.quant import op_quants

    first, second = op_quants(api.parse_config(UINT8, "q.yaml"))
    assert first.table == LeakyRelu(alpha=0.2).byte_table(0.05, 140, 0.021, 9)
    assert (first.q_min, first.q_max) == (0, 255)  # not a clamp of bytes
    # byte 140 is 0.0 -> the output's zero point 9; 130: -0.5 -> -0.1 -> rint(-4.76) + 9 = 4; 0: -7 -> -1.4 saturates
    assert (first.table[140], first.table[130], first.table[0], first.table[255]) == (9, 4, 0, 255)
    assert second.table == LeakyRelu().byte_table(0.04, 128, 0.03, 100)


@pytest.mark.slow
@requires_tool(*TOOLS["hvx"])
def test_uint8_on_hvx_is_bit_exact():
    result = kernelgen.validate(api.parse_config(UINT8, "q.yaml"), "hvx", seed=11)
    assert result.passed and "bit-exact" in result.detail, result.detail


@requires_tool("py:onnx", "py:onnxruntime")
def test_the_byte_table_is_onnxruntimes_bytes():
    """DequantizeLinear -> LeakyRelu -> QuantizeLinear in onnxruntime, every byte, random scales and zero points."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(45)
    x = np.arange(256, dtype=np.uint8).reshape(1, 1, 16, 16)
    for alpha in (0.01, 0.2, -0.7):
        for _ in range(15):
            s_in, s_out = (float(np.float32(rng.uniform(0.002, 0.2))) for _ in range(2))
            z_in, z_out = (int(rng.integers(0, 256)) for _ in range(2))
            inits = [numpy_helper.from_array(np.array(v, dtype=t), n) for n, v, t in (
                ("si", s_in, np.float32), ("zi", z_in, np.uint8), ("so", s_out, np.float32), ("zo", z_out, np.uint8))]
            nodes = [helper.make_node("DequantizeLinear", ["x", "si", "zi"], ["v"]),
                     helper.make_node("LeakyRelu", ["v"], ["g"], alpha=alpha),
                     helper.make_node("QuantizeLinear", ["g", "so", "zo"], ["y"])]
            graph = helper.make_graph(nodes, "leaky", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                                     [1, 1, 16, 16])],
                                      [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
            session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            (theirs,) = session.run(None, {"x": x})
            ours = LeakyRelu(alpha=float(np.float32(alpha))).byte_table(s_in, z_in, s_out, z_out)
            assert list(theirs.reshape(-1)) == list(ours), (alpha, s_in, z_in, s_out, z_out)


def _leaky_model():
    from onnx_models import Builder

    b = Builder(3)
    t = b.node("LeakyRelu", "act1", [b.conv("conv1", "x", 6, 12, 3, pad=1)])
    t = b.node("LeakyRelu", "act2", [b.conv("conv2", t, 12, 8, 1)], alpha=0.2)
    return b.model("x", [1, 6, 9, 7], t)


def _import(model, folder, *target: str):
    import onnx

    folder.mkdir()
    onnx.save(model, str(folder / "m.onnx"))
    result = CliRunner().invoke(main, ["import", str(folder / "m.onnx"), "-o", str(folder / "net"),
                                       *[arg for t in target for arg in ("--target", t)]])
    assert result.exit_code == 0, result.output
    assert "not imported" not in result.output, result.output
    network = kernelgen.load_network(folder / "net" / "network.yaml")
    acts = [op.activation for s in network.kernels for op in s.config.ops]
    assert acts == ["leaky_relu[0.01]", "leaky_relu[0.2]"], acts
    return network


@requires_tool("py:onnx", "py:onnxruntime", "gcc")
def test_a_float_conv_leaky_relu_model_imports_and_validates(tmp_path):
    network = _import(_leaky_model(), tmp_path / "float")
    runs = list(kernelgen.validate_network(network, "c", seed=3))
    assert all(r.ran and r.record.passed for r in runs), [r.record.detail for r in runs]


@pytest.mark.slow
@requires_tool("py:onnx", "py:onnxruntime", *TOOLS["hvx"])
def test_a_qdq_conv_leaky_relu_model_is_bit_exact_with_onnxruntime(tmp_path):
    """onnxruntime's quantize_static (QDQ, uint8 activations, int8 weights over their full range): each LeakyRelu
    between DequantizeLinear and QuantizeLinear folds into its conv as a byte table."""
    from onnx_models import quantized

    network = _import(quantized(_leaky_model(), per_channel=False, full_range=True), tmp_path / "qdq", "hvx")
    assert [s.convert for s in network.steps if s.convert] == ["quantize", "dequantize"]
    runs = list(kernelgen.validate_network(network, "hvx", seed=3))
    assert all(r.ran for r in runs) and all(r.record.passed for r in runs if r.step.is_kernel)
    uint8 = [a for r in runs for a in r.agreement if a.dtype == "uint8"]
    assert uint8 and all(a.max_abs == 0 for a in uint8)  # every byte onnxruntime's
