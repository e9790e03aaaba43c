"""Quantized layers as deployed models hold them (issue 20): per-op quant blocks, per-channel int8 weight
scales, int32 biases, activations as clamps of the output bytes; bit-exact on qemu-hexagon, and the numpy
reference checked against onnxruntime's QLinearConv."""
from __future__ import annotations

import math

import numpy as np
import pytest
from builders import Case, config_text, toolchain
from conftest import requires_tool

from kernelgen import reference_quant
from kernelgen.ops.conv2d import conv2d_acc
from kernelgen.api import parse_config
from kernelgen.errors import ConfigError
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate
from kernelgen.planner import plan
from kernelgen.quant import activation_range, op_quants
from kernelgen.targets import TARGETS

HVX = toolchain("hvx")
BLOCKED = "filter_layout: oihw-8i32o4i"


def _config(ops: list[str], shape=(1, 12, 10, 40), extra: str = "") -> str:
    case = Case(shape, [f"{{{op}, {BLOCKED}}}" for op in ops], "nhwc-8h8w32c", "nhwc-8h8w32c",
                "{k_split: 1, h_block: 2, h_split: 2}", dtype="uint8", targets="[hvx]",
                blocks=(("quant", "{input_scale: 0.05, input_zero_point: 128, weight_dtype: int8}"),))
    return config_text("q", case) + extra


def _validate(config, seed: int):
    """The core's validation of the hvx job (planned and rendered once)."""
    hvx = TARGETS["hvx"]
    return validate(hvx, hvx.build(config, plan(config)), seed)


def _scales(k: int, seed: int = 0) -> str:
    return "[" + ", ".join(f"{s:.5f}" for s in np.random.default_rng(seed).uniform(0.0015, 0.004, k)) + "]"


def test_per_op_quant_resolves_scales_zero_points_and_activation_ranges():
    config = parse_config(_config([
        f"out_channels: 40, kernel: 3, pad: 1, bias: true, activation: relu6, "
        f"quant: {{weight_scale: {_scales(40)}, output_scale: 0.05, output_zero_point: 10}}",
        "out_channels: 36, kernel: 1, activation: [-1.0, 2.0], quant: {weight_scale: 0.004, output_scale: 0.02, "
        "output_zero_point: 100}"]), "q.yaml")
    first, second = op_quants(config)
    assert (first.s_in, first.z_in, first.s_out, first.z_out) == (0.05, 128, 0.05, 10)
    assert (second.s_in, second.z_in) == (0.05, 10)  # op 2 reads op 1's output
    assert first.per_channel and not second.per_channel and len(first.requants) == 40
    # relu6 at scale 0.05, zero point 10: [10, 10 + 120]; the clamp [-1, 2] at 0.02 / 100: [50, 200]
    assert (first.q_min, first.q_max, second.q_min, second.q_max) == (10, 130, 50, 200)
    assert activation_range((0.0, math.inf), 0.1, 0) == (0, 255)  # relu at zero point 0 clamps nothing
    assert activation_range((-0.25, 0.25), 0.1, 128) == (125, 131)  # -2.5 and 2.5 round away from zero


