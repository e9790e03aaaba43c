"""DenseNet quantized by onnxruntime on hvx: a BatchNormalization between DequantizeLinear and QuantizeLinear as a
uint8 1x1 depthwise conv (onnx/qlayers.qbatch_norm), a windowed AveragePool as a uint8 avgpool, the Concats as
channel steps: the network runs whole, its program under qemu-hexagon."""
from __future__ import annotations

import numpy as np
import pytest
from builders import toolchain
from click.testing import CliRunner

import kernelgen
from conftest import require_tools, requires_tool
from kernelgen import api
from kernelgen.cli import main
from kernelgen.errors import ConfigError

ONNX = ("py:onnx", "py:onnxruntime")
TOOLS = toolchain("hvx")
AVGPOOL = """name: pooled
dtype: uint8
input: {{shape: [1, 8, 10, 40], layout: nhwc-8h8w32c}}
quant: {{input_scale: 0.02, input_zero_point: 7, weight_scale: 0.004, weight_dtype: int8, output_scale: 0.03,
        output_zero_point: 100, intermediate_scale: 0.021, intermediate_zero_point: 9, requantization: float32}}
ops:
  - conv2d: {{out_channels: 36, kernel: 1, bias: true, activation: relu}}
  - avgpool: {{kernel: 2, stride: 2, pad: {pad}, quant: {{output_scale: 0.019, output_zero_point: 4}}}}
output: {{layout: nhwc-8h8w32c}}
targets: [hvx]
"""


@requires_tool(*TOOLS)
def test_a_windowed_average_pool_runs_on_bytes():
    """A 2x2 stride-2 average pool after a conv (DenseNet's transition): the byte sums less 4 * za, requantized
    by s_in / (4 * s_out), bit-exact with numpy under qemu-hexagon."""
    config = api.parse_config(AVGPOOL.format(pad=0), "pooled.yaml")
    assert config.ops[1].kind == "avgpool" and config.ops[1].quant.output_scale == 0.019
    result = api.validate(config, "hvx", seed=3)
    assert result.passed and result.detail.startswith("bit-exact"), result.detail


def test_a_padded_average_pool_on_bytes_is_refused_at_its_pad():
    with pytest.raises(ConfigError) as raised:
        api.parse_config(AVGPOOL.format(pad=1), "pooled.yaml")
    assert any(p.key == "ops[1].avgpool.pad" and "expected pad 0 with dtype uint8 (every window whole" in p.message
               for p in raised.value.problems), raised.value


@requires_tool(*ONNX, *TOOLS)
@pytest.mark.parametrize("full_range", [False, True], ids=["7bit", "full_range"])
def test_a_quantized_densenet_imports_whole_and_runs_on_hvx(full_range, tmp_path):
    """quantize_static leaves DenseNet's BatchNormalizations (after each Concat) and its transitions' AveragePool
    between DequantizeLinear and QuantizeLinear (main: 4 host steps, 16 with the Concats they held back). Each BN
    becomes a 1x1 depthwise conv of weights sign(f) * 127 at scale |f| / 127; every step passes, the program
    matches the step-by-step run, and the bytes are onnxruntime's but where its float32 BN rounds otherwise."""
    import onnx
    import onnx_models

    path = tmp_path / "densenet.onnx"
    model = onnx_models.quantized(onnx_models.densenet_network(), per_channel=True, full_range=full_range)
    onnx.save(model, str(path))
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "net")])
    assert result.exit_code == 0, result.output
    assert "not generated" not in result.output and "not imported" not in result.output, result.output
    assert "7 kernel(s), 6 concat step(s) and no host step" in result.output, result.output
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    ops = [op for s in network.kernels for op in s.config.ops]
    assert [(op.kernel, op.stride) for op in ops if op.kind == "avgpool"][0] == ((2, 2), (2, 2))  # the transition
    norms = [op for op in ops if op.kind == "conv2d" and op.groups > 1 and op.kernel == (1, 1)]
    assert len(norms) == 6  # every norm1, the transition's and the final one
    # the transition's norm: f = scale / sqrt(var + eps), its scale as quantize_static left it (int8 weights,
    # dequantized), 127 * weight_scale per channel
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    scale = (inits["tr_norm_scale_quantized"].astype(np.float32) - inits["tr_norm_scale_zero_point"]) \
        * inits["tr_norm_scale_scale"]
    f = np.float32(1) / np.sqrt(inits["tr_norm_var"] + np.float32(1e-5)) * scale
    (tr_norm,) = [op for s in network.kernels if s.config.name.startswith("tr_norm") for op in s.config.ops[:1]]
    np.testing.assert_allclose(np.array(tr_norm.quant.weight_scale) * 127, np.abs(f), rtol=1e-6)
    require_tools(*TOOLS)
    runs = list(kernelgen.validate_network(network, "hvx", seed=5))
    assert all(r.ran for r in runs) and all(r.record.passed for r in runs if r.step.is_kernel)
    uint8 = [a for r in runs for a in r.agreement if a.dtype == "uint8"]
    assert all(a.passed and a.max_abs <= 1 for a in uint8)
    stem = next(r for r in runs if r.step.label == "stem")
    assert stem.agreement[0].max_abs == 0  # before any BN: onnxruntime's bytes
