"""Resize steps (network/resize.py, onnx/resize_steps.py): a float Resize of rows and columns that kernelgen computes
itself rather than onnxruntime, so a segmentation head (torchvision's LRASPP upsamples 14x14 to 28x28 between its
convs and its 28x28 logits to the 224x224 image) stays in the shipped program. The taps against onnxruntime's own
Resize, bit for bit; the import of the forms PyTorch exports; the c program built and run; the manifest's checks;
the drivers that have no resize saying so."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from click.testing import CliRunner

from builders import toolchain
from conftest import require_tools, requires_tool

import kernelgen
from kernelgen.cli import main
from kernelgen.network.resize import COORDINATES, ROUNDINGS, Resize, axis_taps, quantized_resized, resized

ONNX = ("py:onnx", "py:onnxruntime")
# (input rows, columns, output rows, columns): up by 2 and 8 (LRASPP), by odd ratios, down, to and from one pixel
SIZES = [(4, 5, 8, 10), (7, 3, 10, 7), (28, 28, 224, 224), (5, 6, 3, 4), (1, 4, 3, 8), (3, 3, 1, 1), (6, 6, 6, 6)]


def _resize_model(mode: str, coordinates: str, rounding: str, shape, out_hw, scales=None):
    from onnx import TensorProto, helper

    if scales is None:
        inputs = ["x", "", "", "sizes"]
        inits = [helper.make_tensor("sizes", TensorProto.INT64, [4], [*shape[:2], *out_hw])]
    else:
        inputs = ["x", "", "scales"]
        inits = [helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, *scales])]
    node = helper.make_node("Resize", inputs, ["y"], mode=mode, coordinate_transformation_mode=coordinates,
                            nearest_mode=rounding)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _onnxruntime(model, x):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


CASES = [(m, c, r, s) for m, c, r, s in itertools.product(("linear", "nearest"), COORDINATES, ROUNDINGS, SIZES)
         if m == "nearest" or r == "round_prefer_floor"]


@requires_tool(*ONNX)
@pytest.mark.parametrize("given", ["sizes", "scales"])
def test_the_taps_compute_what_onnxruntime_does_bit_for_bit(given):
    """Every mode, coordinate transformation and nearest rounding over up-, odd-, down- and one-pixel sizes, the
    scales given as sizes (output over input size, as ONNX takes them) or as the model's constant scales."""
    rng = np.random.default_rng(5)
    compared = 0
    for mode, coordinates, rounding, (h, w, oh, ow) in CASES:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        if given == "sizes":
            scales = (float(np.float32(oh) / np.float32(h)), float(np.float32(ow) / np.float32(w)))
            model = _resize_model(mode, coordinates, rounding, [1, 3, h, w], (oh, ow))
        else:
            scales = (oh / h, ow / w)
            model = _resize_model(mode, coordinates, rounding, [1, 3, h, w], None, scales)
        expected = _onnxruntime(model, x)
        if expected.shape[2:] != (oh, ow):  # a scale whose product floors one short: another case
            continue
        actual = resized(Resize(mode, coordinates, rounding, scales), x, expected.shape)
        assert actual.tobytes() == expected.tobytes(), (mode, coordinates, rounding, (h, w, oh, ow))
        compared += 1
    assert compared >= len(CASES) - 4


def test_taps_at_the_edges():
    """half_pixel 4 -> 8: output 0 maps to -0.25, clamped to 0 (taps 0 and 1, weights 1 and 0); output 7 to 3.25,
    clamped to 3, the last row (both taps row 3, half each); between, each weight is the distance to the other."""
    taps = axis_taps(Resize("linear", "half_pixel", "round_prefer_floor", (2.0, 2.0)), 0, 4, 8)
    assert taps.first == (0, 0, 0, 1, 1, 2, 2, 3) and taps.second == (1, 1, 1, 2, 2, 3, 3, 3)
    assert taps.first_weight == (1.0, 0.75, 0.25, 0.75, 0.25, 0.75, 0.25, 0.5)
    assert taps.second_weight == (0.0, 0.25, 0.75, 0.25, 0.75, 0.25, 0.75, 0.5)
    nearest = axis_taps(Resize("nearest", "asymmetric", "floor", (2.0, 2.0)), 0, 3, 6)  # PyTorch's 'nearest'
    assert nearest.first == (0, 0, 1, 1, 2, 2) and nearest.first_weight == (1.0,) * 6


