"""Config files -> frozen `Config`. Every check on user input lives here.

Three passes, each reporting every problem it finds with file:line:column and key:
YAML syntax and duplicate keys (yamlmarks.py), the schema (model.py, via pydantic),
then meaning: positive sizes, layouts that fit their tensors, kernels that fit their
padded inputs, non-empty outputs, schedules that can work.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

import kernelgen.config.model as M
import kernelgen.config.epilogue as epilogue_config
import kernelgen.config.schedule as schedule_config
from ..errors import ConfigError, ConfigProblem
from ..ops import IDENTITY, OPS, Activation
from ..ops.conv2d import Conv2dModel
from ..ops.fields import INT32_MAX, LayoutSpec, OpQuantModel, PadSpec
from ..plan_types import Epilogue
from .schedule import Schedule
from ..layout import (ACTIVATION_DIMS, FILTER_DIMS, Layout, LayoutError, PadKind, TensorLayout, listed_of_logical,
                      listed_order, logical_of_listed, padding_cover, parse_layout)
from ..files import display_path, read_head
from .schema_errors import key_text, schema_problems, show
from .yamlmarks import MAX_BYTES, Mark, MarkedDocument, YamlProblem, decode, load

# The largest finite value of each float dtype (IEEE 754 binary32 and binary16).
FLOAT_MAX = {"float32": 3.4028234663852886e38, "float16": 65504.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class Conv2d:
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: tuple[int, int]
    filter_layout: Layout | None  # None: a pool (no filter)
    output_layout: Layout  # the layout of this op's output tensor (intermediate or final)
    kind: str = "conv2d"  # its kind's key in kernelgen/ops' OPS: maxpool, avgpool (global_avgpool's too), mul
    count_include_pad: bool = False  # avgpool: divide by the whole window, else by its positions in the input
    scale_by: str | None = None  # mul: the side input ([n, 1, 1, c]) each channel is multiplied by
    groups: int = 1  # input and output channels split into this many independent convs
    bias: bool = False  # one value per output channel, added to the accumulator
    residual: int | str | None = None  # 0: the chain's input, K: op K's output (1-based), a side input's name
    act: Activation = IDENTITY  # the activation's record (kernelgen/ops): a clamp (relu, relu6), a gate, ...
    activation: str = "none"  # as the config spells it, for reports: relu, relu6, clamp[lo, hi], hardswish
    quant: OpQuantModel | None = None  # dtype uint8: this op's weight scales and output quantization
    filter_layout_by: str = ""  # the targets whose kernels read filter_layout, when the config names none

    @property
    def epilogue(self) -> Epilogue:
        """What the store does between the accumulator and the stored value (false when nothing)."""
        return Epilogue(bias=self.bias, residual=self.residual, act=self.act, activation=self.activation)

    @property
    def span(self) -> tuple[int, int]:
        """Input rows and columns one output pixel reads: (k - 1) * dilation + 1."""
        return OPS[self.kind].window(self).span

    @property
    def pool(self) -> bool:
        """A pool (or a mul): each output channel from its own input channel's window, no filter."""
        return not OPS[self.kind].FILTER


@dataclass(frozen=True, slots=True, kw_only=True)
class SideInput:
    """A tensor the kernel reads besides its input (`side_inputs:`), e.g. the other branch of a two-branch add."""

    name: str  # as the config names it; the kernel's parameter is `param`
    shape: tuple[int, int, int, int]  # logical NHWC
    layout: Layout
    scale: float | None = None  # dtype uint8: real = scale * (q - zero_point)
    zero_point: int | None = None

    @property
    def param(self) -> str:
        """The kernel argument: prefixed, so no name a user picks can shadow an identifier of the kernel's own."""
        return f"side_{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    name: str
    path: str  # as given on the command line; names the config in messages and banners
    dtype: str
    input_shape: tuple[int, int, int, int]  # logical NHWC
    input_layout: Layout
    ops: tuple[Conv2d, ...]
    schedule: Schedule
    targets: tuple[str, ...]
    quant: M.QuantModel  # validated by config_model (a frozen pydantic model)
    # Each target's option block (`hvx: {...}`), checked by that target's own model; a target reads
    # its own with options_of(config, name).
    options: dict[str, BaseModel] = field(default_factory=dict, repr=False)
    # Where each key sits in the file, so later stages (planner, targets) can point at it too.
    marks: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)
    # The file name as the OS spells it (`path` is its printable form): depfiles name this one.
    file: str = field(default="", compare=False, repr=False)
    source: M.SourceModel | None = None  # an imported config's model and nodes (kernelgen import)
    side_inputs: tuple[SideInput, ...] = ()  # tensors besides the input (a residual's other branch)
    channels_last_caches: bool = False  # every target wants the caches channels-innermost (TargetInfo)
    channel_striped_inputs: bool = False  # every target running stripes reads them so (TargetInfo)
    # the float filter layout every target of the config reads in place (TargetInfo.dense_filter_layout; "": some
    # target copies each filter stripe into its filter cache)
    in_place_filter_layout: str = ""

    def problem(self, key: str, message: str) -> ConfigError:
        """A ConfigError about `key` (dotted, as in messages) found after loading, e.g. by the planner."""
        line, column = self.marks.get(key) or self.marks.get(key.rsplit(".", 1)[0], (1, 1))
        return ConfigError([ConfigProblem(self.path, line, column, key, message)])


