"""OpenCL target: PoCL builds every emitted kernel and its output matches numpy.

The matrix covers 1x1/3x3/5x5 and rectangular kernels, stride 1/2, pad 0/1/asymmetric,
dilation 1/2, channels not a multiple of 4, output extents equal to, a multiple of, smaller
and larger than the work-item tile, channel blocks that do and do not divide, batch 2,
single convs and chains, texture (NCHW4c, NHWC4c) and buffer (NHWC, blocked, NCHW)
layouts and index maps that mix channels with columns or rows, filters in textures and in
buffers, pad_value layouts, and float16 storage.
"""
import json
import subprocess

import pytest
from click.testing import CliRunner
from builders import Case, config_text, make_config
from conftest import requires_tool

from kernelgen.cli import main
from kernelgen.api import load_config
from kernelgen.errors import ConfigError
from kernelgen.targets.opencl.plan import plan_opencl
from kernelgen.planner import plan
from kernelgen.targets import TARGETS
from kernelgen.api import validate
from kernelgen.measure.records import Status

NCHW4C = '{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4", pad_value: 0}'
NHWC4C = '{map: "n, h, w, c -> n, h, |, w, c // 4, c % 4", pad_value: -1.5}'
BLOCKED = "nhwc-8h8w32c"

# name: (input shape, ops, input layout, output layout, opencl options, dtype)
MATRIX = {
    "k1_tile_equal": ([1, 2, 4, 32], ["{out_channels: 16, kernel: 1}"], NCHW4C, NCHW4C,
                      "{device: adreno-7xx, tile: [2, 4, 4]}",
                      "float32"),
    "k1_tile_multiple": ([1, 4, 8, 8], ["{out_channels: 32, kernel: 1}"], "NHWC", "NHWC", "{tile: [2, 4, 4]}",
                         "float32"),
    "k1_tile_smaller": ([1, 1, 3, 5], ["{out_channels: 3, kernel: 1}"], "NHWC", "NHWC", "{tile: [2, 4, 4]}",
                        "float32"),
    "k3_pad1_tile_larger_c6": ([1, 9, 10, 6], ["{out_channels: 10, kernel: 3, pad: 1}"], NCHW4C, NHWC4C,
                               "{tile: [2, 3, 1], local_size: [4, 2]}", "float32"),
    "k5_stride2_blocked": ([1, 13, 11, 64], ["{out_channels: 20, kernel: 5, stride: 2, pad: 2}"], BLOCKED, BLOCKED,
                           "{}", "float32"),
    "dilation2_nhwc_c5": ([1, 12, 12, 5], ["{out_channels: 7, kernel: 3, dilation: 2, pad: 1}"], "NHWC", "NHWC",
                          "{tile: [2, 2, 2]}", "float32"),
    "dilation2_stride2_texture": ([1, 15, 12, 8], ["{out_channels: 12, kernel: 3, dilation: 2, stride: 2, pad: 1}"],
                                  NHWC4C, NHWC4C, "{device: adreno-7xx, tile: [1, 3, 3]}", "float32"),
    "rect_asym_pad_nchw": ([1, 6, 7, 9], ["{out_channels: 6, kernel: [3, 1], stride: [2, 1], pad: [1, 0, 0, 2]}"],
                           "NCHW", "NCHW", "{}", "float32"),
    "chain_blocked_buffer": ([1, 16, 16, 32], ["{out_channels: 40, kernel: 3, pad: 1}",
                                               "{out_channels: 33, kernel: 1}"], BLOCKED, BLOCKED,
                             "{tile: [2, 4, 4], local_size: [4, 2, 1]}", "float32"),
    "chain_texture_filter_buffers": ([1, 11, 9, 12], ["{out_channels: 8, kernel: 3, stride: 2, pad: 1}",
                                                      "{out_channels: 6, kernel: 3, dilation: 2, pad: 2}"],
                                     NCHW4C, NCHW4C, "{filters_in_textures: false, tile: [2, 2, 2]}", "float32"),
    "chain_texture_fp16": ([1, 9, 8, 6], ["{out_channels: 10, kernel: 3, pad: 1}", "{out_channels: 5, kernel: 3}"],
                           NCHW4C, NCHW4C, "{device: adreno-7xx, half_arithmetic: false}", "float16"),
    "chain_buffer_fp16": ([1, 9, 8, 6], ["{out_channels: 10, kernel: 3, pad: 1}", "{out_channels: 5, kernel: 3}"],
                          "NHWC", "NHWC", "{}", "float16"),
    "batch2_pad_value_buffer": ([2, 6, 7, 10], ["{out_channels: 6, kernel: 3, pad: 1}"], "nchw-4c",
                                "{map: nchw-4c, pad_value: -1.5}", "{}", "float32"),
    "batch2_texture": ([2, 6, 7, 10], ["{out_channels: 6, kernel: 3, pad: 1}"], NCHW4C, NCHW4C,
                       "{filters_in_textures: false}", "float32"),
    # Channel terms mixed with w and h: no vload4/vstore4 and no per-pixel base, lane by lane.
    "mixed_index_maps": ([1, 7, 6, 6], ["{out_channels: 6, kernel: 3, pad: 1}"],
                         '{map: "n, h, w, c -> n, h, (w * 6 + c) // 4, (w * 6 + c) % 4"}',
                         '{map: "n, h, w, c -> n, (h * 6 + c) // 8, w, (h * 6 + c) % 8"}', "{tile: [2, 2, 4]}",
                         "float32"),
    # Fewer than 4 input channels (an RGB first layer): no full group, only the tail step.
    "rgb_input_buffer": ([1, 9, 9, 3], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}"], "NHWC", "NHWC", "{}",
                         "float32"),
    "rgb_input_texture": ([1, 9, 9, 3], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1}"], NCHW4C, NCHW4C,
                          "{tile: [2, 2, 2]}", "float32"),
    # 2 or 3 channels not innermost: no full group of 4, and the lanes of the partial group are
    # far apart (they were once stored at base + lane, leaving outputs unwritten)
    "c2_output_nchw": ([1, 1, 2, 1], ["{out_channels: 2, kernel: 1}"], "NHWC", "NCHW", "{}", "float32"),
    "c3_output_nchw_8h8w": ([1, 5, 6, 3], ["{out_channels: 3, kernel: 3, pad: 1}"], "NHWC", "nchw-8h8w", "{}",
                            "float32"),
    "c2_output_nhwc_8h8w": ([1, 9, 6, 2], ["{out_channels: 2, kernel: 3, pad: 1}"], "NCHW", "nhwc-8h8w", "{}",
                            "float32"),
    "c3_nchw_intermediate": ([1, 6, 5, 4], ["{out_channels: 3, kernel: 3, pad: 1, output_layout: NCHW}",
                                            "{out_channels: 2, kernel: 1}"], "NHWC", "NCHW", "{}", "float32"),
    # Epilogues (issue 19): + bias vector per accumulator, then fmax/fmin, before every kind of store.
    "bias_relu6_clamp_chain_buffer": ([1, 9, 10, 6], ["{out_channels: 10, kernel: 3, pad: 1, bias: true, "
                                                      "activation: relu6}",
                                                      "{out_channels: 5, kernel: 3, pad: 2, bias: true, "
                                                      "activation: [-0.25, 0.5]}"], "NHWC", "NCHW", "{}", "float32"),
    "bias_relu_texture_tail_fp16": ([1, 9, 8, 6], ["{out_channels: 10, kernel: 3, pad: 1, bias: true, "
                                                   "activation: relu}", "{out_channels: 5, kernel: 3, bias: true}"],
                                    NCHW4C, NCHW4C, "{}", "float16"),
    "clamp_texture_filter_buffers": ([1, 11, 9, 12], ["{out_channels: 8, kernel: 3, stride: 2, pad: 1, "
                                                      "activation: [0.05, 0.3]}"],
                                     NHWC4C, NHWC4C, "{filters_in_textures: false, tile: [2, 2, 2]}", "float32"),
    "bias_blocked_batch2_channel_blocks": ([2, 6, 7, 10], ["{out_channels: 40, kernel: 3, pad: 1, bias: true, "
                                                           "activation: relu}"], BLOCKED, BLOCKED,
                                           "{tile: [2, 4, 2]}", "float32"),
    # residual: input, read where each pixel is stored: buffer lanes, or texels (and read_imageh in fp16 math)
    "residual_clamp_chain_buffer": ([1, 9, 10, 6], ["{out_channels: 10, kernel: 3, pad: 1, bias: true, "
                                                    "activation: relu6}",
                                                    "{out_channels: 6, kernel: 3, pad: 1, bias: true, "
                                                    "residual: input, activation: [-0.5, 0.5]}"],
                                    "NHWC", "NHWC", "{}", "float32"),
    "residual_texture_fp16": ([1, 9, 8, 6], ["{out_channels: 8, kernel: 3, pad: 1, activation: relu}",
                                             "{out_channels: 6, kernel: 3, pad: 1, residual: input, "
                                             "activation: relu}"], NCHW4C, NCHW4C,
                              "{device: adreno-7xx, half_arithmetic: false, tile: [2, 2, 2]}",
                              "float16"),
    "residual_blocked_batch2": ([2, 6, 7, 40], ["{out_channels: 40, kernel: 1, bias: true, residual: input}"],
                                BLOCKED, BLOCKED, "{tile: [2, 4, 2]}", "float32"),
    # residual from an earlier op: its intermediate storage is one more argument of the later kernel
    "residual_from_op1_buffer": ([1, 7, 9, 6], ["{out_channels: 10, kernel: 1, bias: true, activation: relu6}",
                                                "{out_channels: 10, kernel: 3, pad: 1, groups: 1, activation: relu}",
                                                "{out_channels: 10, kernel: 3, pad: 1, residual: 1, "
                                                "activation: [-0.5, 0.5]}"], "NHWC", "NCHW", "{}", "float32"),
    "residual_from_op1_texture_fp16": ([1, 6, 9, 8], ["{out_channels: 6, kernel: 1, activation: relu}",
                                                      "{out_channels: 6, kernel: 3, pad: 1, bias: true, residual: 1}"],
                                       NCHW4C, NCHW4C, "{tile: [2, 2, 2]}", "float16"),
    # Grouped and depthwise convs: per group channel rc, each accumulator vector times an input vector
    # (a vload of adjacent channels, a broadcast, or lane by lane), fused epilogues as for dense convs
    "depthwise_nhwc_bias_relu6": ([1, 9, 10, 12], ["{out_channels: 12, kernel: 3, pad: 1, groups: 12, bias: true, "
                                                   "activation: relu6}"], "NHWC", "NHWC", "{tile: [1, 4, 1]}",
                                  "float32"),
    "depthwise_stride2_multiplier2_texture_fp16": ([1, 11, 9, 6], ["{out_channels: 12, kernel: 3, stride: 2, pad: 1, "
                                                                   "groups: 6, bias: true}"], NCHW4C, NCHW4C, "{}",
                                                   "float16"),
    "depthwise_dilated_c5_texture": ([1, 12, 12, 5], ["{out_channels: 5, kernel: 3, dilation: 2, pad: 2, groups: 5, "
                                                      "activation: [-0.25, 0.5]}"], NHWC4C, NHWC4C,
                                     "{filters_in_textures: false, tile: [2, 2, 2]}", "float32"),
    "grouped_4_chain_buffer": ([1, 8, 7, 12], ["{out_channels: 8, kernel: 3, pad: 1, groups: 4, activation: relu}",
                                               "{out_channels: 12, kernel: 1, groups: 4, bias: true}"], "NHWC", "NCHW",
                               "{}", "float32"),
    "grouped_2_residual_texture_fp16": ([1, 6, 7, 8], ["{out_channels: 8, kernel: 3, pad: 1, groups: 2, "
                                                       "residual: input, activation: relu}"], NCHW4C, NCHW4C,
                                        "{tile: [2, 2, 2]}", "float16"),
    "inverted_residual_block_buffer": ([1, 7, 6, 8], ["{out_channels: 16, kernel: 1, bias: true, activation: relu6}",
                                                      "{out_channels: 16, kernel: 3, pad: 1, groups: 16, bias: true, "
                                                      "activation: relu6}",
                                                      "{out_channels: 8, kernel: 1, bias: true, residual: input}"],
                                       "NHWC", "NHWC", "{}", "float32"),
    "depthwise_blocked_batch2": ([2, 6, 7, 40], ["{out_channels: 40, kernel: 3, pad: 1, groups: 40}"], BLOCKED, BLOCKED,
                                 "{tile: [2, 4, 2]}", "float32"),
    # a bias storage must not take the output's place as the last storage (the pad kernel's target;
    # found by the fuzz suite)
    "bias_pad_value_output_buffer": ([1, 3, 2, 1], ["{out_channels: 1, kernel: 1, bias: true}"], "NHWC", NCHW4C,
                                     "{}", "float32"),
    "buffer_variant_of_texture_map": ([1, 6, 7, 10], ["{out_channels: 6, kernel: 3, pad: 1}"], NCHW4C, NCHW4C,
                                      "{variant: buffer, tile: [3, 2, 4]}", "float32"),
}


