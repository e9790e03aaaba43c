"""What a search over random small ONNX networks (import -> validate -> program, every target) found, each kept as
the smallest model that showed it: a case the importer, the validation or a network program got wrong."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from builders import toolchain
from conftest import require_tools, requires_tool

import kernelgen
from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")
HEXAGON = ("clang-19", "ld.lld-19", "qemu-hexagon")


def quantized(float_model, path, shape, seed: int = 0):
    """`float_model` quantized as users do: quantize_static with its defaults (QDQ, int8 activations and weights),
    calibrated on four random-normal inputs; written to `path`, which is returned."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    class Random(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(seed)
            self.batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    float_path = path.with_name(path.stem + "_float.onnx")
    onnx.save(float_model, str(float_path))
    quantize_static(str(float_path), str(path), Random())
    return path


def _import(model, out, target: str, *options: str):
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(out), "--target", target, *options])
    assert result.exit_code == 0, result.output
    return result.output


@requires_tool(*ONNX, *HEXAGON)
def test_onnxruntime_checks_a_fused_intermediate_only_where_the_next_op_reads_it(tmp_path):
    """A fused uint8 1x1 -> 1x1 at stride 2: the first op's output is computed only at the pixels the strided op
    reads. onnxruntime's op-by-op check compared all of it (the rest is the poison the kernel left there) and failed
    a kernel numpy and the program had found bit-exact ("differs by up to 165 in 118 of 512 outputs")."""
    import onnx_models

    b = onnx_models.Builder(1)
    y = b.conv("conv2", b.conv("conv1", "x", 8, 8, 1), 8, 8, 1, stride=2)
    model = quantized(b.model("x", [1, 8, 8, 8], y), tmp_path / "strided.onnx", [1, 8, 8, 8])
    _import(model, tmp_path / "net", "hvx")
    config = kernelgen.load_config(tmp_path / "net" / "conv1_to_conv2.yaml")
    result = kernelgen.validate(config, "hvx", seed=1)
    assert result.passed, result.detail
    assert result.checked == "bit-exact op-by-op" and "onnxruntime op by op: bit-exact in all 2 ops" in result.detail


@requires_tool(*ONNX, "make", "gcc")
def test_a_copied_channel_step_shares_its_tensor_with_a_kernel_that_binds_it_by_whole_texels(tmp_path):
    """On vulkan a kernel that reads an NCHW tensor by 4-float texels binds it rounded up to whole texels (a 3x5x5
    slice: 76 floats); the slice's copy writes its 75. The network plan took the 4 bytes for another layout and
    refused the network ("holds 'slice_out' in 304 bytes, an earlier kernel in 300"); now they are the binding's
    slack, and the region holds the larger."""
    import onnx_models
    from onnx import numpy_helper

    require_tools(*toolchain("vulkan"))
    b = onnx_models.Builder(5)
    for name, value in (("start", [0]), ("end", [3]), ("axis", [1])):
        b.inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
    sliced = b.node("Slice", "slice", ["x", "start", "end", "axis"])  # [1, 3, 5, 5]: 75 floats
    model = onnx_models.save(b.model("x", [1, 4, 5, 5], b.conv("c1", sliced, 3, 4, 1)), tmp_path / "slice.onnx")
    _import(model, tmp_path / "net", "vulkan")
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    validation = kernelgen.validate_network(network, "vulkan", seed=3)
    runs = list(validation)
    assert len(runs) == 2 and all(run.ran and all(a.passed for a in run.agreement) for run in runs), runs
    program = validation.run_program()
    assert program.ran and program.passed, program.why