def load_config(path: str | Path, catalog: M.Catalog) -> Config:
    """Read and check a config; `catalog` names the targets it may use (kernelgen.api passes the registry's)."""
    path_text = display_path(path)  # a file name that is not UTF-8 still prints (and fills banners)
    try:
        text = decode(read_head(path, MAX_BYTES))
    except OSError as error:
        raise ConfigError([ConfigProblem(path_text, 1, 1, "", f"cannot read config: {error.strerror}")]) from None
    except YamlProblem as problem:
        raise ConfigError([ConfigProblem(path_text, problem.mark.line, problem.mark.column, "", problem.message)]) from None
    return replace(parse_config(text, path_text, catalog), file=str(path))


def parse_config(text: str, path: str, catalog: M.Catalog) -> Config:
    try:
        document = load(text)
    except YamlProblem as problem:
        raise ConfigError([ConfigProblem(path, problem.mark.line, problem.mark.column, "", problem.message)]) from None
    return _checked(document, path, catalog)


def config_from_data(data: dict, path: str, catalog: M.Catalog) -> Config:
    """A config from its keys as loading its YAML would give them, built by a program (kernelgen import's candidate
    groups) without text: each value marked in the order a file lists it, so that problems sort as the file's
    would (the marks' lines count values, not lines)."""
    values: dict = {}

    def mark(value: Any, keys: tuple) -> None:
        values[keys] = Mark(len(values) + 1, 1)
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            mark(item, (*keys, key))

    mark(data, ())
    return _checked(MarkedDocument(data, values, values), path, catalog)


def _checked(document: MarkedDocument, path: str, catalog: M.Catalog) -> Config:
    if not isinstance(document.data, dict):
        raise ConfigError([ConfigProblem(path, 1, 1, "", "expected a mapping of config keys (name, input, ops, ...)")])
    schema = M.config_model(catalog)
    try:
        model = schema.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(schema_problems(error, document, path, schema)) from None
    try:
        return _Checker(model, document, path, catalog).build()
    except ConfigError as error:
        raise _listed_as_nhwc(model, document, path, catalog) or error from None


def _listed_as_nhwc(model: M.ConfigModel, document: MarkedDocument, path: str, catalog: M.Catalog
                    ) -> ConfigError | None:
    """An imported config that kernelgen import wrote before shapes followed the layout's letters (an NHWC shape
    with layout NCHW) mostly fails to load as the different tensor it now reads as; when reading its shapes in
    NHWC order would load, that is what the file is, and the one thing to say about it."""
    spec = model.input.layout
    order = listed_order(spec if isinstance(spec, str) else spec.map)
    if model.source is None or order == ACTIVATION_DIMS:
        return None
    legacy = _Checker(model, document, path, catalog)
    legacy.listed_nhwc = True
    try:
        legacy.build()
    except ConfigError:
        return None
    mark = document.mark(("input", "shape"))
    listed = list(listed_of_logical(tuple(model.input.shape), order))
    return ConfigError([ConfigProblem(
        path, mark.line, mark.column, "input.shape",
        f"expected the shape in the order of the layout's letters, [{', '.join(order)}] = {listed}, got "
        f"{list(model.input.shape)} in NHWC order, as kernelgen import wrote it before: import the model again "
        f"(or list every shape as its layout names it)")])


def _shared(names: set[str]) -> str:
    """The one name every target gave, or "" where they differ (or there are none)."""
    return next(iter(names)) if len(names) == 1 else ""


def options_of(config: Config, target: str) -> Any:
    """The target's option block as its own model validated it (its defaults when the file has none)."""
    return config.options[target]


def with_options(config: Config, target: str, options: BaseModel) -> Config:
    """The config with another option block for `target` (a sweep's candidate)."""
    return replace(config, options={**config.options, target: options})


# ---------------------------------------------------------------- meaning

