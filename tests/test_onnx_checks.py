"""Invalid ONNX Conv nodes (issue 32 item 3): each one onnxruntime refuses is listed as not imported, with the
reason onnxruntime gives; validate on a config whose model onnxruntime cannot run is a FAIL row (or, when the
model's weights do not fit the config, a config error at source.nodes), never a traceback; files that are not
ONNX models are exit 2."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")

# name -> (single_conv arguments, the reason kernelgen gives: the text before onnxruntime's, in brackets)
HOSTILE = {
    "weights for 5 channels on 8": (dict(weight=[8, 5, 3, 3]),
                                    "its input has 8 channels but its weights [8, 5, 3, 3] take 5 per group x group 1"),
    "kernel_shape 5x5 on 3x3 weights": (dict(weight=[8, 8, 3, 3], kernel_shape=[5, 5]),
                                        "kernel_shape [5, 5] does not match its 3x3 weights"),
    "stride 0": (dict(weight=[8, 8, 3, 3], strides=[0, 1]), "strides [0, 1]: expected positive values"),
    "dilation 0": (dict(weight=[8, 8, 3, 3], dilations=[1, 0]), "dilations [1, 0]: expected positive values"),
    "negative pad": (dict(weight=[8, 8, 3, 3], pads=[-1, 0, 0, 0]), "pads [-1, 0, 0, 0]: expected non-negative"),
    "pads of 3": (dict(weight=[8, 8, 3, 3], pads=[1, 1, 1]), "pads [1, 1, 1]: expected 4 ints"),
    "group dividing neither channel count": (dict(weight=[8, 3, 3, 3], group=3),
                                             "its input has 8 channels but its weights [8, 3, 3, 3] take 3 per group "
                                             "x group 3 = 9"),
    "group dividing the input only": (dict(weight=[8, 2, 3, 3], channels=6, group=3),
                                      "its 8 output channels are not divisible by group 3"),
    "group 2^40": (dict(weight=[8, 8, 3, 3], group=2 ** 40), "x group 1099511627776"),
    "group 0": (dict(weight=[8, 8, 3, 3], group=0), "group 0: expected a positive int"),
    "kernel larger than the padded input": (dict(weight=[8, 8, 9, 9], pads=[1, 1, 1, 1]),
                                            "its 9x9 kernel with dilations [1, 1] spans 9x9 pixels but its padded "
                                            "input is 8x8"),
    "dilated past the input": (dict(weight=[8, 8, 3, 3], dilations=[4, 1]),
                               "spans 9x3 pixels but its padded input is 6x6"),
    "bias of the wrong size": (dict(weight=[8, 8, 3, 3], bias=[5]), "its bias has shape [5], expected [8]"),
    "auto_pad unknown": (dict(weight=[8, 8, 3, 3], auto_pad="SAME"), "auto_pad SAME: expected one of"),
}


def _onnxruntime_refuses(model, channels: int) -> str:
    """onnxruntime's own message for the model (it must refuse it: these checks are its checks)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    with pytest.raises(Exception) as refused:  # noqa: B017 onnxruntime's errors are plain Exception subclasses
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        session.run(None, {"x": np.ones((1, channels, 6, 6), np.float32)})
    return str(refused.value)


@requires_tool(*ONNX)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_conv_node_onnxruntime_refuses_is_not_imported_and_says_why(case, tmp_path):
    import onnx_models

    arguments, reason = HOSTILE[case]
    model = onnx_models.single_conv(**arguments)
    path = onnx_models.save(model, tmp_path / "hostile.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out"), "--target", "c"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "no Conv node could be imported" in result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("not imported: Conv conv: ")]
    assert reason in line, line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.yaml"))
    ort = _onnxruntime_refuses(model, arguments.get("channels", 8))
    quoted = re.search(r"\(onnxruntime: (.*)\)$", line).group(1)
    assert quoted.lower() in ort.lower(), (quoted, ort)


