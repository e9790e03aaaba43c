"""Issue 29's quantized ops on hvx: uint8 max pools and global average pools in a chain, a two-branch add's other
branch as a side input with its own scale and zero point, and QDQ networks of MobileNetV2's and ResNet18's shapes
(onnxruntime's own quantizer) imported whole and run end to end under qemu-hexagon, bit-exact with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from builders import Case, make_config, toolchain
from click.testing import CliRunner

import kernelgen
from conftest import require_tools, requires_tool
from kernelgen.cli import main
from kernelgen.errors import ConfigError
from kernelgen.ops import HardSigmoid
from kernelgen.quant import op_quants
from kernelgen.reference_quant import op_output

TOOLS = toolchain("hvx")
ONNX = ("py:onnx", "py:onnxruntime")
QUANT = ("{{input_scale: 0.02, input_zero_point: 7, weight_scale: 0.004, weight_dtype: int8, output_scale: 0.03, "
         "output_zero_point: 100, intermediate_scale: 0.021, intermediate_zero_point: 9, requantization: {form}}}")
UINT8 = Case((), (), input_layout="nhwc-8h8w32c", output_layout="nhwc-8h8w32c", schedule=None, dtype="uint8",
             targets="[hvx]")

# odd shapes: channels no multiple of 32 (or 4), widths no multiple of 8, batch 2, padded and stride-2 windows
CHAINS = {
    "conv, padded 3x3 stride-2 max pool, 1x1": UINT8.with_(shape=[2, 13, 11, 40], ops=[
        "{out_channels: 36, kernel: 3, pad: 1, bias: true, activation: relu}",
        "maxpool: {kernel: 3, stride: 2, pad: 1}",
        "{out_channels: 20, kernel: 1}"]),
    "max pools first and last, asymmetric padding": UINT8.with_(shape=[2, 15, 13, 33], ops=[
        "maxpool: {kernel: 3, stride: 2, pad: 1}",
        "{out_channels: 20, kernel: 3, pad: 1, bias: true}",
        "maxpool: {kernel: 2, stride: 2, pad: [0, 0, 1, 1]}"]),
    "the classifier head: conv, global average pool, fc": UINT8.with_(shape=[2, 7, 9, 70], ops=[
        "{out_channels: 45, kernel: 1, bias: true, activation: relu6}",
        "global_avgpool: {quant: {output_scale: 0.011, output_zero_point: 4}}",
        "{out_channels: 37, kernel: 1, bias: true}"]),
    "a two-branch add: stride-2 conv + a side input": UINT8.with_(
        shape=[2, 9, 11, 40], side_inputs="{branch: {shape: [2, 5, 6, 36], layout: nhwc-8h8w32c, scale: 0.04, "
                                          "zero_point: 130}}",
        ops=["{out_channels: 36, kernel: 3, stride: 2, pad: 1, bias: true, residual: branch, activation: relu, "
             "quant: {conv_scale: 0.05, conv_zero_point: 120}}"]),
    "squeeze-excite: mul by a side input, 1x1 conv with hardswish, 3x3 conv": UINT8.with_(
        shape=[2, 9, 11, 40], side_inputs="{scale: {shape: [2, 1, 1, 40], layout: nhwc-8h8w32c, scale: 0.0031, "
                                          "zero_point: 3}}",
        ops=["mul: {by: scale, quant: {output_scale: 0.013, output_zero_point: 120}}",
             "{out_channels: 36, kernel: 1, bias: true, activation: hardswish, quant: {conv_scale: 0.04, "
             "conv_zero_point: 110}}",
             "{out_channels: 20, kernel: 3, pad: 1, bias: true, activation: hardsigmoid, quant: {conv_scale: 0.05, "
             "conv_zero_point: 90}}"]),
}


def _config(case: str, form: str):
    return make_config("q", CHAINS[case].with_block("quant", QUANT.format(form=form)))


@requires_tool(*TOOLS)
@pytest.mark.parametrize("form", ["float32", "fixed_point"])
@pytest.mark.parametrize("case", sorted(CHAINS))
def test_quantized_pools_and_side_inputs_are_bit_exact_on_hvx(case, form):
    """Each chain compiled by clang-19 and run under qemu-hexagon on fresh random bytes, twice (two poison bytes),
    every op checked bit for bit on the kernel's own input to it."""
    result = kernelgen.validate(_config(case, form), "hvx", seed=int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.passed, result.detail
    assert "bit-exact" in result.detail


def test_global_average_pool_is_onnxruntimes_qlinear_form():
    """QLinearGlobalAveragePool: sum(a) - n * za, times f32(s_in / f32(s_out * n)) in float32, rounded half to even,
    plus z_out: the reference holds to it at a tie (a sum landing exactly on a half rounds to the even byte)."""
    config = _config("the classifier head: conv, global average pool, fc", "float32")
    x = np.full((2, 7, 9, 45), 9, dtype=np.uint8)  # za = 9: every sum is n * za, the mean exactly the zero point
    x[0, 0, 0, :] += np.arange(45, dtype=np.uint8)  # channel c: sum - n * za = c
    got = op_output(config, 1, [None, x], None, None)[..., :].astype(int)
    scale = np.float32(np.float32(0.021) / np.float32(np.float32(0.011) * np.float32(63)))
    want = np.clip(np.rint(np.arange(45, dtype=np.float32) * scale) + 4, 0, 255)
    assert got.shape == (2, 1, 1, 45) and (got[0, 0, 0] == want).all() and (got[1] == 4).all()


def test_global_average_pool_takes_any_scale_in_float32():
    """The pool's float32 requantization is scalar float in the kernel: a scale past 1 (an output scale finer than
    the input's over the pixels) is no error there, as it is for the fixed-point form's Q31 multiplier."""
    def config(form: str):
        pool = UINT8.with_(shape=[1, 2, 2, 40], ops=["global_avgpool: {quant: {output_scale: 0.0001, "
                                                     "output_zero_point: 4}}"])
        return make_config("q", pool.with_block("quant", f"{{input_scale: 0.02, input_zero_point: 7, "
                                                         f"requantization: {form}}}"))

    (gap,) = op_quants(config("float32"))
    assert gap.float_requants[0].scale == pytest.approx(0.02 / (0.0001 * 4)) and not gap.requants
    with pytest.raises(ConfigError, match=r"global_avgpool\.quant\.output_scale: the requantization multiplier"):
        op_quants(config("fixed_point"))


def test_uint8_max_pool_skips_padding_even_below_the_zero_point():
    """ONNX MaxPool's padding is never the maximum: bytes below the zero point (negative reals) stay the maximum
    of a window that is mostly padding, where a cache holding the zero point would win."""
    config = _config("max pools first and last, asymmetric padding", "float32")
    x = np.zeros((2, 15, 13, 33), dtype=np.uint8)  # 0 < za = 7: every real value negative
    out = op_output(config, 0, [x], None, None)
    assert out.shape == (2, 8, 7, 33) and (out == 0).all()


@requires_tool(*ONNX, *TOOLS)
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("shape", ["mobilenet_v2_classifier", "classifier_network", "squeeze_excite_network"])
def test_qdq_networks_import_whole_and_run_bit_exact_on_hvx(shape, per_channel, tmp_path):
    """MobileNetV2's, ResNet18's and MobileNetV3's shapes (inverted residual, padded max pool, a two-branch add with
    a stride-2 downsample branch, hardswish, squeeze-excite with its hardsigmoid and Mul, global average pool,
    Flatten, Gemm) quantized by onnxruntime: every node imported (the input's QuantizeLinear and the output's
    DequantizeLinear are convert steps kernelgen runs), every tensor bit-exact with onnxruntime running the whole
    model."""
    import onnx
    import onnx_models

    path = tmp_path / f"{shape}.onnx"
    onnx.save(onnx_models.quantized(getattr(onnx_models, shape)(), per_channel), str(path))
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "net")])
    assert result.exit_code == 0, result.output
    assert "not generated" not in result.output and "not imported" not in result.output, result.output
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    assert not [s for s in network.steps if not s.is_kernel and not s.convert]  # no host step
    assert [s.convert for s in network.steps if s.convert] == ["quantize", "dequantize"]
    kinds = {op.kind for s in network.kernels for op in s.config.ops}
    assert kinds == {"conv2d", "avgpool"} | {"classifier_network": {"maxpool"}, "squeeze_excite_network": {"mul"}}.get(
        shape, set())
    if shape == "squeeze_excite_network":  # the gates are byte tables after their convs
        gates = [op.act.name for s in network.kernels for op in s.config.ops if isinstance(op.act, HardSigmoid)]
        assert sorted(gates) == ["hardsigmoid", "hardswish", "hardswish"]
    if shape == "classifier_network":  # the downsample branch is the block's side input
        assert any(s.config.side_inputs for s in network.kernels)
    require_tools(*TOOLS)
    runs = list(kernelgen.validate_network(network, "hvx", seed=5))
    assert all(r.ran for r in runs) and all(r.record.passed for r in runs if r.step.is_kernel)
    uint8 = [a for r in runs for a in r.agreement if a.dtype == "uint8"]
    assert uint8 and all(a.max_abs == 0 and a.relative == 0 for a in uint8)  # every byte onnxruntime's
    assert runs[-1].agreement[0].max_abs == 0.0  # the logits too: the same bytes, dequantized alike


