"""The uint8 depthwise sweep on HVX (issue 30; templates/hvx/depthwise_sweep_uint8.c.j2): a lone 3x3 depthwise conv
with one column of left padding and the fixed-point requantization reads its rows from the input tensor and stores
into the output tensor, each block of up to 4 output rows as one block of scheduled packets (depthwise_asm.py).
Every schedule the sweep can take assembles (the assembler checks each packet); the kernels are bit-exact under
qemu-hexagon on the extents around its column groups (widths below, equal to and past one 4-pixel vector, with a
partial last vector), odd stripe heights (a last row alone), stripes equal to, below and above the row block,
padding rows above and below a block, rows past the output, channel tails (stored under a predicate), batch 2,
stride 2 either way, per-channel and uniform scales, each clamp; and its useful MACs per packet
(QEMU's counters are deterministic) stay above the issue's 40 on one benchmark shape."""
from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from builders import Case, config_text, toolchain
from conftest import requires_tool

from kernelgen.api import parse_config
from kernelgen.cli import main
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate
from kernelgen.planner import plan
from kernelgen.targets import TARGETS
from kernelgen.targets.hvx.depthwise import depthwise
from kernelgen.targets.hvx.depthwise_asm import SCALARS, Block, block_asm

HVX = toolchain("hvx")


def _config(shape, stride, schedule: str = "{k_split: 1, h_block: 4}", extra: str = ", activation: relu6",
            arch: str = "v66", uniform: bool = False) -> str:
    n, h, w, c = shape
    scales = ", ".join(f"{s:.5f}" for s in np.random.default_rng(c).uniform(0.0015, 0.004, 1 if uniform else c))
    op = (f"{{out_channels: {c}, kernel: 3, stride: {stride}, pad: 1, groups: {c}, bias: true{extra}, "
          f"filter_layout: oihw-8i32o4i, quant: {{weight_scale: [{scales}], output_scale: 0.03, "
          "output_zero_point: 5}}")
    quant = "{input_scale: 0.05, input_zero_point: 128, weight_dtype: int8}"
    return config_text(f"dw{c}", Case([n, h, w, c], [op], "nhwc-8h8w32c", "nhwc-8h8w32c", schedule, dtype="uint8",
                                      blocks=(("quant", quant), ("hvx", f"{{arch: {arch}}}")), targets="[hvx]"))


SWEEP_CASES = [  # (input shape, stride, schedule)
    ((1, 5, 1, 32), 1, "{k_split: 1, h_block: 4}"),  # one column: a partial first vector, the next is padding
    ((1, 6, 3, 40), 1, "{k_split: 1, h_block: 3}"),  # odd stripe height, a channel tail of 8
    ((1, 7, 4, 32), 1, "{k_split: 1, h_block: 4}"),  # one whole vector
    ((2, 9, 5, 64), 1, "{k_split: 2, h_block: 4}"),  # batch 2, a partial second vector, two blocks per stripe
    ((1, 11, 9, 48), 1, "{k_split: 1, h_block: 5}"),  # rows past the output in the last stripe
    ((1, 8, 17, 32), 1, "{k_split: 1, h_block: 8}"),  # the rolled loop, then a partial vector
    ((1, 9, 1, 32), 2, "{k_split: 1, h_block: 4}"),
    ((1, 10, 9, 40), 2, "{k_split: 1, h_block: 3}"),  # odd width: the last output column reads padding
    ((2, 13, 21, 64), 2, "{k_split: 1, h_block: 2}"),  # the rolled loop, batch 2
    ((1, 10, 17, 33), [1, 2], "{k_split: 1, h_block: 4}"),  # stride 2 across only, a tail of 1
    ((1, 9, 12, 64), [2, 1], "{k_split: 2, h_block: 3}"),  # stride 2 down only
    # short rows at stride 2 across: blocks of 4 output rows
    ((1, 14, 14, 40), 2, "{k_split: 1, h_block: 4}"),  # a block equal to the stripe (a padding row above), then 3 rows
    ((1, 13, 13, 32), 2, "{k_split: 1, h_block: 8}"),  # odd sizes: 4 rows, then 3 whose last reads a padding row below
    ((1, 20, 10, 32), 2, "{k_split: 1, h_block: 5}"),  # stripes above the block: 4 rows then 1
    ((2, 6, 6, 64), 2, "{k_split: 2, h_block: 4}"),  # batch 2, 3 rows below the block, an even width's partial vector
    ((1, 9, 8, 32), [1, 2], "{k_split: 1, h_block: 3}"),  # stride 1 down: 3 rows sharing two input rows each
]
CLAMP_CASES = [  # (input shape, stride, epilogue, one scale for every channel)
    ((1, 7, 10, 40), 1, ", activation: relu", False),  # the lower clamp alone
    ((1, 7, 10, 40), 2, "", False),  # no clamp
    ((1, 9, 13, 64), 1, ", activation: relu6", True),  # one scale: the narrowing form, in C (no scheduled rows)
]


