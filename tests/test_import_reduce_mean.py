"""`kernelgen import` of a ReduceMean over the rows and columns (MNASNet's x.mean([2, 3]) before its classifier) as a
global average pool: before, it stayed in onnxruntime and MNASNet had no program. Axes as an attribute (opset 17)
or a constant input (opset 18), keepdims 0 or 1; a mean over other axes stays a host step, saying why."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen import api
from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")


def _model(opset: int, axes: list[int], keepdims: int):
    """conv + relu, ReduceMean, then the Gemm classifier on [N, C] (keepdims 0) or a 1x1 conv (keepdims 1)."""
    import onnx_models
    from onnx import helper, numpy_helper

    b = onnx_models.Builder(4)
    t = b.relu("relu", b.conv("conv", "x", 6, 12, 3, pad=1))
    inputs = [t]
    attrs = {"keepdims": keepdims}
    if opset >= 18:
        b.inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        inputs.append("axes")
    else:
        attrs["axes"] = axes
    t = b.node("ReduceMean", "mean", inputs, **attrs)
    if keepdims:
        out = b.conv("head", t, 12, 5, 1)
    else:
        b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.5, 0.5, (5, 12)).astype(np.float32), "fc_w"))
        b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.2, 0.2, 5).astype(np.float32), "fc_b"))
        out = b.node("Gemm", "fc", [t, "fc_w", "fc_b"], transB=1)
    model = b.model("x", [2, 6, 7, 9], out)
    model.opset_import[0].CopyFrom(helper.make_opsetid("", opset))
    return model


@requires_tool(*ONNX, "gcc")
@pytest.mark.parametrize("opset, axes, keepdims", [(17, [2, 3], 0), (18, [-1, -2], 1)])
def test_a_mean_over_rows_and_columns_is_a_global_pool_and_the_network_runs(opset, axes, keepdims, tmp_path):
    import onnx_models

    path = onnx_models.save(_model(opset, axes, keepdims), tmp_path / "m.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "m"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "not generated" not in result.output and "not imported" not in result.output, result.output
    ops = [(op.kind, op.kernel) for file in sorted((tmp_path / "m").glob("*.yaml")) if file.name != "network.yaml"
           for op in api.load_config(file).ops]
    assert ("avgpool", (7, 9)) in ops, ops  # a global pool: the window is the whole 7x9 image
    checked = CliRunner().invoke(main, ["validate", str(tmp_path / "m" / "network.yaml"), "--target", "c"])
    assert checked.exit_code == 0, checked.output
    assert "FAIL" not in checked.output and "program" in checked.output, checked.output


@requires_tool(*ONNX)
def test_a_mean_over_other_axes_stays_in_onnxruntime_saying_why(tmp_path):
    import onnx_models

    path = onnx_models.save(_model(17, [1, 2, 3], 1), tmp_path / "c.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "c"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "ReduceMean mean: a mean over axes [1, 2, 3], not the rows and columns (2, 3)" in result.output, \
        result.output