def _segmentation_head(tmp_path, nearest: bool = False):
    """A model shaped like LRASPP's head as PyTorch exports it: conv -> Resize 2x between convs (sizes a constant),
    conv -> Resize to the input's size (sizes from Shape -> Slice -> Concat of the input), the network's output."""
    import onnx_models
    from onnx import TensorProto, helper, numpy_helper

    b = onnx_models.Builder(7)
    low = b.relu("relu", b.conv("down", "x", 3, 16, 3, stride=2, pad=1))  # [1, 16, 6, 7]
    mode = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor") if nearest \
        else dict(mode="linear", coordinate_transformation_mode="half_pixel")
    b.inits.append(numpy_helper.from_array(np.array([1, 16, 12, 14], np.int64), "mid_sizes"))
    up = b.node("Resize", "up", [low, "", "", "mid_sizes"], **mode)  # [1, 16, 12, 14]: NHWC between kernels
    logits = b.conv("classify", b.conv("mix", up, 16, 16, 3, pad=1), 16, 5, 1)
    for name, value in (("start", [2]), ("end", [4]), ("classes", [1, 5])):
        b.inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
    shape = b.node("Shape", "shape", ["x"])
    hw = b.node("Slice", "hw", [shape, "start", "end"])
    sizes = b.node("Concat", "sizes", ["classes", hw], axis=0)
    y = b.node("Resize", "out", [b.conv("coarse", logits, 5, 5, 3, stride=2, pad=1), "", "", sizes], **mode)
    # the output's shape declared as torch.onnx.export declares it; the input's from an exported shape: the sizes
    # from Shape -> Slice -> Concat are then nodes (as in torchvision's LRASPP), not a folded constant
    model = b.model("x", ["batch", 3, 12, 14], y)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 5, 12, 14]))
    return onnx_models.save(model, tmp_path / "head.onnx")


def _import(model, out, target: str = "c"):
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(out), "--target", target])
    assert result.exit_code == 0, result.output
    return result.output


@requires_tool(*ONNX)
def test_import_writes_resize_steps_and_no_host_step(tmp_path):
    output = _import(_segmentation_head(tmp_path), tmp_path / "net")
    assert "2 resize step(s) and no host step" in output, output
    assert "resized by kernelgen" in output and "5 node(s) in 2 resize step(s)" in output, output
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    resizes = [s for s in network.steps if s.kind == "resize"]
    assert [s.resize for s in resizes] == [Resize("linear", "half_pixel", "round_prefer_floor", (2.0, 2.0))] * 2
    assert not any(s.is_host for s in network.steps)
    middle, last = resizes
    # between kernels the resize reads and writes NHWC (the c kernels' channels innermost); the output stays NCHW
    assert [network.tensors[t].layout for t in (*middle.inputs, *middle.outputs)] == ["NHWC", "NHWC"]
    assert network.tensors[last.outputs[0]].layout is None and last.outputs[0] in network.outputs
    text = (tmp_path / "net" / "network.yaml").read_text()
    assert '- resize: {mode: linear, coordinates: half_pixel, scales: [2.0, 2.0]}  # "shape", "hw", "sizes", "out"' \
        in text


@requires_tool(*ONNX, "make", "gcc")
@pytest.mark.parametrize("nearest", [False, True], ids=["linear", "nearest"])
def test_the_c_program_resizes_as_onnxruntime_does(tmp_path, nearest):
    """Both of network.c's loops (NHWC out between kernels, NCHW out at the network's output), linear and nearest:
    every step against onnxruntime on the step before's output, then the built program on a new input against
    onnxruntime's whole model. Float tolerance: validation's (1e-3 of the largest magnitude a step, 1e-4 for the
    program against the step-by-step run); the numbers checked are far below."""
    require_tools(*toolchain("c"))
    _import(_segmentation_head(tmp_path, nearest), tmp_path / "net")
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    validation = kernelgen.validate_network(network, "c", seed=6)
    runs = list(validation)
    resizes = [run for run in runs if run.step.kind == "resize"]
    assert len(resizes) == 2 and all(run.ran for run in runs), runs
    for run in resizes:  # numpy's resize of the kernel's output against onnxruntime's of its own
        assert all(a.passed and a.relative < 1e-5 for a in run.agreement), run.agreement
    program = validation.run_program()
    assert program.ran and program.passed, program.why
    assert program.relative < 1e-5, program.relative
    assert not validation.verdict().failed


