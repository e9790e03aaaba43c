"""Vulkan target: GLSL -> SPIR-V (glslangValidator, spirv-val) -> lavapipe, compared with numpy.

The matrix covers kernel sizes 1x1/3x3/5x5 and rectangular, stride 1/2, pad 0/1/same,
dilation 2, channel counts not divisible by 4 (input and output), invocation and workgroup
tiles equal to, dividing, smaller and larger than the output, single convs and chains,
batch > 1, blocked and channel-padded (pad_value) layouts, float32 and float16, and wide_store
(chunk pairs stored as 64-bit words, with ragged pairs and a channel count that leaves no pair whole).
"""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from builders import Case, config_text, make_config
from conftest import requires_tool

from kernelgen.api import load_config, parse_config
from kernelgen.errors import ConfigError
from kernelgen.planner import plan
from kernelgen.targets import TARGETS
from kernelgen.api import validate
from kernelgen.targets.vulkan.options import MAX_STORE_ACCESSES, MAX_STORE_WORK, MAX_UNROLLED_BODY
from kernelgen.targets.gpu.profiles import VULKAN_DEFAULTS
from kernelgen.targets.vulkan.plan import LOOP_LIMIT, plan_vulkan, vec_ok

VULKAN = ("glslangValidator", "spirv-val", "py:vulkan")
PAD4 = '{map: "n, h, w, c -> n, h, w, c // 4, c % 4", pad_value: 0}'
PAD4_OUT = '{map: "n, h, w, c -> n, h, w, c // 4, c % 4", pad_value: -2.5}'

def _case(shape, ops, input_layout: str, output_layout: str, options: str, dtype: str) -> Case:
    return Case(shape, ops, input_layout, output_layout, None, dtype=dtype, blocks=(("vulkan", options),),
                targets="[vulkan]")