@requires_tool(*ONNX, *HEXAGON, "make")
def test_a_quantized_classifier_over_a_flattened_image_is_a_conv_over_its_window(tmp_path):
    """Flatten + Gemm over a 6x5 image (VGG's and AlexNet's classifier form), quantized: the float import took it
    as a 6x5 conv, the quantized one as a 1x1 conv on a 6x5 image with [5, 240] weights, and its config and
    network.yaml were refused (exit 2: "weights of shape [5, 240, 1, 1]; ops[0] expects [5, 8, 1, 1]")."""
    import onnx_models
    from onnx import numpy_helper

    b = onnx_models.Builder(2)
    image = b.relu("relu", b.conv("conv", "x", 4, 8, 3, pad=1))
    flat = b.node("Flatten", "flatten", [image], axis=1)
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.1, 0.1, (5, 8 * 6 * 5)).astype(np.float32), "fc_w"))
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.1, 0.1, 5).astype(np.float32), "fc_b"))
    y = b.node("Gemm", "fc", [flat, "fc_w", "fc_b"], transB=1)
    model = quantized(b.model("x", [1, 4, 6, 5], y), tmp_path / "classifier.onnx", [1, 4, 6, 5])
    _import(model, tmp_path / "net", "hvx")
    fc = kernelgen.load_config(tmp_path / "net" / "fc.yaml")
    assert fc.ops[0].kernel == (6, 5) and fc.ops[0].out_channels == 5, fc.ops[0]
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    assert [step.kind for step in network.steps] == ["convert", "kernel", "kernel", "convert"]
    validation = kernelgen.validate_network(network, "hvx", seed=4)
    runs = list(validation)
    assert all(a.max_abs == 0 for run in runs for a in run.agreement if a.dtype == "uint8"), runs
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why


@requires_tool(*ONNX, *HEXAGON)
def test_a_network_input_a_kernel_and_a_host_step_both_read_is_quantized_by_its_own_step(tmp_path):
    """A quantized Concat of the network's input with a conv's result (DenseNet's form; the concat requantizes, so
    onnxruntime runs it): the input's QuantizeLinear went into the host step with the Concat, and the conv kernel,
    placed first, read bytes no step had written (network.yaml refused: "no step produces
    'x_QuantizeLinear_Output'"). It is a convert step of its own now, before both."""
    import onnx_models

    b = onnx_models.Builder(6)
    y = b.node("Concat", "cat", ["x", b.relu("relu", b.conv("conv", "x", 4, 8, 3, pad=1))], axis=1)
    model = quantized(b.model("x", [1, 4, 6, 6], y), tmp_path / "concat.onnx", [1, 4, 6, 6])
    _import(model, tmp_path / "net", "hvx")
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    assert [step.kind for step in network.steps] == ["convert", "kernel", "host"]
    assert network.steps[0].outputs == network.steps[1].inputs == ("x_QuantizeLinear_Output",)
    runs = list(kernelgen.validate_network(network, "hvx", seed=5))
    assert len(runs) == 3 and all(run.ran and all(a.passed for a in run.agreement) for run in runs), runs


@requires_tool(*ONNX, "gcc", "make")
def test_the_whole_model_oracle_holds_when_onnxruntime_fusions_refuse_an_intermediate_output(tmp_path):
    """Two convs of one input added, the 1x1's result a step boundary: validation asks onnxruntime for it as an
    extra output, and onnxruntime 1.32's default session then refuses the model (it fuses that Conv into the Add
    and loses the output). The oracle takes a session without fusions there instead of stopping the validation."""
    import onnx_models

    b = onnx_models.Builder(0)
    y = b.add("add", b.conv("conv1", "x", 26, 8, 3, pad=1, bias=False), b.conv("conv2", "x", 26, 8, 1))
    model = onnx_models.save(b.model("x", [1, 26, 6, 6], y), tmp_path / "two_convs.onnx")
    _import(model, tmp_path / "net", "c")
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    assert "conv2_out" in network.tensors, network.tensors  # a step boundary: the refused extra output
    validation = kernelgen.validate_network(network, "c", seed=6)
    runs = list(validation)
    assert runs and all(run.ran and all(a.passed for a in run.agreement) for run in runs), runs
    program = validation.run_program()
    assert program.ran and program.passed, program.why
    summary = validation.verdict().summary  # and the verdict says how onnxruntime ran the model
    assert "the model's run: onnxruntime's basic optimizations only (its default session refuses the model: " \
        in summary, summary