@pytest.mark.parametrize("op, message", [
    ("out_channels: 8, kernel: 1, quant: {weight_scale: [0.01, 0.02]}",
     "ops[0].conv2d.quant.weight_scale: expected one weight scale, or one per output channel (8), got 2"),
    ("out_channels: 8, kernel: 1, residual: 2", "ops[0].conv2d.residual: expected 'input' (the first op has no "
                                                "earlier op), got 2"),
])
def test_bad_quant_blocks_are_config_errors(op, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        parse_config(_config([op], shape=(1, 4, 4, 8)), "q.yaml")
    with pytest.raises(ConfigError, match=r"ops\[0\]\.conv2d\.quant: expected a quant block only with dtype uint8"):
        parse_config("name: f\ninput: {shape: [1, 4, 4, 8]}\nops:\n  - conv2d: {out_channels: 8, quant: "
                     "{output_scale: 0.1}}\n", "f.yaml")


@requires_tool(*HVX)
@pytest.mark.parametrize("name, ops", [
    ("per_channel_bias_relu6_chain", [
        f"out_channels: 40, kernel: 3, pad: 1, bias: true, activation: relu6, "
        f"quant: {{weight_scale: {_scales(40)}, output_scale: 0.05, output_zero_point: 10}}",
        f"out_channels: 36, kernel: 1, bias: true, activation: [-1.0, 2.0], "
        f"quant: {{weight_scale: {_scales(36, 1)}, output_scale: 0.02, output_zero_point: 100}}"]),
    ("per_channel_3x3_stride2_relu", [
        f"out_channels: 72, kernel: 3, stride: 2, pad: 1, bias: true, activation: relu, "
        f"quant: {{weight_scale: {_scales(72, 2)}, output_scale: 0.03, output_zero_point: 20}}"]),
])
def test_quantized_layers_are_bit_exact_under_qemu(name, ops):
    config = parse_config(_config(ops).replace("name: q", f"name: {name}"), f"{name}.yaml")
    result = _validate(config, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


def _pow2(k: int, seed: int) -> str:
    return "[" + ", ".join(str(2.0 ** -int(e)) for e in np.random.default_rng(seed).integers(7, 10, k)) + "]"


@requires_tool(*HVX)
@pytest.mark.parametrize("name, ops", [
    ("pow2_dense_chain", [  # per tensor: 2^-4 * 2^-8 / 2^-6; per channel: 2^-6 * 2^-k / 2^-5
        "out_channels: 40, kernel: 3, pad: 1, bias: true, quant: {weight_scale: 0.00390625, "
        "output_scale: 0.015625, output_zero_point: 7}",
        f"out_channels: 36, kernel: 1, bias: true, activation: relu, quant: {{weight_scale: {_pow2(36, 3)}, "
        "output_scale: 0.03125, output_zero_point: 0}"]),
    ("pow2_depthwise_residual", [
        f"out_channels: 40, kernel: 3, pad: 1, groups: 40, bias: true, quant: {{weight_scale: {_pow2(40, 4)}, "
        "output_scale: 0.0625, output_zero_point: 128}",
        f"out_channels: 40, kernel: 1, bias: true, residual: input, quant: {{weight_scale: {_pow2(40, 5)}, "
        "output_scale: 0.125, output_zero_point: 120}"]),
])
def test_power_of_two_scales_requantize_by_a_shift_bit_exact_under_qemu(name, ops):
    """Powers of two requantize by one shift rounded half to even (what onnxruntime's float arithmetic gives for
    them): no multiply in the kernel, and the same integers as the reference."""
    text = _config(ops).replace("name: q", f"name: {name}").replace("input_scale: 0.05", "input_scale: 0.0625")
    config = parse_config(text, f"{name}.yaml")
    (source,) = [t for f, t in TARGETS["hvx"].build(config, plan(config)).files.items() if f.endswith(".c")]
    assert source.count("a rounding shift (half to even)") == 2  # both ops: no Q31 multiply
    result = _validate(config, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


# ---------------------------------------------------------------- the reference against onnxruntime

def _qlinearconv(x_q, w_q, bias, s_x, z_x, s_w, s_y, z_y, pad: int, stride: int):
    """onnxruntime's QLinearConv on NCHW tensors (uint8 activations, per-channel int8 weights, int32 bias)."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array(s_x, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(z_x, np.uint8), "x_zero_point"),
             numpy_helper.from_array(w_q, "w"), numpy_helper.from_array(np.asarray(s_w, np.float32), "w_scale"),
             numpy_helper.from_array(np.zeros(len(s_w), np.int8), "w_zero_point"),
             numpy_helper.from_array(np.array(s_y, np.float32), "y_scale"),
             numpy_helper.from_array(np.array(z_y, np.uint8), "y_zero_point"),
             numpy_helper.from_array(bias, "b")]
    node = helper.make_node("QLinearConv", ["x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point",
                                            "y_scale", "y_zero_point", "b"], ["y"], pads=[pad] * 4,
                            strides=[stride] * 2, kernel_shape=list(w_q.shape[2:]))
    graph = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", TensorProto.UINT8, x_q.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x_q})[0]


@requires_tool("py:onnx", "py:onnxruntime")
@pytest.mark.parametrize("exact", [False, True])
def test_reference_agrees_with_onnxruntime_qlinearconv(exact):
    """onnxruntime requantizes in float (acc * s_x * s_w / s_y, rounded half to even); kernelgen in fixed point
    (a Q31 multiplier, rounded half up, then a rounding shift): at most 1 apart. Multipliers that are exactly
    representable as powers of two make onnxruntime's product exact, and kernelgen requantizes them by one
    shift rounded half to even: the two are identical."""
    rng = np.random.default_rng(20)
    k, c = 48, 40
    s_x, z_x, s_y, z_y = (0.0625, 128, 2.0 ** -10, 120) if exact else (0.05, 128, 0.4, 120)
    # exact: real multipliers 2^-1 .. 2^-4 (a shift of 1-4 bits: ties are common) on small sums
    s_w = [2.0 ** -rng.integers(7, 11) for _ in range(k)] if exact else list(rng.uniform(0.0015, 0.004, k))
    x = rng.integers(112, 145, (1, 9, 11, c), dtype=np.uint8) if exact else rng.integers(0, 256, (1, 9, 11, c),
                                                                                          dtype=np.uint8)
    # 7-bit weights (onnxruntime's reduce_range): its x86 kernels without VNNI saturate pair sums beyond +-64
    w = rng.integers(-3 if exact else -64, 4 if exact else 65, (k, c, 3, 3)).astype(np.int8)
    bias = rng.integers(-64, 64, k).astype(np.int32) if exact else rng.integers(-2 ** 12, 2 ** 12, k).astype(np.int32)
    text = (f"name: ort\ndtype: uint8\ninput: {{shape: [1, 9, 11, {c}]}}\n"
            f"quant: {{input_scale: {s_x!r}, input_zero_point: {z_x}, weight_dtype: int8}}\nops:\n"
            f"  - conv2d: {{out_channels: {k}, kernel: 3, pad: 1, stride: 2, bias: true, quant: {{weight_scale: "
            f"[{', '.join(repr(float(s)) for s in s_w)}], output_scale: {s_y!r}, output_zero_point: {z_y}}}}}\n"
            "targets: [hvx]\n")
    config = parse_config(text, "ort.yaml")
    ours = reference_quant.chain(config, x, [w], [bias]).astype(np.int32)
    theirs = _qlinearconv(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), w, bias, s_x, z_x, s_w, s_y, z_y, 1, 2)
    theirs = theirs.transpose(0, 2, 3, 1).astype(np.int32)
    diff = np.abs(ours - theirs)
    assert diff.max() <= 1
    if exact:
        acc = conv2d_acc(x, w, z_x, 0, config.ops[0], bias).astype(np.float64)
        real = acc * np.array([s_x * s / s_y for s in s_w])  # exact: powers of two
        # onnxruntime's float product is exact here: it is real rounded half to even, to the byte
        assert np.array_equal(theirs, np.clip(np.rint(real) + z_y, 0, 255))
        frac = real - np.floor(real)
        inside = (theirs > 0) & (theirs < 255)
        assert np.sum((frac == 0.5) & inside) > 50 and np.mean(inside) > 0.8  # ties occur, few outputs saturate
        assert np.array_equal(ours, theirs)
    else:
        saturated = np.mean((theirs == 0) | (theirs == 255))
        assert saturated < 0.2 and np.mean(diff) < 0.05, (saturated, np.mean(diff))
        print(f"QLinearConv vs reference: max difference {diff.max()}, {np.mean(diff > 0):.3%} of {diff.size} "
              f"outputs differ, {saturated:.1%} saturated")


# ---------------------------------------------------------------- residual adds

def _resnet_block(residual: str = "input", conv_quant: str = "conv_scale: 0.06, conv_zero_point: 120, ") -> str:
    return _config([
        "out_channels: 40, kernel: 3, pad: 1, bias: true, activation: relu, quant: {weight_scale: 0.003, "
        "output_scale: 0.04, output_zero_point: 0}",
        f"out_channels: 40, kernel: 3, pad: 1, bias: true, residual: {residual}, activation: relu, quant: "
        f"{{weight_scale: {_scales(40, 3)}, {conv_quant}output_scale: 0.05, output_zero_point: 0}}"],
        shape=(1, 10, 9, 40))


def test_quantized_add_is_within_one_step_of_the_real_sum():
    """Every pair of bytes: the fixed-point add lands within one output step of the exact real sum (TFLite's
    ADD has the same error: three roundings, each at most half a step of its own scale)."""
    (_, second) = op_quants(parse_config(_resnet_block(), "r.yaml"))
    add = second.add
    a, b = (g.reshape(-1) for g in np.meshgrid(np.arange(256), np.arange(256), indexing="ij"))
    got = reference_quant.quantized_add(a, b, add, second.z_out).astype(np.float64)
    real = 0.06 * (a - 120) + 0.05 * (b - 128)  # conv at (0.06, 120), the residual (the input) at (0.05, 128)
    expected = np.clip(real / 0.05 + second.z_out, 0, 255)
    assert np.abs(got - expected).max() <= 1.0
    assert np.mean(np.abs(got - np.rint(expected)) == 0) > 0.95


@requires_tool(*HVX)
@pytest.mark.parametrize("residual, conv_quant", [("input", "conv_scale: 0.06, conv_zero_point: 120, "),
                                                  ("1", ""),  # op 1's output, the conv at the output's scale
                                                  ])
def test_resnet_basic_block_is_bit_exact_under_qemu(residual, conv_quant):
    config = parse_config(_resnet_block(residual, conv_quant), "resnet.yaml")
    result = _validate(config, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


# ---------------------------------------------------------------- depthwise and grouped

@requires_tool(*HVX)
@pytest.mark.parametrize("name, shape, ops", [
    ("depthwise_stride2_relu6", (1, 11, 9, 40), [
        "out_channels: 40, kernel: 3, stride: 2, pad: 1, groups: 40, bias: true, activation: relu6, "
        f"quant: {{weight_scale: {_scales(40, 4)}, output_scale: 0.03, output_zero_point: 5}}"]),
    ("depthwise_multiplier2_dilated", (1, 10, 9, 20), [
        "out_channels: 40, kernel: 3, dilation: 2, pad: 2, groups: 20, quant: {weight_scale: 0.01, "
        "output_scale: 0.04, output_zero_point: 128}"]),
    ("grouped_4_chain", (2, 8, 9, 48), [
        "out_channels: 40, kernel: 3, pad: 1, groups: 4, bias: true, activation: relu, quant: {weight_scale: "
        "0.003, output_scale: 0.05, output_zero_point: 0}",
        "out_channels: 48, kernel: 1, groups: 8, bias: true, quant: {weight_scale: 0.004, output_scale: 0.05, "
        "output_zero_point: 128}"]),
    ("mobilenet_v2_block", (1, 10, 9, 24), [
        f"out_channels: 144, kernel: 1, bias: true, activation: relu6, quant: {{weight_scale: {_scales(144, 5)}, "
        "output_scale: 0.0235, output_zero_point: 0}",
        f"out_channels: 144, kernel: 3, pad: 1, groups: 144, bias: true, activation: relu6, quant: {{weight_scale: "
        f"{_scales(144, 6)}, output_scale: 0.0235, output_zero_point: 0}}",
        f"out_channels: 24, kernel: 1, bias: true, residual: input, quant: {{weight_scale: {_scales(24, 7)}, "
        "conv_scale: 0.04, conv_zero_point: 125, output_scale: 0.06, output_zero_point: 128}"]),
])
def test_depthwise_grouped_and_mobilenet_blocks_are_bit_exact_under_qemu(name, shape, ops):
    config = parse_config(_config(ops, shape=shape).replace("name: q", f"name: {name}"), f"{name}.yaml")
    result = _validate(config, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


# ---------------------------------------------------------------- the depthwise vector path (issue 30)

def _depthwise(shape, stride, extra: str = "", quant: str = "", weights: str = "weight_dtype: int8",
               pad: int = 1) -> str:
    c = shape[3]
    text = _config([f"out_channels: {c}, kernel: 3, stride: {stride}, pad: {pad}, groups: {c}, bias: true{extra}, "
                    f"quant: {{weight_scale: {_scales(c, c)}, output_scale: 0.03, output_zero_point: 5}}"],
                   shape=shape).replace("name: q", f"name: dw{c}")
    return text.replace("weight_dtype: int8}", f"{weights}{quant}}}")


def _vrmpy_path(source: str) -> bool:
    """vrmpy(ub, b) on 4-pixel words: the transposed input cache's loop, or the sweep's scheduled rows."""
    return "Q6_Vw_vrmpyacc_VwVubVb(acc[" in source or (".w += vrmpy(" in source and "__asm__(" in source)


DEPTHWISE_CASES = [  # (input shape, stride, epilogue, requantization, weights)
    ((2, 13, 11, 104), 1, ", activation: relu6", "", "weight_dtype: int8"),  # batch 2, odd sizes, a tail of 8
    ((1, 15, 13, 96), 2, ", activation: relu", ", requantization: float32", "weight_dtype: int8"),
    ((1, 9, 7, 40), 1, "", ", requantization: float32", "weight_dtype: int8"),  # a tail of 8, no activation
    ((1, 10, 17, 33), [1, 2], ", activation: relu6", "", "weight_dtype: int8"),  # stride 2 across only, a tail of 1
    ((2, 8, 8, 64), [2, 1], ", activation: relu6", "", "weight_dtype: uint8, weight_zero_point: 128"),
    ((1, 12, 10, 48), 1, ", residual: input, activation: relu", "", "weight_dtype: int8"),  # + the input
]


@requires_tool(*HVX)
@pytest.mark.parametrize("shape, stride", [((1, 12, 19, 40), 1), ((1, 13, 21, 64), 2)])
def test_depthwise_vector_path_without_padding_is_bit_exact_under_qemu(shape, stride):
    """pad 0: the window starts at an input block, so the input read copies (and transposes) whole blocks."""
    config = parse_config(_depthwise(shape, stride, ", activation: relu6", pad=0), "dw.yaml")
    hvx = TARGETS["hvx"]
    job = hvx.build(config, plan(config))
    assert "kg_transpose4(s[0])" in job.files[f"dw{shape[3]}.c"]
    result = validate(hvx, job, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


@requires_tool(*HVX)
@pytest.mark.parametrize("shape, stride, extra, quant, weights", DEPTHWISE_CASES)
def test_depthwise_vector_path_is_bit_exact_under_qemu(shape, stride, extra, quant, weights):
    """Stride 1 and 2, channel tails, odd sizes, batch 2, fixed-point and float32 requantization (per channel),
    relu / relu6 / none, a residual, int8 and uint8 weights: the vmpy path against the numpy reference."""
    config = parse_config(_depthwise(shape, stride, extra, quant, weights), "dw.yaml")
    hvx = TARGETS["hvx"]
    job = hvx.build(config, plan(config))
    assert _vrmpy_path(job.files[f"dw{shape[3]}.c"])
    result = validate(hvx, job, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


@requires_tool(*HVX)
@pytest.mark.parametrize("shape, stride, schedule", [
    ((1, 13, 11, 72), 1, "{k_split: 2, h_block: 2, halo: reuse}"),  # the input cache a ring of rows
    ((1, 13, 11, 72), 2, "{k_split: 2, h_block: 2, halo: reuse}"),
    ((2, 12, 10, 64), 1, "{k_split: 1, h_block: 4, pipeline: double_buffer}"),  # prefetches cross stripes ko
])
def test_depthwise_vector_path_under_halo_reuse_and_double_buffering_is_bit_exact(shape, stride, schedule):
    """The transposed input cache with kept ring rows (a channel stripe keeps only its own channels' rows) and
    with two input caches (the prefetch of the next channel stripe reads its channels), k_split 1 and 2."""
    text = _depthwise(shape, stride, ", activation: relu6").replace("{k_split: 1, h_block: 2, h_split: 2}", schedule)
    config = parse_config(text, "dw.yaml")
    hvx = TARGETS["hvx"]
    job = hvx.build(config, plan(config))
    assert _vrmpy_path(job.files[f"dw{shape[3]}.c"])
    result = validate(hvx, job, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


@pytest.mark.parametrize("shape, stride, weights, vector", [
    ((1, 12, 10, 40), 1, "weight_dtype: int8", True),
    ((1, 12, 10, 40), 2, "weight_dtype: int8", True),
    ((1, 12, 10, 40), 1, "weight_dtype: uint8, weight_zero_point: 100", False),  # w - zw can leave int8
    ((1, 12, 10, 40), 1, "weight_dtype: int8, weight_zero_point: 3", False),
])
def test_depthwise_convs_take_the_vector_path_when_their_weights_fit_int8(shape, stride, weights, vector):
    """A lone depthwise op (pad 1, per-channel fixed-point requantization) sweeps its rows straight from the input
    tensor in scheduled assembly, each vector transposed in registers (a word per channel holds 4 neighbouring
    pixels), with vrmpy(ub, b), 3 taps of a row per instruction (no per-tap gather of 4 pixels into bytes[], no
    vunpack to halfwords, no input cache read); weights whose w - zw may leave int8 keep the generic path, whose
    input read copies every channel."""
    config = parse_config(_depthwise(shape, stride, weights=weights), "dw.yaml")
    source = TARGETS["hvx"].build(config, plan(config)).files["dw40.c"]
    assert _vrmpy_path(source) is vector and ("__asm__(" in source) is vector  # the sweep's scheduled rows
    assert ("Q6_Wuh_vunpack_Vub(gathered)" in source) is not vector
    reads = [line for line in source.splitlines() if "kg_input_read(input" in line]
    assert ("kg_conv_1(input, " in source and not reads) is vector
    assert all(not line.endswith(", ko_outer);") for line in reads)  # the generic path: every channel


def test_a_depthwise_op_after_another_multiplies_its_taps_with_vmpy():
    """After a 1x1 (the MobileNetV2 block), the depthwise op reads the 1x1's output cache as stored (4 pixels x 32
    channels per vector): vmpy(ub, b) per tap, two taps summed into words at once; the input cache is not transposed."""
    config = parse_config(_config([
        "out_channels: 64, kernel: 1, quant: {weight_scale: 0.003, output_scale: 0.05, output_zero_point: 0}",
        "out_channels: 64, kernel: 3, pad: 1, groups: 64, quant: {weight_scale: 0.01, output_scale: 0.04, "
        "output_zero_point: 128}"], shape=(1, 10, 9, 24)), "pw_dw.yaml")
    source = TARGETS["hvx"].build(config, plan(config)).files["q.c"]
    assert "Q6_Wh_vmpy_VubVb" in source and "Q6_Wuh_vunpack_Vub(gathered)" not in source
    assert "kg_transpose4" not in source and "Q6_Vw_vrmpyacc_VwVubVb(acc[" not in source


def test_channel_multiplier_2_and_grouped_convs_keep_the_generic_path():
    config = parse_config(_config(["out_channels: 40, kernel: 3, pad: 1, groups: 20, quant: {weight_scale: 0.01, "
                                   "output_scale: 0.04, output_zero_point: 128}"], shape=(1, 10, 9, 20)), "m2.yaml")
    source = TARGETS["hvx"].build(config, plan(config)).files["q.c"]
    assert "Q6_Wh_vmpy_VubVb" not in source and "Q6_Wuh_vunpack_Vub(gathered)" in source


# ---------------------------------------------------------------- a residual left of a padded consumer (issue 32)

def _residual_then_padded(shape, second: str, weights: str) -> str:
    return (f"name: residual_pad\ndtype: uint8\ninput: {{shape: {list(shape)}, layout: nhwc-8h8w32c}}\n"
            f"quant: {{input_scale: 0.05, input_zero_point: 120, {weights}, intermediate_scale: 0.1, "
            "intermediate_zero_point: 100, output_scale: 0.5, output_zero_point: 130}\nops:\n"
            f"  - conv2d: {{out_channels: {shape[3]}, kernel: 1, residual: input}}\n  - conv2d: {{{second}}}\n"
            "output: {layout: nhwc-8h8w32c}\ntargets: [hvx]\n")


@requires_tool(*HVX)
@pytest.mark.parametrize("shape, second, weights", [
    ((1, 4, 4, 4), "out_channels: 4, kernel: 3, pad: 1", "weight_dtype: int8, weight_scale: 0.01"),
    # issue 32's case: batch 2, a grouped, strided and dilated consumer, uint8 weights at zero point 0
    ((2, 12, 6, 9), "out_channels: 6, kernel: 4, stride: [3, 2], pad: 3, dilation: 2, groups: 3",
     "weight_dtype: uint8, weight_scale: 0.01, weight_zero_point: 0"),
])
def test_a_residual_under_a_padded_consumer_reads_only_its_own_pixels(shape, second, weights):
    """The consumer's padding puts the residual op's window columns left of the image (col_lo > 0) while its
    pixel groups start at column 0: the residual gather clamped the column at the top only and read before the
    input. The driver's guard pages (kg_guarded: odd runs start each buffer right after a PROT_NONE page) turned
    that read into SIGSEGV under qemu-hexagon; with the column clamped on both sides the chain is bit-exact."""
    config = parse_config(_residual_then_padded(shape, second, weights), "residual_pad.yaml")
    result = _validate(config, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


# ---------------------------------------------------------------- input-channel chunks

C512 = ("name: c512\ndtype: uint8\ninput: {shape: [1, 14, 14, 512], layout: nhwc-8h8w32c}\n"
        "quant: {input_scale: 0.05, input_zero_point: 128, weight_scale: 0.002, output_scale: 1.0, "
        "output_zero_point: 128}\nops:\n"
        "  - conv2d: {out_channels: 512, kernel: 3, pad: 1, bias: true, activation: relu, "
        "filter_layout: oihw-8i32o4i}\n"
        "output: {layout: nhwc-8h8w32c}\nschedule: auto\nhvx: {arch: v66}\ntargets: [hvx]\n")


def test_a_512_channel_3x3_plans_under_v66_by_splitting_input_channels():
    """The whole input does not fit v66's 256 KiB with any output split (the smallest needs 280576 bytes);
    the search then splits the input channels, keeping int32 partial sums between chunks."""
    from kernelgen.planner import plan
    from kernelgen.targets.hvx.plan import hvx_plan

    config = parse_config(C512, "c512.yaml")
    p = plan(config)
    assert (p.c_split, p.c_block, p.k_split, p.h_split) == (2, 256, 1, 2)
    assert "c_split" in p.search.fitted
    assert p.cache("input").logical_shape == (1, 16, 16, 256)  # one chunk, halo included
    assert p.cache("accumulator").elements == 4 * p.cache("output").elements  # int32 partial sums
    assert hvx_plan(config, p).workspace_bytes <= 262144
    with pytest.raises(ConfigError, match=r"schedule\.c_split: expected 1: input channels split only for a single"):
        parse_config(C512.replace("schedule: auto", "schedule: {c_split: 2}").replace(
            "ops:\n", "ops:\n  - conv2d: {out_channels: 512, kernel: 1, filter_layout: oihw-8i32o4i}\n"), "x.yaml")
    with pytest.raises(ConfigError, match=r"schedule\.c_split: expected a divisor of the input's 16 channel blocks"):
        parse_config(C512.replace("schedule: auto", "schedule: {c_split: 3}"), "x.yaml")


@requires_tool(*HVX)
def test_a_512_channel_3x3_is_bit_exact_and_fast_under_qemu():
    """Bit-exact, and the vrmpy loop keeps its throughput through the chunks: at least 218 useful MACs per
    packet, 0.85 of the vrmpy limit (issue 30; QEMU's packet count is deterministic for a given binary: 225 with
    the scheduled kernel rows, 177 before them)."""
    import tempfile
    from pathlib import Path

    from kernelgen.measure.tensors import random_inputs
    from kernelgen.targets.hvx.runtime import compile_program, counters

    config = parse_config(C512, "c512.yaml")
    hvx = TARGETS["hvx"]
    job = hvx.build(config, plan(config))
    result = validate(hvx, job, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"
    with tempfile.TemporaryDirectory() as tmp:
        program = compile_program(job, Path(tmp))
        c = counters(program, random_inputs(config, job.plan, np.random.default_rng(0)))
    assert c["kernel.packets"] > 0 and 14 * 14 * 512 * 512 * 9 / c["kernel.packets"] >= 218, c


# ---------------------------------------------------------------- onnxruntime's float32 requantization

def _float_requants(scales) -> tuple:
    from kernelgen.quant_float import of_scale

    return tuple(of_scale(scale) for scale in scales)


@pytest.mark.slow  # every accumulator up to 2^24 and beyond, for 18 scales: tens of millions of values
def test_float_split_computes_onnxruntimes_rounding_for_every_accumulator():
    """The hvx kernel's integer steps (FloatSplit.emulate, the same sequence the template emits) against numpy's
    float32 rint(f32(acc) * S) on every accumulator whose result is not saturated, for scales over the whole
    supported range [2^-16, 0.5): equal everywhere, including the double roundings where float32's 24-bit
    product lands on exactly one half (a single exact rounding would differ there)."""
    from kernelgen.quant_float import requantize_float
    from kernelgen.targets.hvx.requantizer import FloatSplit

    rng = np.random.default_rng(27)
    double_roundings = 0
    for exponent in np.linspace(-16, -2, 18):
        (fr,) = _float_requants([2.0 ** (exponent + rng.uniform(0, 0.99))])
        split = FloatSplit.of((fr,))
        assert not isinstance(split, str)
        bound = min(int(300 / fr.scale), 2 ** 31 - 1)  # past 256 in magnitude every byte saturates
        acc = np.arange(-bound, bound + 1, dtype=np.int64)[:, None]
        want = np.clip(requantize_float(acc, (fr,))[:, 0], -256, 256)
        got = np.clip(split.emulate(acc)[:, 0], -256, 256)
        assert np.array_equal(got, want), (fr, acc[got != want][:5, 0])
        double_roundings += int(np.sum(want != np.clip(np.rint(acc[:, 0] * fr.scale), -256, 256)))
    assert double_roundings > 100  # the cases that make float32 differ from one exact rounding were covered


def _half_way(scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Accumulators (within +-2^20) whose float32 product acc * S is exactly n + 1/2, split into those where
    onnxruntime's result differs from rounding the exact product once and those where it does not; and those
    whose product is one float32 step from n + 1/2 (just outside the window that rounds to it)."""
    (fr,) = _float_requants([scale])
    acc = np.arange(-(2 ** 20), 2 ** 20, dtype=np.int64)
    product = acc.astype(np.float32) * np.float32(fr.scale)
    off_half = np.abs(product - np.floor(product) - np.float32(0.5))
    small = np.abs(product) < 100
    half_way = acc[small & (off_half == 0)]
    differs = np.rint(half_way.astype(np.float32) * np.float32(fr.scale)) != np.rint(half_way * fr.scale)
    return half_way[differs], half_way[~differs], acc[small & (off_half > 0) & (off_half <= np.spacing(product))]


def _tie_case(per_channel: bool):
    """A 1x1 conv whose accumulators are bias[k] + p - 32 for pixel p (x = 96 + p at zero point 128 on input
    channel 0, weight 1): each channel's bias is an accumulator whose float32 product is exactly half way, in
    channels 0, 3, ... one where onnxruntime's double rounding shows, in 1, 4, ... one where it does not, in
    2, 5, ... one a float32 step away from half way (its weight scale drawn until it has all three); its 64
    pixels cover the accumulators around it."""
    from kernelgen.quant_float import float_scale

    rng = np.random.default_rng(270)
    k, c = 64, 32
    s_x, s_y = 0.05, 0.9
    s_w, bias = [], []
    while len(s_w) < k:
        scale = float(np.float32(rng.uniform(0.003, 0.006) if per_channel or not s_w else s_w[0]))
        kinds = _half_way(float_scale(s_x, scale, s_y))
        if all(kind.size for kind in kinds):  # per tensor: one scale that has all three
            bias.append(int(rng.choice(kinds[len(s_w) % 3])))
            s_w.append(scale)
    bias = np.array(bias, np.int32)
    x = np.full((1, 8, 8, c), 128, np.uint8)
    x[0, :, :, 0] = (96 + np.arange(64)).reshape(8, 8)
    w = np.zeros((k, c, 1, 1), np.int8)
    w[:, 0] = 1
    scale_text = "[" + ", ".join(repr(s) for s in s_w) + "]" if per_channel else repr(s_w[0])
    text = (f"name: ties\ndtype: uint8\ninput: {{shape: [1, 8, 8, {c}], layout: nhwc-8h8w32c}}\n"
            f"quant: {{input_scale: {s_x!r}, input_zero_point: 128, weight_dtype: int8, requantization: float32}}\n"
            f"ops:\n  - conv2d: {{out_channels: {k}, kernel: 1, bias: true, {BLOCKED}, quant: {{weight_scale: "
            f"{scale_text}, output_scale: {s_y!r}, output_zero_point: 128}}}}\n"
            "output: {layout: nhwc-8h8w32c}\ntargets: [hvx]\nhvx: {arch: v68}\n")
    return parse_config(text, "ties.yaml"), x, w, bias, (s_x, s_w, s_y)


@pytest.mark.slow  # the search for accumulators whose float32 product is exactly half-way (_half_way)
@requires_tool("py:onnx", "py:onnxruntime")
@pytest.mark.parametrize("per_channel", [False, True])
def test_float32_reference_is_onnxruntimes_qlinearconv_at_its_double_roundings(per_channel):
    config, x, w, bias, (s_x, s_w, s_y) = _tie_case(per_channel)
    ours = reference_quant.chain(config, x, [w], [bias]).astype(np.int32)
    theirs = _qlinearconv(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), w, bias, s_x, 128, s_w, s_y, 128, 0, 1)
    assert np.array_equal(ours, theirs.transpose(0, 2, 3, 1).astype(np.int32))
    from kernelgen.quant_float import float_scale

    acc = conv2d_acc(x, w, 128, 0, config.ops[0], bias)
    scales = np.array([float_scale(s_x, s, s_y) for s in s_w])
    one_rounding = np.clip(np.rint(acc * scales) + 128, 0, 255)
    assert np.sum(one_rounding != ours) >= 21  # channels 0, 3, ...: their bias pixel is a double rounding


@requires_tool(*HVX)
@pytest.mark.parametrize("per_channel", [False, True])
def test_float32_requantization_is_bit_exact_under_qemu_at_its_double_roundings(per_channel):
    """The kernel on exactly the accumulators where float32's rounding differs from an exact one (each
    channel's bias is one; random inputs would meet them about once in 2^18 outputs)."""
    from kernelgen.api import generate, run

    config, x, w, bias, _ = _tie_case(per_channel)
    # the fast form first (float_screen.py): these accumulators are the lanes its screen must send to the exact one
    assert "kg_rq_product(x" in "".join(generate(config, "hvx").values())
    got = run(config, "hvx", {"input": x, "filter1": w, "bias1": bias})["output"]
    assert np.array_equal(got, reference_quant.chain(config, x, [w], [bias]))


@pytest.mark.parametrize("quant, message", [
    ("weight_scale: 0.5, output_scale: 0.02", r"quant\.output_scale: quant\.requantization float32 needs s_in \* s_w "
                                              r"/ s_out in \[2\^-16, 0\.5\), got 1\.25; use requantization: fixed_point"),
    ("weight_scale: 0.000001, output_scale: 0.5", r"got 1e-07"),
])
def test_float32_requantization_outside_its_scales_is_a_config_error(quant, message):
    text = ("name: q\ndtype: uint8\ninput: {shape: [1, 4, 4, 8]}\n"
            f"quant: {{input_scale: 0.05, requantization: float32, {quant}}}\n"
            "ops:\n  - conv2d: {out_channels: 8, kernel: 1}\ntargets: [hvx]\n")
    with pytest.raises(ConfigError, match=message):
        op_quants(parse_config(text, "q.yaml"))


def test_per_channel_float32_scales_too_far_apart_are_refused_by_the_hvx_kernel():
    from kernelgen.targets.hvx.requantizer import FloatSplit

    assert "at most a factor of 2^14" in FloatSplit.of(_float_requants([0.3, 0.3 * 2.0 ** -15]))
    assert not isinstance(FloatSplit.of(_float_requants([0.3, 0.3 * 2.0 ** -13])), str)
