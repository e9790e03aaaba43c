"""Reading an ONNX model: its constant tensors, static shapes, who consumes what, and what a Conv node means in
kernelgen's terms (activations: activations.py). Shared by `kernelgen import` and the onnxruntime oracle.

The `onnx` package is an optional dependency (`pip install 'kernelgen[onnx]'`): imported here, lazily.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import KernelgenError
from ..files import FileRefused, read_regular
from .checks import conv_problem
from .short_names import shorten_long_names
from .int8_activations import uint8_activations
from .live_taps import trim
from .static_shapes import fold_static_shapes, stored_constants

ONNX_EXTRA = "pip install 'kernelgen[onnx]'"
# protobuf's limit on one serialized message: an ONNX file (weights beyond it are external data files) is smaller
MAX_MODEL_BYTES = 2 << 30


class OnnxError(KernelgenError):
    """An ONNX file kernelgen cannot read (or the onnx package is missing): bad input, exit 2."""

    exit_code = 2


def onnx_module() -> Any:
    try:
        import onnx
    except ImportError:
        raise OnnxError(f"reading ONNX models needs the onnx package: {ONNX_EXTRA}") from None
    return onnx


def node_id(node) -> str:
    """How configs name a node: its name, or its first output's name when it has none. read_graph makes these
    unique (_distinct_ids)."""
    return node.name or node.output[0]


@dataclass(frozen=True, slots=True)
class ConvNode:
    """A Conv node's attributes as kernelgen's conv2d keys."""

    weight: str
    bias: str | None
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right (ONNX's pads order for 2-D)
    dilation: tuple[int, int]
    groups: int
    kind: str = "conv2d"  # or maxpool, avgpool, global_avgpool (no weight: "")
    count_include_pad: bool = False  # avgpool
    trans_b: bool | None = None  # a Gemm's weight B: [K, C] (True) or [C, K] (False); None: a Conv's OIHW
    scale_by: str | None = None  # mul: the [N, C, 1, 1] tensor each channel is multiplied by (a side input)
    # the model filter's rows r0..r1 and columns c0..c1 a Conv keeps when its outer taps read padding alone
    # (live_taps.py; a float one here, a quantized one in quant.py); None: all of them
    taps: tuple[int, int, int, int] | None = None


@dataclass(frozen=True)
class Graph:
    path: Path
    model: Any  # onnx.ModelProto, shapes inferred
    nodes: tuple  # graph order (topological, as ONNX requires)
    constants: dict[str, np.ndarray]  # initializers and Constant node outputs
    shapes: dict[str, tuple[int, ...]]  # static shapes only (a symbolic batch dimension read as 1)
    consumers: dict[str, tuple[int, ...]]  # tensor -> indices of the nodes reading it
    outputs: frozenset[str]  # the graph's outputs
    producers: dict[str, int] = field(default_factory=dict)  # tensor -> index of the node computing it
    uint8_activations: int = 0  # int8 activations held as uint8, + 128 (int8_activations.py)

    def sole_consumer(self, tensor: str) -> int | None:
        """The one node reading `tensor`, when exactly one does and it is not a graph output."""
        readers = self.consumers.get(tensor, ())
        return readers[0] if len(readers) == 1 and tensor not in self.outputs else None

    def made_by(self, tensor: str) -> str:
        """Where a tensor comes from, for messages: the node computing it, or a graph input."""
        if tensor not in self.producers:
            return "a graph input"
        maker = self.nodes[self.producers[tensor]]
        return f"computed by {maker.op_type} node {node_id(maker)!r}"

    def computes_constant(self, index: int) -> bool:
        """A node whose every output is a constant of the model (Constant, Identity of a constant): no step."""
        return all(name in self.constants for name in self.nodes[index].output)

    def constant_sources(self, names: set[str]) -> tuple[list, list]:
        """The nodes (Constant, Identity of a constant) and initializers that give the constants among `names`, for
        a model cut out of this one: (nodes in graph order, initializers)."""
        wanted, nodes = set(names), set()
        for index in reversed(range(len(self.nodes))):  # consumers before producers: follow Identity chains back
            node = self.nodes[index]
            if self.computes_constant(index) and wanted & set(node.output):
                nodes.add(index)
                wanted |= {i for i in node.input if i}
        initializers = [t for t in self.model.graph.initializer if t.name in wanted]
        return [self.nodes[i] for i in sorted(nodes)], initializers

    def conv(self, index: int) -> ConvNode | str:
        """The float Conv node at `index`, or why kernelgen cannot take it."""
        node = self.nodes[index]
        weight = node.input[1] if len(node.input) > 1 else ""
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        for role, name in (("weight", weight), ("bias", bias)):
            if name is not None and name not in self.constants:
                return f"its {role} {name!r} is not a constant of the model ({self.made_by(name)})"
        if self.constants[weight].dtype != np.float32:
            return f"{self.constants[weight].dtype} weights (float32 models only; quantized ones come as " \
                   f"QLinearConv or DequantizeLinear -> Conv -> QuantizeLinear)"
        conv = self.conv_geometry(index, node.input[0], weight, bias)
        if isinstance(conv, str):
            return conv
        cut = trim(conv.kernel, conv.stride, conv.dilation, conv.pad, self.shapes[node.input[0]][2:4])
        return conv if cut is None else replace(conv, kernel=cut.kernel, pad=cut.pad, dilation=cut.dilation,
                                                 taps=cut.taps)

    def conv_geometry(self, index: int, source: str, weight: str, bias: str | None) -> ConvNode | str:
        """Kernel, stride, pads, dilation and groups of the conv node at `index` (Conv or QLinearConv)."""
        node = self.nodes[index]
        attrs = _attributes(node)
        w = self.constants[weight]
        if w.ndim != 4:
            return f"a {w.ndim - 2}-D convolution (kernelgen has conv2d)"
        in_shape = self.shapes.get(source)
        if in_shape is None or len(in_shape) != 4:
            return "its input has no static NCHW shape"
        bias_shape = tuple(self.constants[bias].shape) if bias in self.constants else None
        problem = conv_problem(attrs, tuple(int(d) for d in w.shape), bias_shape, in_shape)
        if problem:  # a node onnxruntime would refuse: not imported, with its reason
            return problem
        kernel = (int(w.shape[2]), int(w.shape[3]))
        stride = tuple(attrs.get("strides", (1, 1)))
        dilation = tuple(attrs.get("dilations", (1, 1)))
        groups = int(attrs.get("group", 1))
        span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
        auto_pad = attrs.get("auto_pad", b"NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
        if auto_pad in ("NOTSET", "VALID"):
            pads = tuple(attrs.get("pads", (0, 0, 0, 0))) if auto_pad == "NOTSET" else (0, 0, 0, 0)
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            # ONNX: output = ceil(input / stride); the odd pixel of the total goes after (UPPER) or before
            before, after = [], []
            for extent, s, sp in zip(in_shape[2:], stride, span):
                total = max((math.ceil(extent / s) - 1) * s + sp - extent, 0)
                small = total // 2
                before.append(small if auto_pad == "SAME_UPPER" else total - small)
                after.append(total - before[-1])
            pads = (*before, *after)
        else:
            return f"auto_pad {auto_pad}"
        return ConvNode(weight=weight, bias=bias, out_channels=int(w.shape[0]), kernel=kernel,
                        stride=(int(stride[0]), int(stride[1])), pad=tuple(int(p) for p in pads),
                        dilation=(int(dilation[0]), int(dilation[1])), groups=groups)


def read_graph(path: str | Path) -> Graph:
    onnx = onnx_module()
    from onnx import shape_inference

    path = Path(path)
    data = _model_bytes(path)
    try:
        model = onnx.load_model(io.BytesIO(data), format="protobuf", load_external_data=False)
        onnx.load_external_data_for_model(model, str(path.parent))  # weights in files beside it, if any
    except Exception as error:  # protobuf's DecodeError and friends: not a model
        raise OnnxError(f"{path}: not an ONNX model ({type(error).__name__}: {error})") from None
    if not model.HasField("graph"):  # protobuf reads any bytes that hold no fields (an empty file) as a model
        raise OnnxError(f"{path}: not an ONNX model ({'an empty file' if not path.stat().st_size else 'no graph'})")
    shorten_long_names(model)
    rebiased = uint8_activations(model)
    try:
        model = shape_inference.infer_shapes(model)
    except Exception as error:
        raise OnnxError(f"{path}: ONNX shape inference failed: {error}") from None
    # shape arithmetic made constants: then infer again, with the sizes it feeds known
    if any(node.op_type == "Shape" for node in model.graph.node) and \
            fold_static_shapes(model, _static_shapes(model.graph, batch_of_one=False)):
        try:
            model = shape_inference.infer_shapes(model)
        except Exception as error:
            raise OnnxError(f"{path}: ONNX shape inference failed: {error}") from None
    graph = model.graph
    _distinct_ids(graph.node)
    constants = stored_constants(graph)
    for node in graph.node:  # exporters share one initializer between layers through Identity nodes
        if node.op_type == "Identity" and node.input[0] in constants:
            constants[node.output[0]] = constants[node.input[0]]
    shapes = _static_shapes(graph)
    consumers: dict[str, list[int]] = {}
    for index, node in enumerate(graph.node):
        for name in dict.fromkeys(node.input):
            if name:
                consumers.setdefault(name, []).append(index)
    return Graph(path=path, model=model, nodes=tuple(graph.node), constants=constants, shapes=shapes,
                 consumers={k: tuple(v) for k, v in consumers.items()},
                 producers={o: i for i, node in enumerate(graph.node) for o in node.output if o},
                 outputs=frozenset(o.name for o in graph.output), uint8_activations=rebiased)


def _static_shapes(graph, batch_of_one: bool = True) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape that inference made static (a symbolic batch "N" read as one image, unless not
    `batch_of_one`: shape arithmetic is folded only where the model itself fixes every extent)."""
    shapes = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        dims = info.type.tensor_type.shape.dim
        if info.type.tensor_type.HasField("shape") and dims:
            values = [d.dim_value if d.HasField("dim_value") else None for d in dims]
            if values[0] is None and batch_of_one:  # a symbolic batch ("N"): one image
                values[0] = 1
            if all(v is not None for v in values):
                shapes[info.name] = tuple(int(v) for v in values)
    return shapes


def _model_bytes(path: Path) -> bytes:
    """The bytes of a model file, read only when it is a regular file no larger than an ONNX file can be
    (files.read_regular: a symlink to /dev/zero, a FIFO or a folder is refused before a byte is read)."""
    try:
        return read_regular(path, MAX_MODEL_BYTES, "an ONNX model",
                            "an ONNX file can be (protobuf's limit; larger weights live in external data files)")
    except FileRefused as error:
        raise OnnxError(f"{path}: {error}") from None


def _distinct_ids(nodes) -> None:
    """Names each node whose id another node shares `<id>_<k>` (k = 2, 3, ... unused), the first keeping it: node
    names are optional and, in the wild, repeated (and a name may equal an unnamed node's output), yet
    source.nodes, host steps and --cut pick nodes by id. Every reader of a model goes through read_graph, so the
    importer, the oracle and the host steps agree on the new names."""
    ids = [node_id(n) for n in nodes]
    used, seen = set(ids), set()
    for node, ident in zip(nodes, ids):
        if ident in seen:
            k = 2
            while f"{ident}_{k}" in used:
                k += 1
            node.name = f"{ident}_{k}"
            used.add(node.name)
        seen.add(ident)


def _attributes(node) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}