# name: (input shape, [conv2d flow maps], input layout, output layout, vulkan options, dtype)
MATRIX = {name: _case(*row) for name, row in {
    "k1_tile_equal": ([1, 8, 16, 16], ["{out_channels: 64, kernel: 1, filter_layout: HWIO}"], "NHWC", "NHWC",
                      "{ivc_tile: [2, 8, 8], wg_size: [8, 1, 1]}", "float32"),
    "k3_pad1_tiles_not_dividing": ([1, 10, 9, 8], ["{out_channels: 20, kernel: 3, pad: 1, filter_layout: HWIO}"],
                                   "NHWC", "NHWC", "{ivc_tile: [2, 4, 8], wg_size: [2, 2, 1]}", "float32"),
    "c3_stride2_seed002_small": ([1, 33, 33, 3], ["{out_channels: 32, kernel: 3, stride: 2, filter_layout: HWIO}"],
                                 PAD4, "NHWC", "{}", "float32"),
    "c5_k7_oihw_scalar": ([1, 9, 11, 5], ["{out_channels: 7, kernel: [3, 1], stride: [2, 1], pad: [1, 0, 0, 2]}"],
                          "NHWC", "NHWC", "{ivc_tile: [1, 2, 4], wg_size: [1, 1, 1]}", "float32"),
    "k5_same_dilation2_tile_larger": ([1, 6, 7, 12], ["{out_channels: 12, kernel: 5, dilation: 2, pad: same, "
                                                      "filter_layout: HWIO}"], "NHWC", "NHWC",
                                      "{ivc_tile: [4, 8, 16], wg_size: [4, 2, 2]}", "float32"),
    "rect_1x5_padded_output": ([1, 7, 10, 6], ["{out_channels: 6, kernel: [1, 5], pad: same, filter_layout: HWIO}"],
                               PAD4, PAD4_OUT, "{}", "float32"),
    "chain_3x3_1x1": ([1, 16, 16, 16], ["{out_channels: 24, kernel: 3, pad: 1, filter_layout: HWIO}",
                                        "{out_channels: 10, kernel: 1, filter_layout: HWIO}"], "NHWC", "NHWC",
                      "{ivc_tile: [1, 4, 8], wg_size: [4, 2, 1]}", "float32"),
    "chain_of_three_blocked": ([2, 12, 12, 8], ["{out_channels: 8, kernel: 3, pad: 1}", "{out_channels: 12, kernel: 1}",
                                                "{out_channels: 4, kernel: 3, stride: 2}"], "nhwc-8h8w32c",
                               "nhwc-8h8w32c", "{}", "float32"),
    # wide_store: chunk pairs per invocation, stored as 64-bit words; ragged pairs and tiles.
    "wide_store_ragged": ([1, 7, 9, 8], ["{out_channels: 24, kernel: 3, pad: 1, filter_layout: HWIO}"], "NHWC",
                          "NHWC", "{ivc_tile: [2, 4, 16], wg_size: [4, 2, 1], wide_store: true}", "float32"),
    "wide_store_odd_pairs": ([1, 6, 6, 5], ["{out_channels: 20, kernel: 3, stride: 2, filter_layout: HWIO}"],
                                   "NHWC", "NHWC", "{ivc_tile: [1, 2, 8], wg_size: [2, 1, 1], wide_store: true}",
                                   "float32"),
    "wide_store_chain_fp16": ([1, 10, 8, 12], ["{out_channels: 16, kernel: 3, pad: 1, filter_layout: HWIO}",
                                               "{out_channels: 8, kernel: 1, filter_layout: HWIO}"], "NHWC", "NHWC",
                              "{ivc_tile: [2, 2, 8], wg_size: [2, 2, 1], wide_store: true}", "float16"),
    # Epilogues (issue 19): + bias chunk, then max/min, before store_dst and store_pair.
    "bias_relu6_clamp_chain": ([1, 9, 10, 6], ["{out_channels: 10, kernel: 3, pad: 1, bias: true, activation: relu6}",
                                               "{out_channels: 5, kernel: 3, pad: 2, bias: true, "
                                               "activation: [-0.25, 0.5]}"], "NHWC", "NHWC",
                               "{ivc_tile: [2, 2, 4]}", "float32"),
    "bias_relu_wide_store_ragged_fp16": ([1, 7, 9, 8], ["{out_channels: 20, kernel: 3, pad: 1, bias: true, "
                                                        "activation: relu, filter_layout: HWIO}"], "NHWC", "NHWC",
                                         "{ivc_tile: [2, 4, 16], wg_size: [4, 2, 1], wide_store: true}", "float16"),
    "clamp_padded_output": ([1, 7, 10, 6], ["{out_channels: 6, kernel: [1, 5], pad: same, activation: [0.05, 0.3], "
                                            "filter_layout: HWIO}"], PAD4, PAD4_OUT, "{}", "float32"),
    # residual: input at binding 4 (3 without a bias); vec4 chunks or guarded scalars
    "residual_bias_clamp_scalar_lanes": ([1, 9, 10, 6], ["{out_channels: 10, kernel: 3, pad: 1, bias: true, "
                                                         "activation: relu6}",
                                                         "{out_channels: 6, kernel: 3, pad: 1, bias: true, "
                                                         "residual: input, activation: [-0.5, 0.5]}"],
                                         "NHWC", "NHWC", "{ivc_tile: [2, 2, 4]}", "float32"),
    "residual_no_bias_wide_store_fp16": ([1, 7, 9, 8], ["{out_channels: 8, kernel: 3, pad: 1, residual: input, "
                                                        "activation: relu, filter_layout: HWIO}"], "NHWC", "NHWC",
                                         "{ivc_tile: [2, 4, 8], wg_size: [1, 2, 1], wide_store: true}", "float16"),
    "residual_blocked_batch2": ([2, 12, 12, 8], ["{out_channels: 8, kernel: 3, pad: 1, bias: true, "
                                                 "residual: input}"], "nhwc-8h8w32c", "nhwc-8h8w32c", "{}",
                                "float32"),
    # residual from an earlier op: its temp buffer bound again at binding 4 (3 without a bias)
    "residual_from_op1_chain": ([1, 7, 9, 6], ["{out_channels: 10, kernel: 1, bias: true, activation: relu6}",
                                               "{out_channels: 10, kernel: 3, pad: 1, activation: relu}",
                                               "{out_channels: 10, kernel: 3, pad: 1, bias: true, residual: 1, "
                                               "activation: [-0.5, 0.5]}"], "NHWC", "NCHW", "{ivc_tile: [2, 2, 4]}",
                                "float32"),
    "residual_from_op1_fp16_scalar_lanes": ([1, 6, 9, 6], ["{out_channels: 6, kernel: 1, activation: relu, "
                                                           "output_layout: NCHW}",
                                                           "{out_channels: 6, kernel: 3, pad: 1, residual: 1}"],
                                            "NHWC", "NHWC", "{}", "float16"),
    # Grouped and depthwise convs: each output chunk reads its own input chunk (depthwise multiplier 1: the
    # same chunk, load_src), one element for its 4 lanes (output channels per group a multiple of 4), two (2 or
    # more per group) or its lanes one by one
    # issue 32: 4 texelFetch calls per multiply-add took lavapipe's LLVM 25-36 s to compile this; one, ~2 s
    "grouped_3_hwio_wide_store_shared": ([1, 9, 9, 24], ["{out_channels: 24, kernel: 3, pad: 1, groups: 3, "
                                                         "filter_layout: HWIO}"], "NHWC", "NHWC",
                                         "{wide_store: true}", "float32"),
    "grouped_3_ragged_pair": ([2, 5, 6, 12], ["{out_channels: 18, kernel: 2, stride: [1, 2], groups: 3, "
                                              "filter_layout: HWIO, bias: true}"], "NHWC", "NHWC", "{}", "float32"),
    "depthwise_bias_relu6_vec4": ([1, 9, 10, 12], ["{out_channels: 12, kernel: 3, pad: 1, groups: 12, bias: true, "
                                                   "activation: relu6, filter_layout: HWIO}"], "NHWC", "NHWC",
                                  "{ivc_tile: [2, 4, 8]}", "float32"),
    "depthwise_stride2_multiplier2_fp16": ([1, 11, 9, 6], ["{out_channels: 12, kernel: 3, stride: 2, pad: 1, "
                                                           "groups: 6, bias: true}"], "NHWC", "NHWC", "{}", "float16"),
    "depthwise_dilated_c5_scalar": ([1, 12, 12, 5], ["{out_channels: 5, kernel: 3, dilation: 2, pad: 2, groups: 5, "
                                                     "activation: [-0.25, 0.5]}"], "NCHW", "NCHW",
                                    "{ivc_tile: [2, 2, 4]}", "float32"),
    "grouped_4_chain_residual": ([1, 8, 7, 12], ["{out_channels: 8, kernel: 3, pad: 1, groups: 4, activation: relu}",
                                                 "{out_channels: 12, kernel: 1, groups: 4, bias: true, "
                                                 "residual: input}"], PAD4, "NHWC", "{ivc_tile: [2, 2, 4]}",
                                 "float32"),
    "inverted_residual_block_wide_store_fp16": ([1, 7, 6, 8], ["{out_channels: 16, kernel: 1, bias: true, "
                                                               "activation: relu6}",
                                                               "{out_channels: 16, kernel: 3, pad: 1, groups: 16, "
                                                               "bias: true, activation: relu6}",
                                                               "{out_channels: 8, kernel: 1, bias: true, "
                                                               "residual: input}"], "NHWC", "NHWC",
                                                "{ivc_tile: [2, 2, 8], wide_store: true}", "float16"),
    "fp16_k3": ([1, 12, 12, 16], ["{out_channels: 32, kernel: 3, pad: 1, filter_layout: HWIO}"], "NHWC", "NHWC",
                "{}", "float16"),
    # wide_store on a profile without shaderInt64 (issue 32): pairs per invocation, each chunk stored on its own
    "wide_store_without_int64": ([1, 6, 9, 16], ["{out_channels: 16, kernel: 3, pad: 1, filter_layout: HWIO}",
                                                 "{out_channels: 24, kernel: 1, filter_layout: HWIO}"], "NHWC", "NHWC",
                                 "{device: mali-valhall, ivc_tile: [2, 4, 16], wg_size: [2, 2, 1], wide_store: true}",
                                 "float32"),
    "fp16_chain_tail_channels": ([1, 9, 10, 6], ["{out_channels: 10, kernel: 3, filter_layout: HWIO}",
                                                 "{out_channels: 5, kernel: 3, stride: 2, pad: 1}"], PAD4, "NHWC",
                                 "{ivc_tile: [2, 2, 4]}", "float16"),
}.items()}


