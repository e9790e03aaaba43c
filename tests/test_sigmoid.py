"""sigmoid and silu (x * sigmoid(x)) in a conv's epilogue: EfficientNet's and RegNetY's activations, which `kernelgen
import` left to onnxruntime before, so neither network had a program. The config keys and the targets and dtype that
refuse them; the numpy reference against onnxruntime; c's exp (templates/c/expf.h.j2) against float64 exp; every
float target's kernel against the reference; the importer folding PyTorch's Sigmoid + Mul export as silu and the
squeeze-excite gate's Sigmoid, and the network run against onnxruntime."""
from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from builders import toolchain
from conftest import require_tools, requires_tool

from kernelgen import api
from kernelgen.cli import main
from kernelgen.emit import environment
from kernelgen.errors import ConfigError
from kernelgen.ops.sigmoid import GATE_ROUNDOFFS, SIGMOID, SILU

ONNX = ("py:onnx", "py:onnxruntime")
F32_ROUNDOFF = 2.0 ** -24

CHAIN = """\
name: swish
input: {shape: [2, 9, 7, 6], layout: NHWC}
ops:
  - conv2d: {out_channels: 10, kernel: 1, bias: true, activation: silu}
  - conv2d: {out_channels: 10, kernel: 3, stride: 2, pad: 1, groups: 10, bias: true, activation: sigmoid}
  - conv2d: {out_channels: 5, kernel: 3, pad: 1, bias: true, activation: silu}
  - conv2d: {out_channels: 5, kernel: 1, residual: 3, activation: sigmoid}
output: {layout: NHWC}
schedule: {budget: 65536}
"""


def test_the_keys_become_the_sigmoid_records():
    config = api.parse_config(CHAIN, "swish.yaml")
    assert [op.epilogue.act for op in config.ops] == [SILU, SIGMOID, SILU, SIGMOID]
    assert [op.activation for op in config.ops] == ["silu", "sigmoid", "silu", "sigmoid"]
    assert config.ops[3].epilogue.steps == ("residual", "sigmoid")


@pytest.mark.parametrize("text, expected", [
    ("targets: [hvx]\n", "expected an activation target 'hvx' computes (none, relu, relu6, hardswish, hardsigmoid, "
                         "leaky_relu or a clamp [lo, hi]), got silu"),
    # uint8 looks it up in a table of the conv's own bytes (hvx too): it needs their scale
    ("dtype: uint8\ntargets: [hvx]\nquant: {input_scale: 0.1, "
     "input_zero_point: 0, weight_scale: 0.1, output_scale: 0.1, output_zero_point: 0}\n",
     "expected quant: {conv_scale: ..., conv_zero_point: ...} on the op with a silu on dtype uint8"),
])
def test_a_target_or_dtype_without_it_is_refused_at_the_key(text, expected):
    source = ("name: s\ninput: {shape: [1, 4, 4, 4]}\nops:\n  - conv2d: {out_channels: 4, activation: silu}\n"
              + text)
    with pytest.raises(ConfigError) as raised:
        api.parse_config(source, "s.yaml")
    assert any(p.line == 4 and p.key == "ops[0].conv2d.activation" and expected in p.message
               for p in raised.value.problems), raised.value


@requires_tool(*ONNX)
def test_the_reference_is_onnxruntimes_sigmoid_and_silu():
    """Over [-20, 20] and the extremes; the float64 reference against onnxruntime's float32 (its own logistic
    approximation): within the bound the kernels are held to, GATE_ROUNDOFFS units of roundoff (silu: times |x|)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = np.concatenate([np.linspace(-20, 20, 4001), [-100, -88, 0, 88, 100]]).astype(np.float32)
    nodes = [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["x", "g"], ["s"])]
    graph = helper.make_graph(nodes, "swish", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [x.size]) for n in "gs"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    gate, swish = session.run(None, {"x": x})
    x64 = x.astype(np.float64)
    bound = GATE_ROUNDOFFS * F32_ROUNDOFF
    assert np.abs(SIGMOID.reference(x64) - gate).max() <= bound
    assert (np.abs(SILU.reference(x64) - swish) <= bound * np.abs(x64) + F32_ROUNDOFF * np.abs(x64)).all()


def _build_expf(tmp_path, body: str, *flags: str, output: str = "e.so") -> Path:
    """templates/c/expf.h.j2 and `body` built by gcc at the kernels' flags, with `flags` (-march=..., -S)."""
    header = environment().get_template("c/expf.h.j2").render()
    (tmp_path / "e.c").write_text(header + body)
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-O3", "-ffp-contract=fast", "-shared", "-fPIC", *flags,
                    "-o", str(tmp_path / output), str(tmp_path / "e.c")], check=True)
    return tmp_path / output