@requires_tool(*ONNX, *HEXAGON, "make")
def test_a_lone_quantized_depthwise_conv_program_reads_its_filter_from_whole_hvx_vectors(tmp_path):
    """A quantized depthwise 3x3 alone in a network: its kernel loads the filter and biases as aligned 128-byte HVX
    vectors (an aligned load drops the address's low 7 bits), and the weights file aligned its data section and
    tensors to 64 bytes only: the program read each tap's weights from 64 bytes before them and every output was
    wrong (by up to 6.4 against outputs of 8), while validation's own buffers, 128-byte aligned, passed. The file
    aligns to 128 bytes now, and network.c refuses weights that are not."""
    import onnx_models
    from kernelgen.network.weights import ALIGNMENT

    assert ALIGNMENT == 128
    b = onnx_models.Builder(1)
    y = b.conv("conv", "x", 32, 32, 3, pad=1, groups=32)
    model = quantized(b.model("x", [1, 32, 17, 17], y), tmp_path / "depthwise.onnx", [1, 32, 17, 17])
    _import(model, tmp_path / "net", "hvx")
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    validation = kernelgen.validate_network(network, "hvx", seed=2)
    assert all(a.max_abs == 0 for run in validation for a in run.agreement if a.dtype == "uint8")
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why


@requires_tool(*ONNX, *HEXAGON)
def test_a_float_kernels_result_a_quantized_kernel_reads_is_quantized_by_its_own_step(tmp_path):
    """The same with a float kernel before the quantization: quantize_static leaves a MaxPool of the network's
    input in float, so the pool is a float kernel, its QuantizeLinear went into the host step with the Concat, and
    the conv kernel reading its bytes came first with nothing to read. A tensor a kernel reads is now an output of
    the step making it: that step would then wait for the conv, so the host nodes are steps one by one."""
    import onnx_models

    b = onnx_models.Builder(7)
    pooled = b.node("MaxPool", "pool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.node("Concat", "cat", [pooled, b.conv("conv", pooled, 12, 12, 3, pad=1)], axis=1)
    model = quantized(b.model("x", [1, 12, 9, 9], y), tmp_path / "pool_concat.onnx", [1, 12, 9, 9])
    _import(model, tmp_path / "net", "hvx", "--max-group-ops", "1")
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    assert [step.kind for step in network.steps][:3] == ["kernel", "convert", "kernel"], network.steps
    runs = list(kernelgen.validate_network(network, "hvx", seed=5))
    assert len(runs) == len(network.steps) and all(run.ran and all(a.passed for a in run.agreement) for run in runs), runs


@requires_tool(*ONNX, "gcc", "make")
@pytest.mark.parametrize("target", ["c", "vulkan"])
def test_a_network_of_pools_alone_builds_a_program_with_no_weights(tmp_path, target):
    """A MaxPool alone imports as one kernel without weights: validation passed step by step, then the program did
    not build on c ("template precondition failed: the network's kernels have no weights": C has no empty array)
    and crashed on vulkan (a weights buffer of 0 bytes). Now the weights table has one row of zeros and the
    device's weights buffer is never empty."""
    import onnx_models

    if target == "vulkan":
        require_tools(*toolchain("vulkan"))
    b = onnx_models.Builder(8)
    y = b.node("MaxPool", "pool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    model = onnx_models.save(b.model("x", [1, 4, 9, 9], y), tmp_path / "pool.onnx")
    _import(model, tmp_path / "net", target)
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    validation = kernelgen.validate_network(network, target, seed=8)
    assert all(run.ran and all(a.passed for a in run.agreement) for run in validation)
    program = validation.run_program()
    assert program.ran and program.passed and program.max_abs == 0, program.why