def _config(name):
    return make_config(name, MATRIX[name])


def _glsl(config) -> str:
    """The GLSL text `kernelgen build` writes as <name>.comp (and the runs compile)."""
    return TARGETS["vulkan"].build(config, plan(config)).files[f"{config.name}.comp"]


@requires_tool(*VULKAN)
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_matrix_matches_numpy(name):
    result = validate(_config(name), "vulkan")
    assert result.passed, f"{result.detail} (seed {result.seed})"


@requires_tool(*VULKAN)
@pytest.mark.parametrize("name", ["seed000_baseline", "seed000_split", "seed000_3x3"])
def test_seed000_configs_match_numpy(repo, name):
    result = validate(load_config(repo / "configs" / f"{name}.yaml"), "vulkan")
    assert result.passed, f"{result.detail} (seed {result.seed})"


def test_plan_tiles_dispatch_and_loop_count():
    config = _config("k3_pad1_tiles_not_dividing")
    vk = plan_vulkan(config, plan(config))
    op = vk.ops[0]
    assert op.wg_tile == (2, 8, 16) and op.ivc_tile == (2, 4, 2)
    assert op.groups == (2, 2, 5)  # 5 of 4 chunks of 16 channels, 9 of 8 columns, 10 of 2 rows
    # one kernel row of a chunk (2 x 4 pixels x 2 chunks x 3 taps x 4 = 192) fits lavapipe's trip cap (384) and all
    # three (576) do not: the rows go into the fh0 loop (2 input rows a trip, 4 columns + 2) ...
    assert op.fh_block == 1 and op.rows == 2 and op.row == 6
    # ... and both input-channel chunks share a trip: 2 x 192 multiply-adds, the cap
    assert op.ic_unroll == 2 and op.body == 2 * 2 * 4 * 2 * 3 * 4 == VULKAN_DEFAULTS["lavapipe"].trip_cap
    assert op.trips == 1 + 3 * (2 + 2 // 2) and op.trips <= LOOP_LIMIT
    assert op.bounds_check and "ow < 9" in op.store_guard and "oc4 < 5" in op.store_guard


def test_seed002_config_plans_one_subgroup_per_workgroup(repo):
    # The bench's workload: 8 lanes (lavapipe's subgroup) over output channels; every tap
    # unrolled, 64 pixels x 2 vec4 chunks per invocation, the two chunks adjacent and stored
    # as one u64vec4 (wide_store).
    config = load_config(repo / "configs" / "seed002_vulkan.yaml")
    vk = plan_vulkan(config, plan(config))
    op = vk.ops[0]
    assert op.wg_size == (8, 1, 1) and op.ivc_tile == (4, 16, 2) and op.wg_tile == (4, 16, 64)
    assert op.groups == (4, 16, 64) and not op.store_guard  # 256 / 64 channels, 256 / 16 columns, 256 / 4 rows
    assert op.fh_block == 3 and op.x.texel and op.f.texel and op.trips == 1 + 1 * (2 + 4)
    assert op.lane_chunks == 2 and op.chunk_step == 16 and vk.int64 and vk.words == "u64vec4"
    # NHWC with 256 channels: the pair holding channels 8 * oc8 .. 8 * oc8 + 7 is u64vec4 number
    # (pixel * 256 + 8 * oc8) / 8.
    assert op.pair_index == "((n*2097152)+(oh*8192)+(ow*32)+oc8)"
    assert op.label.endswith("/Tile[4x16x8]/WGSize[8x1x1]")


def test_wide_store_owns_chunk_pairs_cyclically():
    """lane_chunks = 2: invocation x owns chunks 2x, 2x + 1, then 2x + 2 * wg_size.x, ..."""
    config = _config("wide_store_ragged")
    op = plan_vulkan(config, plan(config)).ops[0]
    assert op.lane_chunks == 2 and op.chunk_step == 8 and op.ivc_tile[2] == 4
    assert op.pair_index and "oc4 < 6" in op.store_guard  # 24 channels: 3 pairs of a 4-pair workgroup tile
    glsl = _glsl(config)
    assert "first + 8 * (k / LANE_CHUNKS) + k % LANE_CHUNKS" in glsl and "u64vec4 dst[]" in glsl
    # Without room for 8 whole channels (20 channels) the pairs are stored chunk by chunk.
    odd = _config("wide_store_odd_pairs")
    op = plan_vulkan(odd, plan(odd)).ops[0]
    assert op.lane_chunks == 2 and not op.pair_index
    assert not plan_vulkan(odd, plan(odd)).int64


def test_wide_store_without_shader_int64_stores_each_chunk_of_a_pair():
    """mali-valhall has no shaderInt64: the invocation still owns chunk pairs (lane_chunks 2), stored chunk by
    chunk as vec4s, and the shader asks for no 64-bit integers (test_matrix_matches_numpy runs it on lavapipe)."""
    config = _config("wide_store_without_int64")
    vk = plan_vulkan(config, plan(config))
    assert [(op.lane_chunks, op.pair_index, op.store_chunks) for op in vk.ops] == [(2, "", 1), (2, "", 1)]
    assert not vk.int64 and "GL_ARB_gpu_shader_int64" not in _glsl(config) and "uint64_t" not in _glsl(config)
    lavapipe = parse_config(config_text("wide", MATRIX["wide_store_without_int64"]).replace("mali-valhall", "lavapipe"),
                            "wide.yaml")
    assert plan_vulkan(lavapipe, plan(lavapipe)).int64  # where the profile has it: 64-bit words


def test_wide_store_needs_pairs_in_the_tile():
    text = config_text("bad", MATRIX["wide_store_ragged"]).replace("ivc_tile: [2, 4, 16]", "ivc_tile: [2, 4, 12]")
    config = parse_config(text, "bad.yaml")
    with pytest.raises(ConfigError, match="multiple of 8 .wide_store owns chunk pairs."):
        plan_vulkan(config, plan(config))


@pytest.mark.slow
@requires_tool(*VULKAN)
def test_the_default_tile_of_a_big_3x3_compiles_and_validates_in_well_under_minutes():
    """Issue 21: a 3x3 conv over 64x64x128 (no pad) with the default tile kept lavapipe's compiler busy for more
    than 10 minutes; its scalar filter reads (OIHW) were each a branch, which left LLVM a phi per read: 37 s CPU
    for its cold compile before issue 30 made them branch-free, ~4 s after; since the target packs an OIHW
    filter into vec4s of output channels both reads are texel fetches and the kernel rows unrolled too (4,608 vec4
    multiply-adds per trip): 8.4 s; at the 1x32x4 default with one kernel row of one chunk a trip (384, issue 50's
    trip cap) 2.3 s (benchmarks/vulkan_compile.py; not asserted: times belong to benchmarks)."""
    config = parse_config("name: big3x3\ninput: {shape: [1, 64, 64, 128]}\n"
                          "ops: [{conv2d: {out_channels: 128, kernel: 3}}]\ntargets: [vulkan]\n", "big3x3.yaml")
    vk = plan_vulkan(config, plan(config))
    op = vk.ops[0]
    assert vk.buffers[op.filter].layout is not None and op.f.vec4 and op.f.texel
    assert op.ivc_tile == (1, 32, 1) and op.fh_block == 1 and op.body == 32 * 3 * 4
    assert op.trips == 1 + 3 * (2 + 32) <= LOOP_LIMIT
    result = validate(config, "vulkan")
    assert result.passed, result.detail


NCHW_RESIDUAL = ("name: nchw_residual\ninput: {shape: [1, 64, 56, 56], layout: NCHW}\nops:\n"
                 "  - conv2d: {out_channels: 64, kernel: 3, pad: 1, bias: true, residual: input, activation: relu}\n"
                 "output: {layout: NCHW}\ntargets: [vulkan]\n")


NCHW_STRIDED = ("name: nchw_strided\ninput: {shape: [1, 64, 56, 56], layout: NCHW}\nops:\n"
                "  - conv2d: {out_channels: 128, kernel: 3, stride: 2, pad: 1, bias: true, activation: relu}\n"
                "output: {layout: NCHW}\ntargets: [vulkan]\n")


def test_the_default_tile_shrinks_to_the_store_work_budget():
    """An imported network's 3x3 stride-2 conv on NCHW: the strided default 4x16x8 tile stores each of its 128 chunks
    as 4 scalars, 512 per-lane loops on lavapipe, times its 4,608 multiply-adds per trip (11-16 s to compile); halved
    along its longer side to 4x8x8: 256 x 2,304. The stride-1 ResNet 3x3 with an NCHW residual (4 scalars stored and
    4 read a chunk) now takes the 1x32x4 default, one kernel row a trip: 32 x 8 accesses x 384, far inside."""
    config = parse_config(NCHW_STRIDED, "nchw_strided.yaml")
    op = plan_vulkan(config, plan(config)).ops[0]
    assert not op.y.vec4 and op.fh_block == 3
    assert op.ivc_tile == (4, 8, 2) and op.body == 4 * 8 * 2 * 9 * 4
    assert 4 * 8 * 2 * 4 * op.body <= MAX_STORE_WORK < 4 * 16 * 2 * 4 * 2 * op.body
    config = parse_config(NCHW_RESIDUAL, "nchw_residual.yaml")
    op = plan_vulkan(config, plan(config)).ops[0]
    assert not op.y.vec4 and op.residual is not None and not op.residual.vec4
    assert op.ivc_tile == (1, 32, 1) and op.fh_block == 1 and op.body == 32 * 3 * 4
    assert 32 * (4 + 4) * op.body <= MAX_STORE_WORK
    # The strided conv with an NCHW residual (a side input of its output's shape) would read and store 4 x 16 x 2
    # chunks x (4 + 4) scalars = 1,024 per invocation: halved to 4x8x8, 512
    strided = parse_config(NCHW_STRIDED.replace("input: {shape: [1, 64, 56, 56], layout: NCHW}\n",
                                                "input: {shape: [1, 64, 56, 56], layout: NCHW}\nside_inputs: "
                                                "{shortcut: {shape: [1, 128, 28, 28], layout: NCHW}}\n")
                                       .replace("bias: true,", "bias: true, residual: shortcut,"), "res.yaml")
    op = plan_vulkan(strided, plan(strided)).ops[0]
    assert op.residual is not None and not op.residual.vec4
    assert op.ivc_tile == (4, 8, 2) and 4 * 16 * 2 * 8 > MAX_STORE_ACCESSES >= 4 * 8 * 2 * 8
    explicit = parse_config(NCHW_RESIDUAL + "vulkan: {ivc_tile: [8, 8, 8]}\n", "explicit.yaml")
    assert plan_vulkan(explicit, plan(explicit)).ops[0].ivc_tile == (8, 8, 2)  # a tile the config sets is kept


@pytest.mark.slow
@requires_tool(*VULKAN)
def test_the_shrunk_nchw_residual_tile_validates():
    config = parse_config(NCHW_RESIDUAL, "nchw_residual.yaml")
    result = validate(config, "vulkan")
    assert result.passed, result.detail


def test_wide_reductions_unroll_the_channel_loop_under_lavapipes_limit():
    # A tile whose all-taps body exceeds BODY_LIMIT keeps kh as a loop: 11 x 8,194 trips would
    # pass the limit, so the channel loop is unrolled by 2.
    text = ("name: wide\ninput: {shape: [1, 12, 12, 32768], layout: NHWC}\nops:\n"
            "  - conv2d: {out_channels: 4, kernel: 11, filter_layout: HWIO}\n"
            "vulkan: {ivc_tile: [2, 8, 4]}\ntargets: [vulkan]\n")
    config = parse_config(text, "wide.yaml")
    op = plan_vulkan(config, plan(config)).ops[0]
    assert op.fh_block == 1 and op.ic_unroll == 2 and op.trips <= LOOP_LIMIT


def test_layout_vec4_detection():
    config = _config("c3_stride2_seed002_small")
    the_plan = plan(config)
    assert vec_ok(the_plan.tensors[0].layout, 3)  # c // 4, c % 4 pads 3 channels to 4
    seed000 = _config("chain_of_three_blocked")
    assert not vec_ok(plan(seed000).tensors[1].layout, 0)  # OIHW: output channels not innermost


def test_bad_tile_is_a_config_error():
    text = config_text("bad", MATRIX["k1_tile_equal"]).replace("ivc_tile: [2, 8, 8]", "ivc_tile: [2, 8, 6]")
    config = parse_config(text, "bad.yaml")
    with pytest.raises(ConfigError, match="multiple of 4"):
        plan_vulkan(config, plan(config))


def test_pad_value_beyond_channel_padding_is_a_config_error():
    text = config_text("blocked_pad", MATRIX["k1_tile_equal"]).replace(
        "output: {layout: NHWC}", "output: {layout: {map: nhwc-8h8w32c, pad_value: 1.0}}")
    config = parse_config(text.replace("shape: [1, 8, 16, 16]", "shape: [1, 6, 16, 16]"), "blocked_pad.yaml")
    with pytest.raises(ConfigError, match="only into channel padding"):
        plan_vulkan(config, plan(config))


def test_generated_source_names_its_dispatch():
    config = _config("chain_3x3_1x1")
    job = TARGETS["vulkan"].build(config, plan(config))
    vk = job.target_plan
    glsl = job.files["chain_3x3_1x1.comp"]
    assert glsl.startswith("#version 450\n/* Generated by kernelgen")
    assert "#if KG_OP == 1" in glsl and "#if KG_OP == 2" in glsl
    assert f"dispatch {list(vk.ops[0].groups)} workgroups" in glsl
    from kernelgen.targets.base import file_names

    assert file_names(TARGETS["vulkan"], "x") == ("x.comp", "x.dispatch.txt")


@requires_tool(*VULKAN)
def test_bench_prints_seed002_style_rows():
    from kernelgen.measure.bench import bench
    from kernelgen.measure.records import BenchOptions

    config = _config("k1_tile_equal")
    rows = bench(TARGETS["vulkan"], TARGETS["vulkan"].build(config, plan(config)), BenchOptions(repeat=5))
    assert len(rows) == 1 and rows[0].seconds > 0
    assert rows[0].label == "Input[1x8x16x16]xFilter[1x1x16x64]/Stride[1x1]/Tile[2x8x8]/WGSize[8x1x1]/f32"
    # the ratio's arithmetic is tests/test_measure.py's (no timing here: a busy host varies microsecond kernels
    # several-fold); what the device measured is positive and finite
    assert rows[0].peak_gflops > 0 and np.isfinite(rows[0].ratio) and rows[0].ratio > 0
    if Path("/proc/stat").exists():  # Linux: the hypervisor's share of the run is reported beside it
        assert 0.0 <= rows[0].steal["steal"] <= 1.0


BENCH_WORKLOADS = [([1, 64, 64, 128], "{out_channels: 128, kernel: 1}"), ([1, 64, 64, 128], "{out_channels: 128, kernel: 3}"),
                   ([1, 258, 258, 16], "{out_channels: 256, kernel: 3}"),
                   ([1, 225, 225, 3], "{out_channels: 32, kernel: 3, stride: 2}")]


def _default_tiles(config, device):
    from kernelgen.config import with_options
    from kernelgen.targets.vulkan.options import vulkan_options

    return with_options(config, "vulkan", vulkan_options(config).model_copy(update={
        "device": device, "ivc_tile": None, "wg_size": None, "wg_tile": None}))


def test_every_default_kernel_unrolls_at_most_the_body_limit(repo):
    """Issue 30: what one trip of the innermost kept loop unrolls bounds lavapipe's cold compile (options.py has
    the measurements). Every bundled vulkan config (as written, and at each profile's default tiles) and issue
    30's bench workloads stay under it, and each op's GLSL states its body and the limit."""
    configs = [load_config(path) for path in sorted((repo / "configs").glob("*.yaml"))]
    configs = [c for c in configs if "vulkan" in c.targets]
    configs += [parse_config(f"name: w{i}\ninput: {{shape: {shape}}}\nops: [{{conv2d: {op}}}]\ntargets: [vulkan]\n",
                             f"w{i}.yaml") for i, (shape, op) in enumerate(BENCH_WORKLOADS)]
    assert len(configs) >= 12
    for config in configs:
        for variant in (config, _default_tiles(config, "lavapipe"), _default_tiles(config, "rdna2")):
            job = TARGETS["vulkan"].build(variant, plan(variant))
            glsl = job.files[f"{variant.name}.comp"]
            for op in job.target_plan.ops:
                if op.is_pool:
                    continue
                assert 0 < op.body <= MAX_UNROLLED_BODY, (variant.name, op.index, op.body)
                assert f"// {op.body} vec4 multiply-adds unrolled per trip of the innermost loop kept (limit " \
                       f"{MAX_UNROLLED_BODY})" in glsl
                assert op.trips <= LOOP_LIMIT
                # the kept loops are marked so (NIR must not unroll them into the body)
                assert op.fh_block == op.geo.kernel[0] or "[[dont_unroll]] for (int fh" in glsl


def test_the_body_counts_what_is_unrolled():
    config = _config("k3_pad1_tiles_not_dividing")  # [2, 4, 8] tile, 3x3, one kernel row a trip, 2 input chunks
    op = plan_vulkan(config, plan(config)).ops[0]
    assert op.fh_block == 1 and op.ic_unroll == 2 and op.body == 2 * (2 * 4 * 2 * 1 * 3 * 4)


def _pointwise(channels: int, out_channels: int, vulkan: str = "") -> str:
    return (f"name: pw\ninput: {{shape: [1, 16, 16, {channels}], layout: NHWC}}\n"
            f"ops: [{{conv2d: {{out_channels: {out_channels}, kernel: 1}}}}]\n{vulkan}targets: [vulkan]\n")


@pytest.mark.parametrize("channels, unroll", [(128, 4), (96, 4), (40, 2), (36, 1), (4, 1)])
def test_lavapipe_unrolls_input_chunks_to_its_trip_body(channels, unroll):
    """A 1x1 conv at a 4x8x16 tile: 512 multiply-adds per input chunk, past the trip cap (384), so 4 chunks per trip
    (2,048, the profile's trip_body) where the chunks divide by 4, else the largest power of two that divides them;
    a GPU profile keeps one chunk per trip."""
    config = parse_config(_pointwise(channels, 128, "vulkan: {ivc_tile: [4, 8, 16]}\n"), "pw.yaml")
    op = plan_vulkan(config, plan(config)).ops[0]
    assert op.ivc_tile == (4, 8, 4) and op.ic_unroll == unroll and op.body == 512 * unroll <= 2048
    assert f"icb += {unroll})" in TARGETS["vulkan"].build(config, plan(config)).files["pw.comp"]
    gpu = parse_config(_pointwise(channels, 128, "vulkan: {device: rdna2, ivc_tile: [4, 8, 16]}\n"), "pw.yaml")
    assert plan_vulkan(gpu, plan(gpu)).ops[0].ic_unroll == 1


PLAIN_3X3 = ("name: c3\ninput: {shape: [1, 64, 64, 128], layout: NHWC}\n"
             "ops: [{conv2d: {out_channels: 128, kernel: 3, stride: STRIDE, pad: 1, filter_layout: HWIO}}]\n"
             "VULKANtargets: [vulkan]\n")


@pytest.mark.parametrize("kind, vulkan, tile, fh_block, unroll, body", [
    # the default 1x32x4: one kernel row of one input chunk a trip, 32 x 3 taps x 4 = 384 (the cap)
    ("3x3", "", (1, 32, 1), 1, 1, 384),
    # a 1x1 at it: 128 a chunk, two chunks a trip (four would pass the cap)
    ("1x1", "", (1, 32, 1), 1, 2, 256),
    # a tile one of whose kernel rows passes the cap keeps its rows unrolled (8x8x8: 1,536 a row)
    ("3x3", "vulkan: {ivc_tile: [8, 8, 8]}\n", (8, 8, 2), 3, 1, 4608),
    # a strided conv keeps the 4x16x4 default, its rows unrolled (one row 768, past the cap)
    ("s2", "", (4, 16, 1), 3, 1, 2304),
])
def test_lavapipe_trips_stay_within_its_trip_cap(kind, vulkan, tile, fh_block, unroll, body):
    """LAVAPIPE_TRIP_CAP: a trip's x86 (~17 bytes per 8-lane multiply-add pair) within the 32 KiB L1 instruction
    cache where a kernel row of a chunk fits 384 vec4 multiply-adds."""
    text = PLAIN_3X3.replace("STRIDE", "2" if kind == "s2" else "1").replace("VULKAN", vulkan)
    if kind == "1x1":
        text = text.replace("kernel: 3", "kernel: 1").replace("pad: 1", "pad: 0")
    if kind == "s2":
        text = text.replace("out_channels: 128", "out_channels: 32")
    config = parse_config(text, "c3.yaml")
    op = plan_vulkan(config, plan(config)).ops[0]
    assert (op.ivc_tile, op.fh_block, op.ic_unroll, op.body) == (tile, fh_block, unroll, body)
    assert op.lane_chunks == (2 if tile[2] % 2 == 0 else 1)  # wide_store only where a lane owns chunk pairs
    glsl = TARGETS["vulkan"].build(config, plan(config)).files["c3.comp"]
    assert f"// {body} vec4 multiply-adds unrolled per trip" in glsl and f"const int FHB = {fh_block};" in glsl


@pytest.mark.parametrize("out_channels, vulkan, pairs", [
    (128, "", False),  # the 1x32x4 default tile owns one chunk a lane
    (128, "vulkan: {ivc_tile: [4, 8, 16]}\n", True),  # 16 pairs: each of the 8 lanes owns 2
    (64, "vulkan: {ivc_tile: [4, 8, 16]}\n", True),
    (32, "", False),  # pairs would fill 4 of the 8 lanes
    (96, "", False),  # 12 pairs for 8 lanes: a quarter of the last step idle, where 24 chunks fill 8 x 3
    (192, "vulkan: {ivc_tile: [4, 8, 16]}\n", True),
    (128, "vulkan: {wide_store: false}\n", False),
    (32, "vulkan: {wide_store: true}\n", True),
    (128, "vulkan: {ivc_tile: [4, 8, 4]}\n", False),  # an explicit tile of one chunk
    (128, "vulkan: {device: rdna2}\n", False),
])
def test_wide_store_is_lavapipes_default_where_pairs_fill_the_lanes(out_channels, vulkan, pairs):
    config = parse_config(_pointwise(16, out_channels, vulkan), "pw.yaml")
    vk = plan_vulkan(config, plan(config))
    assert vk.ops[0].lane_chunks == (2 if pairs else 1)
    assert bool(vk.ops[0].pair_index) == pairs


WIDE_ROW = ("name: wide_row\ninput: {shape: [1, 20, 64, 32], layout: NHWC}\nops:\n"
            "  - conv2d: {out_channels: 64, kernel: [1, 11], filter_layout: HWIO}\n"
            "vulkan: {ivc_tile: [4, 16, 16]}\ntargets: [vulkan]\n")


def test_an_explicit_tile_past_the_body_limit_is_refused_at_its_key(tmp_path):
    """A 1x11 kernel row at 4x16 pixels x 16 channels unrolls 11,264 vec4 multiply-adds per channel chunk (each
    tap of the row): refused when planned, exit 2 at vulkan.ivc_tile; the default tile fits."""
    from click.testing import CliRunner

    from kernelgen.cli import main

    config = tmp_path / "wide_row.yaml"
    config.write_text(WIDE_ROW)
    result = CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"{config}:5:20: error: vulkan.ivc_tile: "), result.stderr
    assert f"unrolls 11264 vec4 multiply-adds per loop trip; keep it <= {MAX_UNROLLED_BODY}" in result.stderr
    config.write_text(WIDE_ROW.replace("vulkan: {ivc_tile: [4, 16, 16]}\n", ""))
    assert CliRunner().invoke(main, ["plan", str(config)]).exit_code == 0
    shrunk = plan_vulkan(load_config(config), plan(load_config(config))).ops[0]
    assert shrunk.body <= MAX_UNROLLED_BODY