@requires_tool(*ONNX)
@pytest.mark.parametrize("gate", ["HardSwish", "HardSigmoid"])
def test_gate_tables_are_onnxruntimes_bytes(gate):
    """Every byte through DequantizeLinear -> HardSwish | HardSigmoid -> QuantizeLinear in onnxruntime against
    the gate record's byte_table (kernelgen/ops), for random scales and zero points (onnxruntime computes the
    gate in float32; so does the table)."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(29)
    alpha, beta = (1 / 6, 0.5) if gate == "HardSwish" else (0.2, 0.4)
    attrs = {} if gate == "HardSwish" else {"alpha": alpha, "beta": beta}
    x = np.arange(256, dtype=np.uint8).reshape(1, 1, 16, 16)
    for _ in range(40):
        s_in, s_out = (float(np.float32(rng.uniform(0.002, 0.2))) for _ in range(2))
        z_in, z_out = (int(rng.integers(0, 256)) for _ in range(2))
        inits = [numpy_helper.from_array(np.array(v, dtype=t), n) for n, v, t in (
            ("si", s_in, np.float32), ("zi", z_in, np.uint8), ("so", s_out, np.float32), ("zo", z_out, np.uint8))]
        nodes = [helper.make_node("DequantizeLinear", ["x", "si", "zi"], ["v"]),
                 helper.make_node(gate, ["v"], ["g"], **attrs), helper.make_node("QuantizeLinear", ["g", "so", "zo"], ["y"])]
        graph = helper.make_graph(nodes, "gate", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 16, 16])],
                                  [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (theirs,) = session.run(None, {"x": x})
        table = HardSigmoid(alpha=alpha, beta=beta, times_value=gate == "HardSwish").byte_table(s_in, z_in, s_out,
                                                                                                 z_out)
        assert list(theirs.reshape(-1)) == list(table), (s_in, z_in, s_out, z_out)


@pytest.mark.parametrize("s_in, s_out, za, pixels", [(0.02, 0.011, 9, 63), (0.0042349533, 0.0016, 0, 3136),
                                                     (0.0021885219, 0.0009, 97, 49)])
def test_vector_pool_rounding_is_onnxruntimes_on_every_sum(s_in, s_out, za, pixels):
    """The vector pool's integer rounding (avgpool.VectorAvg: FloatSplit) against rint(f32(f32(acc) * S)) on every
    sum(a) - n * za a window of n bytes can give; the last a MobileNetV3-small 56x56 squeeze-excite pool's."""
    from kernelgen.quant_float import of_scale, requantize_float
    from kernelgen.targets.hvx.avgpool import VectorAvg

    scale = of_scale(float(np.float32(s_in) / np.float32(np.float32(s_out) * np.float32(pixels))))
    pool = VectorAvg.of(56, (scale,))
    assert pool is not None and pool.split is not None and (pool.whole_columns, pool.tail) == (56, 0)
    acc = np.arange(-pixels * za, pixels * (255 - za) + 1, dtype=np.int64)
    want, got = requantize_float(acc[:, None], (scale,))[:, 0], pool.split.emulate(acc[:, None])[:, 0]
    for z_out in (0, 128, 255):  # the bytes: past +-511 the kernel's cap, saturated alike
        assert (np.clip(got + z_out, 0, 255) == np.clip(want + z_out, 0, 255)).all()