def _case(shape, ops, in_layout: str, out_layout: str, options: str, dtype: str) -> Case:
    """A matrix row as a Case, under schedule {k_block: 4}."""
    if "|" in in_layout and "variant" not in options and "device" not in options:
        # pocl-cpu's profile puts texture maps in buffers; a matrix case with one runs the texture variant
        options = "{variant: texture" + (", " + options[1:] if options != "{}" else "}")
    return Case(shape, ops, in_layout, out_layout, "{k_block: 4}", dtype=dtype, blocks=(("opencl", options),),
                targets="[opencl]")


def _config(name: str, **overrides):
    case = dict(zip(("shape", "ops", "in_layout", "out_layout", "options", "dtype"), MATRIX[name])) | overrides
    return make_config(name, _case(*case.values()))


@requires_tool("py:pyopencl")
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_matrix_matches_numpy(name):
    result = validate(_config(name), "opencl")
    assert result.passed, f"{result.detail} (seed {result.seed})"
    assert result.bound_ratio <= 1.0


@requires_tool("py:pyopencl")
@pytest.mark.parametrize("name", ["seed000_baseline", "seed000_split", "seed000_3x3", "seed002_opencl_small",
                                  "opencl_chain_fp16"])
def test_bundled_configs_match_numpy(repo, name):
    result = validate(load_config(repo / "configs" / f"{name}.yaml"), "opencl")
    assert result.passed, f"{result.detail} (seed {result.seed})"