class _Checker:
    """Collects every semantic problem before raising, so one run reports them all."""

    def __init__(self, model: M.ConfigModel, document: MarkedDocument, path: str, catalog: M.Catalog) -> None:
        self.model, self.document, self.path, self.catalog = model, document, path, catalog
        self.problems: list[ConfigProblem] = []
        self.listed_nhwc = False  # read every shape as [n, h, w, c] whatever its layout (_listed_as_nhwc)

    def problem(self, keys: tuple, message: str) -> None:
        mark = self.document.mark(keys)
        self.problems.append(ConfigProblem(self.path, mark.line, mark.column, key_text(keys), message))

    def positive(self, keys: tuple, value: int | list[int], what: str, minimum: int = 1) -> tuple[int, ...]:
        values = (value,) if isinstance(value, int) else tuple(value)
        if any(v < minimum for v in values):
            self.problem(keys, f"expected {what}, got {show(value)}")
            return tuple(max(v, minimum) for v in values)
        return values

    def shape(self, keys: tuple, listed: list[int], spec: LayoutSpec) -> tuple[int, int, int, int]:
        """An activation's `shape`, listed in its layout's letter order (layout.listed_order), as the logical NHWC
        shape the rest of kernelgen works in: the one place the config's order becomes the internal one."""
        order = ACTIVATION_DIMS if self.listed_nhwc else listed_order(spec if isinstance(spec, str) else spec.map)
        dims = ", ".join(order)
        named = f" (the order of the layout's letters, {''.join(order).upper()})" if order != ACTIVATION_DIMS else ""
        values = self.positive(keys, listed, f"a shape [{dims}]{named} of positive ints")
        return logical_of_listed(values, order)  # type: ignore[return-value]

    def fits(self, keys: tuple, shape: tuple[int, ...], what: str) -> bool:
        """A tensor a 32-bit index can address (checked with Python ints, before any layout is bound)."""
        size = math.prod(shape)
        if size > INT32_MAX:
            self.problem(keys, f"{what} {list(shape)} has {size} elements, more than {INT32_MAX}: kernels "
                               f"index with 32-bit ints")
            return False
        return True

    def pair(self, keys: tuple, value: int | list[int], what: str) -> tuple[int, int]:
        values = self.positive(keys, value, what)
        return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])

    def layout(self, keys: tuple, spec: LayoutSpec | None, dims: tuple[str, ...],
               shape: tuple[int, ...]) -> Layout | None:
        text, pad = (spec, None) if isinstance(spec, str) else (spec.map, spec.pad_value)
        location = keys if isinstance(spec, str) else (*keys, "map")
        if isinstance(pad, float) and not self.pad_value_fits((*keys, "pad_value"), pad, dims):
            return None
        try:
            layout = parse_layout(text, dims, pad=pad)
            bound = TensorLayout(layout=layout, logical_shape=shape)
            if bound.size > INT32_MAX:
                self.problem(location, f"its physical shape {list(bound.physical_shape)} holds {bound.size} elements "
                                       f"for the logical {list(shape)}, more than {INT32_MAX}: kernels index "
                                       f"with 32-bit ints")
                return None
            bound.check_injective()
            if layout.pad_kind is PadKind.VALUE and bound.padding:
                padding_cover(bound)  # kernels fill the padding by walking this grown domain
        except LayoutError as error:
            self.problem(location, str(error))
            return None
        return layout

    def pad_value_fits(self, keys: tuple, value: float, dims: tuple[str, ...]) -> bool:
        """A pad value is stored in the tensor's element type: it must be one of its values."""
        dtype = self.model.dtype
        if dtype == "uint8":
            low, high = (-128, 127) if dims == FILTER_DIMS and self.model.quant.weight_dtype == "int8" else (0, 255)
            kind = "int8 weights" if low < 0 else "uint8 data"
            if value != int(value) or not low <= value <= high:
                self.problem(keys, f"expected an integer in [{low}, {high}] ({kind}), got {value:g}")
                return False
            return True
        largest = FLOAT_MAX[dtype]
        if abs(value) > largest:
            self.problem(keys, f"expected a {dtype} value, at most {largest:g} in magnitude, got {value:g}")
            return False
        return True

    def build(self) -> Config:
        m = self.model
        shape = self.shape(("input", "shape"), m.input.shape, m.input.layout)
        if not self.fits(("input", "shape"), shape, "the input"):
            raise ConfigError(self.problems)
        input_layout = self.layout(("input", "layout"), m.input.layout, ACTIVATION_DIMS, shape)
        self.model_input_layout = input_layout
        self.sides = self.side_inputs(m)
        ops: list[Conv2d] = []
        self.shapes, self.ops = [shape], ops  # the chain so far: what a residual may name
        n, height, width, channels = shape
        for index, op_model in enumerate(m.ops):
            kinds = [kind for kind in M.OP_KINDS if getattr(op_model, kind) is not None]
            if len(kinds) != 1:
                self.problem(("ops", index), f"expected one op ({', '.join(M.OP_KINDS)}) per list item, got "
                                             f"{' and '.join(kinds) or 'none'}")
                break
            keys, last, in_shape = ("ops", index, kinds[0]), index == len(m.ops) - 1, (n, height, width, channels)
            kind = OPS[kinds[0]]
            if m.dtype == "uint8" and not kind.UINT8:
                usable = [key for key, k in OPS.items() if k.UINT8]
                self.problem(keys, f"expected {', '.join(usable[:-1])} or {usable[-1]} ops with dtype uint8 (a "
                                   f"quantized {kinds[0]} is not generated yet), got {kinds[0]}")
                break
            fields = kind.check(self, keys, getattr(op_model, kinds[0]), last, input_layout, in_shape)
            if fields is None:
                break
            op = Conv2d(**fields)
            ops.append(op)
            _, height, width, channels = OPS[op.kind].out_shape(op, in_shape)
            self.shapes.append((n, height, width, channels))
        read = {op.residual for op in ops} | {op.scale_by for op in ops}
        for side in self.sides if not self.problems else ():  # (an op refused may have named it)
            if side.name not in read:
                self.problem(("side_inputs", side.name), f"expected a side input an op's residual or mul names; no "
                                                         f"op reads {side.name!r}")
        if m.source is not None and set(m.source.sides) != set(m.side_inputs):
            self.problem(("source", "sides") if m.source.sides else ("source",),
                         f"expected the ONNX tensor of each side input ({', '.join(m.side_inputs) or 'none'}), got "
                         f"{', '.join(m.source.sides) or 'none'}")
        schedule = schedule_config.schedule(self, ops, (height, width))
        self.targets(m)
        if self.problems:
            raise ConfigError(sorted(self.problems, key=lambda p: (p.line, p.column)))
        assert input_layout is not None and schedule is not None
        return Config(name=m.name, path=self.path, dtype=m.dtype, input_shape=shape, input_layout=input_layout,
                      ops=tuple(ops), schedule=schedule, targets=tuple(dict.fromkeys(m.targets)), quant=m.quant,
                      options={t.name: getattr(m, t.name) for t in self.catalog if t.options is not None},
                      source=m.source, side_inputs=self.sides,
                      channels_last_caches=bool(m.targets) and all(
                          t.channels_last_caches for t in self.catalog if t.name in m.targets),
                      channel_striped_inputs=bool(m.targets) and all(  # a GPU's kernel per op reads no cache
                          t.channel_striped_inputs or t.loop_orders is None for t in self.catalog if t.name in m.targets),
                      in_place_filter_layout=_shared({t.dense_filter_layout for t in self.catalog
                                                      if t.name in m.targets}),
                      marks={key_text(k): (v.line, v.column) for k, v in self.document.value_marks.items() if k})

    def side_inputs(self, m: M.ConfigModel) -> tuple[SideInput, ...]:
        sides = []
        for name, side in m.side_inputs.items():
            keys = ("side_inputs", name)
            shape = self.shape((*keys, "shape"), side.shape, side.layout)
            if not self.fits((*keys, "shape"), shape, f"side input {name!r}"):
                continue
            layout = self.layout((*keys, "layout"), side.layout, ACTIVATION_DIMS, shape)
            quantized = m.dtype == "uint8"
            for key in ("scale", "zero_point"):
                if quantized and getattr(side, key) is None:
                    self.problem(keys, f"expected {key}: with dtype uint8 (the side input's quantization: real = "
                                       f"scale * (q - zero_point)), got none")
                elif not quantized and getattr(side, key) is not None:
                    self.problem((*keys, key), f"expected {key} only with dtype uint8, got {m.dtype}")
            if layout is not None:
                sides.append(SideInput(name=name, shape=shape, layout=layout, scale=side.scale,
                                       zero_point=side.zero_point))
        return tuple(sides)

    def targets(self, m: M.ConfigModel) -> None:
        known = {t.name: t for t in self.catalog}
        for index, name in enumerate(m.targets):
            if name not in known:
                hint = difflib.get_close_matches(name, list(known), n=1)
                self.problem(("targets", index), f"unknown target {name!r}" + (
                    f" (did you mean {hint[0]!r}?)" if hint else f" (expected one of: {', '.join(known)})"))
            elif m.dtype not in known[name].dtypes:
                self.problem(("dtype",), f"target {name!r} supports dtype {', '.join(known[name].dtypes)}, "
                                         f"got {m.dtype!r}")

    def window(self, keys: tuple, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
               pad_spec: PadSpec, in_shape: tuple[int, int, int, int]
               ) -> tuple[tuple[int, int, int, int], tuple[int, int]] | None:
        """(pad, the output's rows and columns) of a sliding window over the input, or None after a problem."""
        span = ((kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1)
        n, height, width, channels = in_shape
        pad = self.padding((*keys, "pad"), pad_spec, span, stride, (height, width))
        padded = (height + pad[0] + pad[2], width + pad[1] + pad[3])
        if span[0] > padded[0] or span[1] > padded[1]:
            self.problem((*keys, "kernel"), f"a {kernel[0]}x{kernel[1]} kernel with dilation {list(dilation)} spans "
                                            f"{span[0]}x{span[1]} pixels but the padded input is only "
                                            f"{padded[0]}x{padded[1]}")
            return None
        for axis, name in enumerate(("rows", "columns")):
            if stride[axis] > padded[axis]:
                self.problem((*keys, "stride"), f"expected a stride of at most {padded[axis]} (the padded input's "
                                                f"{name}), got {stride[axis]}")
                return None
        return pad, ((padded[0] - span[0]) // stride[0] + 1, (padded[1] - span[1]) // stride[1] + 1)

    def filter_layout(self, keys: tuple, c: Conv2dModel, filter_shape: tuple[int, int, int, int]
                      ) -> tuple[Layout | None, str]:
        """A conv's filter layout (its own, else the one its targets' kernels read for the dtype) and the targets
        that chose it ("" when the config did)."""
        needed = (None if "filter_layout" in c.model_fields_set
                  else schedule_config.target_filter_layout(self.catalog, self.model))
        filter_spec, filter_layout_by = needed or (c.filter_layout, "")
        return self.layout((*keys, "filter_layout"), filter_spec, FILTER_DIMS, filter_shape), filter_layout_by

    def activation(self, keys: tuple, spec: Any) -> epilogue_config.Activation:
        act = epilogue_config.activation(self.problem, keys, spec)
        epilogue_config.check_computed(self.problem, keys, act, [t for t in self.catalog if t.name in self.model.targets],
                                       self.model.dtype)
        return act

    def residual(self, keys: tuple, spec: str | int | None, stride: tuple[int, int],
                 out_shape: tuple[int, int, int, int]) -> int | str | None:
        """What an op's residual adds (config/epilogue.py): keys end in its index, ("ops", index, kind, "residual")."""
        return epilogue_config.residual(self.problem, keys, spec, keys[1], self.shapes,
                                        [*(op.stride for op in self.ops), stride], out_shape,
                                        {side.name: side.shape for side in self.sides})

    def output_layout(self, keys: tuple, spec: LayoutSpec | None, last: bool, input_layout: Layout | None,
                      out_shape: tuple[int, int, int, int]) -> Layout | None:
        """The layout of an op's output: its own output_layout, output.layout for the last op, else the input's."""
        if spec is not None:
            return self.layout((*keys, "output_layout"), spec, ACTIVATION_DIMS, out_shape)
        if last:
            return self.layout(("output", "layout"), self.model.output.layout, ACTIVATION_DIMS, out_shape)
        if input_layout is not None:  # the intermediate tensor keeps the input's physical layout
            try:
                input_layout.bind(out_shape).check_injective()
            except LayoutError as error:
                self.problem(("input", "layout"), f"as the layout of ops[{keys[1]}]'s output: {error}")
                return None
        return input_layout

    def padding(self, keys: tuple, spec: PadSpec, span: tuple[int, int], stride: tuple[int, int],
                size: tuple[int, int]) -> tuple[int, int, int, int]:
        if spec == "valid":
            return (0, 0, 0, 0)
        if spec == "same":
            # TensorFlow's SAME: output = ceil(input / stride), the odd pixel of padding goes last.
            totals = [max((math.ceil(n / s) - 1) * s + k - n, 0) for n, s, k in zip(size, stride, span)]
            return (totals[0] // 2, totals[1] // 2, totals[0] - totals[0] // 2, totals[1] - totals[1] // 2)
        what = Conv2dModel.model_fields["pad"].description
        values = self.positive(keys, spec, what, minimum=0)
        if len(values) == 1:
            return (values[0],) * 4
        if len(values) == 2:
            return (values[0], values[1], values[0], values[1])
        return values  # type: ignore[return-value]