def _load_src(glsl: str) -> str:
    start = glsl.index("vec4 load_src(int n")
    return glsl[start:glsl.index("\n}\n", start)]


def test_texel_reads_past_the_tensor_do_not_branch():
    """Issue 30: a branch per input read left lavapipe's LLVM a phi per read in the unrolled body (37 s of CPU
    for the 3x3 64x64x128 default's cold compile, ~4 s without). Padded convs clamp and select zeros; unpadded
    ragged tiles only clamp (their reads past the tensor feed outputs that are never stored); an input read as
    scalars goes through texels as well (element i is lane i % 4 of texel i / 4) and clamps the same way."""
    padded = _config("k3_pad1_tiles_not_dividing")  # NHWC texel reads, pad 1
    src = _load_src(_glsl(padded))
    assert "if (" not in src and "mix(vec4(0), v, inside)" in src and "clamp(ih, 0, 9)" in src
    ragged = parse_config("name: ragged\ninput: {shape: [1, 64, 64, 128]}\nops: [{conv2d: {out_channels: 128, "
                          "kernel: 3}}]\ntargets: [vulkan]\n", "ragged.yaml")  # 62 rows: 4-row tiles are ragged
    op = plan_vulkan(ragged, plan(ragged)).ops[0]
    assert op.bounds_check and not op.zero_pad and op.x.texel
    src = _load_src(_glsl(ragged))
    assert "if (" not in src and "ih = min(ih, 63);" in src and "mix(" not in src
    scalar = parse_config("name: six\ninput: {shape: [1, 19, 19, 6]}\nops: [{conv2d: {out_channels: 8, kernel: 3}}]\n"
                          "vulkan: {ivc_tile: [4, 4, 8]}\ntargets: [vulkan]\n", "six.yaml")  # 17 rows, 4-row tiles
    op = plan_vulkan(scalar, plan(scalar)).ops[0]
    assert op.bounds_check and not op.zero_pad and op.x.texel and not op.x.vec4
    src = _load_src(_glsl(scalar))
    assert "if (" not in src and "ih = min(ih, 18);" in src and src.count("texelFetch(src, (") == 4
    assert ") >> 2)[(" in src and ") & 3]" in src  # lane i & 3 of texel i >> 2: i >= 0, no signed division
    # seed 000's blocked nhwc-8h8w32c: 32-channel blocks keep every 4 channels one aligned vec4 (expr's common
    # factor rule), so the ragged conv reads one texel per chunk with shifts and masks for the blocks
    blocked = load_config(Path(__file__).resolve().parent.parent / "configs" / "seed000_3x3.yaml")
    op = plan_vulkan(blocked, plan(blocked)).ops[0]
    assert op.bounds_check and not op.zero_pad and op.x.texel and op.x.vec4
    src = _load_src(_glsl(blocked))
    assert src.count("texelFetch(src, ") == 1 and "((ih>>3)*16384)" in src and "(ic4&7)" in src and "/8)" not in src and "%" not in src


