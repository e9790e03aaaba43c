"""The `vulkan:` block of a config: checked by this model when the config is loaded."""
from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, StrictBool, conlist

from ...config import Config, options_of
from ...config_model import Count, StrictModel

NAME = "vulkan"


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
