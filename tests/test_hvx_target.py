"""The hvx target: clang-19 builds each kernel with a generated driver, qemu-hexagon runs it,
uint8 outputs equal reference_quant bit for bit (two runs, outputs and workspace poisoned
with 0xA5 and 0x5A), float32 outputs lie within the rounding bound; the qf32 variant
compiles for v68 and v73 with HVX float multiplies (compile-only: QEMU 7.2 has no HVX float).

The uint8 matrix covers 1x1 and 3x3 kernels, stride 1/2, pad 0/1, dilation 2, channels
equal to / a multiple of / below / above the 32-channel block (layout padding), splits that
do and do not divide, single convs and 2-op chains, int8 and uint8 weights, bias, batch 2.
Each case draws a fresh seed, printed on failure.
"""
from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from builders import Case, make_config, toolchain
from conftest import requires_tool

from kernelgen.targets import TARGETS
from kernelgen.cli import main
from kernelgen.api import load_config, parse_config
from kernelgen.quant import requantization
from kernelgen.targets.hvx.plan import FILTER_LAYOUT, hvx_plan
from kernelgen.planner import plan
from kernelgen.report import text_report
from kernelgen.reference_quant import requantize
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate
from kernelgen.targets.hvx import toolchain as hexagon
from kernelgen.targets.hvx.runtime import compile_program

TOOLS = toolchain("hvx")
BLOCKED, FILTER = "nhwc-8h8w32c", "oihw-8i32o4i"


def _scales(shape: list[int], ops: list[str]) -> str:
    """Scales that keep full-range random data mostly inside uint8 after each conv."""
    def taps(op: str, channels: int) -> int:
        k = 3 if "kernel: 3" in op else 1
        return k * k * channels

    channels = [shape[3]] + [int(op.split("out_channels: ")[1].split(",")[0]) for op in ops]
    s_in, s_w, spread = 0.05, 0.01, 74.0
    scale, std = s_in, spread  # activation std in uint8 steps
    out = []
    for j, op in enumerate(ops):
        acc_std = math.sqrt(taps(op, channels[j])) * std * spread
        scale = scale * s_w * acc_std / 40.0
        out.append(scale)
        std = 40.0
    mid = f"intermediate_scale: {out[0]:.6g}, " if len(ops) > 1 else ""
    return f"input_scale: {s_in}, weight_scale: {s_w}, {mid}output_scale: {out[-1]:.6g}"


def _case(shape, ops, schedule: str, extra: str) -> Case:
    """A uint8 case in HVX's packed layouts, its quant scales chosen for its ops (_scales) plus `extra`."""
    quant = _scales(shape, ops) + (f", {extra}" if extra else "")
    return Case(shape, [f"{{{op[1:-1]}, filter_layout: {FILTER}}}" for op in ops], BLOCKED, BLOCKED, schedule,
                dtype="uint8", blocks=(("quant", f"{{{quant}}}"),), targets="[hvx]")