def _manifest(tmp_path, resize: str, out_shape=(1, 2, 8, 10), dtype: str = "float32"):
    """A manifest of one resize step (no model run: load_network checks the file)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    import onnx
    onnx.save(helper.make_model(graph), str(tmp_path / "m.onnx"))
    path = tmp_path / "network.yaml"
    path.write_text("network: r\nmodel: m.onnx\ninputs: [x]\noutputs: [y]\ntensors:\n"
                    "  x: {shape: [1, 2, 4, 5], dtype: float32}\n"
                    f"  y: {{shape: {list(out_shape)}, dtype: {dtype}}}\n"
                    f"steps:\n  - resize: {resize}\n    inputs: [x]\n    outputs: [y]\n")
    return path


@requires_tool(*ONNX)
@pytest.mark.parametrize("resize, out_shape, dtype, expected", [
    ("{mode: cubic, coordinates: half_pixel, scales: [2, 2]}", (1, 2, 8, 10), "float32",
     "network.yaml:9:20: error: steps[0].resize.mode: expected 'linear' (bilinear over rows and columns) or "
     "'nearest', got \"cubic\""),
    ("{mode: linear, coordinates: tf_crop_and_resize, scales: [2, 2]}", (1, 2, 8, 10), "float32",
     "network.yaml:9:41: error: steps[0].resize.coordinates: expected 'half_pixel', 'pytorch_half_pixel', "
     "'align_corners' or 'asymmetric'"),
    ("{mode: linear, coordinates: half_pixel, scales: [2, 3]}", (1, 2, 8, 10), "float32",
     "steps[0].resize.scales[1]: expected a scale near 2 (5 columns to 10), got 3.0"),
    ("{mode: linear, coordinates: half_pixel, scales: [2, 2]}", (1, 3, 8, 10), "float32",
     "steps[0].outputs[0]: shape mismatch: a resize keeps batch and channels [1, 2], the output 'y' has [1, 3]"),
    ("{mode: nearest, coordinates: asymmetric, scales: [2, 2]}", (1, 2, 8, 10), "uint8",
     "steps[0].outputs[0]: expected a float32 (or both uint8) NCHW image for resize, got 'y': uint8 of shape "
     "[1, 2, 8, 10]"),
])
def test_a_bad_resize_step_is_an_error_at_its_key(tmp_path, resize, out_shape, dtype, expected):
    path = _manifest(tmp_path, resize, out_shape, dtype)
    result = CliRunner().invoke(main, ["build", str(path), "--target", "c", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert expected in result.output, result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@requires_tool(*ONNX, "make")
@pytest.mark.parametrize("target", ["vulkan", "opencl"])
def test_gpu_programs_resize_on_the_device(tmp_path, target):
    """A dispatch per resize step (gpu/resize_parts.py), one output float a work-item, the taps' tables in the
    shader: every step against onnxruntime, then the built program (lavapipe, PoCL) against the whole model."""
    require_tools(*toolchain(target))
    _import(_segmentation_head(tmp_path), tmp_path / "net", target)
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    assert [s.kind for s in network.steps].count("resize") == 2
    validation = kernelgen.validate_network(network, target, seed=7)
    runs = list(validation)
    assert all(run.ran and all(a.passed for a in run.agreement) for run in runs), runs
    program = validation.run_program()
    assert program.ran and program.passed and program.relative < 1e-5, program.why
    result = CliRunner().invoke(main, ["build", str(tmp_path / "net" / "network.yaml"), "--target", target,
                                       "-o", str(tmp_path / "out")])
    assert result.exit_code == 0 and "the kernels alone" not in result.output, result.output


def _qdq_resize_model(mode: str, coordinates: str, rounding: str, shape, out_hw, source, result):
    """DequantizeLinear -> Resize -> QuantizeLinear over uint8, as quantize_static writes a quantized Resize."""
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array(source[0], np.float32), "s_in"),
             numpy_helper.from_array(np.array(source[1], np.uint8), "z_in"),
             numpy_helper.from_array(np.array(result[0], np.float32), "s_out"),
             numpy_helper.from_array(np.array(result[1], np.uint8), "z_out"),
             helper.make_tensor("sizes", TensorProto.INT64, [4], [*shape[:2], *out_hw])]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s_in", "z_in"], ["real"]),
             helper.make_node("Resize", ["real", "", "", "sizes"], ["resized"], mode=mode,
                              coordinate_transformation_mode=coordinates, nearest_mode=rounding),
             helper.make_node("QuantizeLinear", ["resized", "s_out", "z_out"], ["y"])]
    graph = helper.make_graph(nodes, "qresize", [helper.make_tensor_value_info("x", TensorProto.UINT8, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@requires_tool(*ONNX)
def test_a_quantized_resize_is_bit_exact_with_onnxruntime():
    """onnxruntime keeps DequantizeLinear -> Resize -> QuantizeLinear as three nodes at every optimization level, so
    a uint8 resize step is the float resize between a dequantization and a quantization: every byte equal, over
    each mode and transformation, the input's scale and zero point not the output's."""
    rng = np.random.default_rng(8)
    for mode, coordinates, rounding, (h, w, oh, ow) in CASES[::3]:
        x = rng.integers(0, 256, (1, 3, h, w), dtype=np.uint8)
        source, result = (0.05, 120), (0.043, 131)
        expected = _onnxruntime(_qdq_resize_model(mode, coordinates, rounding, [1, 3, h, w], (oh, ow), source,
                                                  result), x)
        scales = (float(np.float32(oh) / np.float32(h)), float(np.float32(ow) / np.float32(w)))
        actual = quantized_resized(Resize(mode, coordinates, rounding, scales), x, expected.shape, source, result)
        assert actual.dtype == np.uint8 and np.array_equal(actual, expected), (mode, coordinates, (h, w, oh, ow))


def _bit_exact_on_hvx(network, seed: int) -> None:
    """The network step by step on hvx, every uint8 tensor onnxruntime's byte for byte, and its program under
    qemu-hexagon the step-by-step run's."""
    validation = kernelgen.validate_network(network, "hvx", seed=seed)
    runs = list(validation)
    assert all(run.ran for run in runs), runs
    for run in runs:
        assert all(a.max_abs == 0 for a in run.agreement if a.dtype == "uint8"), (run.step.label, run.agreement)
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why