@requires_tool(*TOOLS)
def test_a_depthwise_after_two_pointwise_convs_is_right_as_compiled():
    """EfficientNet-B0's block 5.0 at its shape: 1x1 480 -> 80, 1x1 80 -> 480, 5x5 depthwise, per-channel scales.
    Inlined into the kernel after the two 1x1 convs' 7-pixel asm rows, the depthwise's stripe compute came out
    wrong under clang-19 -O2 (13,303 of 94,080 bytes at one seed, by up to 3); kept out of line it is exact."""
    from kernelgen import api

    rng = np.random.default_rng(0)

    def scales(n: int, lo: float, hi: float) -> str:
        return "[" + ", ".join(f"{v:.6g}" for v in rng.uniform(lo, hi, n)) + "]"

    text = f"""name: block5
dtype: uint8
input: {{shape: [1, 14, 14, 480], layout: nhwc-8h8w32c}}
quant: {{input_scale: 0.05, input_zero_point: 128, weight_dtype: int8, weight_zero_point: 0, requantization: float32}}
ops:
  - conv2d: {{out_channels: 80, kernel: 1, bias: true, quant: {{weight_scale: {scales(80, 0.003, 0.005)},
             output_scale: 0.4, output_zero_point: 129}}}}
  - conv2d: {{out_channels: 480, kernel: 1, bias: true, activation: relu, quant: {{weight_scale:
             {scales(480, 0.001, 0.0015)}, output_scale: 0.1, output_zero_point: 128}}}}
  - conv2d: {{out_channels: 480, kernel: 5, pad: 2, groups: 480, bias: true, activation: relu, quant: {{weight_scale:
             {scales(480, 0.0002, 0.0003)}, output_scale: 0.02, output_zero_point: 115}}}}
output: {{layout: nhwc-8h8w32c}}
schedule: auto
targets: [hvx]
"""
    result = api.validate(api.parse_config(text, "block5.yaml"), "hvx", seed=1)
    assert result.passed, result.detail