@requires_tool("clang-19")
@pytest.mark.parametrize("stride", [1, 2])
def test_every_scheduled_row_assembles(stride, tmp_path):
    """Widths around the 4-pixel groups, each clamp, one to four rows (input rows shared at stride 2 down, padding
    rows above and below), whole and tail blocks: the assembler takes every packet (the list scheduler's resource
    model is the assembler's, or stricter)."""
    text = []
    kinds = (((True, True), 1, (), False), ((False, False), 2, (0,), True), ((True, False), 2, (), False),
             ((True, True), 3, (0,), False), ((False, True), 4, (8,), True))
    for w in (1, 3, 4, 5, 9, 14, 17, 28):
        out_w = w if stride == 1 else (w - 1) // 2 + 1
        for clamps, rows, pads, lanes in kinds:
            if rows > 2 and out_w > 8:  # the sweep takes 4 rows for short rows alone
                continue
            row = block_asm(Block(stride=stride, down=2, in_w=w, out_w=out_w, clamps=clamps, rows=rows,
                                  pads=pads, lanes=lanes))
            names = {n: f"v{len(row.temps) + i}" for i, n in enumerate(row.vectors)}
            names |= {n: f"r{i + 1}" for i, n in enumerate(SCALARS)}
            for packet in row.packets:
                bound = (re.sub(r"%\[(\w+)\]", lambda m: names[m.group(1)], i) for i in packet)
                text.append("{ " + "; ".join(bound) + " }")
    (tmp_path / "rows.s").write_text("\n".join(text) + "\n")
    for arch in ("v66", "v73"):
        result = subprocess.run(["clang-19", "--target=hexagon", f"-mcpu=hexagon{arch}", "-mhvx", "-mhvx-length=128b",
                                 "-c", str(tmp_path / "rows.s"), "-o", str(tmp_path / "rows.o")],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[:2000]


@requires_tool(*HVX)
@pytest.mark.parametrize("shape, stride, extra, uniform", CLAMP_CASES)
def test_depthwise_sweep_clamps_and_uniform_scales_are_bit_exact_under_qemu(shape, stride, extra, uniform):
    """The scheduled rows requantize in the per-channel form (the zero point in the rounding); one scale for every
    channel with a shift under 16 narrows two vectors per instruction instead, which the C sweep does."""
    config = parse_config(_config(shape, stride, extra=extra, uniform=uniform), "dw.yaml")
    hvx = TARGETS["hvx"]
    job = hvx.build(config, plan(config))
    assert ("__asm__(" in job.files[f"dw{shape[3]}.c"]) is not uniform
    result = validate(hvx, job, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


@requires_tool(*HVX)
@pytest.mark.parametrize("shape, stride, schedule", SWEEP_CASES)
def test_depthwise_sweep_is_bit_exact_under_qemu(shape, stride, schedule):
    config = parse_config(_config(shape, stride, schedule), "dw.yaml")
    hvx = TARGETS["hvx"]
    job = hvx.build(config, plan(config))
    source = job.files[f"dw{shape[3]}.c"]
    assert "kg_conv_1(input, " in source and "kg_input_read(input" not in source  # no cache copy, no write-back
    assert "kg_write_back(output_cache" not in source and "__asm__(" in source  # scheduled rows
    result = validate(hvx, job, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


def _sweep(config):
    hvx = TARGETS["hvx"]
    return depthwise(config, plan(config), hvx.target_plan(config, plan(config)).ops)


def test_sweep_blocks_by_their_rows_and_padding_rows():
    """576 channels 14x14 stride 2 in stripes of 4 rows (benchmarks/hvx_depthwise.py's case): 4 rows reading input
    rows -1..7 (the first a padding row), then 3 rows reading 7..13; the input's partial last vector needs no mask
    (the last output reads pixels up to 13), an odd width's does; a channel tail doubles the kinds."""
    config = parse_config(_config((1, 14, 14, 576), 2), "dw.yaml")
    sweep = _sweep(config)
    assert sweep.rows == 4
    assert [(a.block.rows, a.block.pads, a.block.top, a.block.bottom) for a in sweep.asm] == [(4, (0,), 1, 0),
                                                                                          (3, (), 0, 0)]
    assert not sweep.asm[0].block.partial and "p0" not in dict(sweep.asm[0].inputs)
    config = parse_config(_config((1, 13, 13, 40), 2, "{k_split: 1, h_block: 8}"), "dw.yaml")
    sweep = _sweep(config)
    assert [(a.block.rows, a.block.pads, a.block.lanes) for a in sweep.asm] == [
        (4, (0,), False), (3, (6,), False), (4, (0,), True), (3, (6,), True)]
    assert sweep.asm[0].block.partial


def test_the_sweep_leaves_other_depthwise_convs_to_the_cached_paths():
    """No left padding, a float32 requantization or a residual: the transposed input cache and its write-back."""
    for text in (_config((1, 12, 19, 40), 1).replace("pad: 1", "pad: 0"),
                 _config((1, 12, 19, 40), 1).replace("weight_dtype: int8}", "weight_dtype: int8, "
                                                     "requantization: float32}"),
                 _config((1, 12, 19, 40), 1, extra=", residual: input")):
        config = parse_config(text, "dw.yaml")
        source = TARGETS["hvx"].build(config, plan(config)).files["dw40.c"]
        assert "kg_conv_1(input, " not in source and "kg_input_read(input" in source


@requires_tool(*HVX)
def test_depthwise_sweep_reaches_40_useful_macs_per_packet(tmp_path):
    """256 channels, 28x28, stride 1, bias + relu6, per-channel scales on v66 (benchmarks/hvx_depthwise.py's case):
    measured 51.4; the floor leaves room for the scheduler's choices, not for losing the sweep."""
    path = tmp_path / "dw.yaml"
    path.write_text(_config((1, 28, 28, 256), 1))
    result = CliRunner().invoke(main, ["bench", str(path), "--target", "hvx", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["results"]
    assert row["useful_macs_per_packet"] >= 40, row


@requires_tool(*HVX)
def test_the_bench_counts_the_kernel_a_user_builds(tmp_path):
    """The whole kernel's packets come from the build without the stripe-compute counters (their reads, ~20 packets
    a stripe call, are not the kernel's), the compute breakdown from the build with them: 576 channels at 14x14,
    stride 2, where they weigh most (5648 against 6814 packets when measured)."""
    from kernelgen.measure.tensors import random_inputs
    from kernelgen.targets.hvx.runtime import compile_program, counters
    from kernelgen.targets.hvx.toolchain import parse_counters

    config = parse_config(_config((1, 14, 14, 576), 2), "dw576.yaml")
    job = TARGETS["hvx"].build(config, plan(config))
    program = compile_program(job, tmp_path)
    args = random_inputs(config, job.plan, np.random.default_rng(0))
    c = counters(program, args)
    _, profiled, _ = program.execute(args, (0xA5,), profile=True)
    instrumented = parse_counters(profiled)
    assert 0 < c["compute.packets"] < c["kernel.packets"] < instrumented["kernel0.packets"], (c, instrumented)
    assert c["compute.packets"] == instrumented["compute0.packets"]
    assert job.plan.flops / 2 / c["kernel.packets"] >= 40, c