@requires_tool(*ONNX, "clang-19", "ld.lld-19", "qemu-hexagon", "make")
def test_a_quantized_segmentation_head_runs_whole_on_the_dsp(tmp_path):
    """The head quantized by quantize_static with its defaults: both Resizes (their DequantizeLinear and
    QuantizeLinear with them) are uint8 resize steps, none is left to onnxruntime, and the hvx program under
    qemu-hexagon is bit-exact with the step-by-step run, which is bit-exact with onnxruntime."""
    from test_random_network_findings import quantized

    import onnx

    model = quantized(onnx.load(str(_segmentation_head(tmp_path))), tmp_path / "head_q.onnx", [1, 3, 12, 14])
    output = _import(model, tmp_path / "net", "hvx")
    assert "2 resize step(s) and no host step" in output, output
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    resizes = [s for s in network.steps if s.kind == "resize"]
    assert all(network.tensors[t].dtype == "uint8" for s in resizes for t in (*s.inputs, *s.outputs))
    _bit_exact_on_hvx(network, seed=9)


# (channels, input rows x columns, output rows x columns, the conv's (scale, zero point), the resize's, HVX or not):
# up by 16 with a channel block of 5 (37 = 32 + 5) and equal scales (an exact tie in about one result of 100); by 8
# with other scales; by 2 onto 14 columns (a last vector of 2 pixels); by 3, whose weights (k/6) have no few-bit
# binary form
VECTOR_RESIZES = {
    "x16, equal scales": (37, (5, 7), (80, 112), (0.05, 120), (0.05, 120), True),
    "x8": (24, (4, 6), (32, 48), (0.04, 3), (0.031, 140), True),
    "x2, a short last vector": (16, (5, 7), (10, 14), (0.02, 7), (0.04, 250), True),
    "x3": (16, (4, 5), (12, 15), (0.05, 120), (0.05, 120), False),
    # DeepLabV3's pooled branch: one pixel to 14 x 14 (every tap that pixel, half and half), equal scales
    "one pixel to 14 x 14": (40, (1, 1), (14, 14), (0.0015, 0), (0.0015, 0), True),
}


@requires_tool(*ONNX, "clang-19", "ld.lld-19", "qemu-hexagon", "make")
@pytest.mark.parametrize("case", list(VECTOR_RESIZES))
def test_the_dsp_resizes_in_hvx_integers_as_onnxruntime_does(tmp_path, case):
    """A uint8 linear resize whose weights are few-bit binary fractions runs on HVX in integers, the lanes near a
    rounding tie computed again in float32 (targets/hvx/resize_vector.py); its program under qemu-hexagon is
    bit-exact with the step-by-step run (numpy, itself bit-exact with onnxruntime). With the re-computation
    switched off, the x16 case's equal scales put results on ties that the integers round otherwise."""
    import onnx
    import onnx_models

    channels, in_hw, out_hw, conv, resized_at, vector = VECTOR_RESIZES[case]
    onnx.save(onnx_models.qdq_resize_network(channels, in_hw, out_hw, conv, resized_at), str(tmp_path / "r.onnx"))
    _import(tmp_path / "r.onnx", tmp_path / "net", "hvx")
    result = CliRunner().invoke(main, ["build", str(tmp_path / "net" / "network.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    source = (tmp_path / "out" / "r" / "hvx" / "network.c").read_text()
    assert ("_resize_one(" in source and "Q6_Ww_vmpy_VhVh" in source) == vector, case
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    _bit_exact_on_hvx(network, seed=4)
