"""The `vulkan:` block of a config: checked by this model when the config is loaded."""
from __future__ import annotations

import math
from typing import Literal, Union

from pydantic import Field, StrictBool, conlist

from ...config import Config, options_of
from ...config_model import Count, StrictModel
from ...devices import DeviceProfile

NAME = "vulkan"
# Accumulators one invocation may hold (oh * ow * oc of its tile): the shader unrolls every one of them. A CPU
# profile (lavapipe): 2,048, as the opencl target. A GPU profile: 4x its register budget (rdna2: 512), past which
# each op spills hundreds of registers whatever the compiler does, and RADV's ACO needs minutes and gigabytes
# (measured on a 3-op chain, three pipelines: 4 s at 32 accumulators, 8 s at 256 (655 VGPRs spilled), 12 s at
# 512 (1,833), over 100 s at 1,024; issue 32's 4,096 ran past 600 s at 2.9 GB).
MAX_TILE_ACCUMULATORS = 2048
GPU_TILE_REGISTERS = 4


class VulkanModel(StrictModel):
    """Options of the `vulkan` target (issue: Vulkan GLSL compute)."""

    wg_tile: Union[conlist(Count, min_length=3, max_length=3), None] = Field(
        default=None, description="[oh, ow, oc]: output tile of one workgroup")
    ivc_tile: Union[conlist(Count, min_length=3, max_length=3), None] = Field(
        default=None, description="[oh, ow, oc]: output tile of one invocation (oc a multiple of 4)")
    wg_size: Union[conlist(Count, min_length=3, max_length=3), None] = Field(
        default=None, description="[x, y, z]: invocations per workgroup")
    device: Literal["lavapipe", "rdna2", "adreno-7xx", "mali-valhall"] = Field(
        default="lavapipe", description="the device profile the defaults come from (kernelgen devices): 'lavapipe' "
                                        "(tuned on Mesa's CPU driver), 'rdna2', 'adreno-7xx' or 'mali-valhall'")
    wide_store: StrictBool = Field(
        default=False, description="true or false: with true, an invocation owns pairs of adjacent vec4 channel "
                                   "chunks and stores each pair as one vector of 64-bit words (chunk by chunk on a "
                                   "profile without shaderInt64)")


def vulkan_options(config: Config) -> VulkanModel:
    return options_of(config, NAME)


def check_accumulators(config: Config, ivc: tuple[int, int, int], profile: DeviceProfile, *,
                       explicit: bool) -> None:
    """Refuse an invocation tile with more accumulators than the profile allows (MAX_TILE_ACCUMULATORS), at the
    key that set it: ivc_tile, or wg_tile (which sets it as wg_tile / wg_size)."""
    held = math.prod(ivc)
    budget = profile.register_budget
    limit = MAX_TILE_ACCUMULATORS if budget is None else GPU_TILE_REGISTERS * budget
    if held <= limit:
        return
    why = ("the shader unrolls every one" if budget is None else
           f"{GPU_TILE_REGISTERS} x its {budget}-register budget in kernelgen devices: past it every op spills "
           f"hundreds of registers, and a GPU compiler such as RADV's ACO takes minutes")
    key = "vulkan.ivc_tile" if explicit or vulkan_options(config).wg_tile is None else "vulkan.wg_tile"
    raise config.problem(key, f"the invocation tile {list(ivc)} holds {held} accumulators (oh * ow * oc); keep it "
                              f"<= {limit} on {profile.name} ({why})")
