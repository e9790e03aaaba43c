"""uint8 sigmoid and SiLU as byte tables (kernelgen/ops/sigmoid.py): onnxruntime's own bytes for them, entry by
entry, within the slack its approximate logistic leaves; the config's gate quantization checked; EfficientNet's
block quantized by onnxruntime imported whole and run on hvx."""
from __future__ import annotations

import numpy as np
import pytest
from builders import Case, make_config, toolchain
from click.testing import CliRunner

import kernelgen
from conftest import require_tools, requires_tool
from kernelgen.cli import main
from kernelgen.errors import ConfigError
from kernelgen.ops.sigmoid import SIGMOID, SILU
from kernelgen.quant import op_quants

ONNX = ("py:onnx", "py:onnxruntime")
TOOLS = toolchain("hvx")
UINT8 = Case((), (), input_layout="nhwc-8h8w32c", output_layout="nhwc-8h8w32c", schedule=None, dtype="uint8",
             targets="[hvx]")
QUANT = ("{input_scale: 0.02, input_zero_point: 7, weight_scale: 0.004, weight_dtype: int8, output_scale: 0.03, "
         "output_zero_point: 100}")


def _onnxruntime_table(silu: bool, s_in: float, z_in: int, s_out: float, z_out: int,
                       gate: tuple[float, int] = (1 / 255, 0)) -> np.ndarray:
    """Every byte through DequantizeLinear -> Sigmoid -> QuantizeLinear (and for SiLU on through the gate's
    DequantizeLinear and a Mul by the dequantized byte), in onnxruntime's optimized session."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    values = [("si", s_in, np.float32), ("zi", z_in, np.uint8), ("so", s_out, np.float32), ("zo", z_out, np.uint8),
              ("sg", gate[0], np.float32), ("zg", gate[1], np.uint8)]
    inits = [numpy_helper.from_array(np.array(v, dtype=t), n) for n, v, t in values]
    nodes = [helper.make_node("DequantizeLinear", ["x", "si", "zi"], ["v"]), helper.make_node("Sigmoid", ["v"], ["g"])]
    if silu:
        nodes += [helper.make_node("QuantizeLinear", ["g", "sg", "zg"], ["gq"]),
                  helper.make_node("DequantizeLinear", ["gq", "sg", "zg"], ["gv"]),
                  helper.make_node("Mul", ["v", "gv"], ["m"]),
                  helper.make_node("QuantizeLinear", ["m", "so", "zo"], ["y"])]
    else:
        nodes.append(helper.make_node("QuantizeLinear", ["g", "so", "zo"], ["y"]))
    graph = helper.make_graph(nodes, "table", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                              [i for i in inits if silu or i.name not in ("sg", "zg")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.arange(256, dtype=np.uint8).reshape(1, 256)})[0].reshape(-1).astype(int)


@requires_tool(*ONNX)
@pytest.mark.parametrize("silu", [False, True], ids=["sigmoid", "silu"])
def test_tables_are_onnxruntimes_bytes_within_their_slack(silu):
    """For random scales and zero points (a gate at 1/255 as quantize_static makes it), the table is onnxruntime's
    QLinearSigmoid (-> QLinearMul) bytes: equal where the slack is 0, within it elsewhere. Measured here: 1 entry of
    76,800 apart, every time one whose exact gate lies within MLAS's logistic error of a half."""
    rng = np.random.default_rng(31)
    record = SILU if silu else SIGMOID
    slacks = []
    for _ in range(60):
        s_in = float(np.float32(rng.uniform(0.01, 0.2)))
        z_in = int(rng.integers(0, 256))
        s_out = float(np.float32(rng.uniform(0.01, 0.1) if silu else rng.uniform(0.002, 0.006)))
        z_out = int(rng.integers(0, 30))
        table = np.array(record.byte_table(s_in, z_in, s_out, z_out, (1 / 255, 0) if silu else None))
        slack = record.table_slack(s_in, z_in, s_out, z_out, (1 / 255, 0) if silu else None)
        theirs = _onnxruntime_table(silu, s_in, z_in, s_out, z_out)
        assert np.abs(theirs - table).max() <= slack, (s_in, z_in, s_out, z_out)
        slacks.append(slack)
    assert slacks.count(0) >= 50  # bit-exact for nearly every scale


