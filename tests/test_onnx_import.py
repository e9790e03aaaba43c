"""`kernelgen import`: ONNX models (built with onnx.helper in onnx_models.py) -> configs, then validated on
the model's own weights against numpy and onnxruntime."""
from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.api import load_config
from kernelgen.cli import main
from kernelgen.ops import IDENTITY

ONNX = ("py:onnx", "py:onnxruntime")




def _import(tmp_path: Path, name: str, model, *extra: str):
    import onnx_models

    model_file = onnx_models.save(model, tmp_path / f"{name}.onnx")
    result = CliRunner().invoke(main, ["import", str(model_file), "-o", str(tmp_path / name), *extra])
    configs = (tmp_path / name).glob("*.yaml") if (tmp_path / name).exists() else ()
    return result, sorted(p for p in configs if p.name != "network.yaml")  # the network manifest is no config


@requires_tool(*ONNX)
def test_mobilenet_v2_block_becomes_one_fused_config(tmp_path):
    import onnx_models

    result, files = _import(tmp_path, "mnv2", onnx_models.mobilenet_v2_block(c=16, expand=6, size=14))
    assert result.exit_code == 0, result.output
    assert [f.name for f in files] == ["expand_to_project.yaml"]
    config = load_config(files[0])
    expand, depthwise, project = config.ops
    assert config.input_shape == (1, 14, 14, 16) and config.input_layout.name == "NCHW"
    assert (expand.out_channels, expand.kernel, expand.bias, expand.activation) == (96, (1, 1), True, "relu6")
    assert (depthwise.groups, depthwise.kernel, depthwise.pad, depthwise.activation) == (96, (3, 3), (1, 1, 1, 1),
                                                                                           "relu6")
    assert (project.out_channels, project.residual, project.act) == (16, 0, IDENTITY)
    # the c target's dense tiles read OHWI16o in place (targets/c/microkernel.py): named on the dense convs alone
    assert [op.filter_layout.name for op in config.ops] == ["OHWI16o", "OIHW", "OHWI16o"]
    assert config.source.onnx == "../mnv2.onnx"
    assert config.source.nodes == ["expand", "expand_relu6", "depthwise", "dw_relu6", "project", "residual_add"]
    assert "not imported" not in result.output


@requires_tool(*ONNX)
def test_resnet_basic_block_folds_the_add_then_the_relu_after_it(tmp_path):
    import onnx_models

    result, files = _import(tmp_path, "resnet", onnx_models.resnet_basic_block(), "--target", "c",
                            "--target", "opencl")
    assert result.exit_code == 0, result.output
    config = load_config(files[0])
    assert config.targets == ("c", "opencl")
    assert [op.filter_layout.name for op in config.ops] == ["OIHW", "OIHW"]  # opencl reads no OHWI16o in place
    assert [(op.residual, op.activation, op.bias) for op in config.ops] == [(None, "relu", True), (0, "relu", True)]


def _layout_lines(folder: Path) -> dict[str, list[str]]:
    """Each written file's lines that say a tensor's layout (network.yaml's tensors, each config's input, sides and
    output; not an op's filter_layout)."""
    return {f.name: [line.split("  #")[0] for line in f.read_text().splitlines()
                     if "layout:" in line and "filter_layout:" not in line]
            for f in sorted(folder.glob("*.yaml"))}


