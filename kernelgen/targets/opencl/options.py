"""The `opencl:` block of a config: checked by this model when the config is loaded."""
from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, StrictBool, conlist

from ...config import Config, options_of
from ...config.model import Count, StrictModel

NAME = "opencl"


class OpenCLModel(StrictModel):
    """Options of the `opencl` target (issue: OpenCL textures)."""

    tile: Union[conlist(Count, min_length=3, max_length=3), None] = Field(
        default=None, description="[oh, ow, oc4]: output rows, columns and 4-channel groups per work-item")
    local_size: Union[conlist(Count, min_length=1, max_length=3), None] = Field(
        default=None, description="a work-group size of 1 to 3 positive ints")
    variant: Union[Literal["texture", "buffer"], None] = Field(
        default=None, description="'texture' or 'buffer' (default: texture when the layout has an axis separator and "
                                  "the device profile prefers textures, as adreno-7xx does)")
    device: Literal["pocl-cpu", "adreno-7xx", "adreno-6xx", "mali-valhall", "rdna2"] = Field(
        default="pocl-cpu", description="the device profile the defaults come from (kernelgen devices): 'pocl-cpu' "
                                        "(PoCL's CPU device), 'adreno-7xx', 'adreno-6xx', 'mali-valhall' or 'rdna2'; "
                                        "it gives filters in textures or buffers, the image2d limit, the largest "
                                        "work-group")
    filters_in_textures: Union[StrictBool, None] = Field(
        default=None, description="true or false: keep filters in image2d textures (default: the device profile's)")
    image_limit: Union[conlist(Count, min_length=2, max_length=2), None] = Field(
        default=None, description="[width, height] of the largest image2d the device takes (default: the profile's; "
                                  "PoCL: 8192x8192)")
    half_arithmetic: Union[StrictBool, None] = Field(
        default=None, description="true or false: validate the full-fp16 kernels (half math, needs cl_khr_fp16; "
                                  "dtype float16); default: the device profile's fp16 arithmetic, for float16")


def half_arithmetic(config: Config) -> bool:
    """Whether validation runs the full-fp16 kernels: as the config says, else as its device profile computes."""
    from ...devices import profile

    o = opencl_options(config)
    if o.half_arithmetic is not None:
        return o.half_arithmetic
    return config.dtype == "float16" and profile(o.device).fp16_arithmetic


def opencl_options(config: Config) -> OpenCLModel:
    return options_of(config, NAME)