def test_an_entry_within_the_logistics_error_of_a_half_is_slack():
    """v = 0.5 (byte 25 at 0.02 from 0): its sigmoid 0.6225 lands on 159.5 output steps at s_out = g / 159.5 (to
    float32's rounding, 1e-5 steps off), which MLAS's logistic (within 1.8e-7, 6.4e-5 steps) may round either way."""
    g = 1 / (1 + np.exp(-0.5))
    s_out = float(np.float32(g / 159.5))
    assert SIGMOID.table_slack(0.02, 0, s_out, 0) == 1
    assert SIGMOID.table_slack(0.02, 0, s_out * 1.01, 0) == 0
    assert SIGMOID.byte_table(0.02, 0, s_out, 0)[25] in (159, 160)


def test_silu_without_a_gate_quantization_rounds_the_exact_product_once():
    s_in, z_in, s_out, z_out = 0.05, 128, 0.03, 10
    v = (np.arange(256) - z_in) * np.float32(s_in)
    want = np.clip(np.rint(v / (1 + np.exp(-v)) / np.float32(s_out)) + z_out, 0, 255)
    assert list(SILU.byte_table(s_in, z_in, s_out, z_out)) == list(want.astype(int))


def _silu_config(quant: str):
    ops = [f"{{out_channels: 36, kernel: 1, bias: true, activation: silu, quant: {quant}}}"]
    return make_config("q", UINT8.with_(shape=[1, 9, 11, 40], ops=ops).with_block("quant", QUANT))


def test_a_silu_with_its_gate_quantization_builds_that_table():
    config = _silu_config("{conv_scale: 0.04, conv_zero_point: 110, gate_scale: 0.0039, gate_zero_point: 0}")
    (oq,) = op_quants(config)
    assert oq.table == SILU.byte_table(0.04, 110, 0.03, 100, (0.0039, 0))
    assert oq.table != SILU.byte_table(0.04, 110, 0.03, 100)  # the gate's rounding moves some entries


@pytest.mark.parametrize("quant, activation, message", [
    ("{conv_scale: 0.04, conv_zero_point: 110, gate_scale: 0.0039}", "silu",
     "expected gate_scale and gate_zero_point together"),
    ("{conv_scale: 0.04, conv_zero_point: 110, gate_scale: 0.0039, gate_zero_point: 0}", "hardswish",
     "expected gate_scale only with a silu on dtype uint8 (the gate it multiplies by), got it with hardswish"),
])
def test_a_gate_quantization_is_checked(quant, activation, message):
    ops = [f"{{out_channels: 36, kernel: 1, activation: {activation}, quant: {quant}}}"]
    with pytest.raises(ConfigError) as error:
        make_config("q", UINT8.with_(shape=[1, 9, 11, 40], ops=ops).with_block("quant", QUANT))
    assert message in str(error.value) and "ops[0].conv2d" in str(error.value)


@requires_tool(*ONNX, *TOOLS)
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_an_efficientnet_block_imports_whole_and_runs_bit_exact_on_hvx(per_channel, tmp_path):
    """EfficientNet's block quantized by onnxruntime (QDQ SiLUs, a squeeze-excite Sigmoid gate): every node
    imported, the SiLUs and the gate tables after their convs, every tensor onnxruntime's bytes under qemu-hexagon
    (main: 9 host steps of Sigmoid and Mul)."""
    import onnx
    import onnx_models

    path = tmp_path / "efficientnet.onnx"
    onnx.save(onnx_models.quantized(onnx_models.efficientnet_network(), per_channel), str(path))
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "net")])
    assert result.exit_code == 0, result.output
    assert "not generated" not in result.output and "not imported" not in result.output, result.output
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    assert [s.convert for s in network.steps if not s.is_kernel] == ["quantize", "dequantize"]
    acts = sorted(op.act.name for s in network.kernels for op in s.config.ops if op.act.KEY == "sigmoid")
    assert acts == ["sigmoid", "silu", "silu", "silu", "silu"]
    gated = [op.quant.gate_scale for s in network.kernels for op in s.config.ops if op.act.name == "silu"]
    assert all(g is not None and 0 < g < 0.005 for g in gated)  # the Sigmoid's QuantizeLinear, about 1/255
    require_tools(*TOOLS)
    runs = list(kernelgen.validate_network(network, "hvx", seed=5))
    assert all(r.ran for r in runs) and all(r.record.passed for r in runs if r.step.is_kernel)
    uint8 = [a for r in runs for a in r.agreement if a.dtype == "uint8"]
    assert uint8 and all(a.max_abs == 0 for a in uint8)  # every byte onnxruntime's
    assert runs[-1].agreement[0].max_abs == 0.0