@requires_tool(*ONNX)
def test_a_c_network_passes_nhwc_tensors_between_its_kernels(tmp_path):
    """Tensors only kernels write and read are NHWC, as the c kernels compute; the network's input and output and
    what a host step (the MaxPool with indices) reads or writes stay NCHW."""
    import onnx_models

    result, _ = _import(tmp_path, "sr", onnx_models.small_resnet())
    assert result.exit_code == 0, result.output
    assert (f"network {tmp_path / 'sr' / 'network.yaml'}: 4 kernel(s) and 1 host step(s) between them, in order; "
            f"2 tensor(s) NHWC between kernels, as they compute") in result.output.splitlines()
    nchw, nhwc = "dtype: float32, layout: NCHW}", "dtype: float32, layout: NHWC}"
    assert _layout_lines(tmp_path / "sr") == {
        "block1_conv1_to_block1_conv2.yaml": ["input: {shape: [1, 8, 8, 8], layout: NCHW}", "output: {layout: NHWC}"],
        "block2_conv1_to_fc.yaml": ["input: {shape: [1, 8, 8, 8], layout: NHWC}",
                                    "  shortcut: {shape: [1, 4, 4, 16], layout: NHWC}", "output: {layout: NCHW}"],
        "block2_down.yaml": ["input: {shape: [1, 8, 8, 8], layout: NHWC}", "output: {layout: NHWC}"],
        "network.yaml": [f'  "x": {{shape: [1, 3, 32, 32], {nchw}',
                         f'  "stem_relu_out": {{shape: [1, 8, 16, 16], {nchw}',
                         f'  "pool_out": {{shape: [1, 8, 8, 8], {nchw}',
                         f'  "block1_relu2_out": {{shape: [1, 8, 8, 8], {nhwc}',
                         f'  "block2_down_out": {{shape: [1, 16, 4, 4], {nhwc}',
                         f'  "fc_out": {{shape: [1, 10], {nchw}'],
        "stem.yaml": ["input: {shape: [1, 3, 32, 32], layout: NCHW}", "output: {layout: NCHW}"]}
    header = (tmp_path / "sr" / "block2_down.yaml").read_text().splitlines()[0]
    assert header.endswith("NHWC tensors between two kernels of the network (channels innermost, as they compute), "
                           "NCHW as ONNX stores them elsewhere")
    assert (tmp_path / "sr" / "stem.yaml").read_text().splitlines()[0].endswith("NCHW tensors as ONNX stores them")


@requires_tool(*ONNX)
def test_a_network_with_a_target_that_computes_channels_apart_stays_nchw(tmp_path):
    """opencl's kernels compute in the tensors' own layout: with it among the targets nothing is relaid."""
    import onnx_models

    result, _ = _import(tmp_path, "sr", onnx_models.small_resnet(), "--target", "c", "--target", "opencl")
    assert result.exit_code == 0, result.output
    assert "in order\n" in result.output  # nothing relaid, nothing said
    lines = [line for found in _layout_lines(tmp_path / "sr").values() for line in found]
    assert len(lines) == 6 + 4 * 2 + 1 and not [line for line in lines if "NCHW" not in line]


@requires_tool(*ONNX)
def test_unsupported_nodes_are_listed_and_the_convs_still_imported(tmp_path):
    import onnx_models

    result, files = _import(tmp_path, "mixed", onnx_models.with_unsupported_nodes())
    assert result.exit_code == 0, result.output
    assert [f.name for f in files] == ["conv_after_lrn_to_fc.yaml", "stem.yaml"]
    left = [line for line in result.output.splitlines() if line.startswith("not ")]
    assert left == ["not generated (host steps in network.yaml, run by onnxruntime): LRN, Softmax"]
    stem = load_config(tmp_path / "mixed" / "stem.yaml")
    assert (stem.ops[0].stride, stem.ops[0].activation, stem.input_shape) == ((2, 2), "relu", (1, 16, 16, 3))
    head = load_config(tmp_path / "mixed" / "conv_after_lrn_to_fc.yaml")
    assert head.input_shape == (1, 8, 8, 8)  # after the LRN, a host step
    assert [op.kind for op in head.ops] == ["conv2d", "avgpool", "conv2d"]  # the Gemm: a 1x1 conv on the pooled image


