"""A lone channelwise op (a depthwise conv of one filter per channel, a pool, a mul) under channels_outer: each
channel stripe's input cache holds that stripe's channels alone (planner/geometry.channel_striped_input), so the
input is read once over all stripes and the caches shrink with the stripe. Before, every stripe's input window held
all input channels: MobileNetV3-Large's 5x5 depthwise over 14x14x672 and EfficientNet-B0's global pools over
112x112 fitted no schedule under the c target's 512 KiB budget, and `kernelgen import` left them to onnxruntime,
so those networks got no program. Exact caches and traffic from the planner; each kernel compiled and run against
numpy."""
from __future__ import annotations

from dataclasses import replace

import pytest

from builders import Case, make_config, toolchain, with_quick
from conftest import requires_tool

from kernelgen import api
from kernelgen.errors import NoScheduleFits
from kernelgen.planner.work import PREFETCHED_BYTES

# MobileNetV3-Large's features.13 depthwise, as `kernelgen import` writes it
V3_LARGE_DW = Case([1, 14, 14, 672], ["{out_channels: 672, kernel: 5, stride: 2, pad: 2, groups: 672, bias: true, "
                                      "activation: hardswish}"], schedule="auto", targets="[c]")
# EfficientNet-B0's first squeeze-excite pool: no row stripes (one output row), so only channels can shrink it
B0_POOL = Case([1, 112, 112, 32], ["global_avgpool: {}"], schedule="auto", targets="[c]")


def _caches(plan) -> dict[str, tuple[tuple[int, ...], int]]:
    return {c.name: (c.logical_shape, c.elements * c.element_bytes) for c in plan.caches}


def test_a_depthwise_stripe_caches_its_own_channels():
    plan = api.plan(make_config("v3l_dw", V3_LARGE_DW))
    # 7 output rows of a 5x5 stride-2 window: 17 input rows and columns; two stripes of 352 channels (11 x 32)
    assert (plan.k_block, plan.k_split, plan.stripe_counts) == (32, 11, (2, 1, 1))
    assert _caches(plan) == {"input": ((1, 17, 17, 352), 406912), "filter": ((352, 1, 5, 5), 35200),
                             "output": ((1, 7, 7, 352), 68992)}
    assert plan.workspace_elements * 4 == 514048 <= 524288  # each cache aligned to 2048 bytes, within the budget
    # each stripe's run of an NHWC pixel (352 and 320 channels of 672) moves with the 128 bytes prefetched after it
    assert PREFETCHED_BYTES == 128
    assert plan.traffic.input_bytes == 14 * 14 * ((352 * 4 + 128) + (320 * 4 + 128))
    assert plan.traffic.output_bytes == 7 * 7 * 672 * 4


def test_short_runs_of_nhwc_pixels_are_not_chosen_over_whole_pixels():
    """The c target's default plan for a lone depthwise 3x3 over 112x112x96 NHWC, as a plain config gets it. When each
    stripe's 8 channels counted as 32 bytes moved, the search chose 12 stripes of them: every stripe's memory
    traffic was whole pixels, and the kernel ran 3.3x slower cold (3.2 against 0.98 ms). All 96 channels of a pixel
    in one stripe, the input's pixels move once (and the window's halo columns again)."""
    plan = api.plan(make_config("dw", Case([1, 112, 112, 96], [DW % (96, 3, 1, 1, 96)], schedule=None, targets="[c]")))
    assert plan.schedule_origin.startswith("auto")
    assert (plan.k_block, plan.k_split, plan.stripe_counts) == (32, 3, (1, 5, 5))
    assert _caches(plan)["input"][0][3] == 96
    eight = api.plan(make_config("dw8", Case([1, 112, 112, 96], [DW % (96, 3, 1, 1, 96)],
                                             schedule="{budget: 524288, k_block: 8, k_split: 1}",
                                             targets="[c]")))
    assert eight.stripe_counts[0] == 12  # 8 channels a stripe when the config asks for them: each run 32 + 128 bytes
    assert eight.traffic.input_bytes % (12 * 112 * 160) == 0  # each 32-byte run of a row's 112 pixels costs 160
    assert eight.traffic.input_bytes > 3 * plan.traffic.input_bytes


def test_channel_planes_move_once_however_narrow_the_stripe():
    """NCHW: a stripe's channels are whole planes of memory, so 3 stripes of 8 channels read the input once; the same
    stripes over NHWC (96-byte pixels) bring every pixel in each stripe."""
    plan = api.plan(make_config("nchw", CASES["nchw_input"]))
    assert plan.stripe_counts == (3, 2, 1)
    rows = 9 + 3  # two row stripes' windows inside the 10 rows: 8 rows and a halo row each side, clipped
    assert plan.traffic.input_bytes == rows * 9 * 24 * 4
    nhwc = api.plan(make_config("nhwc", CASES["nchw_input"].with_(input_layout="NHWC")))
    assert nhwc.stripe_counts == (3, 2, 1) and nhwc.traffic.input_bytes == 3 * rows * 9 * 24 * 4


