"""Issue 47: on the GPU profiles each conv of a vulkan chain takes its own default tile (vulkan/defaults.py
default_tile_for), by its own kernel, stride and output, not one tile sized by the chain's last op and largest
stride (lavapipe too since issue 50); a tile the config gives still serves every conv. Plans only (no toolchain): the tiles are the profile's numbers, exactly."""
from __future__ import annotations

import pytest

from kernelgen.api import parse_config
from kernelgen.planner import plan
from kernelgen.targets.vulkan.plan import plan_vulkan

# A MobileNetV2-like chain that ends small: 1x1 expand at 28x28, a stride-2 depthwise 3x3 down to 14x14, a 1x1
# project, then a 3x3 stride-2 conv down to 7x7 with 8 channels (the small last op that used to size every tile).
CHAIN = """name: chain
input: {{shape: [1, 16, 28, 28], layout: NCHW}}
ops:
  - conv2d: {{out_channels: 96, kernel: 1}}
  - conv2d: {{out_channels: 96, kernel: 3, stride: 2, pad: 1, groups: 96}}
  - conv2d: {{out_channels: 32, kernel: 1}}
  - conv2d: {{out_channels: 8, kernel: 3, stride: 2, pad: 1}}
output: {{layout: NCHW}}
targets: [vulkan]
vulkan: {{device: {device}{extra}}}
"""


def _tiles(device: str, extra: str = "") -> list[tuple[int, int, int]]:
    config = parse_config(CHAIN.format(device=device, extra=extra), "chain.yaml")
    return [op.ivc_tile for op in plan_vulkan(config, plan(config)).ops]


@pytest.mark.parametrize("device, tiles", [
    # Adreno: a 1x1 conv 2x2x4 (pointwise_ivc_tile), the others 1x2x4 halved in width at stride 2
    ("adreno-7xx", [(2, 2, 1), (1, 1, 1), (2, 2, 1), (1, 1, 1)]),
    # Mali: 1x1x4 for every conv (no pointwise tile)
    ("mali-valhall", [(1, 1, 1)] * 4),
    # rdna2: 2x4x4, halved in width at stride 2
    ("rdna2", [(2, 4, 1), (2, 2, 1), (2, 4, 1), (2, 2, 1)]),
    # lavapipe (a tile per conv since issue 50's trip cap made them quick to compile): the 1x1s 1x32x4 fitted to
    # their outputs (1x28x4, 1x14x4), the strided convs 4x16x8 fitted (4x7x4 for 7x7x8; the grouped conv on scalar
    # reads 4x14x8 shrunk to 1x7x8, gathering at most 64 chunks a kernel row)
    ("lavapipe", [(1, 28, 1), (1, 7, 2), (1, 14, 1), (4, 7, 1)]),
])
def test_each_conv_of_a_chain_takes_its_own_default_tile(device, tiles):
    assert _tiles(device) == tiles


def test_a_tile_the_config_gives_serves_every_conv():
    assert _tiles("adreno-7xx", ", ivc_tile: [1, 1, 4]") == [(1, 1, 1)] * 4
