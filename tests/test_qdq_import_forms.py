"""Forms of QDQ models `kernelgen import` takes for hvx beyond uint8 activations at ordinary scales: int8
activations (quantize_static's default activation type), held as uint8 with each byte and zero point + 128 and
shown equal under ONNX's own semantics, then run whole on the DSP bit-exact; and a conv whose float32 scale
s_in * s_w / s_out is past what the kernels requantize by in float32's way, imported with fixed-point
requantization (within 1 of onnxruntime) instead of refused."""
from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from conftest import requires_tool

import kernelgen
from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")
HEXAGON = ("clang-19", "ld.lld-19", "qemu-hexagon")


def _as_int8(model):
    """The same QDQ model with int8 activations, as quantize_static writes by default (QInt8): each uint8 zero
    point - 128, so every dequantized value is the same."""
    from onnx import TensorProto, numpy_helper

    for k, init in enumerate(model.graph.initializer):
        if init.data_type == TensorProto.UINT8:
            values = numpy_helper.to_array(init).astype(np.int16) - 128
            model.graph.initializer[k].CopyFrom(numpy_helper.from_array(values.astype(np.int8), init.name))
    return model


@requires_tool(*ONNX)
def test_int8_activations_are_held_as_uint8_with_the_same_values_under_onnx_semantics():
    import onnx_models
    import onnxruntime as ort

    from kernelgen.onnx.int8_activations import uint8_activations

    model = _as_int8(onnx_models.qdq_concat_network())
    rewritten = _as_int8(onnx_models.qdq_concat_network())
    assert uint8_activations(rewritten) == 13  # every QuantizeLinear's result: x, 8 convs, 2 concats, the pool, the Flatten
    zero_points = {i.name: i for i in rewritten.graph.initializer}
    assert all(zero_points[n.input[2]].data_type == 2 for n in rewritten.graph.node if n.op_type == "QuantizeLinear")
    weights = [n for n in rewritten.graph.node if n.op_type == "DequantizeLinear" and n.input[0].endswith("_wq")]
    assert weights and all(zero_points[n.input[2]].data_type == 3 for n in weights)  # weights stay int8
    x = np.random.default_rng(4).standard_normal((1, 8, 12, 12)).astype(np.float32)
    spec = ort.SessionOptions()
    spec.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the nodes as ONNX defines them
    got, want = (ort.InferenceSession(m.SerializeToString(), spec, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0] for m in (rewritten, model))
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 5
    # an int8 tensor the caller gets (a graph output) or reads: the model is left as it is
    ends = _as_int8(onnx_models.qdq_concat_network())
    ends.graph.output.append(onnx_models.helper.make_tensor_value_info("cat_q", 3, None))
    assert uint8_activations(ends) == 0 and all(i.data_type != 2 or not i.name.endswith("_as_uint8")
                                                for i in ends.graph.initializer)


@requires_tool(*ONNX, *HEXAGON, "make")
def test_a_network_quantized_with_int8_activations_runs_whole_on_the_dsp_bit_exact(tmp_path):
    import onnx
    import onnx_models

    onnx.save(_as_int8(onnx_models.qdq_concat_network()), str(tmp_path / "qs8.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / "qs8.onnx"), "-o", str(tmp_path / "qs8"),
                                       "--target", "hvx"])
    assert result.exit_code == 0, result.output
    assert "int8 activations: 13 tensor(s) held as uint8, each byte and zero point + 128" in result.output
    assert "8 kernel(s), 2 concat step(s) and no host step" in result.output
    network = kernelgen.load_network(tmp_path / "qs8" / "network.yaml")
    assert network.tensors["cat_q"].zero_point == 7 and network.tensors["x_q"].zero_point == 128
    validation = kernelgen.validate_network(network, "hvx", seed=8)
    runs = list(validation)
    assert all(a.max_abs == 0 for r in runs for a in r.agreement) and len(runs) == 12
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why