# name: (input shape, ops, schedule, quant extras)
MATRIX = {name: _case(*row) for name, row in {
    "k1_c32_equal_block": ([1, 8, 8, 32], ["{out_channels: 32, kernel: 1}"], "{}", ""),
    "k3_pad1_c16_below_k48_above": ([1, 10, 9, 16], ["{out_channels: 48, kernel: 3, pad: 1}"],
                                    "{k_split: 2, h_split: 1}", ""),
    "k3_stride2_c64_multiple_bias": ([1, 13, 11, 64], ["{out_channels: 64, kernel: 3, stride: 2, pad: 1}"],
                                     "{h_block: 4, h_split: 1}", "bias: true"),
    "k1_stride2_c40_above_k70": ([1, 15, 15, 40], ["{out_channels: 70, kernel: 1, stride: 2}"],
                                 "{k_split: 2, h_block: 3, h_split: 2}", ""),
    "chain_3x3pad1_1x1": ([1, 16, 16, 32], ["{out_channels: 40, kernel: 3, pad: 1}", "{out_channels: 33, kernel: 1}"],
                          "{k_split: 1, h_split: 1}", ""),
    "chain_splits_not_dividing": ([1, 22, 20, 32], ["{out_channels: 96, kernel: 3}", "{out_channels: 96, kernel: 3}"],
                                  "{k_split: 2, h_split: 2}", "bias: true"),
    "chain_stride2_dilation2_uint8_weights": ([1, 21, 19, 12], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}",
                                                                "{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"],
                                              "{h_block: 3, h_split: 2}",
                                              "weight_dtype: uint8, weight_zero_point: 121"),
    "batch2_k3_pad1_c10": ([2, 6, 7, 10], ["{out_channels: 6, kernel: 3, pad: 1}"], "{h_block: 4}", ""),
    # Issue 7: the double-buffered pipeline and the halo ring on strided, dilated and batched cases.
    "chain_stride2_dilation2_double_buffer": ([1, 21, 19, 12], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}",
                                                                "{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"],
                                              "{h_block: 3, h_split: 1, pipeline: double_buffer}", ""),
    "chain_stride2_dilation2_halo_reuse": ([1, 21, 19, 12], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}",
                                                             "{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"],
                                           "{h_block: 1, h_split: 2, halo: reuse}", "bias: true"),
    "batch2_k3_pad1_c40_k70_double_buffer": ([2, 6, 7, 40], ["{out_channels: 70, kernel: 3, pad: 1}"],
                                             "{h_block: 2, pipeline: double_buffer}", ""),
    "batch2_k3_stride2_halo_reuse": ([2, 19, 9, 10], ["{out_channels: 6, kernel: 3, stride: 2, pad: 1}"],
                                     "{h_block: 2, halo: reuse}", ""),
}.items()}


def _validate(config, seed: int):
    """The core's validation of the hvx job (planned and rendered once)."""
    hvx = TARGETS["hvx"]
    return validate(hvx, hvx.build(config, plan(config)), seed)


# ---- without tools ---------------------------------------------------------------


def test_requantization_multiplier_and_shift():
    rq = requantization(0.000215, "k", None)
    assert 2 ** 30 <= rq.multiplier < 2 ** 31
    assert abs(rq.multiplier * 2.0 ** -(31 + rq.shift) / 0.000215 - 1) < 2 ** -30
    acc = np.array([-(2 ** 31), -1000000, -1, 0, 1, 186000, 2 ** 31 - 1], dtype=np.int64)
    got = requantize(acc, rq, 128)
    assert got.dtype == np.uint8 and got[0] == 0 and got[-1] == 255 and got[3] == 128
    assert abs(int(got[5]) - (128 + round(186000 * 0.000215))) <= 1


