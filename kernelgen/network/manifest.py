"""Network manifests (`network.yaml`, written by `kernelgen import`) -> a frozen `Network`.

A manifest says how a whole model runs as kernelgen's kernels: its inputs and outputs, every tensor that crosses a
step boundary (by its ONNX name, with shape, dtype, layout and, when quantized, scale and zero point), and the steps
in execution order: a kernel (a config beside the manifest) or a host step (ONNX nodes kernelgen does not generate,
run by onnxruntime on the extracted subgraph). Weights stay in the model; the manifest names it.

Checked like configs: YAML and schema problems at their line and column, then meaning: the model file exists, each
step reads only tensors an earlier step (or the network's input) produced, no cycle, each kernel's config loads and
its input and output agree with the tensors it is wired to in shape and dtype. Every problem is a ConfigError
(exit 2) naming the manifest's line.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Callable, Literal, Union

from pydantic import Field, ValidationError, conlist

from ..config import Config
from .channel_checks import check_channel_step
from .resize import COORDINATES, MODES, ROUNDINGS, Resize, check_resize_step
from ..config.model import Name, Scale, StrictModel, ZeroPoint, Count, LayoutText
from ..errors import ConfigError, ConfigProblem
from ..files import display_path, read_head
from ..layout import ACTIVATION_DIMS, LayoutError, parse_layout
from ..config.schema_errors import key_text, schema_problems
from ..config.yamlmarks import MAX_BYTES, MarkedDocument, YamlProblem, decode, load

TensorName = Annotated[str, Field(strict=True, min_length=1, max_length=4096)]
NodeName = Annotated[str, Field(strict=True, min_length=1, max_length=4096)]
DTYPES = ("float32", "float16", "uint8", "int8", "int32", "int64")


class TensorModel(StrictModel):
    shape: conlist(Count, min_length=1, max_length=8) = Field(description="the tensor's ONNX shape (NCHW for images)")
    dtype: Literal[DTYPES] = Field(description=f"one of: {', '.join(DTYPES)}")
    layout: Union[LayoutText, None] = Field(default=None, description="the layout kernels hold it in (the config's "
                                                                      "input or output layout); absent: ONNX's own")
    scale: Union[Scale, None] = Field(default=None, description="a positive number: the quantized tensor's scale")
    zero_point: Union[ZeroPoint, None] = Field(default=None, description="an int 0..255: its zero point")


class SliceModel(StrictModel):
    start: Annotated[int, Field(strict=True, ge=0)] = Field(description="the first channel taken")
    stop: Annotated[int, Field(strict=True, ge=1)] = Field(description="one past the last channel taken")


class ShuffleModel(StrictModel):
    groups: Annotated[int, Field(strict=True, ge=1)] = Field(description="g: output channel j*g + i is input channel "
                                                                         "i*(C/g) + j")


class ResizeModel(StrictModel):
    mode: Literal[MODES] = Field(description="'linear' (bilinear over rows and columns) or 'nearest'")
    coordinates: Literal[COORDINATES] = Field(
        description="'half_pixel', 'pytorch_half_pixel', 'align_corners' or 'asymmetric': how an output index maps "
                    "back to the input (ONNX's coordinate_transformation_mode)")
    rounding: Literal[ROUNDINGS] = Field(
        default="round_prefer_floor", description="'round_prefer_floor', 'round_prefer_ceil', 'floor' or 'ceil': the "
                                                  "input index a nearest resize reads (ONNX's nearest_mode)")
    scales: conlist(Annotated[float, Field(strict=False, gt=0)], min_length=2, max_length=2) = Field(
        description="[rows, columns]: the model's scales, or output size over input size")


class StepModel(StrictModel):
    kernel: Union[Name, None] = Field(default=None, description="a config name: <name>.yaml beside the manifest")
    host: Union[conlist(NodeName, min_length=1), None] = Field(
        default=None, description="a list of ONNX node names run by onnxruntime")
    convert: Union[Literal["quantize", "dequantize"], None] = Field(
        default=None, description="'quantize' or 'dequantize': ONNX's QuantizeLinear or DequantizeLinear of one tensor "
                                  "at the uint8 side's scale and zero point, run by kernelgen (a quantized network's "
                                  "float input and output)")
    slice: Union[SliceModel, None] = Field(
        default=None, description="{start, stop}: ONNX's Slice of channels start..stop-1 of one NCHW image, run by "
                                  "kernelgen as a copy (ShuffleNetV2's split)")
    shuffle: Union[ShuffleModel, None] = Field(
        default=None, description="{groups}: the channel shuffle ONNX spells Reshape [N, g, C/g, H, W], Transpose "
                                  "(0, 2, 1, 3, 4), Reshape [N, C, H, W], run by kernelgen as a copy")
    concat: Union[Literal["channels"], None] = Field(
        default=None, description="'channels': ONNX's Concat along axis 1 of NCHW images, run by kernelgen: the "
                                  "inputs' channels one after another in the output, as a copy (equal dtypes, and a "
                                  "uint8 network's equal scales and zero points)")
    resize: Union[ResizeModel, None] = Field(
        default=None, description="{mode, coordinates, rounding, scales}: ONNX's Resize of one float32 NCHW image's "
                                  "rows and columns, run by kernelgen (network/resize.py)")
    ops: Union[conlist(Annotated[str, Field(strict=True)]), None] = Field(
        default=None, description="the host nodes' ONNX op types (for the reader)")
    inputs: conlist(TensorName, min_length=1) = Field(description="a list of tensor names the step reads")
    outputs: conlist(TensorName, min_length=1) = Field(description="a list of tensor names the step writes")


class NetworkModel(StrictModel):
    network: Name = Field(description="the network's name (names network.c's functions)")
    model: Annotated[str, Field(strict=True, min_length=1, max_length=4096)] = Field(
        description="the ONNX model file, relative to this manifest's folder")
    inputs: conlist(TensorName, min_length=1) = Field(description="a list of the model's input tensors")
    outputs: conlist(TensorName, min_length=1) = Field(description="a list of the model's output tensors")
    tensors: dict[TensorName, TensorModel] = Field(description="{name: {shape, dtype, layout, ...}}")
    steps: conlist(StepModel, min_length=1) = Field(description="a list of steps in execution order")


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: str | None
    scale: float | None = None
    zero_point: int | None = None

    @property
    def nbytes(self) -> int:
        size = {"float32": 4, "float16": 2, "uint8": 1, "int8": 1, "int32": 4, "int64": 8}[self.dtype]
        count = 1
        for extent in self.shape:
            count *= extent
        return count * size


@dataclass(frozen=True, slots=True)
class Step:
    index: int  # 0-based position in `steps`
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    config: Config | None = None  # a kernel step's config
    nodes: tuple[str, ...] = ()  # a host step's ONNX nodes
    op_types: tuple[str, ...] = ()
    convert: str = ""  # "quantize" or "dequantize": a conversion kernelgen runs (network/execute.py convert)
    concat: bool = False  # the inputs' channels one after another: a copy kernelgen runs (channel_copy.py)
    slice: tuple[int, int] | None = None  # (start, stop): channels start..stop-1 of the input, a copy
    shuffle: int = 0  # groups: the channel shuffle, a copy
    resize: Resize | None = None  # ONNX's Resize of rows and columns, computed by kernelgen (network/resize.py)

    @property
    def is_kernel(self) -> bool:
        return self.config is not None

    @property
    def kind(self) -> str:
        """kernel, convert, concat, slice, shuffle, resize (what kernelgen runs) or host (what onnxruntime runs)."""
        return "kernel" if self.config is not None else "convert" if self.convert else \
            "concat" if self.concat else "slice" if self.slice is not None else "shuffle" if self.shuffle else \
            "resize" if self.resize is not None else "host"

    @property
    def moves_channels(self) -> bool:
        """A concat, slice or shuffle: channels copied, nothing computed."""
        return self.kind in ("concat", "slice", "shuffle")

    @property
    def is_host(self) -> bool:
        return self.kind == "host"

    @property
    def label(self) -> str:
        if self.config is not None:
            return self.config.name
        if self.convert:
            return self.convert
        if self.moves_channels or self.resize is not None:
            return self.kind
        return "host " + "+".join(dict.fromkeys(self.op_types or ("nodes",)))


@dataclass(frozen=True)
class Network:
    name: str
    path: str  # the manifest as given
    model: Path  # the ONNX file
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tensors: dict[str, Tensor]
    steps: tuple[Step, ...]
    marks: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def kernels(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.is_kernel)

    def problem(self, key: str, message: str) -> ConfigError:
        line, column = self.marks.get(key) or self.marks.get(key.rsplit(".", 1)[0], (1, 1))
        return ConfigError([ConfigProblem(self.path, line, column, key, message)])


ConfigLoader = Callable[[Path], Config]


def is_manifest(path: str | Path) -> bool:
    """Whether a YAML file is a network manifest (a top-level `network:` key) rather than a config."""
    try:
        head = read_head(path, 64 * 1024).decode("utf-8", "replace")
    except OSError:
        return False
    return any(line.startswith("network:") for line in head.splitlines())


def load_network(path: str | Path, load_config: ConfigLoader) -> Network:
    """Read and check a manifest; `load_config` loads each kernel's config (the registry's targets)."""
    path_text = display_path(path)
    try:
        text = decode(read_head(path, MAX_BYTES))
        document = load(text)
    except OSError as error:
        raise ConfigError([ConfigProblem(path_text, 1, 1, "", f"cannot read manifest: {error.strerror}")]) from None
    except YamlProblem as problem:
        raise ConfigError([ConfigProblem(path_text, problem.mark.line, problem.mark.column, "",
                                         problem.message)]) from None
    if not isinstance(document.data, dict):
        raise ConfigError([ConfigProblem(path_text, 1, 1, "", "expected a mapping of manifest keys (network, model, "
                                                              "inputs, outputs, tensors, steps)")])
    try:
        model = NetworkModel.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(schema_problems(error, document, path_text, NetworkModel)) from None
    return _Checker(model, document, path_text, Path(path), load_config).build()


class _Checker:
    def __init__(self, model: NetworkModel, document: MarkedDocument, path_text: str, path: Path,
                 load_config: ConfigLoader) -> None:
        self.model, self.document, self.path_text, self.path = model, document, path_text, path
        self.load_config = load_config
        self.problems: list[ConfigProblem] = []

    def fail(self, keys: tuple, message: str, *, key: bool = False) -> None:
        mark = self.document.mark(keys, key=key)
        self.problems.append(ConfigProblem(self.path_text, mark.line, mark.column, key_text(keys), message))

    def build(self) -> Network:
        m = self.model
        model_file = self.path.parent / m.model
        if not model_file.is_file():
            self.fail(("model",), f"no such file: {display_path(model_file)} (the model, relative to the manifest's "
                                  f"folder)")
        tensors = {name: Tensor(name, tuple(t.shape), t.dtype, t.layout, t.scale, t.zero_point)
                   for name, t in m.tensors.items()}
        for name, tensor in tensors.items():
            self._layout(tensor)
        for where in ("inputs", "outputs"):
            for k, name in enumerate(getattr(m, where)):
                if name not in tensors:
                    self.fail((where, k), f"{name!r} is not in tensors:")
        for k, name in enumerate(m.outputs):
            if name in m.inputs:  # network.c writes each output through the step producing it: none produces this
                self.fail(("outputs", k), f"{name!r} is the network input: an output is written by a step (a copy "
                                          f"of the input is the caller's)")
        steps = [self._step(k, s, tensors) for k, s in enumerate(m.steps)]
        if not any(s.kernel is not None for s in m.steps):
            self.fail(("steps",), "expected at least one kernel step (kernel: a config name): with host, convert and "
                                  "copy steps only, kernelgen has nothing to generate or check (onnxruntime runs the "
                                  "model)")
        self._order(steps)
        if self.problems:
            raise ConfigError(self.problems)
        marks = {key_text(k): (v.line, v.column) for k, v in self.document.value_marks.items() if k}
        return Network(name=m.network, path=self.path_text, model=model_file, inputs=tuple(m.inputs),
                       outputs=tuple(m.outputs), tensors=tensors, steps=tuple(steps), marks=marks)

    def _layout(self, tensor: Tensor) -> None:
        """A 4-D tensor's layout must be one the layout engine reads for an NCHW image (the arena sizes it by it)."""
        if tensor.layout is None or len(tensor.shape) != 4:
            return
        n, c, h, w = tensor.shape
        try:
            parse_layout(tensor.layout, ACTIVATION_DIMS).bind((n, h, w, c))
        except LayoutError as error:
            self.fail(("tensors", tensor.name, "layout"), f"expected a layout of an NCHW image (NCHW, NHWC, "
                                                          f"nhwc-8h8w32c, ...), got {tensor.layout!r}: {error}")

    def _step(self, k: int, s: StepModel, tensors: dict[str, Tensor]) -> Step:
        if sum(x is not None for x in (s.kernel, s.host, s.convert, s.concat, s.slice, s.shuffle, s.resize)) != 1:
            self.fail(("steps", k), "expected exactly one of kernel: (a config name), host: (ONNX nodes), convert: "
                                    "(quantize or dequantize), concat: channels, slice: {start, stop}, shuffle: "
                                    "{groups} or resize: {mode, coordinates, scales}")
        for where in ("inputs", "outputs"):
            for i, name in enumerate(getattr(s, where)):
                if name not in tensors:
                    self.fail(("steps", k, where, i), f"{name!r} is not in tensors: (every tensor a step reads or "
                                                      f"writes is listed there)")
        config = None
        if s.kernel is not None:
            file = self.path.parent / f"{s.kernel}.yaml"
            if not file.is_file():
                self.fail(("steps", k, "kernel"), f"no config {display_path(file)} beside the manifest")
            else:
                try:
                    config = self.load_config(file)
                except ConfigError as error:
                    self.problems += error.problems
                    config = None
                if config is not None:
                    self._wiring(k, s, config, tensors)
        if s.convert is not None:
            self._conversion(k, s, tensors)
        kind = "concat" if s.concat else "slice" if s.slice else "shuffle" if s.shuffle else ""
        if kind and all(t in tensors for t in (*s.inputs, *s.outputs)):
            check_channel_step(kind, k, [tensors[t] for t in s.inputs], [tensors[t] for t in s.outputs], self.fail,
                               start=s.slice.start if s.slice else 0, stop=s.slice.stop if s.slice else 0,
                               groups=s.shuffle.groups if s.shuffle else 0)
        resize = None
        if s.resize is not None:
            resize = Resize(mode=s.resize.mode, coordinates=s.resize.coordinates, rounding=s.resize.rounding,
                            scales=(float(s.resize.scales[0]), float(s.resize.scales[1])))
            if all(t in tensors for t in (*s.inputs, *s.outputs)):
                check_resize_step(k, resize, [tensors[t] for t in s.inputs], [tensors[t] for t in s.outputs],
                                  self.fail)
        return Step(index=k, inputs=tuple(s.inputs), outputs=tuple(s.outputs), config=config,
                    nodes=tuple(s.host or ()), op_types=tuple(s.ops or ()), convert=s.convert or "",
                    concat=s.concat is not None, slice=(s.slice.start, s.slice.stop) if s.slice else None,
                    shuffle=s.shuffle.groups if s.shuffle else 0, resize=resize)

    def _conversion(self, k: int, s: StepModel, tensors: dict[str, Tensor]) -> None:
        """quantize: one float32 tensor to one uint8 tensor of the same shape (or [N, C] of an [N, C, 1, 1] image:
        the same bytes) with a scale and zero point; dequantize the other way."""
        if len(s.inputs) != 1 or len(s.outputs) != 1:
            self.fail(("steps", k), f"expected one input and one output for convert: {s.convert}, got "
                                    f"{len(s.inputs)} and {len(s.outputs)}")
            return
        source, result = tensors.get(s.inputs[0]), tensors.get(s.outputs[0])
        if source is None or result is None:
            return
        quantized, where = (result, ("outputs", 0)) if s.convert == "quantize" else (source, ("inputs", 0))
        real = source if s.convert == "quantize" else result
        if quantized.dtype != "uint8" or quantized.scale is None or quantized.zero_point is None:
            self.fail(("steps", k, *where), f"expected a uint8 tensor with a scale and zero point for convert: "
                                            f"{s.convert}, got {quantized.name!r} ({quantized.dtype})")
        if real.dtype != "float32":
            self.fail(("steps", k, "inputs" if s.convert == "quantize" else "outputs", 0),
                      f"expected a float32 tensor for convert: {s.convert}, got {real.name!r} ({real.dtype})")
        if source.shape != result.shape and _as_image(source.shape) != _as_image(result.shape):
            self.fail(("steps", k, "outputs", 0), f"shape mismatch: {list(source.shape)} in, {list(result.shape)} out "
                                                  f"(the same shape, or [N, C] of an [N, C, 1, 1] image)")

    def _wiring(self, k: int, s: StepModel, config: Config, tensors: dict[str, Tensor]) -> None:
        """A kernel reads its input, then its side inputs in the config's order, and writes one tensor: their shapes
        (ONNX NCHW) and dtypes must be the config's."""
        reads = 1 + len(config.side_inputs)
        if len(s.inputs) != reads or len(s.outputs) != 1:
            sides = f" and its {len(config.side_inputs)} side input(s)" if config.side_inputs else ""
            self.fail(("steps", k), f"kernel {config.name} reads {reads} tensor(s) (its input{sides}) and writes one "
                                    f"(got {len(s.inputs)} and {len(s.outputs)})")
            return
        out = output_shape(config)
        wanted = [("inputs", i, name, (n, c, h, w)) for i, (name, (n, h, w, c)) in enumerate(
            zip(s.inputs, [config.input_shape, *(side.shape for side in config.side_inputs)]))]
        for where, index, name, want in (*wanted, ("outputs", 0, s.outputs[0], (out[0], out[3], out[1], out[2]))):
            tensor = tensors.get(name)
            if tensor is None:
                continue
            if tensor.shape != want and not (want[2:] == (1, 1) and tensor.shape == want[:2]):  # [N, C]: 1x1
                self.fail(("steps", k, where, index), f"shape mismatch: {name!r} is {list(tensor.shape)} in tensors:, "
                                                  f"but kernel {config.name} {'reads' if where == 'inputs' else 'writes'}"
                                                  f" {list(want)} (NCHW)")
            if tensor.dtype != config.dtype:
                self.fail(("steps", k, where, index), f"dtype mismatch: {name!r} is {tensor.dtype}, kernel "
                                                  f"{config.name} takes {config.dtype}")

    def _order(self, steps: list[Step]) -> None:
        """Each step reads what the network's inputs or an earlier step produced; a later producer is a cycle or
        an order problem, and a tensor nobody produces is named."""
        producer: dict[str, int] = {}
        for step in steps:
            for i, name in enumerate(step.outputs):
                if name in producer or name in self.model.inputs:
                    self.fail(("steps", step.index, "outputs", i), f"{name!r} is already written by "
                                                                   f"{'the network input' if name in self.model.inputs else f'step {producer[name]}'}")
                producer.setdefault(name, step.index)
        for step in steps:
            for i, name in enumerate(step.inputs):
                if name in self.model.inputs:
                    continue
                if name not in producer:
                    self.fail(("steps", step.index, "inputs", i), f"no step produces {name!r} (and it is not a "
                                                                  f"network input)")
                elif producer[name] >= step.index:
                    later = producer[name]
                    cycle = _reaches(steps, producer, later, step.index)
                    self.fail(("steps", step.index, "inputs", i),
                              f"a cycle: step {step.index} reads {name!r} from step {later}, which depends on step "
                              f"{step.index}" if cycle else
                              f"{name!r} is written by step {later}, after this one (steps run in the listed order)")
        for k, name in enumerate(self.model.outputs):
            if name not in producer and name not in self.model.inputs:
                self.fail(("outputs", k), f"no step produces the network output {name!r}")


def _reaches(steps: list[Step], producer: dict[str, int], start: int, goal: int) -> bool:
    """Whether step `start` depends (through the tensors it reads) on step `goal`."""
    seen, stack = set(), [start]
    while stack:
        k = stack.pop()
        if k == goal:
            return True
        if k in seen:
            continue
        seen.add(k)
        stack += [producer[t] for t in steps[k].inputs if t in producer]
    return False


def output_shape(config: Config) -> tuple[int, int, int, int]:
    """The chain's output, logical NHWC, from each op's geometry (no planning)."""
    n, h, w, _ = config.input_shape
    for op in config.ops:
        (top, left, bottom, right), (span_h, span_w) = op.pad, op.span
        h = (h + top + bottom - span_h) // op.stride[0] + 1
        w = (w + left + right - span_w) // op.stride[1] + 1
    return n, h, w, config.ops[-1].out_channels


def _as_image(shape: tuple[int, ...]) -> tuple[int, ...]:
    """[N, C] as the [N, C, 1, 1] image whose bytes it is (a Flatten of a 1x1 image); other shapes as they are."""
    return (*shape, 1, 1) if len(shape) == 2 else shape
