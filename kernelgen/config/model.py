"""The config format as pydantic models: the one schema that validates YAML and is printed
by `kernelgen schema`. Every field's description says what it expects, in the words the
error messages use ("expected <description>, got 0").
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Callable, Literal, Union

from pydantic import AfterValidator, BaseModel, ByteSize, ConfigDict, Field, StrictBool, StrictStr, conlist, create_model

import kernelgen.ops as ops
from ..roofs import Roofs
from .reserved import MAX_NAME_LENGTH, RESERVED, reserved_in

NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
# Every index a kernel computes is a 32-bit int: no count, size or extent in a config may pass it.
INT32_MAX = 2**31 - 1
MAX_LAYOUT_LENGTH = 500  # characters of a layout string or index map; the bundled ones have under 60

Count = Annotated[int, Field(strict=True, ge=1, le=INT32_MAX)]  # strict: true and "8" are not numbers
Extent = Annotated[int, Field(strict=True, ge=0, le=INT32_MAX)]
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]  # ints accepted; nan, inf, true not
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


# The activation's spellings come from the kinds' table (kernelgen/ops): each plain name, a clamp [lo, hi], and
# a parametrised kind's {kind: {...}} block.
ACTIVATION_NAMES = tuple(ops.NAMED)
ActivationSpec = Union[Literal[ACTIVATION_NAMES], conlist(Number, min_length=2, max_length=2), ops.Parameters]


class Conv2dModel(StrictModel):
    out_channels: Count = Field(description="a positive int")
    kernel: IntPair = Field(default=1, description="a positive int or [h, w]")
    stride: IntPair = Field(default=1, description="a positive int or [h, w]")
    pad: PadSpec = Field(default=0, description="a non-negative int, [h, w], [top, left, bottom, right], "
                                                "'same' or 'valid'")
    dilation: IntPair = Field(default=1, description="a positive int or [h, w]")
    groups: Count = Field(default=1, description="a positive int dividing the input and output channels: "
                                                 "channels split into that many independent convs (groups equal "
                                                 "to the input channels: depthwise)")
    bias: StrictBool = Field(default=False, description="true or false: add one value per output channel (a "
                                                        "kernel argument like the filter)")
    residual: Union[Literal["input"], Count, Name, None] = Field(
        default=None, description="'input' (add the chain's input), K (add the output of op K, an earlier op, "
                                  "1-based) or the name of a side input (the other branch of a two-branch add): a "
                                  "residual of the same shape, added after the bias")
    activation: ActivationSpec = Field(
        default="none", description=", ".join(kind.DOC for kind in ops.ACTIVATIONS.values()) + ", applied after "
                                    "the bias and the residual")
    quant: Union[OpQuantModel, None] = Field(
        default=None, description="dtype uint8: {weight_scale: number or [one per output channel], output_scale: "
                                  "..., output_zero_point: ...}")
    filter_layout: LayoutSpec = Field(
        default="OIHW", description=LAYOUT_HELP + " (default: OIHW, or the layout a target's kernels read for the "
                                                  "dtype: oihw-8i32o4i for hvx uint8)")
    output_layout: Union[LayoutSpec, None] = Field(
        default=None, description=LAYOUT_HELP + " (default: the input's layout for an intermediate "
                                                "tensor, output.layout for the last op)")


class MaxPoolModel(StrictModel):
    kernel: IntPair = Field(description="a positive int or [h, w]: the window")
    stride: IntPair = Field(default=1, description="a positive int or [h, w]")
    pad: PadSpec = Field(default=0, description="a non-negative int, [h, w], [top, left, bottom, right], 'same' or "
                                                "'valid'; padded positions are never the maximum (ONNX MaxPool)")
    output_layout: Union[LayoutSpec, None] = Field(
        default=None, description=LAYOUT_HELP + " (default: the input's layout for an intermediate "
                                                "tensor, output.layout for the last op)")


class AvgPoolModel(MaxPoolModel):
    pad: PadSpec = Field(default=0, description="a non-negative int, [h, w], [top, left, bottom, right], 'same' or "
                                                "'valid'")
    count_include_pad: StrictBool = Field(
        default=False, description="true or false: divide by the whole window (true) or by its positions inside "
                                   "the input (false, ONNX AveragePool's default)")


class PoolQuantModel(StrictModel):
    """dtype uint8: a global average pool's or a mul's output quantization (default: the top-level quant's)."""

    output_scale: Union[Scale, None] = Field(default=None, description="a positive number: the scale of this op's "
                                                                       "output")
    output_zero_point: Union[ZeroPoint, None] = Field(default=None, description="an int in [0, 255]")


class GlobalAvgPoolModel(StrictModel):
    quant: Union[PoolQuantModel, None] = Field(
        default=None, description="dtype uint8: {output_scale: ..., output_zero_point: ...} (onnxruntime's "
                                  "QLinearGlobalAveragePool: the byte sum requantized by s_in / (s_out * pixels))")
    output_layout: Union[LayoutSpec, None] = Field(
        default=None, description=LAYOUT_HELP + " (default: the input's layout for an intermediate "
                                                "tensor, output.layout for the last op)")


class MulModel(StrictModel):
    by: Name = Field(description="the name of a side input of shape [n, 1, 1, c]: each channel of the op's input "
                                 "times its value (squeeze-excite's scaling)")
    quant: Union[PoolQuantModel, None] = Field(
        default=None, description="dtype uint8: {output_scale: ..., output_zero_point: ...} (onnxruntime's "
                                  "QLinearMul: (q - z_in) * (f - z_f) times s_in * s_f / s_out, plus z_out, rounded "
                                  "once)")
    output_layout: Union[LayoutSpec, None] = Field(
        default=None, description=LAYOUT_HELP + " (default: the input's layout for an intermediate "
                                                "tensor, output.layout for the last op)")


OP_KINDS = ("conv2d", "maxpool", "avgpool", "global_avgpool", "mul")


class OpModel(StrictModel):
    """One op: exactly one of its keys (the loader says so when there are more or none)."""

    conv2d: Conv2dModel = Field(default=None, description="a conv2d op: {out_channels: ..., kernel: ..., "
                                                                      "...}")
    maxpool: MaxPoolModel = Field(default=None, description="a max pool: {kernel: ..., stride: ..., "
                                                                        "pad: ...}")
    avgpool: AvgPoolModel = Field(default=None, description="an average pool: {kernel: ..., stride: "
                                                                        "..., pad: ..., count_include_pad: ...}")
    global_avgpool: GlobalAvgPoolModel = Field(
        default=None, description="{}: the mean of each channel over the whole image (a 1x1 output)")
    mul: MulModel = Field(default=None, description="{by: <side input>}: each channel times a side input's value "
                                                    "for it (squeeze-excite)")


class InputModel(StrictModel):
    shape: conlist(Count, min_length=4, max_length=4) = Field(
        description="a logical NHWC shape [n, h, w, c] of positive ints")
    layout: LayoutSpec = Field(default="NHWC", description=LAYOUT_HELP)


class OutputModel(StrictModel):
    layout: LayoutSpec = Field(default="NHWC", description=LAYOUT_HELP)


class ScheduleModel(StrictModel):
    c_split: Union[Count, None] = Field(
        default=None, description="a positive int dividing the input's channel blocks: input-channel chunks per "
                                  "stripe, their partial sums kept in the output cache (a single op; default 1, or "
                                  "fitted to the budget)")
    k_split: Union[Count, None] = Field(
        default=None, description="a positive int: output-channel blocks per stripe (default 1, or fitted to "
                                  "the budget)")
    h_split: Union[Count, None] = Field(
        default=None, description="a positive int: row blocks per stripe (default 1, or fitted to the budget)")
    w_split: Union[Count, None] = Field(
        default=None, description="a positive int: column blocks per stripe (default: the whole width, or fitted "
                                  "to the budget)")
    budget: Union[ByteSize, Literal["auto"], None] = Field(
        default=None, description="bytes the caches may use, as an int or a size like '8MiB' or '1.5MB', or "
                                  "'auto' (the hvx VTCM size); the planner fits the splits not given to it with "
                                  "the least traffic")
    k_block: Union[Count, None] = Field(
        default=None, description="a positive int: output channels per block "
                                  "(default: the output layout's channel block, else 32)")
    h_block: Union[Count, None] = Field(
        default=None, description="a positive int: output rows per block "
                                  "(default: the output layout's row block, else 8)")
    w_block: Union[Count, None] = Field(
        default=None, description="a positive int: output columns per block "
                                  "(default: the output layout's column block, else 8)")
    pipeline: Literal["none", "double_buffer"] = Field(
        default="none", description="'none' or 'double_buffer': two input and two output caches, so the load of "
                                    "stripe i+1 and the store of stripe i-1 overlap the compute of stripe i")
    halo: Literal["reload", "reuse"] = Field(
        default="reload", description="'reload' or 'reuse': keep the input rows two vertically adjacent stripes "
                                      "share in a ring buffer and load only the new rows")
    order: Literal["channels_outer", "rows_outer", "auto"] = Field(
        default="channels_outer", description="'channels_outer' (seed 000: the last op's output-channel stripes "
                                              "outermost, earlier ops rerun for each), 'rows_outer' (row stripes "
                                              "outermost, the last op's channel blocks inside each: earlier ops run "
                                              "once per row stripe) or 'auto' (the budget search picks the one with "
                                              "less traffic; needs a budget)")


class SideInputModel(InputModel):
    scale: Union[Scale, None] = Field(default=None, description="dtype uint8: a positive number, the side input's "
                                                                "scale (required with uint8)")
    zero_point: Union[ZeroPoint, None] = Field(default=None, description="dtype uint8: an int in [0, 255] "
                                                                         "(required with uint8)")


class QuantModel(StrictModel):
    """Per-tensor affine quantization for dtype uint8: real = scale * (q - zero_point)."""

    input_scale: Scale = Field(default=0.05, description="a positive number")
    input_zero_point: ZeroPoint = Field(default=128, description="an int in [0, 255]")
    weight_dtype: Literal["uint8", "int8"] = Field(default="int8", description="'uint8' or 'int8'")
    weight_scale: Scale = Field(default=0.01, description="a positive number")
    weight_zero_point: Annotated[int, Field(strict=True, ge=-128, le=255)] = Field(
        default=0, description="an int in [-128, 127] for int8 weights, [0, 255] for uint8 weights")
    output_scale: Scale = Field(default=0.1, description="a positive number")
    output_zero_point: ZeroPoint = Field(default=128, description="an int in [0, 255]")
    bias: StrictBool = Field(default=False, description="true or false: add an int32 bias per output channel")
    intermediate_scale: Union[Scale, None] = Field(
        default=None, description="a positive number: scale of chain intermediates (default: output_scale)")
    intermediate_zero_point: Union[ZeroPoint, None] = Field(
        default=None, description="an int in [0, 255]: zero point of chain intermediates (default: output_zero_point)")
    requantization: Literal["fixed_point", "float32"] = Field(
        default="fixed_point", description="'fixed_point' (a Q31 multiplier and a rounding shift, as TFLite) or "
                                           "'float32' (onnxruntime's float scale and one rounding half to even: "
                                           "what `kernelgen import` writes)")


class SourceModel(StrictModel):
    """Where an imported config came from (`kernelgen import`): validate then checks the kernel against the
    model's own weights and runs the same nodes in onnxruntime."""

    onnx: Annotated[str, Field(strict=True, min_length=1, max_length=4096)] = Field(
        description="the ONNX model file, relative to this config's folder")
    nodes: conlist(Annotated[str, Field(strict=True, min_length=1, max_length=4096)], min_length=1) = Field(
        description="the ONNX nodes this config fuses, in graph order (a node's name, or its first output's "
                    "name when it has none)")
    sides: dict[Name, Annotated[str, Field(strict=True, min_length=1, max_length=4096)]] = Field(
        default_factory=dict, description="the ONNX tensor each side input is, by the side input's name")


class ConfigModel(StrictModel):
    name: Name = Field(description=f"a name matching {NAME_PATTERN}, at most {MAX_NAME_LENGTH} characters, that is "
                                   f"not a C, OpenCL or GLSL keyword or C library name")
    dtype: Literal["float32", "float16", "uint8"] = Field(default="float32",
                                                        description="one of: float32, float16, uint8")
    input: InputModel = Field(description="{shape: [n, h, w, c], layout: ...}")
    side_inputs: dict[Name, SideInputModel] = Field(
        default_factory=dict, description="named tensors the kernel reads besides its input, each {shape: [n, h, w, "
                                          "c], layout: ..., and with uint8 scale: ..., zero_point: ...}: what an op's residual may name (the other branch of a "
                                          "two-branch add)")
    ops: conlist(OpModel, min_length=1) = Field(description="a list of one or more ops (- conv2d: {...}, - maxpool: "
                                                            "{...}, - avgpool: {...}, - global_avgpool: {}, - mul: {...})")
    output: OutputModel = Field(default_factory=OutputModel, description="{layout: ...}")
    schedule: Union[Literal["auto"], ScheduleModel] = Field(
        default_factory=ScheduleModel,
        description="'auto' (fit every split to the hvx VTCM size) or {k_split: ..., h_split: ..., budget: ..., ...}")
    targets: conlist(StrictStr, min_length=1) = Field(default=["c"], description="a list of target names")
    quant: QuantModel = Field(default_factory=QuantModel, description="quantization parameters for dtype uint8")
    source: Union[SourceModel, None] = Field(
        default=None, description="{onnx: FILE, nodes: [...]}: the model an imported config came from")


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetInfo:
    """What the config loader knows of one target. The registry (kernelgen.targets) hands these to
    the loader at the command line; the core never imports a target."""

    name: str
    dtypes: tuple[str, ...]
    options: type[BaseModel] | None = None  # the model of its option block (`hvx:`); None: it takes none
    # `schedule: auto` and `budget: auto` ask the one target that has one: options -> (bytes, where from)
    default_budget: Callable[[BaseModel], tuple[int, str]] | None = None
    roofs: Roofs | None = None  # the device's compute and bandwidth limits, for the importer's fusion estimate
    # schedule.order values whose stripe loops it renders; None: it runs no stripe loops (a kernel per conv), so
    # the order does not apply to it
    loop_orders: tuple[str, ...] | None = ("channels_outer",)
    # (dtype, layout): the filter layout its kernels read for that dtype, which an op naming no filter_layout takes
    # (hvx uint8: vrmpy reads OIHW8i32o4i); a dtype not listed takes any layout (default OIHW)
    filter_layouts: tuple[tuple[str, str], ...] = ()


Catalog = tuple[TargetInfo, ...]


@lru_cache(maxsize=8)
def config_model(catalog: Catalog) -> type[ConfigModel]:
    """The config format with one option block per target that declares one (`hvx: {...}`)."""
    blocks = {t.name: (t.options, Field(default_factory=t.options, description=f"options of the {t.name} target"))
              for t in catalog if t.options is not None}
    # The schema lists the catalog's targets; the loader checks them itself, to say "did you mean ...?".
    names = [t.name for t in catalog]
    targets = (conlist(StrictStr, min_length=1),
               Field(default=["c"], description=f"a list of target names ({', '.join(names)})",
                     json_schema_extra={"items": {"enum": names, "type": "string"}}))
    return create_model("ConfigModel", __base__=ConfigModel, targets=targets, **blocks)


def json_schema(catalog: Catalog) -> dict:
    schema = config_model(catalog).model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kernelgen config"
    return schema