def test_vtcm_budget_is_checked(repo, tmp_path):
    text = (repo / "configs" / "hvx_seed000_3x3_u8.yaml").read_text().replace("arch: v73", "arch: v66")
    (tmp_path / "small.yaml").write_text(text)
    result = CliRunner().invoke(main, ["build", str(tmp_path / "small.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "hvx.vtcm_bytes" in result.output and "262144 bytes of v66" in result.output


def test_uint8_kernel_keeps_the_plan_loop_nest(repo):
    config = load_config(repo / "configs" / "hvx_seed000_3x3_u8.yaml")
    hp = hvx_plan(config, plan(config))
    assert hp.workspace_bytes <= hp.vtcm_bytes
    source = TARGETS["hvx"].build(config, plan(config)).files["hvx_seed000_3x3_u8.c"]
    for line in ("for (int ko_outer = 0; ko_outer < 2; ++ko_outer)", "for (int ho_outer = 0; ho_outer < 4; ++ho_outer)",
                 "for (int ko_outer_1 = 0; ko_outer_1 < 2; ++ko_outer_1)",
                 "uint8_t *const output_cache = input_cache;", "Q6_Vuw_vrmpyacc_VuwVubRub"):
        assert line in source


def test_uint8_kernel_loop_nest_is_the_plan_stripe_nest(repo):
    """pycparser: the emitted kernel's loops are the plan's stripe loops, sections become helper calls."""
    from test_emit import _c_tree, _parse_kernel, _plan_tree

    config = load_config(repo / "configs" / "hvx_seed000_3x3_u8.yaml")
    the_plan = plan(config)
    hp = hvx_plan(config, the_plan)
    source = TARGETS["hvx"].build(config, the_plan).files["hvx_seed000_3x3_u8.c"]
    kernel_text = source[source.index("void hvx_seed000_3x3_u8("):]
    kernel = _parse_kernel("typedef unsigned char uint8_t;\ntypedef signed char int8_t;\ntypedef int int32_t;\n" + kernel_text,
                           "hvx_seed000_3x3_u8")
    tree = _c_tree(kernel.body)
    assert tree == _plan_tree(hp.kernel.body)
    assert tree == [("ko_outer", 2, [("ho_outer", 4, [("ko_outer_1", 2, [])])])]
    outer = _plan_tree(the_plan.kernel.body)
    assert [(v, n) for v, n, _ in outer] == [("ko_outer", 2)]
    assert [(v, n) for v, n, _ in outer[0][2]] == [("ho_outer", 4)]


# ---- with the Hexagon toolchain ----------------------------------------------------


@requires_tool(*TOOLS)
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_uint8_matrix_is_bit_exact(name):
    config = make_config(name, MATRIX[name])
    result = _validate(config, int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"
    assert "100% of outputs saturated" not in result.detail


@requires_tool(*TOOLS)
def test_seed000_3x3_uint8_uses_vrmpy_without_vector_spills(repo, tmp_path):
    config = load_config(repo / "configs" / "hvx_seed000_3x3_u8.yaml")
    for name, text in TARGETS["hvx"].build(config, plan(config)).files.items():
        (tmp_path / name).write_text(text)
    asm = hexagon.assembly(tmp_path / "hvx_seed000_3x3_u8.c", arch="v73", include_dirs=[tmp_path])
    assert asm.count("vrmpy(") >= 2 * 256  # each conv's unrolled tap: 4 channel blocks x 8 pixels x 8
    assert hexagon.vector_spills(asm) == 0


@requires_tool(*TOOLS)
@pytest.mark.parametrize("arch", ["v68", "v73"])
def test_qf32_variant_compiles_with_hvx_float_multiplies(repo, arch):
    text = (repo / "configs" / "hvx_seed000_3x3_qf32.yaml").read_text().replace("arch: v73", f"arch: {arch}")
    config = parse_config(text, "qf32.yaml")
    result = _validate(config, 0)
    assert result.status is Status.COMPILED, result.detail
    assert "compile-only: QEMU 7.2 has no HVX float" in result.detail and not result.passed


@requires_tool(*TOOLS)
@pytest.mark.parametrize("extra", ["", ", pipeline: double_buffer", ", halo: reuse"])
def test_float32_chain_runs_under_qemu(extra):
    text = ("name: f32_chain\ninput: {shape: [1, 12, 10, 40], layout: nhwc-8h8w32c}\nops:\n"
            "  - conv2d: {out_channels: 36, kernel: 3, pad: 1, filter_layout: oihw-8i32o4i}\n"
            "  - conv2d: {out_channels: 20, kernel: 3, stride: 2, dilation: 2, pad: 2, "
            "filter_layout: oihw-8i32o4i}\n"
            f"output: {{layout: nhwc-8h8w32c}}\nschedule: {{k_split: 1, h_block: 2, h_split: 1{extra}}}\n"
            "targets: [hvx]\n")
    result = _validate(parse_config(text, "f32.yaml"), int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


EPILOGUE_CHAIN = (
    "name: f32_epilogue\ninput: {shape: [1, 10, 8, 40], layout: nhwc-8h8w32c}\nops:\n"
    "  - conv2d: {out_channels: 36, kernel: 3, pad: 1, bias: true, activation: relu6, filter_layout: oihw-8i32o4i}\n"
    "  - conv2d: {out_channels: 36, kernel: 3, pad: 1, groups: 36, bias: true, residual: 1, activation: relu6, "
    "filter_layout: oihw-8i32o4i}\n"
    "  - conv2d: {out_channels: 72, kernel: 3, pad: 1, groups: 36, filter_layout: oihw-8i32o4i}\n"
    "  - conv2d: {out_channels: 40, kernel: 1, groups: 4, bias: true, residual: input, activation: [-0.3, 0.4], "
    "filter_layout: oihw-8i32o4i}\n"
    "output: {layout: nhwc-8h8w32c}\nschedule: {k_split: 1, h_block: 2, h_split: 1}\ntargets: [hvx]\n")


@requires_tool(*TOOLS)
def test_float32_bias_activations_groups_and_residuals_run_under_qemu():
    """The scalar float32 kernel (the plan's loop nest, epilogues included) runs: depthwise, channel
    multiplier 2, 4 groups, a residual from op 1 and one from the input."""
    config = parse_config(EPILOGUE_CHAIN, "f32_epilogue.yaml")
    result = _validate(config, 7)
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


@requires_tool(*TOOLS)
@pytest.mark.parametrize("op", [
    "{out_channels: 40, kernel: 3, stride: 2, pad: 1, groups: 20, bias: true, activation: relu}",  # multiplier 2
    "{out_channels: 20, kernel: 3, dilation: 2, pad: 2, groups: 20, activation: [-0.5, 0.5]}",
    "{out_channels: 12, kernel: [3, 1], pad: [1, 0], groups: 4}"])
def test_float32_depthwise_and_grouped_shapes_run_under_qemu(op):
    text = ("name: f32_grouped\ninput: {shape: [2, 9, 7, 20], layout: nhwc-8h8w32c}\nops:\n"
            f"  - conv2d: {op[:-1]}, filter_layout: oihw-8i32o4i}}\n"
            "output: {layout: nhwc-8h8w32c}\nschedule: {k_split: 1, h_block: 2, h_split: 1}\ntargets: [hvx]\n")
    result = _validate(parse_config(text, "g.yaml"), int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


@requires_tool(*TOOLS)
def test_qf32_variant_compiles_groups_and_epilogues():
    """The qf32 variant of the same chain: depthwise as a lane-by-lane vector multiply, other groups
    gathered, + bias and + residual in qf32, the clamp as vmax/vmin on sf. Compile-only (QEMU 7.2)."""
    config = parse_config(EPILOGUE_CHAIN.replace("{k_split: 1", "{k_split: 2", 1).replace(
        "targets: [hvx]", "hvx: {arch: v73, float_compute: qf32}\ntargets: [hvx]"), "q.yaml")
    job = TARGETS["hvx"].build(config, plan(config))
    the_plan = job.target_plan
    assert the_plan.qf32 is not None
    assert [(o.group_in, o.group_out, o.bias, o.residual) for o in the_plan.ops] == [
        (0, 0, True, None), (1, 1, True, 1), (1, 2, False, None), (18, 10, True, 0)]
    result = validate(TARGETS["hvx"], job, 0)
    assert result.status is Status.COMPILED, result.detail
    with tempfile.TemporaryDirectory() as tmp:
        compile_program(job, Path(tmp))  # writes the job's files, checks the qf32 vmpy
        asm = hexagon.assembly(Path(tmp) / f"{job.plan.name}.c", arch="v73", include_dirs=[Path(tmp)])
    for instruction in (r"\.qf32\s*=\s*vmpy\(", r"\.qf32\s*=\s*vadd\(v\d+\.qf32,\s*v\d+\.sf\)",
                        r"\.sf\s*=\s*vmax\(", r"\.sf\s*=\s*vmin\("):
        assert re.search(instruction, asm), instruction


@requires_tool(*TOOLS)
def test_bench_prints_counters(repo):
    result = CliRunner().invoke(main, ["bench", str(repo / "configs" / "hvx_matrix_chain_u8.yaml"), "--target", "hvx"])
    assert result.exit_code == 0, result.output
    for key in ("packets=", "instructions=", "hvx_instructions=", "macs=", "macs_per_packet=",
                "compute_macs_per_packet="):
        assert key in result.output


def test_matrix_configs_are_valid():
    for name, case in MATRIX.items():
        config = make_config(name, case)
        assert hvx_plan(config, plan(config)).ops


@requires_tool(*TOOLS)
@pytest.mark.parametrize("name", ["seed000_baseline", "seed000_split", "seed000_3x3"])
def test_seed000_float32_under_qemu(repo, name):
    """Seed 000's three cases in float32 on the scalar Hexagon path, run under QEMU: about a
    minute each for 1x1 and six minutes for 3x3 (3.5 GFLOP of scalar float work executed)."""
    from kernelgen.api import validate

    result = validate(load_config(repo / "configs" / f"{name}.yaml"), "hvx")
    assert result.passed, f"{result.detail} (seed {result.seed})"


# Issue 33: uint8 ops naming no filter_layout, a depthwise one and a dense one; scales keep the outputs unsaturated.
NO_FILTER_LAYOUT = (
    "name: dw_default\ndtype: uint8\ninput: {shape: [1, 12, 10, 64], layout: nhwc-8h8w32c}\n"
    "quant: {input_scale: 0.05, input_zero_point: 128, weight_dtype: int8, weight_scale: 0.002, output_scale: 0.1, "
    "output_zero_point: 128}\nops:\n  - conv2d: {out_channels: 64, kernel: 3, pad: 1, groups: 64}\n"
    "  - conv2d: {out_channels: 40, kernel: 1}\noutput: {layout: nhwc-8h8w32c}\ntargets: [hvx]\n")


def test_uint8_ops_naming_no_filter_layout_take_the_one_the_hvx_kernels_read(tmp_path):
    """Depthwise and dense alike get OIHW8i32o4i, and the plan report says where it came from; an op naming its
    layout keeps it (and is left out of the note); float32 keeps OIHW, which the scalar kernel reads."""
    path = tmp_path / "dw_default.yaml"
    path.write_text(NO_FILTER_LAYOUT)
    result = CliRunner().invoke(main, ["build", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert [op.filter_layout.name for op in load_config(path).ops] == [FILTER_LAYOUT, FILTER_LAYOUT]
    note = ("note: filter1, filter2: OIHW8i32o4i, the layout the hvx target reads uint8 filters in (the config names "
            "no filter_layout)")
    assert note in (tmp_path / "out" / "dw_default" / "plan.txt").read_text()
    named = NO_FILTER_LAYOUT.replace("groups: 64}", "groups: 64, filter_layout: oihw-8i32o4i}")
    assert "note: filter2: OIHW8i32o4i, the layout" in text_report(plan(parse_config(named, "named.yaml")))
    float32 = "".join(line for line in NO_FILTER_LAYOUT.splitlines(True) if not line.startswith(("dtype", "quant")))
    config = parse_config(float32, "f32.yaml")
    assert config.dtype == "float32" and [op.filter_layout.name for op in config.ops] == ["OIHW", "OIHW"]
    assert "filter_layout" not in text_report(plan(config))


@requires_tool(*TOOLS)
def test_uint8_depthwise_naming_no_filter_layout_is_bit_exact_under_qemu():
    result = _validate(parse_config(NO_FILTER_LAYOUT, "dw_default.yaml"), int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"
    assert "(0% of outputs saturated)" in result.detail


@pytest.mark.parametrize("edit, key, line", [
    ("schedule: {k_split: 1, h_split: 1, k_block: 8}", "schedule.k_block", 7),
    ("schedule: {k_split: 1, h_split: 1}\n#", "ops[0].conv2d.filter_layout", 5),
])
def test_uint8_layout_problems_point_at_their_own_key(tmp_path, edit, key, line):
    """The blocked-layout requirement names the key that breaks it, not input.layout."""
    text = ("name: kb\ndtype: uint8\ninput: {shape: [1, 8, 8, 32], layout: nhwc-8h8w32c}\nops:\n"
            "  - conv2d: {out_channels: 32, kernel: 1, filter_layout: FILTER}\noutput: {layout: nhwc-8h8w32c}\n"
            "SCHEDULE\ntargets: [hvx]\n")
    text = text.replace("SCHEDULE", edit).replace("FILTER", "OIHW" if key.startswith("ops") else "oihw-8i32o4i")
    path = tmp_path / "kb.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["build", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and f"kb.yaml:{line}:" in result.output and f" {key}: " in result.output, \
        result.output