@requires_tool(*ONNX)
def test_residual_from_an_earlier_conv_and_an_escaping_intermediate(tmp_path):
    import onnx_models

    b = onnx_models.Builder(5)
    t1 = b.relu("r1", b.conv("c1", "x", 8, 8, 1))
    t2 = b.conv("c2", t1, 8, 8, 3, pad=1)
    t3 = b.add("add", t2, t1)  # + conv 1's result (after its relu): residual: 1
    t4 = b.conv("c3", t3, 8, 8, 3, pad=1)  # its result also feeds a pool: the group ends here
    t5 = b.node("LRN", "lrn", [t4], size=3)  # a node kernelgen does not generate
    t6 = b.conv("c4", t4, 8, 8, 1)
    model = b.model("x", [1, 8, 6, 6], t6)
    model.graph.output.append(__import__("onnx").helper.make_tensor_value_info(t5, 1, None))
    result, files = _import(tmp_path, "chain", model)
    assert result.exit_code == 0, result.output
    assert [f.name for f in files] == ["c1_to_c3.yaml", "c4.yaml"]
    config = load_config(files[0])
    assert [op.residual for op in config.ops] == [None, 1, None]
    assert "not generated (host steps in network.yaml, run by onnxruntime): LRN\n" in result.output


@requires_tool(*ONNX)
def test_no_conv_is_exit_1_and_a_file_that_is_not_onnx_exit_2(tmp_path):
    import onnx_models

    b = onnx_models.Builder()
    model = b.model("x", [1, 3, 4, 4], b.relu("only", "x"))
    result, files = _import(tmp_path, "none", model)
    assert result.exit_code == 1 and files == []
    assert "not generated: Relu" in result.output
    assert "no Conv node could be imported" in result.stderr
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07 not a protobuf \xff\xff")
    result = CliRunner().invoke(main, ["import", str(junk), "-o", str(tmp_path / "junk")])
    assert result.exit_code == 2 and "not an ONNX model" in result.stderr
    result = CliRunner().invoke(main, ["import", str(junk), "--target", "cuda"])
    assert result.exit_code == 2 and "unknown target 'cuda'" in result.output


