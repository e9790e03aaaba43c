"""The c target's dense micro-kernel on grouped convs (RegNet's and ResNeXt's: groups of 8 or 16 channels): each
block of a tile's output channels lies in one group and sums that group's input channels alone (tiles.py). Before,
a grouped conv that was not depthwise kept the planner's scalar loops: RegNetY-400MF's ran at 4-16 GFLOP/s and the
network took 2.8x onnxruntime's time. Groups narrower than a vector (ResNeXt50's 4 channels) take the lane-group
tile: a vector of outputs is several whole groups, each lane fed its own group's inputs by a shuffle. Each case
compiled and run against numpy; no timings (`kernelgen bench`)."""
from __future__ import annotations

import pytest

from builders import Case, make_config, toolchain, with_quick
from conftest import requires_tool

from kernelgen import api

GROUPED = "{out_channels: %d, kernel: 3, stride: %d, pad: 1, groups: %d, bias: true, activation: relu}"
CASES = {
    # RegNetY-400MF's last stage: 55 groups of 8 channels, stride 2
    "regnet_y": (Case([1, 14, 14, 440], [GROUPED % (440, 2, 55)], schedule="auto", targets="[c]"), (1,)),
    # 5 groups of 8 in stripes of 24 channels: the second stripe's last block (channels 40..47) has no group
    "stripe_past_the_groups": (Case([2, 9, 11, 40], [GROUPED % (40, 1, 5)], schedule="{k_block: 8, k_split: 3}",
                                    targets="[c]"), (1,)),
    # groups of 16 channels: two 8-float vectors a block, both of one group
    "groups_of_16": (Case([1, 10, 12, 64], [GROUPED % (64, 1, 4)], schedule="{k_block: 16}", targets="[c]"), (1,)),
    # RegNet's block: 1x1, grouped 3x3 stride 2, 1x1, over NCHW tensors (channels-last caches)
    "block": (Case([1, 12, 10, 24], ["{out_channels: 64, kernel: 1, bias: true, activation: relu}", GROUPED % (64, 2, 4),
                                     "{out_channels: 32, kernel: 1, bias: true}"], input_layout="NCHW",
                   output_layout="NCHW", schedule="{k_block: 16}", targets="[c]"), (1, 2, 3)),
}


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", with_quick(list(CASES), "stripe_past_the_groups"))
def test_a_grouped_conv_runs_in_the_micro_kernel(name):
    case, tiled = CASES[name]
    config = make_config(f"grouped_{name}", case)
    job = api.jobs(config, ("c",))["c"]
    notes = job.target_plan.notes
    for j in tiled:
        assert any(note.startswith(f"conv2d #{j}: micro-kernel") for note in notes), notes
    if name == "groups_of_16":  # 16 channels a group: where the compiler targets AVX-512F, one wide vector a kv step
        wide = job.target_plan.tiles[0].wide
        assert (wide.lanes, wide.vectors, wide.width) == (16, 1, 16)
    result = api.validate(config, "c", seed=13)
    assert result.passed, result.detail


NARROW = "{out_channels: %d, kernel: 3, stride: %d, pad: %d, dilation: %d, groups: %d, bias: true, activation: relu}"
# Groups narrower than a vector, as many inputs as outputs: each lane sums its own group's inputs (tiles.py
# lane_group). (input shape, ops, layouts, schedule, the group width of each op's tile: 0 for the others)
LANE_GROUPS = {
    # ResNeXt50's layer1: 32 groups of 4 (here on 14x13, schedule: auto picks the stripes)
    "resnext_groups_of_4": (Case([1, 14, 13, 128], [NARROW % (128, 1, 1, 1, 32)], schedule="auto", targets="[c]"),
                            (4,)),
    # groups of 2 at stride 2 (column reuse across taps skips a column), k_block 16: two vectors a stripe block
    "groups_of_2_stride_2": (Case([2, 11, 12, 32], [NARROW % (32, 2, 1, 1, 16)], schedule="{k_block: 16}",
                                  targets="[c]"), (2,)),
    # dilation 2, padding 2, and a stripe of 24 over 40 channels: its last block (40..47) has no group to sum
    "dilated_stripe_past_the_groups": (Case([1, 9, 17, 40], [NARROW % (40, 1, 2, 2, 10)],
                                            schedule="{k_block: 8, k_split: 3}", targets="[c]"), (4,)),
    # a grouped 1x1 at stride 2 (every other loaded column read: only those declared, -Werror)
    "pointwise_stride_2": (Case([1, 9, 10, 32], ["{out_channels: 32, kernel: 1, bias: true}",
                                                 NARROW.replace("kernel: 3", "kernel: 1") % (32, 2, 0, 1, 8)],
                                schedule="{k_block: 16}", targets="[c]"), (0, 4)),
    # ResNeXt's block over NCHW tensors: 1x1, grouped 3x3 (groups of 4), 1x1 (channels-last caches)
    "block_nchw": (Case([1, 12, 10, 24], ["{out_channels: 64, kernel: 1, bias: true, activation: relu}",
                                          NARROW % (64, 1, 1, 1, 16), "{out_channels: 32, kernel: 1, bias: true}"],
                        input_layout="NCHW", output_layout="NCHW", schedule="{k_block: 16}", targets="[c]"),
                   (0, 4, 0)),
}


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", with_quick(list(LANE_GROUPS), "groups_of_2_stride_2"))
def test_groups_narrower_than_a_vector_run_in_the_lane_group_tile(name):
    case, widths = LANE_GROUPS[name]
    config = make_config(f"lane_{name}", case)
    job = api.jobs(config, ("c",))["c"]
    assert tuple(0 if t is None else t.lane_group for t in job.target_plan.tiles) == widths
    for j, width in enumerate(widths, start=1):
        if width:
            assert any(n.startswith(f"conv2d #{j}: micro-kernel") and f"(groups of {width}: each lane its group's "
                       "inputs)" in n for n in job.target_plan.notes), job.target_plan.notes
    text = job.files[f"lane_{name}.c"]
    width = max(widths)  # each lane's group's last input: lane k reads channel k // width * width + width - 1
    last = ", ".join(str(k // width * width + width - 1) for k in range(8))
    assert f"KG_SHUFFLE(KG_LOAD(x0), {last});" in text
    result = api.validate(config, "c", seed=13)
    assert result.passed, result.detail


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("case, why", [
    # 4 outputs a group from 8 inputs: a lane's inputs would span two vectors
    (Case([1, 8, 8, 64], [GROUPED % (32, 1, 8)], schedule="{k_block: 8}", targets="[c]"), "4 output channels"),
    # groups of 3: no whole number of them in a vector
    (Case([1, 8, 9, 12], [GROUPED % (12, 1, 4)], schedule="{k_block: 8}", targets="[c]"), "3 output channels"),
])
def test_other_narrow_groups_keep_the_planners_loops_and_say_why(case, why):
    config = make_config("narrow_groups", case)
    notes = api.jobs(config, ("c",))["c"].target_plan.notes
    assert any(f"a grouped conv whose groups' {why} are not whole vectors of 8" in n for n in notes), notes
    result = api.validate(config, "c", seed=13)
    assert result.passed, result.detail
