"""A Gemm on a Flatten of an image wider than 1x1 (VGG's classifier after its 7x7 pool, AlexNet's after 6x6): the
conv over the whole window it is, B's rows read as OIHW filters (Flatten orders an NCHW image C, H, W, as a
filter's rows are). Before, only a 1x1 image's Flatten was a classifier and such networks kept their classifier in
onnxruntime."""
from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from conftest import requires_tool

from kernelgen import api
from kernelgen.cli import main
from kernelgen.onnx.layers import gemm_filter

ONNX = ("py:onnx", "py:onnxruntime")


def test_bs_rows_become_filters_over_the_window():
    rng = np.random.default_rng(0)
    b = rng.standard_normal((5, 3 * 2 * 4)).astype(np.float32)  # [K, C*H*W], transB
    x = rng.standard_normal((3, 2, 4)).astype(np.float32)
    filters = gemm_filter(b, True, (2, 4))
    assert filters.shape == (5, 3, 2, 4)
    np.testing.assert_allclose(np.einsum("kchw,chw->k", filters, x), b @ x.reshape(-1), rtol=1e-5)
    np.testing.assert_array_equal(gemm_filter(b.T.copy(), False, (2, 4)), filters)  # B as [C*H*W, K]


def _vgg_like(trans_b: bool):
    import onnx_models
    from onnx import numpy_helper

    b = onnx_models.Builder(31)
    t = b.node("MaxPool", "pool", [b.relu("c1_r", b.conv("c1", "x", 3, 8, 3, pad=1))], kernel_shape=[2, 2],
               strides=[2, 2])
    flat = b.node("Flatten", "flat", [t], axis=1)  # [1, 8 * 3 * 3]
    w1 = b.rng.uniform(-0.2, 0.2, (16, 72)).astype(np.float32)
    b.inits += [numpy_helper.from_array(w1 if trans_b else w1.T.copy(), "fc1_w"),
                numpy_helper.from_array(b.rng.uniform(-0.1, 0.1, 16).astype(np.float32), "fc1_b"),
                numpy_helper.from_array(b.rng.uniform(-0.3, 0.3, (4, 16)).astype(np.float32), "fc2_w")]
    hidden = b.relu("fc1_r", b.node("Gemm", "fc1", [flat, "fc1_w", "fc1_b"], transB=int(trans_b)))
    return b.model("x", [1, 3, 6, 7], b.node("Gemm", "fc2", [hidden, "fc2_w"], transB=1))


@requires_tool(*ONNX, "gcc")
def test_a_vgg_classifier_imports_as_a_window_conv_and_the_network_runs_whole(tmp_path):
    import onnx_models

    for trans_b in (True, False):
        path = onnx_models.save(_vgg_like(trans_b), tmp_path / f"vgg{int(trans_b)}.onnx")
        out = tmp_path / f"v{int(trans_b)}"
        imported = CliRunner().invoke(main, ["import", str(path), "-o", str(out), "--target", "c"])
        assert imported.exit_code == 0 and "not generated" not in imported.output, imported.output
        ops = [op for f in out.glob("*.yaml") if f.name != "network.yaml" for op in api.load_config(f).ops
               if op.kind == "conv2d"]
        assert sorted(op.kernel for op in ops) == [(1, 1), (3, 3), (3, 3)], ops  # fc1 over the 3x3 pooled image
        # fc1 reads its filter in the dense tiles' order in place (gathering a row from 16 filters a call was 2.8x
        # slower on AlexNet's); fc2, 1x1, is a GEMV on OIHW rows as before
        assert {op.kernel: op.filter_layout.source for op in ops if op.out_channels in (16, 4)} == {(3, 3): "OHWI16o",
                                                                                               (1, 1): "OIHW"}, ops
        checked = CliRunner().invoke(main, ["validate", str(out / "network.yaml"), "--target", "c"])
        assert checked.exit_code == 0 and "FAIL" not in checked.output, checked.output
        assert "program net_run (make run)" in checked.output or "_run (make run)" in checked.output, checked.output