@requires_tool(*ONNX, *HEXAGON, "make")
def test_a_conv_whose_float32_scale_is_past_half_imports_with_fixed_point_requantization(tmp_path):
    import onnx
    import onnx_models
    from onnx import numpy_helper

    model = onnx_models.qdq_concat_network()
    for k, init in enumerate(model.graph.initializer):  # the squeeze's output scale: s_in * s_w / s_out up to 0.67
        if init.name == "s_s":
            model.graph.initializer[k].CopyFrom(numpy_helper.from_array(np.asarray(0.0003, np.float32), "s_s"))
    onnx.save(model, str(tmp_path / "qfp.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / "qfp.onnx"), "-o", str(tmp_path / "qfp"),
                                       "--target", "hvx"])
    assert result.exit_code == 0 and "8 kernel(s), 2 concat step(s) and no host step" in result.output, \
        result.output
    configs = {p.stem: p.read_text() for p in (tmp_path / "qfp").glob("*.yaml")}
    fixed = sorted(name for name, text in configs.items() if "requantization: fixed_point}  # a float32 scale "
                   "s_in * s_w / s_out is past [2^-16, 0.5)" in text)
    assert fixed == ["e0", "squeeze"]  # e0 reads the squeeze's tiny scale: 0.0003 * 0.002 / 0.045 < 2^-16
    assert all("requantization: float32}" in configs[name] for name in configs if name not in (*fixed, "network"))
    network = kernelgen.load_network(tmp_path / "qfp" / "network.yaml")
    validation = kernelgen.validate_network(network, "hvx", seed=9)
    runs = list(validation)
    assert max(a.max_abs for r in runs for a in r.agreement if r.step.kind != "convert") == 1
    assert validation.verdict().status == "pass"
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why


@requires_tool(*ONNX, *HEXAGON, "make")
def test_a_shufflenet_quantized_with_the_defaults_runs_whole_on_the_dsp(tmp_path):
    """Two ShuffleNetV2 units and a global pool, quantized by onnxruntime's quantize_static with its defaults (QDQ,
    int8 activations, per channel), as a user does: each Slice between DequantizeLinear (one shared by both halves)
    and QuantizeLinear, the shuffle's Reshape and Transpose each between a QuantizeLinear -> DequantizeLinear pair,
    the Concat requantizing; the pool a ReduceMean before the classifier. All of it imports as kernels and channel steps, and the DSP
    program is bit-exact with the step-by-step run."""
    import onnx_models
    from onnxruntime.quantization import CalibrationDataReader, quantize_static
    from test_channel_steps import _shufflenet_unit

    b = onnx_models.Builder(22)
    y = _shufflenet_unit(b, _shufflenet_unit(b, b.relu("stem_r", b.conv("stem", "x", 3, 16, 3, pad=1)), 16, "u1", 8),
                         16, "u2", 8)
    pooled = b.node("ReduceMean", "mean", [y], axes=[2, 3], keepdims=0)  # x.mean([2, 3])
    rng = np.random.default_rng(4)
    b.inits += [onnx_models.numpy_helper.from_array(rng.standard_normal((10, 16)).astype(np.float32) * 0.3, "fc_w"),
                onnx_models.numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc_b")]
    logits = b.node("Gemm", "fc", [pooled, "fc_w", "fc_b"], transB=1)
    float_path = onnx_models.save(b.model("x", [1, 3, 8, 8], logits), tmp_path / "shn.onnx")

    class Calibration(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(3)
            self.feeds = iter([{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(str(float_path), str(tmp_path / "shn_q.onnx"), Calibration(), per_channel=True)
    result = CliRunner().invoke(main, ["import", str(tmp_path / "shn_q.onnx"), "-o", str(tmp_path / "q"),
                                       "--target", "hvx"])
    assert result.exit_code == 0, result.output
    assert "int8 activations:" in result.output, result.output
    assert "4 kernel(s), 2 concat, 4 slice, 2 shuffle step(s) and no host step" in result.output, result.output
    manifest = (tmp_path / "q" / "network.yaml").read_text()
    assert manifest.count("layout: nhwc-8h8w32c") == manifest.count("dtype: uint8"), manifest
    network = kernelgen.load_network(tmp_path / "q" / "network.yaml")
    validation = kernelgen.validate_network(network, "hvx", seed=10)
    runs = list(validation)
    assert validation.verdict().status == "pass"
    moved = [a for r in runs if r.step.moves_channels for a in r.agreement]
    assert len(moved) == 8 and max(a.max_abs for a in moved) <= 1
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why
