"""An imported float config is checked against its model op by op: each op's own nodes of the ONNX graph, run by
onnxruntime on the kernel's own input to that op, held to that op's rounding bound. numpy reads the config, so it
cannot see a config that differs from its model; the chain-wide bound against onnxruntime grows by sum|w| per op
and, in MobileNetV3-small's classifier tail, is 60 times the outputs (benchmarks/model_drift.py). Op by op, a dropped bias fails at its op.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from builders import toolchain
from click.testing import CliRunner
from conftest import require_tools
from onnx import numpy_helper

from kernelgen import api
from kernelgen.cli import main
from kernelgen.targets import TARGETS

TOOLS = {name: toolchain(name) for name in TARGETS}  # each target's own list (`kernelgen targets`)
ONNX = ("py:onnx", "py:onnxruntime")


def mobilenet_v3_tail(seed: int = 11):
    """MobileNetV3-small's last block and classifier at a small size, as torchvision writes them: 1x1 expand +
    HardSwish, 5x5 depthwise + HardSwish, squeeze-excite (global pool, 1x1 + ReLU, 1x1 + HardSigmoid, Mul), 1x1
    project + the block's input; then the head (1x1 + HardSwish), global pool, Flatten, Gemm + HardSwish, Gemm.
    From the Mul on it is the tail the issue names (`features_11_block_2_mul_to_classifier`)."""
    import onnx_models

    b = onnx_models.Builder(seed)
    t = b.node("HardSwish", "expand_hs", [b.conv("expand", "x", 24, 96, 1)])
    t = b.node("HardSwish", "dw_hs", [b.conv("dw", t, 96, 96, 5, pad=2, groups=96)])
    s = b.node("GlobalAveragePool", "se_pool", [t])
    s = b.relu("se_relu", b.conv("se_fc1", s, 96, 24, 1))
    s = b.node("HardSigmoid", "se_gate", [b.conv("se_fc2", s, 24, 96, 1)], alpha=1 / 6, beta=0.5)
    t = b.node("Mul", "se_mul", [s, t])
    t = b.add("block_add", b.conv("project", t, 96, 24, 1), "x")
    t = b.node("HardSwish", "head_hs", [b.conv("head", t, 24, 144, 1)])
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    for name, (k, c) in (("fc1", (128, 144)), ("fc2", (40, 128))):
        b.inits.append(numpy_helper.from_array(
            (b.rng.uniform(-1, 1, (k, c)) * np.sqrt(3 / c)).astype(np.float32), f"{name}_w"))
        b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.2, 0.2, k).astype(np.float32), f"{name}_b"))
    t = b.node("HardSwish", "fc1_hs", [b.node("Gemm", "fc1", [t, "fc1_w", "fc1_b"], transB=1)])
    return b.model("x", [1, 24, 7, 7], b.node("Gemm", "fc2", [t, "fc2_w", "fc2_b"], transB=1))


@pytest.fixture(scope="module")
def tail(tmp_path_factory):
    """The model imported (one config from the Mul to the classifier), and that config's text."""
    require_tools(*ONNX)
    import onnx_models

    folder = tmp_path_factory.mktemp("v3tail")
    model = onnx_models.save(mobilenet_v3_tail(), folder / "v3tail.onnx")
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(folder / "configs"), "--target", "c"])
    assert result.exit_code == 0, result.output
    return folder / "configs" / "se_mul_to_fc2.yaml"


def test_the_tail_is_one_config_of_six_ops(tail):
    config = api.load_config(tail)
    assert [op.kind for op in config.ops] == ["mul", "conv2d", "conv2d", "avgpool", "conv2d", "conv2d"]
    assert [op.bias for op in config.ops if op.kind == "conv2d"] == [True, True, True, True]


def _without_head_bias(tail) -> str:
    """The config with `bias: true` removed from the head conv (op 3, 24 -> 144 + HardSwish) alone."""
    text = tail.read_text()
    line = next(line for line in text.splitlines() if "out_channels: 144" in line)
    assert "bias: true, " in line
    return text.replace(line, line.replace("bias: true, ", ""))


def _beside_the_model(tail, folder):
    """The mutated config where its source.onnx (relative to it) still finds the model."""
    (folder / "configs").mkdir()
    (folder / "v3tail.onnx").symlink_to(tail.parent.parent / "v3tail.onnx")
    mutated = folder / "configs" / tail.name
    mutated.write_text(_without_head_bias(tail))
    return mutated


@pytest.mark.parametrize("target", ["c", "opencl", "vulkan"])
def test_a_config_that_drops_a_bias_fails_at_that_op(tail, target, tmp_path):
    require_tools(*ONNX, *TOOLS[target])
    mutated = _beside_the_model(tail, tmp_path)
    config = api.load_config(mutated)
    result = api.validate(config, target, seed=3)
    assert not result.passed, result.detail
    assert result.failure == ("onnxruntime",), result.detail  # numpy reads the same wrong config: it agrees
    assert re.search(r"^conv2d #3 differs from onnxruntime .* by up to [0-9.]+: output\[", result.detail), \
        result.detail
    assert result.detail.endswith("the config differs from its model here")
    assert result.oracles == ("numpy", "onnxruntime")


@pytest.mark.parametrize("target", ["c", "opencl", "vulkan"])
def test_the_unmutated_tail_passes_op_by_op_against_the_model(tail, target, tmp_path):
    require_tools(*ONNX, *TOOLS[target])
    config = api.load_config(tail)
    result = api.validate(config, target, seed=3)
    assert result.passed, result.detail
    assert result.oracles == ("numpy", "onnxruntime") and result.checked == "op-by-op"
