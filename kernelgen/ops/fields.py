"""The words of the config's schema that every op's block is written in: counts, pairs, pads, names, layouts, the
strict base model and the uint8 quant blocks. The op kinds' modules (conv2d.py, pools.py, mul.py) declare their
blocks from these; config/model.py declares the rest of the file's keys from them."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, conlist

from ..config.reserved import MAX_NAME_LENGTH, RESERVED, reserved_in
from .activation import Number

NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
# Every index a kernel computes is a 32-bit int: no count, size or extent in a config may pass it.
INT32_MAX = 2**31 - 1
MAX_LAYOUT_LENGTH = 500  # characters of a layout string or index map; the bundled ones have under 60

Count = Annotated[int, Field(strict=True, ge=1, le=INT32_MAX)]  # strict: true and "8" are not numbers
Extent = Annotated[int, Field(strict=True, ge=0, le=INT32_MAX)]
Scale = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
ZeroPoint = Annotated[int, Field(strict=True, ge=0, le=255)]
IntPair = Union[Count, conlist(Count, min_length=2, max_length=2)]
PadSpec = Union[Extent, conlist(Extent, min_length=2, max_length=2),
                conlist(Extent, min_length=4, max_length=4), Literal["same", "valid"]]


def _not_reserved(name: str) -> str:
    language = reserved_in(name)
    if language is not None:
        raise ValueError(f"{name!r} is a reserved name in {language}, and the name becomes the kernels' "
                         f"function and file names: choose another")
    return name


Name = Annotated[str, Field(strict=True, pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH,
                            json_schema_extra={"not": {"enum": sorted(RESERVED)}}), AfterValidator(_not_reserved)]
# A layout string (nhwc-8h8w32c) or an index map (it has an arrow); what the dims may be depends on the tensor.
LAYOUT_PATTERN = r"^\s*([A-Za-z]+(-?([0-9]+[A-Za-z])+)?|.*->.*)\s*$"
LayoutText = Annotated[str, Field(strict=True, max_length=MAX_LAYOUT_LENGTH, pattern=LAYOUT_PATTERN)]


class StrictModel(BaseModel):
    """Unknown keys are errors; loaded values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class LayoutMap(StrictModel):
    map: LayoutText = Field(description="a layout string like 'nhwc-8h8w32c' or an index map "
                                       "like 'n, h, w, c -> n, c // 4, h, |, w, c % 4'")
    pad_value: Union[Number, Literal["undef"], None] = Field(
        default=None, description="a finite number the tensor's dtype holds, 'undef', or absent (padding is never "
                                  "read or written)")


LayoutSpec = Union[LayoutText, LayoutMap]
LAYOUT_HELP = "a layout string like 'nhwc-8h8w32c' or {map: <index map>, pad_value: ...}"


def output_layout_field():
    """Every op's `output_layout` key."""
    return Field(default=None, description=LAYOUT_HELP + " (default: the input's layout for an intermediate "
                                                         "tensor, output.layout for the last op)")


MAX_SCALES = 1 << 16  # per-channel weight scales: one per output channel of any real layer


class OpQuantModel(StrictModel):
    """dtype uint8: this op's weight scales and output quantization (the top-level quant: gives the defaults)."""

    weight_scale: Union[Scale, conlist(Scale, min_length=1, max_length=MAX_SCALES), None] = Field(
        default=None, description="a positive number, or a list of one per output channel (per-channel weights)")
    output_scale: Union[Scale, None] = Field(default=None, description="a positive number: the scale of this op's "
                                                                       "output")
    output_zero_point: Union[ZeroPoint, None] = Field(default=None, description="an int in [0, 255]")
    conv_scale: Union[Scale, None] = Field(
        default=None, description="a positive number: with a residual, the scale the conv's result is quantized to "
                                  "before the add (the conv's own output tensor in TFLite; default: output_scale)")
    conv_zero_point: Union[ZeroPoint, None] = Field(default=None, description="an int in [0, 255] (default: "
                                                                              "output_zero_point)")
    gate_scale: Union[Scale, None] = Field(
        default=None, description="a positive number: with a silu on dtype uint8, the scale its gate (the sigmoid) is "
                                  "quantized to before the product (a QDQ model's QuantizeLinear after the Sigmoid; "
                                  "default: the gate is not quantized)")
    gate_zero_point: Union[ZeroPoint, None] = Field(default=None, description="an int in [0, 255]")


class PoolQuantModel(StrictModel):
    """dtype uint8: a global average pool's or a mul's output quantization (default: the top-level quant's)."""

    output_scale: Union[Scale, None] = Field(default=None, description="a positive number: the scale of this op's "
                                                                       "output")
    output_zero_point: Union[ZeroPoint, None] = Field(default=None, description="an int in [0, 255]")


__all__ = ["Count", "Extent", "INT32_MAX", "IntPair", "LAYOUT_HELP", "LayoutMap", "LayoutSpec", "LayoutText",
           "MAX_LAYOUT_LENGTH", "MAX_NAME_LENGTH", "NAME_PATTERN", "Name", "Number", "OpQuantModel", "PadSpec",
           "PoolQuantModel", "Scale", "StrictModel", "ZeroPoint", "output_layout_field"]
