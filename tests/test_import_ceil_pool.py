"""`kernelgen import` of a MaxPool with ceil_mode 1 (SqueezeNet's and GoogLeNet's 3x3 stride-2 pools): the rounded-up
output's last window reaches past the input, and a max over a window is the max of its positions in the input, so the
pool becomes a maxpool with that much more bottom and right padding. Before, those pools stayed in onnxruntime. An
AveragePool with ceil_mode stays there, saying why (its divisor at the edge is no padding rule)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen import api
from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")


def _model(op_type: str, rows: int, cols: int):
    import onnx_models

    b = onnx_models.Builder(5)
    t = b.relu("relu", b.conv("conv", "x", 4, 8, 3, pad=1))
    t = b.node(op_type, "pool", [t], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    return b.model("x", [1, 4, rows, cols], b.conv("head", t, 8, 6, 1))


@requires_tool(*ONNX, "gcc")
@pytest.mark.parametrize("rows, cols, extra", [(12, 14, (1, 1)), (13, 14, (0, 1))])
def test_a_ceil_mode_max_pool_is_a_max_pool_with_more_padding(rows, cols, extra, tmp_path):
    """Along 12 or 14, (n - 3) / 2 rounds up to one more window, which reaches one past the input; along 13 it
    divides exactly."""
    import onnx_models

    path = onnx_models.save(_model("MaxPool", rows, cols), tmp_path / "m.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "m"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "not generated" not in result.output and "not imported" not in result.output, result.output
    pools = [op for file in sorted((tmp_path / "m").glob("*.yaml")) if file.name != "network.yaml"
             for op in api.load_config(file).ops if op.kind == "maxpool"]
    assert [op.pad for op in pools] == [(0, 0, *extra)]
    checked = CliRunner().invoke(main, ["validate", str(tmp_path / "m" / "network.yaml"), "--target", "c"])
    assert checked.exit_code == 0, checked.output
    assert "FAIL" not in checked.output and "program" in checked.output, checked.output


@requires_tool(*ONNX)
def test_a_ceil_mode_average_pool_stays_in_onnxruntime_saying_why(tmp_path):
    import onnx_models

    path = onnx_models.save(_model("AveragePool", 12, 14), tmp_path / "a.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "a"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "AveragePool pool: ceil_mode 1 (output sizes rounded up) on an AveragePool" in result.output, result.output
