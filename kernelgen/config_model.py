"""The config format as pydantic models: the one schema that validates YAML and is printed
by `kernelgen schema`. Every field's description says what it expects, in the words the
error messages use ("expected <description>, got 0").
"""
from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, conlist

NAME_PATTERN = r"^[a-z][a-z0-9_]*$"

PositiveInt = Field(gt=0)
IntPair = Union[StrictInt, conlist(StrictInt, min_length=2, max_length=2)]
PadSpec = Union[StrictInt, conlist(StrictInt, min_length=2, max_length=2),
                conlist(StrictInt, min_length=4, max_length=4), Literal["same", "valid"]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LayoutMap(_Strict):
    map: StrictStr = Field(description="a layout string like 'nhwc-8h8w32c' or an index map "
                                       "like 'n, h, w, c -> n, c // 4, h, |, w, c % 4'")
    pad_value: Union[float, Literal["undef"], None] = Field(
        default=None, description="a number, 'undef', or absent (padding is never read or written)")


LayoutSpec = Union[StrictStr, LayoutMap]
LAYOUT_HELP = "a layout string like 'nhwc-8h8w32c' or {map: <index map>, pad_value: ...}"


class Conv2dModel(_Strict):
    out_channels: StrictInt = Field(description="a positive int")
    kernel: IntPair = Field(default=1, description="a positive int or [h, w]")
    stride: IntPair = Field(default=1, description="a positive int or [h, w]")
    pad: PadSpec = Field(default=0, description="a non-negative int, [h, w], [top, left, bottom, right], "
                                                "'same' or 'valid'")
    dilation: IntPair = Field(default=1, description="a positive int or [h, w]")
    filter_layout: LayoutSpec = Field(default="OIHW", description=LAYOUT_HELP)
    output_layout: Union[LayoutSpec, None] = Field(
        default=None, description=LAYOUT_HELP + " (default: the input's layout for an intermediate "
                                                "tensor, output.layout for the last op)")


class OpModel(_Strict):
    conv2d: Conv2dModel = Field(description="a conv2d op: {out_channels: ..., kernel: ..., ...}")


class InputModel(_Strict):
    shape: conlist(StrictInt, min_length=4, max_length=4) = Field(
        description="a logical NHWC shape [n, h, w, c] of positive ints")
    layout: LayoutSpec = Field(default="NHWC", description=LAYOUT_HELP)


class OutputModel(_Strict):
    layout: LayoutSpec = Field(default="NHWC", description=LAYOUT_HELP)


class ScheduleModel(_Strict):
    k_split: StrictInt = Field(default=1, description="a positive int: output-channel blocks per stripe")
    h_split: StrictInt = Field(default=1, description="a positive int: row blocks per stripe")
    k_block: Union[StrictInt, None] = Field(
        default=None, description="a positive int: output channels per block "
                                  "(default: the output layout's channel block, else 32)")
    h_block: Union[StrictInt, None] = Field(
        default=None, description="a positive int: output rows per block "
                                  "(default: the output layout's row block, else 8)")


class ConfigModel(_Strict):
    name: StrictStr = Field(pattern=NAME_PATTERN, description=f"a name matching {NAME_PATTERN}")
    dtype: Literal["float32"] = Field(default="float32", description="one of: float32")
    input: InputModel = Field(description="{shape: [n, h, w, c], layout: ...}")
    ops: conlist(OpModel, min_length=1) = Field(description="a list of one or more ops (- conv2d: {...})")
    output: OutputModel = Field(default_factory=OutputModel, description="{layout: ...}")
    schedule: ScheduleModel = Field(default_factory=ScheduleModel,
                                    description="{k_split: ..., h_split: ..., k_block: ..., h_block: ...}")
    targets: conlist(Literal["c"], min_length=1) = Field(default=["c"], description="a list of targets from: c")


def json_schema() -> dict:
    schema = ConfigModel.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kernelgen config"
    return schema