@requires_tool("py:pyopencl")
def test_full_fp16_kernels_are_not_run_without_cl_khr_fp16():
    """Never a silent pass: half arithmetic needs cl_khr_fp16, which this PoCL lacks."""
    from kernelgen.targets.opencl.toolchain import OpenCLRunner

    config = _config("chain_texture_fp16", options="{half_arithmetic: true}")
    with OpenCLRunner() as runner:
        has_fp16 = runner.info.has_fp16
    result = validate(config, "opencl")
    if has_fp16:
        assert result.passed, result.detail
    else:
        assert result.status is Status.NOT_RUN and "cl_khr_fp16" in result.detail


def test_fp16_arithmetic_comes_from_the_device_profile():
    """adreno-7xx computes float16 in half (validate runs the full-fp16 kernels), pocl-cpu in float (no
    cl_khr_fp16); an explicit half_arithmetic wins, and a float32 config never asks for it."""
    from kernelgen.targets.opencl.options import half_arithmetic

    assert half_arithmetic(_config("chain_texture_fp16", options="{device: adreno-7xx}"))
    assert not half_arithmetic(_config("chain_texture_fp16", options="{device: pocl-cpu}"))
    assert not half_arithmetic(_config("chain_texture_fp16", options="{device: adreno-7xx, half_arithmetic: false}"))
    assert not half_arithmetic(_config("batch2_texture", options="{device: adreno-7xx}"))


