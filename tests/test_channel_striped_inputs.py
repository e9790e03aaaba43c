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

# MobileNetV3-Large's features.13 depthwise, as `kernelgen import` writes it
V3_LARGE_DW = Case([1, 14, 14, 672], ["{out_channels: 672, kernel: 5, stride: 2, pad: 2, groups: 672, bias: true, "
                                      "activation: hardswish}"], schedule="auto", targets="[c]")
# EfficientNet-B0's first squeeze-excite pool: no row stripes (one output row), so only channels can shrink it
B0_POOL = Case([1, 112, 112, 32], ["global_avgpool: {}"], schedule="auto", targets="[c]")


def _caches(plan) -> dict[str, tuple[tuple[int, ...], int]]:
    return {c.name: (c.logical_shape, c.elements * c.element_bytes) for c in plan.caches}


def test_a_depthwise_stripe_caches_its_own_channels_and_the_input_is_read_once():
    plan = api.plan(make_config("v3l_dw", V3_LARGE_DW))
    # 7 output rows of a 5x5 stride-2 window: 17 input rows and columns, 32 channels a stripe (k_block 32)
    assert (plan.k_block, plan.k_split, plan.stripe_counts) == (32, 1, (21, 1, 1))
    assert _caches(plan) == {"input": ((1, 17, 17, 32), 36992), "filter": ((32, 1, 5, 5), 3200),
                             "output": ((1, 7, 7, 32), 6272)}
    assert plan.workspace_elements * 4 == 51200  # each cache aligned to 2048 bytes
    assert plan.traffic.input_bytes == 14 * 14 * 672 * 4  # once, not once per each of the 21 stripes
    assert plan.traffic.output_bytes == 7 * 7 * 672 * 4


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
    assert (striped.traffic.input_bytes, whole.traffic.input_bytes) == (7 * 7 * 64 * 4, 4 * 7 * 7 * 64 * 4)


def test_a_gpu_target_beside_c_does_not_take_the_striped_window_away():
    """opencl and vulkan run a kernel per op, no stripe loops: they read no plan cache, so c's plan keeps its."""
    plan = api.plan(make_config("v3l_dw", V3_LARGE_DW.with_(targets="[c, opencl, vulkan]")))
    assert _caches(plan)["input"] == ((1, 17, 17, 32), 36992)


def test_a_global_pool_narrows_its_channel_block_until_the_window_fits():
    """32 channels of 112x112 are 1.6 MB; the search halves the open k_block under channels_outer for a lone
    channelwise op, and 8 channels (401,408 bytes) fit the 512 KiB budget."""
    plan = api.plan(make_config("b0_pool", B0_POOL))
    assert (plan.k_block, plan.stripe_counts) == (8, (4, 1, 1))
    assert _caches(plan) == {"input": ((1, 112, 112, 8), 401408), "output": ((1, 1, 1, 8), 32)}
    assert plan.traffic.input_bytes == 112 * 112 * 32 * 4


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
    "channel_tail": Case([1, 28, 28, 120], [DW % (120, 5, 1, 2, 120)], schedule="auto", targets="[c]"),
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