@requires_tool("gcc")
def test_cs_exp_is_within_two_ulps_over_its_range_and_saturates_past_it(tmp_path):
    """kg_expf, built as the kernels build it, on every 97th float32 in [-86, 86] and at the edges."""
    lib = ctypes.CDLL(str(_build_expf(tmp_path, "\nvoid apply(const float *x, float *y, int n) {\n"
                                      "  for (int i = 0; i < n; ++i) y[i] = kg_expf(x[i]);\n}\n", "-march=native")))
    bits = np.arange(np.float32(-86).view(np.int32), np.iinfo(np.int32).min, -97, dtype=np.int64)
    x = np.concatenate([np.arange(0, np.float32(86).view(np.int32), 97).astype(np.int32).view(np.float32),
                        (bits & 0xFFFFFFFF).astype(np.uint32).view(np.float32)[::-1][-10**6:]])
    x = np.concatenate([x[(x >= -86) & (x <= 86)], [-86.0, -20.5, -1e-30, 0.0, 1e-30, 86.0]]).astype(np.float32)
    y = np.empty_like(x)
    lib.apply(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(x.size))
    exact = np.exp(x.astype(np.float64))
    ulps = np.abs(y - exact) / np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 2.0, (ulps.max(), x[ulps.argmax()])
    edges = np.array([-1000, -87, -np.inf, 86.5, 1000, np.inf, np.nan], np.float32)
    out = np.empty_like(edges)
    lib.apply(edges.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(edges.size))
    e86 = np.exp(np.float64(86))
    assert np.allclose(out[:3], 1 / e86, rtol=2 ** -22) and np.allclose(out[3:6], e86, rtol=2 ** -22), out
    assert np.isnan(out[6]), "a NaN stays NaN"


@requires_tool("gcc")
def test_a_sigmoid_loop_is_vectorized_by_gcc_for_avx2(tmp_path):
    """gcc -march=haswell (AVX2, FMA) vectorizes the gate's loop over a tile's 32 channels: packed 8-float FMAs and
    divides, no scalar divide (kg_expf's clamps as float selects left this loop scalar: 4.2x the time of
    EfficientNet-B0's features_2_0_block_0_0_to_1_0)."""
    loop = ("\nvoid gate(const float *restrict v, float *restrict g) {\n"
            "  for (int i = 0; i < 32; ++i) g[i] = 1.0f / (kg_expf(v[i] * -1.0f) + 1.0f);\n}\n")
    library = _build_expf(tmp_path, loop, "-march=haswell", "-S", output="e.s")
    assembly = library.read_text()
    assert re.search(r"vfmadd\w+ps\s+%ymm", assembly) and re.search(r"vdivps\s+%ymm", assembly), assembly[:2000]
    assert "vdivss" not in assembly


@pytest.mark.parametrize("target", ["c", "opencl", "vulkan"])
def test_every_float_target_matches_the_reference(target):
    require_tools(*toolchain(target))
    config = api.parse_config(CHAIN + f"targets: [{target}]\n", "swish.yaml")
    result = api.validate(config, target, seed=9)
    assert result.passed, f"{result.detail} (seed {result.seed})"
    assert result.checked == "op-by-op", result.checked
    assert result.bound_ratio <= 1.0