def test_a_target_that_copies_every_channel_keeps_the_whole_window():
    """hvx's input read copies a stripe's channel blocks into a cache of every channel (TargetInfo): on such a
    target the window and the traffic stay as before, and this op fits no schedule under 512 KiB."""
    config = make_config("v3l_dw", V3_LARGE_DW)
    assert config.channel_striped_inputs
    with pytest.raises(NoScheduleFits, match="expected a budget of at least 790528 bytes"):
        api.plan(replace(config, channel_striped_inputs=False))
    small = make_config("dw", Case([1, 7, 7, 64], ["{out_channels: 64, kernel: 3, pad: 1, groups: 64}"],
                                   schedule="{k_block: 16}", targets="[c]"))
    striped, whole = api.plan(small), api.plan(replace(small, channel_striped_inputs=False))
    assert _caches(striped)["input"] == ((1, 9, 9, 16), 5184)
    assert _caches(whole)["input"] == ((1, 9, 9, 64), 20736)
    # four 16-channel runs of each 64-channel pixel, each with the 128 bytes prefetched after it; the whole window
    # reads each pixel once per stripe
    assert (striped.traffic.input_bytes, whole.traffic.input_bytes) == (7 * 7 * 4 * (16 * 4 + 128),
                                                                        4 * 7 * 7 * 64 * 4)


def test_a_gpu_target_beside_c_does_not_take_the_striped_window_away():
    """opencl and vulkan run a kernel per op, no stripe loops: they read no plan cache, so c's plan keeps its."""
    plan = api.plan(make_config("v3l_dw", V3_LARGE_DW.with_(targets="[c, opencl, vulkan]")))
    assert _caches(plan)["input"] == ((1, 17, 17, 352), 406912)


def test_a_global_pool_narrows_its_channel_block_until_the_window_fits():
    """32 channels of 112x112 are 1.6 MB; the search halves the open k_block under channels_outer for a lone
    channelwise op, and 8 channels (401,408 bytes) fit the 512 KiB budget."""
    plan = api.plan(make_config("b0_pool", B0_POOL))
    assert (plan.k_block, plan.stripe_counts) == (8, (4, 1, 1))
    assert _caches(plan) == {"input": ((1, 112, 112, 8), 401408), "output": ((1, 1, 1, 8), 32)}
    # each stripe's 32-byte run of a 128-byte pixel brings the whole pixel (PREFETCHED_BYTES): four times the input
    assert plan.traffic.input_bytes == 4 * 112 * 112 * 32 * 4


def test_a_chain_or_rows_outer_keeps_every_channel_in_the_input_window():
    """A later op reads all of an earlier op's channels, and under rows_outer the input is read once per row stripe
    outside the channel blocks: both keep the whole window."""
    chain = make_config("chain", Case([1, 7, 7, 64], ["{out_channels: 64, kernel: 3, pad: 1, groups: 64}",
                                                       "{out_channels: 16, kernel: 1}"],
                                      schedule="{k_block: 16}", targets="[c]"))
    assert _caches(api.plan(chain))["input"][0] == (1, 9, 9, 64)
    rows = make_config("rows", Case([1, 7, 7, 64], ["{out_channels: 64, kernel: 3, pad: 1, groups: 64}"],
                                    schedule="{k_block: 16, order: rows_outer}", targets="[c]"))
    assert _caches(api.plan(rows))["input"][0] == (1, 9, 9, 64)


DW = "{out_channels: %d, kernel: %d, stride: %d, pad: %d, groups: %d, bias: true, activation: relu}"
CASES = {
    "v3_large_5x5_s2": V3_LARGE_DW,
    # 120 channels in stripes of 32: the last stripe reads channels 96..119, zeros past them (MobileNetV3-Large's
    # features.5, which read every channel's pixel stride before the tiles learnt the window's)
    "channel_tail": Case([1, 28, 28, 120], [DW % (120, 5, 1, 2, 120)], schedule="{k_block: 32, k_split: 1}",
                         targets="[c]"),
    "two_stripes_a_block": Case([1, 9, 11, 48], [DW % (48, 3, 1, 1, 48)], schedule="{k_block: 8, k_split: 3}",
                                targets="[c]"),
    "nchw_input": Case([1, 10, 9, 24], [DW % (24, 3, 1, 1, 24)], input_layout="NCHW", schedule="{k_block: 8}",
                       targets="[c]"),
    "batch": Case([2, 8, 8, 16], [DW % (16, 3, 2, 1, 16)], schedule="{k_block: 8}", targets="[c]"),
    "halo_ring": Case([1, 16, 12, 32], [DW % (32, 3, 1, 1, 32)],
                      schedule="{k_block: 8, h_block: 4, h_split: 1, halo: reuse}", targets="[c]"),
    "double_buffer": Case([1, 12, 12, 32], [DW % (32, 3, 1, 1, 32)],
                          schedule="{k_block: 8, h_block: 4, h_split: 1, pipeline: double_buffer}", targets="[c]"),
    "global_pool": B0_POOL,
    "maxpool_tail": Case([1, 15, 15, 44], ["maxpool: {kernel: 3, stride: 2, pad: 1}"], schedule="{k_block: 8}",
                         targets="[c]"),
    "mul": Case([1, 6, 5, 40], ["mul: {by: scale}"], side_inputs="{scale: {shape: [1, 1, 1, 40]}}",
                schedule="{k_block: 8}", targets="[c]"),
}


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", with_quick(list(CASES), "channel_tail", "global_pool"))
def test_each_channel_stripe_computes_from_its_own_channels(name):
    config = make_config(f"striped_{name}", CASES[name])
    plan = api.plan(config)
    stripe = plan.k_block * plan.k_split
    caches = _caches(plan)
    window = caches["input_a" if "input_a" in caches else "input"][0]  # (double buffering: input_a and input_b)
    assert plan.stripe_counts[0] > 1 and window[3] == stripe  # striped, several stripes
    result = api.validate(config, "c", seed=11)
    assert result.passed, result.detail