@requires_tool(*ONNX, "gcc", "clang-19", "qemu-hexagon")
def test_imported_blocks_validate_against_numpy_and_onnxruntime(tmp_path):
    import onnx_models

    _, mnv2 = _import(tmp_path, "mnv2", onnx_models.mobilenet_v2_block(c=8, expand=3, size=9))
    _, resnet = _import(tmp_path, "resnet", onnx_models.resnet_basic_block(c=8, size=7))
    result = CliRunner().invoke(main, ["validate", *map(str, mnv2 + resnet), "--target", "c", "--target", "hvx",
                                       "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    assert [(r["config"], r["target"], r["status"], r["oracles"]) for r in rows] == [
        (name, target, "pass", ["numpy", "onnxruntime"]) for name in ("expand_to_project", "conv1_to_conv2")
        for target in ("c", "hvx")]


@requires_tool(*ONNX, "gcc")
def test_onnxruntime_catches_a_config_that_drifted_from_its_model(tmp_path):
    """numpy checks the kernel against the config; onnxruntime against the model: a config edited to relu6
    where the model has relu passes the first and fails the second."""
    import onnx_models

    _, files = _import(tmp_path, "resnet", onnx_models.resnet_basic_block(c=8, size=7))
    files[0].write_text(files[0].read_text().replace("activation: relu}", "activation: [-1.0, 0.5]}", 1))
    result = CliRunner().invoke(main, ["validate", str(files[0]), "--target", "c", "--json"])
    assert result.exit_code == 1
    (row,) = json.loads(result.stdout)["results"]
    assert row["status"] == "FAIL" and row["detail"].startswith("conv2d #1 differs from onnxruntime")
    assert row["max_abs_error"] < 1e-5  # the numpy reference of the config itself still agrees


@requires_tool(*ONNX, "gcc")
def test_a_source_that_does_not_match_the_config_is_a_config_error(tmp_path):
    import onnx_models

    _, files = _import(tmp_path, "resnet", onnx_models.resnet_basic_block(c=8, size=7))
    text = files[0].read_text()
    files[0].write_text(text.replace('"conv2", ', '"conv9", '))
    result = CliRunner().invoke(main, ["validate", str(files[0]), "--target", "c"])
    assert result.exit_code == 2 and "source.nodes: expected nodes of ../resnet.onnx; it has no node 'conv9'" in \
        result.stderr


@requires_tool(*ONNX, "clang-19", "qemu-hexagon")
def test_quantized_models_import_as_uint8_configs_and_validate_against_onnxruntime(tmp_path):
    """QLinearConv chains and QDQ patterns (DequantizeLinear -> Conv -> Relu -> QuantizeLinear) become uint8
    configs with the model's scales, zero points, per-channel weights and int32 biases; validate runs them on
    the model's own weights, bit-exact against numpy and within 1 of onnxruntime (its float requantization
    rounds half to even)."""
    import onnx_models

    result, chain = _import(tmp_path, "ql", onnx_models.qlinear_chain())
    assert result.exit_code == 0, result.output
    config = load_config(chain[0])
    assert config.dtype == "uint8" and config.quant.input_zero_point == 128 and config.quant.weight_dtype == "int8"
    first, second = config.ops
    assert (first.out_channels, first.kernel, first.bias, len(first.quant.weight_scale)) == (48, (3, 3), True, 48)
    assert (first.quant.output_scale, first.quant.output_zero_point) == (pytest.approx(0.08), 10)
    assert (second.quant.output_scale, second.quant.output_zero_point) == (pytest.approx(0.1), 128)
    result, dw = _import(tmp_path, "qdq", onnx_models.qdq_depthwise())
    assert result.exit_code == 0, result.output
    config = load_config(dw[0])
    assert (config.ops[0].groups, config.ops[0].stride, config.ops[0].activation) == (32, (2, 2), "relu")
    assert config.source.nodes == ["dq_x", "dq_w", "dw", "dw_relu", "q_y"]
    result = CliRunner().invoke(main, ["validate", str(chain[0]), str(dw[0]), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    assert [(r["status"], r["oracles"]) for r in rows] == [("pass", ["numpy", "onnxruntime"])] * 2
    # imported configs requantize as onnxruntime does (float32 scale, one rounding): exactly its results
    assert all("onnxruntime op by op: bit-exact in all" in r["detail"] for r in rows), rows
    assert "requantization: float32" in chain[0].read_text()


@requires_tool(*ONNX, "clang-19", "qemu-hexagon")
def test_full_range_int8_weights_are_checked_by_the_session_that_is_exact_on_this_cpu(tmp_path):
    """quantize_static's default full-range int8 weights: onnxruntime's default session on an x86 CPU without VNNI
    saturates (pairs of products in 16 bits), so the check runs its u8u8 precision mode there, which is exact, and
    says so; with VNNI (or weights within +-64) the default session is the oracle. Either way bit for bit."""
    import onnx_models
    from kernelgen.onnx.oracle import quant_oracle, u8s8_saturation

    result, chain = _import(tmp_path, "full", onnx_models.qlinear_chain(weight_bound=127))
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["validate", str(chain[0]), "--json", "--seed", "2"])
    assert shown.exit_code == 0, shown.output
    (row,) = json.loads(shown.stdout)["results"]
    assert row["status"] == "pass" and "bit-exact in 2 poisoned runs" in row["detail"]
    full = np.full((4, 4, 1, 1), 127, np.int8)
    oracle = quant_oracle([full])
    assert row["oracles"] == ["numpy", oracle.name] and f"{oracle.name} op by op: bit-exact in all 2 ops" in \
        row["detail"], row
    if u8s8_saturation([full]):  # this host
        assert oracle.name == "onnxruntime u8u8" and "this x86 CPU has no VNNI" in row["detail"]
    # the rule itself: only int8 weights beyond +-64, only x86 without VNNI
    assert u8s8_saturation([full], {"avx2", "fma"}) if platform.machine() in ("x86_64", "AMD64") else True
    assert not u8s8_saturation([full], {"avx2", "avx512_vnni"}) and not u8s8_saturation([full // 2], {"avx2"})
    assert not u8s8_saturation([full.astype(np.uint8)], {"avx2"})


@requires_tool(*ONNX, "clang-19", "qemu-hexagon")
def test_quantized_residual_blocks_import_with_their_add_and_validate_against_onnxruntime(tmp_path):
    """A QDQ ResNet basic block and MobileNetV2 inverted residual, as onnxruntime's quantizer writes them: the
    add of the block's input (DequantizeLinear of both operands -> Add [-> Relu] -> QuantizeLinear) folds into
    the last conv as `residual: input` with the conv's own scale as conv_scale; bit-exact against numpy, at most
    1 from onnxruntime (which adds and requantizes in float)."""
    import onnx_models

    result, resnet = _import(tmp_path, "qres", onnx_models.qdq_resnet_block())
    assert result.exit_code == 0, result.output
    assert "not imported" not in result.output  # every node, the Add and its DequantizeLinear included
    config = load_config(resnet[0])
    first, second = config.ops
    assert (first.activation, first.residual) == ("relu", None)
    assert (second.activation, second.residual) == ("relu", 0)
    assert (second.quant.conv_scale, second.quant.conv_zero_point) == (pytest.approx(0.06), 120)
    assert (second.quant.output_scale, second.quant.output_zero_point) == (pytest.approx(0.07), 0)
    assert config.source.nodes[-4:] == ["dq_residual", "add", "add_relu", "q_y"]
    result, mobilenet = _import(tmp_path, "qmb", onnx_models.qdq_mobilenet_v2_block())
    assert result.exit_code == 0 and "not imported" not in result.output, result.output
    config = load_config(mobilenet[0])
    assert [(op.groups, op.activation, op.residual) for op in config.ops] == [
        (1, "relu6", None), (96, "relu6", None), (1, "none", 0)]
    result = CliRunner().invoke(main, ["validate", str(resnet[0]), str(mobilenet[0]), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    assert [(r["status"], r["oracles"]) for r in rows] == [("pass", ["numpy", "onnxruntime"])] * 2
    # the convs as onnxruntime's; the add (its QLinearAdd rounds by platform) within 1, op by op
    assert all("onnxruntime op by op: bit-exact" in r["detail"] for r in rows), rows


@requires_tool(*ONNX, "clang-19", "qemu-hexagon")
def test_onnxruntime_is_compared_op_by_op_and_a_wrong_requantization_fails(tmp_path):
    """The fixed-point form (TFLite's) is compared op by op, within 1 per requantization; an op whose
    requantization is wrong (here its output zero point, which kernel and numpy then share) fails against
    onnxruntime, named by its op."""
    import onnx_models

    result, chain = _import(tmp_path, "ql", onnx_models.qlinear_chain())
    assert result.exit_code == 0, result.output
    text = chain[0].read_text()
    fixed = chain[0].parent / "fixed.yaml"
    fixed.write_text(text.replace("requantization: float32", "requantization: fixed_point").replace(
        "name: qconv1_to_qconv2", "name: fixed"))
    wrong = chain[0].parent / "wrong.yaml"
    assert "output_zero_point: 10}" in text
    wrong.write_text(text.replace("output_zero_point: 10}", "output_zero_point: 12}").replace(
        "name: qconv1_to_qconv2", "name: wrong"))
    shown = CliRunner().invoke(main, ["validate", str(fixed), str(wrong), "--json", "--seed", "3"])
    rows = json.loads(shown.stdout)["results"]
    assert rows[0]["status"] == "pass" and "onnxruntime op by op" in rows[0]["detail"], rows[0]
    assert "within 1" in rows[0]["detail"] and "fixed-point requantization" in rows[0]["detail"], rows[0]
    assert rows[1]["status"] == "FAIL" and "conv2d #1: onnxruntime differs by up to 2" in rows[1]["detail"], rows[1]
    assert shown.exit_code == 1
