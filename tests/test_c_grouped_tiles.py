"""The c target's dense micro-kernel on grouped convs (RegNet's and ResNeXt's: groups of 8 or 16 channels): each
block of a tile's output channels lies in one group and sums that group's input channels alone (tiles.py). Before,
a grouped conv that was not depthwise kept the planner's scalar loops: RegNetY-400MF's ran at 4-16 GFLOP/s and the
network took 2.8x onnxruntime's time. Each case compiled and run against numpy; no timings (`kernelgen bench`)."""
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
    result = api.validate(config, "c", seed=13)
    assert result.passed, result.detail


@requires_tool(*toolchain("c"))
def test_groups_narrower_than_a_vector_keep_the_planners_loops_and_say_why():
    config = make_config("narrow_groups", Case([1, 8, 8, 32], [GROUPED % (32, 1, 8)], schedule="{k_block: 8}",
                                               targets="[c]"))
    notes = api.jobs(config, ("c",))["c"].target_plan.notes
    assert any("a grouped conv whose groups' 4 output channels are not whole vectors of 8" in n for n in notes), notes
    result = api.validate(config, "c", seed=13)
    assert result.passed, result.detail