def _efficientnet_block(b):
    """EfficientNet-B0's MBConv at a small size, as PyTorch exports it: 1x1 expand + SiLU (a Sigmoid and a Mul),
    3x3 depthwise + SiLU, squeeze-excite (global pool, 1x1 + SiLU, 1x1 + Sigmoid, the Mul by it), 1x1 project."""
    def silu(name, x):
        return b.node("Mul", f"{name}_mul", [x, b.node("Sigmoid", f"{name}_sig", [x])])

    t = silu("expand", b.conv("expand", "x", 8, 24, 1))
    t = silu("dw", b.conv("dw", t, 24, 24, 3, pad=1, groups=24))
    s = b.node("GlobalAveragePool", "se_pool", [t])
    s = silu("se_fc1", b.conv("se_fc1", s, 24, 6, 1))
    s = b.node("Sigmoid", "se_gate", [b.conv("se_fc2", s, 6, 24, 1)])
    t = b.node("Mul", "se_mul", [t, s])
    return b.conv("project", t, 24, 8, 1)


@requires_tool(*ONNX, "gcc")
def test_pytorchs_silu_and_the_squeeze_excite_sigmoid_fold_and_the_network_runs(tmp_path):
    import onnx_models

    b = onnx_models.Builder(7)
    other = b.node("Sigmoid", "lone_sig", [b.conv("side", "x", 8, 8, 1)])  # a Sigmoid alone: the conv's sigmoid
    path = onnx_models.save(b.model("x", [1, 8, 10, 9], b.add("out", _efficientnet_block(b), other)),
                            tmp_path / "b0.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "b0"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "not imported" not in result.output and "not generated" not in result.output, result.output
    activations = {}
    for file in (tmp_path / "b0").glob("*.yaml"):
        if file.name != "network.yaml":
            config = api.load_config(file)
            activations |= {f"{config.name}#{j}": op.activation for j, op in enumerate(config.ops)}
    assert sorted(activations.values()).count("silu") == 3, activations
    assert sorted(activations.values()).count("sigmoid") == 2, activations  # the gate and the lone side Sigmoid
    checked = CliRunner().invoke(main, ["validate", str(tmp_path / "b0" / "network.yaml"), "--target", "c"])
    assert checked.exit_code == 0, checked.output
    assert "FAIL" not in checked.output and "program" in checked.output, checked.output


@requires_tool(*ONNX)
def test_a_mul_of_a_sigmoid_by_another_tensor_is_no_silu(tmp_path):
    """conv -> Sigmoid -> Mul(that, x): the conv's result has one reader, the Sigmoid, which it folds; the Mul by the
    network's input is an elementwise product that stays in onnxruntime."""
    import onnx_models

    b = onnx_models.Builder(3)
    gated = b.node("Mul", "not_silu", [b.node("Sigmoid", "sig", [b.conv("conv", "x", 8, 8, 1)]), "x"])
    path = onnx_models.save(b.model("x", [1, 8, 6, 5], gated), tmp_path / "gated.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "g"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "not generated (host steps in network.yaml, run by onnxruntime): Mul\n" in result.output, result.output
    assert [op.activation for op in api.load_config(tmp_path / "g" / "conv.yaml").ops] == ["sigmoid"]


@requires_tool(*ONNX)
def test_a_target_without_sigmoid_keeps_the_convs_and_leaves_the_sigmoids_to_onnxruntime(tmp_path):
    """hvx computes no sigmoid: its float import folds none (the convs stay kernels, as before sigmoid existed),
    where folding would have made every such conv's config fail and left the conv itself to onnxruntime (the
    squeeze-excite gate's Mul is a kernel)."""
    import onnx_models

    b = onnx_models.Builder(7)
    path = onnx_models.save(b.model("x", [1, 8, 10, 9], _efficientnet_block(b)), tmp_path / "b0.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "h"), "--target", "hvx"])
    assert result.exit_code == 0, result.output
    assert "not imported" not in result.output, result.output
    assert "not generated (host steps in network.yaml, run by onnxruntime): Sigmoid x4, Mul x3" in result.output, \
        result.output
