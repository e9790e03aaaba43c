"""Portable C target: gcc builds every kernel with -Werror and it matches numpy.

The matrix covers kernel sizes 1x1/3x3/5x5 and rectangular, stride 1/2, pad 0/1/same,
dilation 1/2, channels equal to / a multiple of / below / above the 32-channel block,
splits that do and do not divide the extents, single convs, 2- and 3-op chains, batch > 1,
and flat, blocked, 2-D (axis separator) and pad_value layouts.
"""
from pathlib import Path

import numpy as np
import pytest
from builders import Case, make_config, toolchain, with_quick
from conftest import requires_tool

from kernelgen.api import load_config
from kernelgen.planner import plan
from kernelgen.targets import TARGETS
from kernelgen.targets.c import toolchain as gcc
from kernelgen.api import validate

BLOCKED = "nhwc-8h8w32c"
FILTER = "oihw-8i32o4i"
TEXTURE = '{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4", pad_value: 0}'

# name: (input shape, [ops as conv2d flow maps], input layout, output layout, schedule)
MATRIX = {name: Case(*row) for name, row in {
    "k1_c32_equal_block": ([1, 8, 8, 32], ["{out_channels: 32, kernel: 1}"], BLOCKED, BLOCKED, "{}"),
    "k3_pad1_c16_below_k48_above": ([1, 10, 9, 16], ["{out_channels: 48, kernel: 3, pad: 1}"], BLOCKED, BLOCKED,
                                    "{k_split: 2, h_split: 1}"),
    "k5_stride2_c64_multiple_k20": ([1, 13, 11, 64], ["{out_channels: 20, kernel: 5, stride: 2, pad: 2}"], BLOCKED,
                                    BLOCKED, "{}"),
    "rect_kernel_asym_pad": ([1, 9, 12, 5], ["{out_channels: 7, kernel: [3, 1], stride: [2, 1], pad: [1, 0, 0, 2]}"],
                             "NHWC", "NHWC", "{h_block: 2, h_split: 2}"),
    "rect_1x5_same": ([1, 7, 10, 6], ["{out_channels: 3, kernel: [1, 5], pad: same}"], "NHWC", "NHWC", "{}"),
    "dilation2_same": ([1, 12, 12, 8], ["{out_channels: 8, kernel: 3, dilation: 2, pad: same}"], "NHWC", "NHWC",
                       "{h_block: 4, h_split: 1}"),
    "chain_3x3pad1_1x1": ([1, 16, 16, 32], ["{out_channels: 40, kernel: 3, pad: 1}", "{out_channels: 33, kernel: 1}"],
                          BLOCKED, BLOCKED, "{k_split: 1, h_split: 1}"),
    "chain_stride2_dilation2": ([1, 21, 19, 12], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}",
                                                  "{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"],
                                "NHWC", "NHWC", "{k_block: 8, k_split: 2, h_block: 3, h_split: 2}"),
    "chain_splits_not_dividing": ([1, 20, 20, 32], ["{out_channels: 96, kernel: 3}", "{out_channels: 96, kernel: 3}"],
                                  BLOCKED, BLOCKED, "{k_split: 2, h_split: 2}"),
    "chain_of_three": ([1, 12, 12, 8], ["{out_channels: 8, kernel: 3, pad: 1}", "{out_channels: 12, kernel: 1}",
                                        "{out_channels: 4, kernel: 3, stride: 2}"], "NHWC", BLOCKED,
                       "{h_block: 2, h_split: 1}"),
    "batch2_nchw4c_pad_value": ([2, 6, 7, 10], ["{out_channels: 6, kernel: 3, pad: 1}"], "nchw-4c",
                                "{map: nchw-4c, pad_value: -1.5}", "{h_block: 4}"),
    # Issue 7: pipelines, ring buffers, width splits and pad values on the same strided/dilated chain.
    "double_buffer_chain_stride2_dilation2": ([1, 21, 19, 12], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}",
                                                                "{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"],
                                              "NHWC", "NHWC", "{k_block: 8, k_split: 2, h_block: 3, h_split: 1, "
                                                              "pipeline: double_buffer}"),
    "halo_reuse_chain_stride2_dilation2": ([1, 21, 19, 12], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}",
                                                             "{out_channels: 24, kernel: 3, dilation: 2, pad: 2}"],
                                           "NHWC", "NHWC", "{k_block: 8, k_split: 2, h_block: 1, h_split: 2, "
                                                           "halo: reuse}"),
    "w_split_tail_3x3_pad1": ([1, 16, 20, 8], ["{out_channels: 8, kernel: 3, pad: 1}"], "NHWC", "NHWC",
                              "{h_block: 4, h_split: 2, w_block: 4, w_split: 2}"),
    "w_split_chain_double_buffer_batch2": ([2, 14, 17, 8], ["{out_channels: 12, kernel: 3, pad: 1, stride: 2}",
                                                            "{out_channels: 8, kernel: 3, dilation: 2, pad: 2}"],
                                           BLOCKED, BLOCKED, "{h_block: 2, h_split: 1, w_block: 2, w_split: 2, "
                                                             "k_block: 8, pipeline: double_buffer}"),
    "pad_value_overcompute_c10": ([1, 9, 9, 10], ["{out_channels: 12, kernel: 3, pad: 1}"],
                                  "{map: nhwc-8c, pad_value: 1.5}", "{map: nhwc-8c, pad_value: 0}", "{h_block: 4}"),
    "pad_value_undef_output": ([1, 9, 9, 10], ["{out_channels: 12, kernel: 3, pad: 1}"],
                               "{map: nhwc-8c, pad_value: undef}", "{map: nhwc-8c, pad_value: undef}", "{h_block: 4}"),
    # Epilogues (issue 19): bias and activation fused into the store of each op.
    "bias_relu6_then_clamp_chain_padded": ([1, 9, 10, 6], ["{out_channels: 10, kernel: 3, pad: 1, bias: true, "
                                                           "activation: relu6}",
                                                           "{out_channels: 5, kernel: 3, pad: 2, bias: true, "
                                                           "activation: [-0.25, 0.5]}"],
                                           "NHWC", "NHWC", "{k_block: 4, h_block: 4}"),
    # the output's channel padding must stay 0 (no overcompute through a bias), a block tail has no bias
    "bias_relu_blocked_channel_tail": ([1, 8, 8, 12], ["{out_channels: 10, kernel: 3, pad: 1, bias: true, "
                                                       "activation: relu}"],
                                       "NHWC", "{map: nhwc-8c, pad_value: 0}", "{k_block: 8}"),
    "relu_only_chain_halo_reuse": ([1, 14, 9, 8], ["{out_channels: 8, kernel: 3, pad: 1, activation: relu}",
                                                   "{out_channels: 6, kernel: 3, pad: 1, activation: relu}"],
                                   "NHWC", "NHWC", "{h_block: 2, h_split: 2, halo: reuse}"),
    "bias_double_buffer_w_split": ([1, 12, 16, 8], ["{out_channels: 12, kernel: 3, pad: 1, bias: true}"], "NHWC",
                                   "NHWC", "{h_block: 4, h_split: 1, w_block: 4, w_split: 2, pipeline: double_buffer}"),
    # Residuals (issue 19): the chain's input added where the output is written, before the activation.
    "mobilenet_v2_block_residual": ([1, 10, 9, 8], ["{out_channels: 24, kernel: 1, bias: true, activation: relu6}",
                                                    "{out_channels: 24, kernel: 3, pad: 1, groups: 24, bias: true, "
                                                    "activation: relu6}",
                                                    "{out_channels: 8, kernel: 1, bias: true, residual: input}"],
                                    "NHWC", "NHWC", "{k_block: 8, h_block: 4}"),
    "resnet_basic_residual_batch2_blocked": ([2, 9, 8, 12], ["{out_channels: 12, kernel: 3, pad: 1, bias: true, "
                                                             "activation: relu}",
                                                             "{out_channels: 12, kernel: 3, pad: 1, bias: true, "
                                                             "residual: input, activation: relu}"],
                                             BLOCKED, BLOCKED, "{k_block: 8, h_block: 2, h_split: 2}"),
    # residual from an earlier op: its output read from the stripe cache (no traffic), behind a padded 3x3
    "inverted_residual_from_depthwise": ([1, 10, 9, 6], ["{out_channels: 12, kernel: 1, bias: true, activation: relu6}",
                                                         "{out_channels: 12, kernel: 3, pad: 1, groups: 12, bias: true, "
                                                         "activation: relu6}",
                                                         "{out_channels: 12, kernel: 1, residual: 2}",
                                                         "{out_channels: 12, kernel: 3, pad: [0, 1, 2, 1], residual: 1, "
                                                         "activation: relu}"],
                                         "NHWC", BLOCKED, "{k_block: 8, h_block: 3, w_block: 4, w_split: 1}"),
    "residual_from_op1_blocked_halo_reuse": ([2, 11, 7, 8], ["{out_channels: 8, kernel: 3, pad: 1, activation: relu}",
                                                             "{out_channels: 8, kernel: 3, pad: 1, bias: true, "
                                                             "residual: 1, activation: relu}"],
                                             BLOCKED, BLOCKED, "{k_block: 4, h_block: 2, h_split: 2, halo: reuse}"),
    # residual on the first op of a chain: its halo rows outside the tensor must not read the input
    "residual_on_intermediate_with_padding": ([1, 7, 6, 4], ["{out_channels: 4, kernel: 3, pad: 1, residual: input, "
                                                             "activation: [-0.5, 0.5]}",
                                                             "{out_channels: 3, kernel: 3, pad: 1}"],
                                              "NHWC", "NCHW", "{h_block: 2, w_block: 2, w_split: 2}"),
    # an output channel block (8c, pad 0) wider than the channel stripes: the padding channels 12..15 need
    # the fill loop (the stripes stop at 12; found by the grouped case below)
    "pad_value0_stripes_short_of_channel_block": ([1, 8, 7, 12], ["{out_channels: 12, kernel: 1}"], "NHWC",
                                                  "{map: nhwc-8c, pad_value: 0}", "{k_block: 4}"),
    # Grouped and depthwise convs (issue 19): each output channel reads its own group's channels.
    "inverted_residual_fused": ([1, 10, 9, 8], ["{out_channels: 24, kernel: 1, bias: true, activation: relu6}",
                                                "{out_channels: 24, kernel: 3, pad: 1, groups: 24, bias: true, "
                                                "activation: relu6}", "{out_channels: 8, kernel: 1, bias: true}"],
                                "NHWC", "NHWC", "{k_block: 8, h_block: 4}"),
    "depthwise_stride2_multiplier2_blocked": ([1, 11, 9, 6], ["{out_channels: 12, kernel: 3, stride: 2, pad: 1, "
                                                              "groups: 6}"], BLOCKED, BLOCKED, "{k_block: 8}"),
    "depthwise_dilated_nchw": ([1, 12, 12, 5], ["{out_channels: 5, kernel: 3, dilation: 2, pad: 2, groups: 5}"],
                               "NCHW", "NCHW", "{h_block: 4, h_split: 2}"),
    "grouped_4_chain_pad_value": ([1, 8, 7, 12], ["{out_channels: 8, kernel: 3, pad: 1, groups: 4, "
                                                  "activation: relu}", "{out_channels: 12, kernel: 1, groups: 4}"],
                                  "{map: nhwc-8c, pad_value: 0}", "{map: nhwc-8c, pad_value: 0}", "{k_block: 4}"),
    # input-channel chunks (schedule.c_split): partial sums stay in the output cache between chunks
    "c_split_blocked_bias_relu": ([1, 9, 10, 64], ["{out_channels: 12, kernel: 3, pad: 1, bias: true, "
                                                   "activation: relu}"], BLOCKED, BLOCKED,
                                  "{k_block: 8, h_block: 4, c_split: 2}"),
    "c_split_nhwc_40_in_8_chunks": ([2, 7, 6, 40], ["{out_channels: 5, kernel: [3, 1], pad: [1, 0], dilation: 2, "
                                                    "stride: 2}"], "NHWC", "NCHW", "{c_split: 8, w_block: 2, w_split: 2}"),
    # a pad_value on a layout with no padding slots: nothing to fill (once emitted `if () {`)
    "pad_value_without_padding": ([1, 5, 6, 3], ["{out_channels: 4, kernel: 3, pad: 1}"], "NHWC",
                                  '{map: "n, h, w, c -> n, h, w, c", pad_value: 0}', "{}"),
    "texture_layouts": ([1, 9, 8, 6], ["{out_channels: 10, kernel: 3, pad: 1}", "{out_channels: 5, kernel: 3}"],
                        TEXTURE, TEXTURE, "{k_block: 4, h_block: 4, h_split: 1}"),
}.items()}


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", with_quick(sorted(MATRIX), "mobilenet_v2_block_residual", "chain_of_three"))
def test_matrix_matches_numpy(name):
    config = make_config(name, MATRIX[name])
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"
    assert result.bound_ratio <= 1.0


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", ["seed000_baseline", "seed000_split", "seed000_3x3"])
def test_bundled_seed_configs_match_numpy(repo, name):
    result = validate(load_config(repo / "configs" / f"{name}.yaml"), "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


@requires_tool(*toolchain("c"))
def test_emitted_pack_helpers_match_the_layout_engine(tmp_path):
    config = make_config("packs", MATRIX["batch2_nchw4c_pad_value"])
    the_plan = plan(config)
    for name, text in TARGETS["c"].build(config, the_plan).files.items():
        (tmp_path / name).write_text(text)
    lib = gcc.Library(gcc.build_shared([tmp_path / "packs.c"], tmp_path / "libpacks.so"))
    rng = np.random.default_rng(3)
    for tensor in the_plan.tensors[:-1]:
        logical = rng.standard_normal(tensor.logical_shape).astype(np.float32)
        physical = np.full(tensor.layout.flat_shape, np.nan, dtype=np.float32)
        lib.call(f"packs_pack_{tensor.name}", [logical, physical])
        np.testing.assert_array_equal(physical, tensor.layout.pack(logical))
    out = the_plan.tensors[-1]
    physical = out.layout.pack(rng.standard_normal(out.logical_shape).astype(np.float32))
    logical = np.zeros(out.logical_shape, dtype=np.float32)
    lib.call("packs_unpack_output", [physical, logical])
    np.testing.assert_array_equal(logical, out.layout.unpack(physical))


@requires_tool(*toolchain("c"))
def test_tolerance_catches_a_small_systematic_error(tmp_path):
    """Scaling every product by (1 + 1e-4) stays far below any sane absolute tolerance, yet the
    rounding bound (about 144 * 2^-24 = 8.6e-6 relative here) must reject it."""
    config = make_config("scaled", MATRIX["dilation2_same"])
    the_plan = plan(config)
    sources = TARGETS["c"].build(config, the_plan).files
    (tmp_path / "scaled.h").write_text(sources["scaled.h"])
    fma = "#define KG_FMA(acc, x, w) ((acc) += (x) * (w))"  # the micro-kernel's multiply-add
    assert fma in sources["scaled.c"]
    (tmp_path / "scaled.c").write_text(sources["scaled.c"].replace(fma, fma.replace("+= (x)", "+= 1.0001f * (x)")))
    from kernelgen.measure.compare import compare
    from kernelgen.measure.records import Status
    from kernelgen.measure.tensors import random_inputs

    inputs = random_inputs(config, the_plan, np.random.default_rng(11))
    output = np.full(the_plan.tensors[-1].layout.flat_shape, np.nan, dtype=np.float32)
    workspace = np.full(the_plan.workspace_elements, np.nan, dtype=np.float32)
    lib = gcc.Library(gcc.build_shared([tmp_path / "scaled.c"], tmp_path / "libscaled.so"))
    lib.call("scaled", [*inputs.physical_list(), output, workspace])
    result = compare(config, the_plan, "c", 11, inputs, {0xFF: output})
    assert result.status is Status.FAIL and result.max_rel_error < 1e-3


@requires_tool("gcc", "g++")
def test_the_header_is_included_from_cpp_as_is(tmp_path, repo):
    """extern "C" and the C++ spelling of restrict: a C++ host includes the generated header, calls the C
    kernel (compiled by gcc) and links."""
    import subprocess

    from kernelgen.api import generate, load_config

    config = load_config(repo / "configs" / "seed000_baseline.yaml")
    for rel, text in generate(config, "c").items():
        (tmp_path / Path(rel).name).write_text(text)
    host = tmp_path / "host.cpp"
    host.write_text('#include <vector>\n#include "seed000_baseline.h"\nint main() {\n'
                    "  std::vector<float> in(SEED000_BASELINE_INPUT_ELEMENTS, 1.0f), f1(SEED000_BASELINE_FILTER1_ELEMENTS, "
                    "0.5f), f2(SEED000_BASELINE_FILTER2_ELEMENTS, 0.25f), out(SEED000_BASELINE_OUTPUT_ELEMENTS, -1.0f), "
                    "ws(SEED000_BASELINE_WORKSPACE_ELEMENTS);\n"
                    "  seed000_baseline(in.data(), f1.data(), f2.data(), out.data(), ws.data());\n"
                    "  return out[0] > 0.0f ? 0 : 1;\n}\n")
    for args in (["gcc", "-std=c99", "-O1", "-c", "seed000_baseline.c", "-o", "kernel.o"],
                 ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "host.cpp", "kernel.o", "-o", "host"],
                 ["./host"]):
        done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, (args, done.stderr)