@requires_tool("clang-19")
@pytest.mark.parametrize("name", ["chain_texture_fp16", "chain_buffer_fp16", "bias_relu_texture_tail_fp16",
                                  "residual_texture_fp16"])
def test_full_fp16_kernels_compile_for_spir_with_cl_khr_fp16(tmp_path, name):
    """The half kernels PoCL skips still have to be valid OpenCL C: clang compiles them for SPIR."""
    config = _config(name)
    source = TARGETS["opencl"].build(config, plan(config)).files[f"{name}.cl"]
    assert ("read_imageh(" in source) == ("texture" in name) and "#if defined(cl_khr_fp16)" in source
    (tmp_path / "k.cl").write_text(source)
    done = subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header",
                           "--target=spir64", "-Xclang", "-cl-ext=+cl_khr_fp16", "-c", "-emit-llvm",
                           "-o", str(tmp_path / "k.bc"), str(tmp_path / "k.cl")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    preprocessed = subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header",
                                   "--target=spir64", "-Xclang", "-cl-ext=+cl_khr_fp16", "-E", str(tmp_path / "k.cl")],
                                  capture_output=True, text=True).stdout
    assert f"{name}_conv2_h" in preprocessed  # the fp16 block was compiled, not skipped


def test_launch_plan_is_recorded_in_the_source_and_json():
    config = _config("chain_blocked_buffer")
    cplan = plan_opencl(config, plan(config))
    files = TARGETS["opencl"].build(config, plan(config)).files
    launch = json.loads(files["chain_blocked_buffer.launch.json"])["launch"]
    assert [k["global_size"] for k in launch["kernels"]] == [list(k.global_size) for k in cplan.kernels]
    assert launch["tile"] == {"oh": 2, "ow": 4, "oc4": 4} and launch["local_size"] == [4, 2, 1]
    source = files["chain_blocked_buffer.cl"]
    for kernel in cplan.kernels:
        assert f"{kernel.name}(" in source and f"{list(kernel.global_size)} / {list(kernel.local_size)}" in source
    assert source.startswith("/* Generated by kernelgen")


