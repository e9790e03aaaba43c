"""The uint8 depthwise vector path beyond 3x3 (templates/hvx/depthwise_uint8.c.j2, the vmpy form): MobileNetV3's
and EfficientNet's 5x5, stride 2 and DeepLabV3's dilated 5x5 read their taps as aligned input vectors joined with
valign (stride 1) or dealt into even and odd pixels first (stride 2), never gathered through memory; a row's taps
summed in pairs into words, an odd row's last tap paired with the next row's. Each case is bit-exact under
qemu-hexagon against the numpy reference on a fresh seed; the generated source shows which path it took."""
from __future__ import annotations

import numpy as np
import pytest
from builders import Case, config_text, toolchain
from conftest import requires_tool

from kernelgen.api import parse_config
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate
from kernelgen.planner import plan
from kernelgen.targets import TARGETS
from kernelgen.targets.hvx.depthwise import depthwise

HVX = toolchain("hvx")
QUANT = "{input_scale: 0.05, input_zero_point: 128, weight_dtype: int8}"


def _scales(k: int, seed: int) -> str:
    return "[" + ", ".join(f"{s:.5f}" for s in np.random.default_rng(seed).uniform(0.0008, 0.003, k)) + "]"


def _depthwise(c: int, taps: str, seed: int, extra: str = ", activation: relu6") -> str:
    return (f"out_channels: {c}, {taps}, groups: {c}, bias: true{extra}, quant: {{weight_scale: {_scales(c, seed)}, "
            "output_scale: 0.03, output_zero_point: 5}")


def _pointwise(c: int) -> str:
    return (f"out_channels: {c}, kernel: 1, bias: true, activation: relu, quant: {{weight_scale: {_scales(c, c)}, "
            "output_scale: 0.04, output_zero_point: 0}")


def _config(name: str, shape, ops, schedule: str = "auto") -> str:
    ops = [f"{{{op}, filter_layout: oihw-8i32o4i}}" for op in ops]
    return config_text(name, Case(list(shape), ops, "nhwc-8h8w32c", "nhwc-8h8w32c", schedule, dtype="uint8",
                                  blocks=(("quant", QUANT),), targets="[hvx]"))


CASES = [  # (name, input shape, ops, schedule)
    # MobileNetV3's stride-2 5x5 after its expansion; 72 channels: a tail block of 8
    ("v3_5x5_s2", (1, 13, 11, 24), [_pointwise(72), _depthwise(72, "kernel: 5, stride: 2, pad: 2", 1)], "auto"),
    # DeepLabV3's dilated 5x5 (rows and columns 2 apart), past one 4-pixel vector of reach
    ("dilated_5x5", (1, 12, 10, 32), [_pointwise(96), _depthwise(96, "kernel: 5, dilation: 2, pad: 4", 2)], "auto"),
    # conv #1: the input cache as stored (no transpose), each channel stripe its own blocks; batch 2, odd sizes
    ("lone_5x5", (2, 11, 13, 40), [_depthwise(40, "kernel: 5, pad: 2", 3)], "auto"),
    # 7x7 at stride 2: odd pixels shifted by 3, two dealt pairs a group
    ("dw_7x7_s2", (1, 15, 17, 32), [_pointwise(64), _depthwise(64, "kernel: 7, stride: 2, pad: 3", 4)], "auto"),
    # dilation at stride 2: the even pixels shifted by one and two
    ("dilated_3x3_s2", (1, 14, 13, 32), [_pointwise(32), _depthwise(32, "kernel: 3, stride: 2, dilation: 2, pad: 2",
                                                                     5, "")], "auto"),
    # an even row (no tap held), stride 2 across only, rows of 2
    ("dw_2x4_s12", (1, 9, 14, 32), [_pointwise(40), _depthwise(40, "kernel: [2, 4], stride: [1, 2], pad: 1", 6)],
     "auto"),
    # one row of 3 taps: the held tap added alone after the row
    ("dw_1x3", (1, 7, 9, 32), [_pointwise(32), _depthwise(32, "kernel: [1, 3], pad: [0, 1, 0, 1]", 7)], "auto"),
    # conv #1 on a ring of kept rows (halo reuse) with rows 2 apart, and with two input caches
    ("ring_dilated", (1, 17, 12, 64), [_depthwise(64, "kernel: 5, dilation: [2, 1], pad: [4, 2, 4, 2]", 8)],
     "{k_split: 1, h_block: 2, halo: reuse}"),
    ("double_buffer", (1, 12, 12, 64), [_depthwise(64, "kernel: 5, stride: 2, pad: 2", 9)],
     "{k_split: 1, h_block: 3, pipeline: double_buffer}"),
]


def _job(name, shape, ops, schedule):
    config = parse_config(_config(name, shape, ops, schedule), f"{name}.yaml")
    hvx = TARGETS["hvx"]
    return config, hvx.build(config, plan(config))


@pytest.mark.parametrize("name, shape, ops, schedule", CASES, ids=[c[0] for c in CASES])
def test_depthwise_convs_of_any_taps_multiply_aligned_vectors(name, shape, ops, schedule):
    """The depthwise op is on the vector path: vmpy(ub, b) per tap on joined or dealt vectors; no 4-pixel gather
    through bytes[], no widening to halfwords, no transposed input cache (conv #1 reads it as stored)."""
    config, job = _job(name, shape, ops, schedule)
    source = job.files[f"{name}.c"]
    chosen = depthwise(config, job.plan, TARGETS["hvx"].target_plan(config, job.plan).ops)
    assert chosen.ops == (len(ops),) and not chosen.transposed and not chosen.sweep
    assert "Q6_Wh_vmpy_VubVb" in source and "Q6_Wuh_vunpack_Vub(gathered)" not in source
    assert "kg_transpose4" not in source
    # stride 2 across deals each row's pixels into even and odd ones (by 32 bytes; the channel sums deal words)
    assert ("Q6_W_vdeal_VVR(v[2 * j + 1], v[2 * j], -32)" in source) is (
        ", stride: 2" in ops[-1] or "stride: [1, 2]" in ops[-1])


@requires_tool(*HVX)
@pytest.mark.parametrize("name, shape, ops, schedule", CASES, ids=[c[0] for c in CASES])
def test_depthwise_convs_of_any_taps_are_bit_exact_under_qemu(name, shape, ops, schedule):
    _, job = _job(name, shape, ops, schedule)
    result = validate(TARGETS["hvx"], job, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


def test_conv_1_keeps_its_vrmpy_forms_for_3x3_alone():
    """A lone 3x3 conv #1 still sweeps (vrmpy on registers), a lone 3x3 without left padding still transposes its
    input cache; a dilated 3x3 or a 5x5 as conv #1 reads its cache as stored."""
    def chosen(taps):
        config = parse_config(_config("dw", (1, 12, 10, 40), [_depthwise(40, taps, 1)]), "dw.yaml")
        p = plan(config)
        return depthwise(config, p, TARGETS["hvx"].target_plan(config, p).ops)

    assert chosen("kernel: 3, pad: 1").sweep
    assert chosen("kernel: 3, pad: 0").transposed
    for taps in ("kernel: 3, dilation: 2, pad: 2", "kernel: 5, pad: 2"):
        d = chosen(taps)
        assert d.ops == (1,) and not d.sweep and not d.transposed
    assert chosen("kernel: 9, pad: 4").ops == ()  # past 7 taps a row: the generic path