@requires_tool(*VULKAN)
@pytest.mark.parametrize("text, read", [
    # an RGB input (one 3-component texel per pixel), padded (the zero select), stride 2, 10 output channels (the
    # packed filter's last vec4 holds 2 zero lanes), OIHW
    ("input: {shape: [2, 13, 11, 3]}\nops: [{conv2d: {out_channels: 10, kernel: 3, stride: 2, pad: 1}}]", "rgb"),
    ("dtype: float16\ninput: {shape: [1, 9, 8, 3]}\nops: [{conv2d: {out_channels: 8, kernel: 3, pad: 1}}]", "rgb"),
    # 6 channels (scalars through 4-float texels), a blocked filter, then a depthwise conv reading the first's output
    ("input: {shape: [1, 9, 7, 6]}\nops:\n"
     "  - conv2d: {out_channels: 32, kernel: 3, pad: 1, filter_layout: oihw-8i32o4i}\n"
     "  - conv2d: {out_channels: 32, kernel: 3, groups: 32, pad: 1}", "scalars"),
    # a blocked input whose 32-channel blocks keep vec4s of channels (expr's common factor rule)
    ("input: {shape: [1, 9, 10, 64], layout: nhwc-8h8w32c}\nops:\n"
     "  - conv2d: {out_channels: 32, kernel: 3, pad: 1, filter_layout: oihw-8i32o4i}", "vec4"),
], ids=["rgb_oihw", "rgb_float16", "six_channels_then_depthwise", "blocked_vec4"])
def test_target_packed_filters_and_scalar_texel_reads_validate(text, read):
    """Issue 30: filters without a vec4 of output channels are packed by the target (h, w, i, o // 4, o % 4,
    zero-padded), said in the dispatch notes; activations without a vec4 of channels are read through texels on
    lavapipe: a 3-channel NHWC input one RGB texel per pixel (its binding's view 3-component, said in the dispatch
    notes), others as scalars through 4-float texels, their buffer rounded up to whole texels."""
    config = parse_config(f"name: packed\n{text}\ntargets: [vulkan]\n", "packed.yaml")
    vk = plan_vulkan(config, plan(config))
    conv = vk.ops[0]
    packing = vk.buffers[conv.filter].layout
    assert packing is not None and conv.f.vec4 and conv.f.texel
    out_c, in_c = plan(config).tensors[1].layout.logical_shape[:2]
    assert packing.physical_shape == (3, 3, in_c, -(-out_c // 4), 4)
    assert conv.x.texel and conv.x.vec4 == (read == "vec4") and conv.x.rgb == (read == "rgb")
    if read == "scalars":
        assert vk.buffers[conv.src].elements % 4 == 0 and vk.buffers[conv.src].elements == 9 * 7 * 6 + 2
    job = TARGETS["vulkan"].build(config, plan(config))
    notes = job.files["packed.dispatch.txt"]
    assert 'filter1: bind it packed by the vulkan target as "o, i, h, w -> h, w, i, o // 4, o % 4"' in notes
    texel3 = "VK_FORMAT_R16G16B16_SFLOAT" if config.dtype == "float16" else "VK_FORMAT_R32G32B32_SFLOAT"
    assert (f"op 1: bind input (binding 0) as a uniform texel buffer of 3-component texels ({texel3})"
            in notes) == (read == "rgb")
    source = job.files["packed.comp"]
    assert (".xyz, 0);  // one RGB texel" in source) == (read == "rgb")
    result = validate(config, "vulkan")
    assert result.passed, result.detail


@pytest.mark.parametrize("ops, vulkan, lanes", [
    (["{out_channels: 128, kernel: 1}"], "", 8),  # lavapipe's 8 lanes along x over output channels
    (["{out_channels: 32, kernel: 3, stride: 2, pad: 1}"], "vulkan: {wg_size: [4, 2, 1]}\n", 4),
    (["{out_channels: 32, kernel: 3, pad: 1, groups: 32}"], "", 0),  # each lane reads its own channels
    (["{out_channels: 32, kernel: 3, pad: 1}"], "vulkan: {wg_size: [1, 8, 1]}\n", 0),  # one lane along x
    (["{out_channels: 128, kernel: 1}"], "vulkan: {wg_size: [16, 1, 1]}\n", 0),  # more than lavapipe's subgroup
    (["{out_channels: 32, kernel: 1}"], "vulkan: {ivc_tile: [4, 1, 4]}\n", 0),  # a one-column row
    (["{out_channels: 128, kernel: 1}"], "vulkan: {device: rdna2}\n", 0),  # a GPU profile
])
def test_lavapipe_dense_convs_shuffle_input_columns_between_lanes(ops, vulkan, lanes):
    """A dense conv's lanes along x (output channels) read the same input row segments: on lavapipe each fetches
    one column of every `lanes` and subgroupShuffle hands each lane all of them (the matrix above validates the
    shuffles at wg_size x 2, 4 and 8, ragged rows, tails and strides); the .dispatch.txt states the subgroup size
    they need, and a device whose subgroups would split a row of x lanes is refused."""
    from kernelgen.errors import ToolchainError
    from kernelgen.targets.vulkan.device import DeviceInfo
    from kernelgen.targets.vulkan.program import check_device

    text = (f"name: sh\ninput: {{shape: [1, 12, 12, 32], layout: NHWC}}\nops:\n"
            + "".join(f"  - conv2d: {op}\n" for op in ops) + f"{vulkan}targets: [vulkan]\n")
    config = parse_config(text, "sh.yaml")
    vk = plan_vulkan(config, plan(config))
    assert vk.ops[0].shuffle_lanes == lanes
    files = TARGETS["vulkan"].build(config, plan(config)).files
    assert ("shuffled(C[r / %d]" % lanes in files["sh.comp"]) == bool(lanes)
    assert ("GL_KHR_shader_subgroup_shuffle" in files["sh.comp"]) == bool(lanes)
    assert (f"a subgroup size that is a multiple of {lanes}" in files["sh.dispatch.txt"]) == bool(lanes)
    if lanes:
        info = DeviceInfo(index=0, name="narrow", driver="", shader_float16=True, storage_16bit=True,
                          subgroup_size=lanes // 2, timestamp_period_ns=1.0, max_workgroup_size=(1024, 1024, 64),
                          max_workgroup_invocations=1024, shader_int64=True)
        with pytest.raises(ToolchainError, match="subgroups of"):
            check_device(vk, info)
        check_device(vk, replace(info, subgroup_size=2 * lanes))
