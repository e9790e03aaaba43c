"""Depthwise convs whose channels are no multiple of 8 (ShuffleNetV2 1.0's 58, 116 and 232) on the c target: the
channel-vector tile reads the last vector short, its lanes past the channels taking the next pixel's first ones (or
the workspace's slack after the last cache), and never stores them. Before, such a depthwise kept the planner's
scalar loops (ShuffleNetV2 1.0's stage2 blocks at 38 GFLOP/s, the network 1.33x onnxruntime's time), and a lone one
reading its input in place read 6 floats past a 58-channel input's last pixel (AddressSanitizer:
heap-buffer-overflow). Each case runs under AddressSanitizer with every argument, the workspace too, in an
allocation of exactly its size, then against numpy."""
from __future__ import annotations

import pytest
import yaml
from builders import toolchain
from conftest import requires_tool
from test_c_compilers import SANITIZED

from kernelgen import api

BLOCK = """name: {name}
input: {{shape: [1, {h}, {w}, {c}], layout: NHWC}}
ops:
  - conv2d: {{out_channels: {c}, kernel: 1, bias: true, activation: relu}}
  - conv2d: {{out_channels: {c}, kernel: 3, stride: {stride}, pad: 1, groups: {c}, bias: true}}
  - conv2d: {{out_channels: {c}, kernel: 1, bias: true, activation: relu}}
output: {{layout: NHWC}}
schedule: auto
targets: [c]
"""
LONE = """name: {name}
input: {{shape: [1, {h}, {w}, {c}], layout: NHWC}}
ops:
  - conv2d: {{out_channels: {c}, kernel: 3, pad: 1, groups: {c}, bias: true}}
output: {{layout: NHWC}}
schedule: auto
targets: [c]
"""


def _sanitized(text: str):
    data = yaml.safe_load(text)
    data["c"] = {"cflags": list(SANITIZED)}
    return api.parse_config(yaml.safe_dump(data, sort_keys=False), "sanitized.yaml")


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("c, h, w, stride", [(58, 28, 28, 1), (116, 14, 13, 1), (116, 28, 28, 2), (12, 9, 7, 1)])
def test_a_block_whose_depthwise_channels_are_no_multiple_of_8_runs_in_micro_kernels(c, h, w, stride):
    config = api.parse_config(BLOCK.format(name=f"block{c}", c=c, h=h, w=w, stride=stride), "block.yaml")
    job = api.jobs(config, ("c",))["c"]
    tiles = job.target_plan.tiles
    assert all(t is not None for t in tiles), job.target_plan.notes
    assert tiles[1].depthwise and not tiles[1].columns and tiles[1].reads_past
    # the last cache's last pixel's short vector reads up to 15 floats past it: the workspace holds them
    assert job.target_plan.workspace_elements == job.plan.workspace_elements + 16
    result = api.validate(_sanitized(BLOCK.format(name=f"block{c}", c=c, h=h, w=w, stride=stride)), "c", seed=3)
    assert result.passed, result.detail


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("c", [58, 20])
def test_a_lone_depthwise_over_such_channels_reads_its_input_through_the_cache(c):
    """Its last vector of the input's channels is short: read in place it ran past the input's last pixel."""
    text = LONE.format(name=f"lone{c}", c=c, h=28, w=27)
    job = api.jobs(api.parse_config(text, "lone.yaml"), ("c",))["c"]
    tile = job.target_plan.tiles[0]
    assert tile is not None and tile.depthwise and tile.direct is None
    assert not any("reads the input directly" in note for note in job.target_plan.notes)
    result = api.validate(_sanitized(text), "c", seed=3)
    assert result.passed, result.detail


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("c", [20, 16])
def test_a_strided_1x1_depthwise_over_the_cache_declares_only_the_columns_it_reads(c):
    """A 1x1 depthwise at stride 2 reads every other loaded column: the tile clamped them all, and the kernels'
    -Werror stopped at the unused ones (found by random configs under AddressSanitizer, 20 channels)."""
    text = f"""name: dw1s2
input: {{shape: [1, 9, 9, {c}], layout: NHWC}}
ops:
  - conv2d: {{out_channels: {c}, kernel: 1, bias: true, activation: relu}}
  - conv2d: {{out_channels: {c}, kernel: 1, stride: 2, groups: {c}}}
output: {{layout: NHWC}}
schedule: {{k_block: 16}}
targets: [c]
"""
    result = api.validate(api.parse_config(text, "dw1s2.yaml"), "c", seed=3)
    assert result.passed, result.detail
