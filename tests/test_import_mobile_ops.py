"""`kernelgen import` of the ops between the convs of mobile networks (issue 29): HardSwish and HardSigmoid fold
into the conv before them, biases an exporter shares through Identity nodes are constants, and a conv refused
for a computed weight or bias names that input and what computes it."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.api import load_config
from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")


def _mobilenet_v3_tail(b, x: str, c: int) -> str:
    """torchvision's MobileNetV3 pieces without squeeze-excite: 1x1 expand + HardSwish, 3x3 depthwise +
    HardSigmoid (PyTorch's alpha 1/6), 1x1 project whose bias the exporter shares with the expand conv's through an
    Identity node (deduplicated equal initializers)."""
    from onnx import helper

    t = b.node("HardSwish", "expand_hs", [b.conv("expand", x, c, 2 * c, 1)])
    t = b.node("HardSigmoid", "dw_hsig", [b.conv("dw", t, 2 * c, 2 * c, 3, stride=2, pad=1, groups=2 * c)],
               alpha=1 / 6, beta=0.5)
    b.nodes.append(helper.make_node("Identity", ["dw_b"], ["shared_b"], name="Identity_0"))
    b.nodes.append(helper.make_node("Conv", [t, "project_w", "shared_b"], ["project_out"], name="project",
                                    kernel_shape=[1, 1]))
    w = b.rng.uniform(-0.3, 0.3, (2 * c, 2 * c, 1, 1)).astype(np.float32)
    from onnx import numpy_helper
    b.inits.append(numpy_helper.from_array(w, "project_w"))
    return "project_out"


@requires_tool(*ONNX, "gcc")
def test_gates_fold_and_identity_biases_are_constants(tmp_path):
    import onnx_models

    b = onnx_models.Builder(5)
    model = b.model("x", [2, 6, 11, 9], _mobilenet_v3_tail(b, "x", 6))
    path = onnx_models.save(model, tmp_path / "v3.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "v3"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "not generated" not in result.output and "not imported" not in result.output, result.output
    (config_file,) = [p for p in (tmp_path / "v3").glob("*.yaml") if p.name != "network.yaml"]
    config = load_config(config_file)
    assert [op.activation for op in config.ops] == ["hardswish", "hardsigmoid[0.166667, 0.5]", "none"]
    assert config.ops[1].act.alpha == pytest.approx(1 / 6, rel=1e-7)  # the node's float32 attribute
    checked = CliRunner().invoke(main, ["validate", str(config_file), str(tmp_path / "v3" / "network.yaml"),
                                        "--target", "c"])
    assert checked.exit_code == 0, checked.output
    assert "pass" in checked.output and "FAIL" not in checked.output, checked.output


@requires_tool(*ONNX)
def test_a_computed_bias_is_named_with_what_computes_it(tmp_path):
    import onnx_models
    from onnx import helper

    b = onnx_models.Builder(2)
    scaled = b.node("Mul", "scale", ["x", "x"])  # any computed tensor
    b.nodes.append(helper.make_node("ReduceMean", [scaled], ["m"], name="mean", axes=[0, 2, 3], keepdims=0))
    b.nodes.append(helper.make_node("Conv", ["x", "cw", "m"], ["y"], name="conv", kernel_shape=[1, 1]))
    from onnx import numpy_helper
    b.inits.append(numpy_helper.from_array(np.ones((4, 4, 1, 1), np.float32), "cw"))
    path = onnx_models.save(b.model("x", [1, 4, 5, 5], "y"), tmp_path / "computed.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out"), "--target", "c"])
    assert "its bias 'm' is not a constant of the model (computed by ReduceMean node 'mean')" in result.output, \
        result.output