@requires_tool(*ONNX)
def test_a_valid_conv_beside_an_invalid_one_still_imports(tmp_path):
    import onnx_models

    b = onnx_models.Builder(4)
    t = b.relu("relu", b.conv("good", "x", 8, 8, 3, pad=1))
    b.inits.append(onnx_models.numpy_helper.from_array(np.ones((8, 8, 3, 3), np.float32), "bad_w"))
    t = b.node("Conv", "bad", [t, "bad_w"], kernel_shape=[3, 3], strides=[0, 0])
    path = onnx_models.save(b.model("x", [1, 8, 6, 6], t), tmp_path / "mixed.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").glob("*.yaml") if p.name != "network.yaml") == ["good.yaml"]
    assert "not imported: Conv bad: strides [0, 0]: expected positive values" in result.stdout


@requires_tool(*ONNX)
def test_a_quantized_conv_with_an_invalid_group_is_not_imported(tmp_path):
    """QLinearConv and QDQ convs go through the same checks (Graph.conv_geometry)."""
    import onnx_models

    model = onnx_models.qdq_depthwise(c=8)
    for node in model.graph.node:
        if node.op_type == "Conv":
            for attribute in node.attribute:
                if attribute.name == "group":
                    attribute.i = 3
    path = onnx_models.save(model, tmp_path / "qdq.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "not imported: Conv dw: its input has 8 channels but its weights [8, 1, 3, 3] take 1 per group x " \
           "group 3 = 3" in result.stdout


@requires_tool(*ONNX)
def test_files_that_are_not_onnx_models_are_exit_2(tmp_path):
    import onnx

    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    graphless = tmp_path / "graphless.onnx"
    graphless.write_bytes(onnx.ModelProto(ir_version=8, producer_name="x").SerializeToString())
    for path, why in ((empty, "an empty file"), (graphless, "no graph")):
        result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out")])
        assert result.exit_code == 2, result.output
        assert f"error: {path}: not an ONNX model ({why})" in result.stderr
        assert "no Conv node could be imported" not in result.output


CONFIG = """\
name: conv
input: {shape: [1, 8, 6, 6], layout: NCHW}
ops:
  - conv2d: {out_channels: 8, kernel: [3, 3]}
output: {layout: NCHW}
targets: [c]
source: {onnx: "hostile.onnx", nodes: ["conv"]}
"""


@requires_tool(*ONNX, "gcc")
def test_validate_reports_an_oracle_onnxruntime_cannot_run_as_a_fail_row(tmp_path):
    """The config as the importer used to write it for a kernel_shape [5, 5] node on 3x3 weights: the kernel
    passes against numpy, and onnxruntime's refusal is the FAIL row's finding."""
    import onnx_models

    onnx_models.save(onnx_models.single_conv([8, 8, 3, 3], kernel_shape=[5, 5]), tmp_path / "hostile.onnx")
    (tmp_path / "conv.yaml").write_text(CONFIG)
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "conv.yaml"), "--json"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    (row,) = json.loads(result.stdout)["results"]
    assert row["status"] == "FAIL" and row["failure"] == ["onnxruntime"]
    assert row["detail"].startswith("onnxruntime could not run conv: kernel_shape is not compatible with W shape")
    assert row["max_abs_error"] < 1e-5  # numpy agrees with the kernel: the model is what cannot run


@requires_tool(*ONNX)
def test_validate_on_weights_that_do_not_fit_the_config_is_a_config_error(tmp_path):
    """A [8, 5, 3, 3] weight under an op reading 8 channels: exit 2 at source.nodes, not a reshape traceback."""
    import onnx_models

    onnx_models.save(onnx_models.single_conv([8, 5, 3, 3]), tmp_path / "hostile.onnx")
    (tmp_path / "conv.yaml").write_text(CONFIG)
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "conv.yaml")])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert (f"{tmp_path / 'conv.yaml'}:7:39: error: source.nodes: Conv 'conv' has weights of shape [8, 5, 3, 3]; "
            f"ops[0] expects [8, 8, 3, 3]") in result.stderr