@requires_tool(*TOOLS)
def test_a_window_of_padding_columns_alone_computes_no_pixel_group():
    """Found by the random uint8 chains with `hvx.pixels` drawn: after a 1-column conv, a 1x1 with stride 3 and pad 1
    reads only the padding column left of the image, so conv #1's window there holds no column to compute. Its
    pixel group still ran, on a column clamped to one left of the source, and read 1,824 bytes before the workspace
    (the driver's guard page: SIGSEGV). Now such a window's first group is its end: no group runs."""
    from kernelgen import api

    text = """name: pad_cols
dtype: uint8
input: {shape: [2, 3, 1, 2], layout: nhwc-8h8w32c}
quant: {input_scale: 0.05, input_zero_point: 133, weight_dtype: uint8, weight_scale: 0.01, weight_zero_point: 0,
        intermediate_scale: 0.05, intermediate_zero_point: 140, output_scale: 0.1, output_zero_point: 60}
ops:
  - conv2d: {out_channels: 2, kernel: 3, pad: 1, activation: relu6}
  - conv2d: {out_channels: 4, kernel: 1, stride: [1, 3], pad: 1, groups: 2}
output: {layout: nhwc-8h8w32c}
targets: [hvx]
hvx: {arch: v67, pixels: 12}
"""
    config = api.parse_config(text, "pad_cols.yaml")
    first = api.jobs(config, ("hvx",))["hvx"].target_plan.ops[0]
    assert (first.col_lo, first.col_hi, first.first_group) == (1, 1, 1)
    result = api.validate(config, "hvx", seed=11)
    assert result.passed, result.detail


@requires_tool(*TOOLS)
@pytest.mark.parametrize("kernel, pad", [((5, 5), (3, 3, 3, 3)), ((3, 5), (2, 10, 2, 9))])
def test_padding_wider_than_half_the_kernel_reads_no_layout_padding(kernel, pad):
    """Found by the random network search: a 5x5 conv with pad 3 on a 4-column input. The window's second 8-pixel
    block lies wholly right of the input, its count of valid pixels came out negative (a byte 0xFF: every pixel
    kept), and the input's layout padding went into the conv as pixels: 167 of 672 outputs wrong. With pad 10 on
    the left, the copy also loaded a block before the input (SIGSEGV). The counts are clamped to [0, 8] and a block
    outside the input is the zero point."""
    from kernelgen import api

    text = f"""name: wide_pad
dtype: uint8
input: {{shape: [1, 12, 4, 8], layout: nhwc-8h8w32c}}
quant: {{input_scale: 0.0273, input_zero_point: 143, weight_dtype: int8, weight_scale: 0.0021, weight_zero_point: 0,
        output_scale: 0.0248, output_zero_point: 136}}
ops:
  - conv2d: {{out_channels: 8, kernel: {list(kernel)}, pad: {list(pad)}, bias: true}}
output: {{layout: nhwc-8h8w32c}}
targets: [hvx]
"""
    result = api.validate(api.parse_config(text, "wide_pad.yaml"), "hvx", seed=1)
    assert result.passed, result.detail
