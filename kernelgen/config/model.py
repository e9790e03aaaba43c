"""The config format as pydantic models: the one schema that validates YAML and is printed
by `kernelgen schema`. Every field's description says what it expects, in the words the
error messages use ("expected <description>, got 0").
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Callable, Literal, Union

from pydantic import BaseModel, ByteSize, Field, StrictBool, StrictStr, conlist, create_model

from ..ops import OPS
# the words the schema is written in (the targets' option blocks and the network manifest take theirs from here)
from ..ops.fields import LayoutText  # noqa: F401 (network/manifest.py's)
from ..ops.fields import LAYOUT_HELP, NAME_PATTERN, Count, LayoutSpec, Name, Scale, StrictModel, ZeroPoint
from ..roofs import Roofs
from .reserved import MAX_NAME_LENGTH

# The op kinds' config keys (kernelgen/ops' OPS table): each list item of `ops` is exactly one of them.
OP_KINDS = tuple(OPS)
# One op: each kind's block an optional key (the loader says so when there are more or none).
OpModel = create_model("OpModel", __base__=StrictModel, __doc__="One op: exactly one of its keys (the loader says "
                                                                "so when there are more or none).", **{
    key: (kind.MODEL, Field(default=None, description=kind.DOC)) for key, kind in OPS.items()})


class InputModel(StrictModel):
    shape: conlist(Count, min_length=4, max_length=4) = Field(
        description="a shape (in the order of the layout's letters: [n, h, w, c], or [n, c, h, w] for NCHW) of "
                    "positive ints")
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
    input: InputModel = Field(description="{shape: [n, h, w, c], layout: ...} (shape in the order of the layout's "
                                                   "letters: [n, c, h, w] with layout NCHW)")
    side_inputs: dict[Name, SideInputModel] = Field(
        default_factory=dict, description="named tensors the kernel reads besides its input, each {shape: [n, h, w, "
                                          "c], layout: ..., and with uint8 scale: ..., zero_point: ...}: what an op's residual may name (the other branch of a "
                                          "two-branch add)")
    ops: conlist(OpModel, min_length=1) = Field(description="a list of one or more ops (" + ", ".join(
        f"- {key}: {kind.FORM}" for key, kind in OPS.items()) + ")")
    output: OutputModel = Field(default_factory=OutputModel, description="{layout: ...}")
    schedule: Union[Literal["auto", "fixed"], ScheduleModel, None] = Field(
        default=None,
        description="'auto' (fit the splits, blocks and loop order to the targets' budget: the c target's one-core "
                    "L2, the hvx VTCM size), 'fixed' (one block per stripe, the whole width, nothing fitted: the "
                    "same as {}) or {k_split: ..., h_split: ..., budget: ..., ...}; default: 'auto' when the c "
                    "target is among the targets, else 'fixed'")
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
    # what a config naming this target and no `schedule:` plans with: "auto" (c: a user's plain config gets caches
    # fitted to the core, not one block per stripe) or "fixed" (the planner's one block per stripe)
    default_schedule: Literal["auto", "fixed"] = "fixed"
    roofs: Roofs | None = None  # the device's compute and bandwidth limits, for the importer's fusion estimate
    # schedule.order values whose stripe loops it renders; None: it runs no stripe loops (a kernel per conv), so
    # the order does not apply to it
    loop_orders: tuple[str, ...] | None = ("channels_outer",)
    # (dtype, layout): the filter layout its kernels read for that dtype, which an op naming no filter_layout takes
    # (hvx uint8: vrmpy reads OIHW8i32o4i); a dtype not listed takes any layout (default OIHW)
    filter_layouts: tuple[tuple[str, str], ...] = ()
    # the float filter layout its dense-conv micro-kernel reads in place (no copy into a filter cache per call),
    # which `kernelgen import` names on a dense conv of its configs that has more than one output pixel and output
    # channels in whole blocks of the layout ("": none; a config naming none keeps OIHW)
    dense_filter_layout: str = ""
    # whether its kernels want a chain's caches channels-innermost (NHWC) where the tensors' layouts are not (an
    # imported NCHW network's): the c target's micro-kernels read channel vectors of each pixel
    channels_last_caches: bool = False
    # whether its kernels read a lone channelwise op's input (a pool, a mul, a depthwise conv of one filter per
    # channel) one channel stripe at a time, so the plan's input cache holds the stripe's channels alone
    # (planner/geometry.channel_striped_input): the c target's do; hvx's input read copies the stripe's channel
    # blocks into a cache of every channel
    channel_striped_inputs: bool = False
    # the activation kinds (kernelgen/ops ACTIVATIONS keys) its kernels compute; None: every kind
    activations: tuple[str, ...] | None = None
    # whether its uint8 kernels apply any table kind (a byte table does not care what the activation computes),
    # those left out of `activations` for their float arithmetic included (hvx: a sigmoid's exp on uint8)
    uint8_tables: bool = False


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