def test_global_size_is_a_multiple_of_the_local_size_and_covers_the_output():
    config = _config("k3_pad1_tile_larger_c6")
    (kernel,) = plan_opencl(config, plan(config)).kernels
    assert kernel.global_size == (4, 6, 3)  # 10 columns / 3 = 4 tiles, 9 rows / 2 = 5 -> 6; 10 channels / 4
    assert all(g % l == 0 for g, l in zip(kernel.global_size, kernel.local_size))


def test_texture_over_the_image_limit_is_a_config_error(tmp_path):
    """Seed 002's output in NCHW4c is 256 x 16384 texels; the same shape of error, scaled down, where folding
    cannot help either (twice as wide is over the width): an explicit `variant: texture` is refused."""
    big = _case([1, 40, 30, 16], ["{out_channels: 64, kernel: 3}"], NCHW4C, NCHW4C,
                "{variant: texture, image_limit: [40, 512]}", "float32")
    (tmp_path / "big.yaml").write_text(config_text("big", big))
    result = CliRunner().invoke(main, ["build", str(tmp_path / "big.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "output texture would be 28x608 texels" in result.output and "limit 40x512" in result.output


@requires_tool("py:pyopencl")
def test_a_texture_taller_than_the_limit_is_folded_and_validates():
    """Seed 002's W3 output (NCHW4c, 256 x 16384 texels) is folded under PoCL's 8192 limit: every 2 rows side by
    side, 512 x 8192, the same bytes in the same order. Scaled down: 20 x 12 under a 16-row limit."""
    config = _config("k1_tile_equal", shape=[1, 12, 10, 8], ops=["{out_channels: 8, kernel: 3, pad: 1}"],
                     options="{variant: texture, image_limit: [64, 16]}")
    cplan = plan_opencl(config, plan(config))
    assert cplan.storage("input").texels == (20, 12) and cplan.storage("output").texels == (20, 12)
    assert cplan.storage("output").map_text == "n, h, w, c -> n, c // 4, h // 2, |, h % 2, w, c % 4"
    assert any("output texture would be 10x24 texels" in n and "folded to 20x12, every 2 rows" in n
               for n in cplan.notes)
    result = validate(config, "opencl")
    assert result.passed, result.detail


def test_a_default_texture_over_the_profile_limit_falls_back_to_buffers_and_says_so():
    """Issue 21: what the profile chose by default and cannot hold (an activation texture, a filter texture over
    the image2d limit) moves to a buffer, with a note; what the config asked for explicitly is an error."""
    c = _config("k1_tile_equal", shape=[1, 40, 30, 16], ops=["{out_channels: 64, kernel: 3}"],
                options="{device: adreno-7xx, image_limit: [40, 512]}")  # textures by default
    activations = plan_opencl(c, plan(c))
    assert activations.variant == "buffer" and not activations.uses_images
    assert any("output texture would be" in n and "activations stay in buffers instead" in n for n in activations.notes)
    # the Adreno profile keeps filters in textures: 80 input channels are 80 texels wide, over a 64-wide limit
    filters = _config("k1_tile_equal", shape=[1, 6, 6, 80], options="{device: adreno-7xx, image_limit: [64, 512]}")
    cplan = plan_opencl(filters, plan(filters))
    assert cplan.variant == "texture" and cplan.storage("filter1").kind == "buffer"
    assert cplan.storage("input").kind == "image"
    assert any("filter1 texture would be" in n and "filters stay in buffers instead" in n for n in cplan.notes)
    explicit = _config("k1_tile_equal", shape=[1, 6, 6, 80],
                       options="{device: adreno-7xx, filters_in_textures: true, image_limit: [64, 512]}")
    with pytest.raises(ConfigError, match="filter1 texture would be"):
        plan_opencl(explicit, plan(explicit))


def test_the_device_profile_picks_textures_and_filter_storage_and_bounds_the_work_group():
    """pocl-cpu: a texture map stays in a buffer (the buffer variant ran 3x faster here), and a texture variant
    reads float16 filter buffers; adreno-7xx: textures for both (TVM's Adreno schedules)."""
    pocl = plan_opencl(c := _config("batch2_texture", options="{device: pocl-cpu}"), plan(c))
    pocl_texture = plan_opencl(c := _config("batch2_texture", options="{variant: texture}"), plan(c))
    adreno = plan_opencl(c := _config("batch2_texture", options="{device: adreno-7xx}"), plan(c))
    assert pocl.variant == "buffer" and not pocl.uses_images
    assert pocl_texture.variant == "texture" and pocl_texture.storage("filter1").kind == "buffer"
    assert adreno.variant == "texture" and adreno.storage("filter1").kind == "image"
    big = _config("batch2_texture", options="{device: adreno-7xx, local_size: [64, 32]}")
    with pytest.raises(ConfigError, match="2048 work-items, over adreno-7xx's 1024"):
        plan_opencl(big, plan(big))


def test_layout_without_channel_lanes_cannot_be_a_texture():
    config = _config("batch2_texture", in_layout='{map: "n, h, w, c -> n, h, |, w, c"}')
    with pytest.raises(ConfigError, match="c % 4"):
        plan_opencl(config, plan(config))


def test_oversized_tile_is_a_config_error():
    config = _config("batch2_texture", options="{tile: [8, 8, 16]}")
    with pytest.raises(ConfigError, match="4096 accumulators per work-item"):
        plan_opencl(config, plan(config))


def test_half_arithmetic_needs_half_storage():
    config = _config("batch2_texture", options="{half_arithmetic: true}")
    with pytest.raises(ConfigError, match="opencl.half_arithmetic: needs dtype float16"):
        plan_opencl(config, plan(config))


def test_texture_output_with_channel_tail_needs_a_pad_value():
    config = _config("batch2_texture", out_layout='{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4"}')
    with pytest.raises(ConfigError, match="needs a pad_value"):
        plan_opencl(config, plan(config))


def test_buffer_variant_uses_wide_vectors_and_masks_only_real_padding(repo):
    """No conv padding: no masks in the hot loop. The last column tile (62 = 15 x 4 + 2) reads
    clamped columns for its two missing pixels and guards their stores instead."""
    config = load_config(repo / "configs" / "opencl_seed000_3x3_single.yaml")
    source = TARGETS["opencl"].build(config, plan(config)).files["opencl_seed000_3x3_single.cl"]
    assert "float16 acc" in source and "vload16(" in source
    assert " ? " not in source and "const int m" not in source
    assert "clamp(rw2, 0, 63)" in source and "if (((owt*4)+3) < 62) {" in source


@requires_tool("py:pyopencl")
def test_bench_reports_time_flops_and_the_fma_peak():
    from kernelgen.measure.bench import bench
    from kernelgen.measure.records import BenchOptions

    config = _config("k1_tile_multiple")
    job = TARGETS["opencl"].build(config, plan(config))
    rows = [r for r in bench(TARGETS["opencl"], job, BenchOptions(repeat=1)) if "torch" not in r.label]
    assert len(rows) == 1 and rows[0].seconds > 0 and rows[0].flops == plan(_config("k1_tile_multiple")).flops
    assert rows[0].peak_gflops > 0 and 0 < rows[0].ratio


def test_sweep_covers_tiles_times_work_groups_of_the_variant():
    from kernelgen.targets.gpu.profiles import OPENCL_SWEEPS
    from kernelgen.targets.opencl.sweep import sweep_variants
    from kernelgen.targets.opencl.options import opencl_options

    config = _config("batch2_texture")  # texture variant, filters in buffers
    variants = sweep_variants(config)
    space = OPENCL_SWEEPS["vectors+images"]
    assert len(variants) == len(space.tiles) * len(space.sizes) == 12
    options = [opencl_options(c) for _, c in variants]
    assert {tuple(o.tile) for o in options} == set(space.tiles)
    assert {tuple(o.local_size) for o in options} == set(space.sizes)
    assert variants[0][0] == "tile=[1, 4, 16] local=[8, 1, 1]"  # the key a resumed sweep matches, as before
    assert all(o.variant == "texture" and not o.filters_in_textures for o in options)
    assert len({key for key, _ in variants}) == len(variants)  # keys tell variants apart (resume matches them)


@requires_tool("py:pyopencl")
def test_cli_validate_passes_for_the_reduced_seed002_workload(repo):
    result = CliRunner().invoke(main, ["validate", str(repo / "configs" / "seed002_opencl_small.yaml"),
                                       "--target", "opencl"])
    assert result.exit_code == 0, result.output
    assert "seed002_opencl_small" in result.output and " pass " in result.output


def test_channel_lanes_are_adjacent_only_when_every_channel_is():
    """contiguous4 decides vstore4 / base + lane addressing: it must look at every channel,
    the partial last group included, and stay bounded for layouts it cannot reason about."""
    from kernelgen.layout import parse_layout
    from kernelgen.targets.gpu.vectors import EXHAUSTIVE_LIMIT, lanes_together as contiguous4

    def bound(text, shape):
        return parse_layout(text, ("n", "h", "w", "c")).bind(shape)

    assert contiguous4(bound("NHWC", (1, 3, 3, 2)))
    assert not contiguous4(bound("NCHW", (1, 3, 3, 2)))  # no full group: once answered True
    assert not contiguous4(bound("nhwc-8h8w", (1, 8, 8, 3)))
    assert contiguous4(bound("nchw-4c", (1, 3, 3, 6)))  # the partial group 4, 5 sits in its own block
    assert not contiguous4(bound("nchw-2c", (1, 3, 3, 6)))  # blocks of 2 channels
    mixed = "n, h, w, c -> n, h, (w * 6 + c) // 8, (w * 6 + c) % 8 // 4, (w * 6 + c) % 4"
    assert contiguous4(bound(mixed, (1, 7, 6, 6)))  # checked element by element
    assert not contiguous4(bound(mixed, (1, EXHAUSTIVE_LIMIT // 36 + 1, 6, 6)))  # past the limit: lane by lane
    # the simplifier flattens 4 * ((6w + c) // 4) + (6w + c) % 4 back to 6w + c: proven at any size
    two_level = "n, h, w, c -> n, h, (w * 6 + c) // 4, (w * 6 + c) % 4"
    assert contiguous4(bound(two_level, (1, EXHAUSTIVE_LIMIT // 36 + 1, 6, 6)))


def test_half_arithmetic_launches_the_fp16_convs_then_the_pad_kernel():
    """The launch list for a cl_khr_fp16 device: every fp16 conv, then the (storage-only) pad kernel.
    PoCL here has no cl_khr_fp16, so this list is checked without running it (no device opened: the launch
    lists come from the job alone); a device without it would time the float-arithmetic kernels instead."""
    from kernelgen.targets.opencl.runtime import OpenCLProgram

    config = _config("batch2_pad_value_buffer", dtype="float16",
                     options="{half_arithmetic: true, variant: buffer}")
    job = TARGETS["opencl"].build(config, plan(config))
    program = OpenCLProgram(job, runner=None, cannot_run="no cl_khr_fp16")
    names = [launch.kernel for launch in program.launches]
    assert names == ["batch2_pad_value_buffer_conv1_h", "batch2_pad_value_buffer_pad_output"]
    assert [launch.kernel for launch in program.timed_launches] == ["batch2_pad_value_buffer_conv1",
                                                                    "batch2_pad_value_buffer_pad_output"]
