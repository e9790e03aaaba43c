"""The float forms of the ONNX nodes that start an op of a float chain (graph.ConvNode): a Conv, MaxPool,
AveragePool and GlobalAveragePool as pools, a Gemm on a flattened image (the classifier) as the conv over its whole
window, a Mul by channel factors, and a BatchNormalization no conv absorbed as a 1x1 depthwise conv. Each *_op
function returns the op, or why kernelgen cannot take the node, or None when the node is not that op after all;
converters.py says which op type each one converts."""
from __future__ import annotations

import numpy as np

from .graph import ConvNode, Graph, _attributes
from .group_config import Op

def pool(graph: Graph, index: int) -> ConvNode | str:
    node = graph.nodes[index]
    shape = graph.shapes.get(node.input[0])
    if shape is None or len(shape) != 4:
        return "its input has no static NCHW shape"
    if len(node.output) > 1 and node.output[1]:
        return "it also returns the argmax indices"
    _, channels, height, width = shape
    if node.op_type == "ReduceMean":  # MNASNet's x.mean([2, 3]): a global average pool, [N, C] or [N, C, 1, 1]
        why = not_spatial_mean(graph, node)
        if why is not None:
            return why
    if node.op_type in ("GlobalAveragePool", "ReduceMean"):
        return ConvNode(weight="", bias=None, out_channels=channels, kernel=(height, width), stride=(1, 1),
                        pad=(0, 0, 0, 0), dilation=(1, 1), groups=channels, kind="global_avgpool")
    attrs = _attributes(node)
    kernel = tuple(int(k) for k in attrs.get("kernel_shape", ()))
    stride = tuple(int(s) for s in attrs.get("strides", (1, 1)))
    pads = tuple(int(p) for p in attrs.get("pads", (0, 0, 0, 0)))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if len(kernel) != 2 or len(stride) != 2 or len(pads) != 4:
        return "not a 2-D pool"
    if auto_pad not in ("NOTSET", "VALID"):
        return f"auto_pad {auto_pad} (give explicit pads)"
    if auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    if int(attrs.get("ceil_mode", 0)):
        if node.op_type != "MaxPool":  # an average's divisor at the rounded-up edge is not a padding rule
            return "ceil_mode 1 (output sizes rounded up) on an AveragePool"
        extra = _ceil_padding(graph, node, (height, width), kernel, stride, pads)
        if isinstance(extra, str):
            return extra
        pads = (pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1])
    if tuple(attrs.get("dilations", (1, 1))) != (1, 1):
        return "dilated pooling"
    if min(kernel) < 1 or min(stride) < 1 or min(pads) < 0:
        return f"kernel {list(kernel)}, strides {list(stride)}, pads {list(pads)}: not a valid window"
    top, left, bottom, right = pads
    if max(top, bottom) >= kernel[0] or max(left, right) >= kernel[1]:
        return f"pads {list(pads)} as large as the {kernel[0]}x{kernel[1]} window"
    if kernel[0] > height + top + bottom or kernel[1] > width + left + right:
        return f"a {kernel[0]}x{kernel[1]} window over a padded {height + top + bottom}x{width + left + right} input"
    kind = "maxpool" if node.op_type == "MaxPool" else "avgpool"
    return ConvNode(weight="", bias=None, out_channels=channels, kernel=kernel, stride=stride, pad=pads,
                    dilation=(1, 1), groups=channels, kind=kind,
                    count_include_pad=bool(int(attrs.get("count_include_pad", 0))))


def _ceil_padding(graph: Graph, node, size: tuple[int, int], kernel: tuple, stride: tuple, pads: tuple
                  ) -> tuple[int, int] | str:
    """A MaxPool's ceil_mode as padding: the rows and columns past the bottom and right pads its rounded-up output
    reads (SqueezeNet's and GoogLeNet's 3x3 stride-2 pools). A max over a window reaching into the padding is the max
    of its positions in the input, as onnxruntime's is, so extra padding is the whole of ceil_mode. The output size is
    the model's own (shape inference)."""
    out = graph.shapes.get(node.output[0])
    if out is None or len(out) != 4 or not all(isinstance(d, int) for d in out[2:]):
        return "ceil_mode 1 with no static output shape"
    extra = tuple((o - 1) * s + k - (n + head + tail)
                  for o, s, k, n, head, tail in zip(out[2:], stride, kernel, size, pads[:2], pads[2:]))
    if min(extra) < 0:
        return f"ceil_mode 1: an output of {list(out[2:])} where rounding up gives no more than rounding down"
    return extra


def not_spatial_mean(graph: Graph, node) -> str | None:
    """Why a ReduceMean of an NCHW tensor is not a mean over its rows and columns (axes 2 and 3, in either sign, as an
    attribute or, from opset 18, a constant input); None when it is one."""
    attrs = _attributes(node)
    if len(node.input) > 1 and node.input[1]:
        given = graph.constants.get(node.input[1])
        if given is None:
            return "its axes are computed, not constant"
        axes = [int(a) for a in given.reshape(-1)]
    else:
        axes = [int(a) for a in attrs.get("axes", ())]
    if sorted(a % 4 for a in axes) != [2, 3]:
        return f"a mean over axes {axes}, not the rows and columns (2, 3)"
    return None


def flattened_gemm(graph: Graph, flatten: int) -> int | None:
    """The Gemm a Flatten of an [N, C, H, W] image feeds alone (the classifier after a global pool, 1x1; VGG's and
    AlexNet's after a 7x7 or 6x6 pool), or None."""
    node = graph.nodes[flatten]
    shape = graph.shapes.get(node.input[0])
    if node.op_type != "Flatten" or shape is None or len(shape) != 4:
        return None
    if int(_attributes(node).get("axis", 1)) != 1:
        return None
    reader = graph.sole_consumer(node.output[0])
    if reader is None or graph.nodes[reader].op_type != "Gemm" or graph.nodes[reader].input[0] != node.output[0]:
        return None
    return reader


def gemm(graph: Graph, index: int, channels: int, window: tuple[int, int] = (1, 1)) -> ConvNode | str:
    """A Gemm y = x B^T + c (or x B + c) on [N, channels * window] (a flattened image), as a conv over the whole
    window with B's rows as its filters."""
    node = graph.nodes[index]
    attrs = _attributes(node)
    weight = node.input[1]
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    for role, name in (("weight", weight), ("bias", bias)):
        if name is not None and name not in graph.constants:
            return f"its {role} {name!r} is not a constant of the model ({graph.made_by(name)})"
    if float(attrs.get("alpha", 1.0)) != 1.0 or float(attrs.get("beta", 1.0)) != 1.0:
        return "alpha or beta other than 1"
    if int(attrs.get("transA", 0)):
        return "transA 1"
    b = graph.constants[weight]
    trans_b = bool(int(attrs.get("transB", 0)))
    if b.ndim != 2 or b.dtype != np.float32:
        return f"a {b.dtype} weight of rank {b.ndim} (float32 [K, C] only)"
    k, c = b.shape if trans_b else b.shape[::-1]
    if c != channels * window[0] * window[1]:
        given = f"{channels} channels" if window == (1, 1) else f"{channels}x{window[0]}x{window[1]} values"
        return f"its weight {list(b.shape)} does not take the {given} it is given"
    if bias is not None and gemm_bias_problem(graph.constants[bias].shape, int(k)):
        return gemm_bias_problem(graph.constants[bias].shape, int(k))
    return ConvNode(weight=weight, bias=bias, out_channels=int(k), kernel=window, stride=(1, 1), pad=(0, 0, 0, 0),
                    dilation=(1, 1), groups=1, trans_b=trans_b)


def gemm_bias_problem(shape: tuple[int, ...], k: int) -> str:
    """Why a Gemm's bias C is not one value per output ("" when it is): ONNX broadcasts C to [N, K], so [K] and
    [1, K] are both one per output (the kernel's bias; the oracle reads either as [K]); a single value, or [N, K],
    is not."""
    if tuple(shape) in ((k,), (1, k)):
        return ""
    return f"a bias of shape {list(shape)} for {k} outputs (one per output: [{k}] or [1, {k}])"


def gemm_filter(b: np.ndarray, trans_b: bool, window: tuple[int, int] = (1, 1)) -> np.ndarray:
    """A Gemm's B as the OIHW filter of the conv it is (over a flattened image's whole window: a row of B holds
    channel-major C, H, W values, as Flatten orders an NCHW image)."""
    rows = np.ascontiguousarray(b if trans_b else b.T)
    return rows.reshape(rows.shape[0], rows.shape[1] // (window[0] * window[1]), *window)


FloatOp = tuple[list[int], int, ConvNode]  # (the nodes before the op's own, its node, the op)


def conv_op(graph: Graph, index: int, source: str | None) -> FloatOp | str:
    conv = graph.conv(index)
    return conv if isinstance(conv, str) else ([], index, conv)


def pool_op(graph: Graph, index: int, source: str | None) -> FloatOp | str:
    pooled = pool(graph, index)
    return pooled if isinstance(pooled, str) else ([], index, pooled)


def flatten_op(graph: Graph, index: int, source: str | None) -> FloatOp | str | None:
    """A Flatten of an image feeding a Gemm alone: the classifier, a conv whose lead node is the Flatten, its window
    the whole image (1x1 after a global pool: Flatten orders C, H, W as an OIHW filter's rows do)."""
    classifier = flattened_gemm(graph, index)
    if classifier is None:
        return None
    _, channels, height, width = graph.shapes[graph.nodes[index].input[0]]
    fc = gemm(graph, classifier, channels, (height, width))
    return fc if isinstance(fc, str) else ([index], classifier, fc)


def gemm_op(graph: Graph, index: int, source: str | None) -> FloatOp | str | None:
    """A Gemm on [N, C] (a classifier without a Flatten before it) as a 1x1 conv."""
    node = graph.nodes[index]
    shape = graph.shapes.get(node.input[0]) if node.input else None
    if shape is None or len(shape) != 2:
        return None
    fc = gemm(graph, index, shape[1])
    return fc if isinstance(fc, str) else ([], index, fc)


def batch_norm_op(graph: Graph, index: int, source: str | None) -> FloatOp | str:
    """An inference BatchNormalization that follows no conv (DenseNet's pre-activation after each Concat: BN, ReLU,
    conv; PyTorch's export folds every BN that follows a conv into it) as the 1x1 depthwise conv it is per channel:
    filter scale / sqrt(var + eps), bias B - mean * filter (batch_norm_affine)."""
    node = graph.nodes[index]
    channels = batch_norm_channels(graph, node)
    if isinstance(channels, str):
        return channels
    stats = [graph.constants.get(t) for t in node.input[1:5]]
    if len(stats) != 4 or any(s is None or s.shape != (channels,) for s in stats):
        return "its scale, bias, mean and variance are not constants of one value per channel"
    return [], index, ConvNode(weight=node.input[1], bias=node.input[2], out_channels=channels, kernel=(1, 1),
                               stride=(1, 1), pad=(0, 0, 0, 0), dilation=(1, 1), groups=channels)


def batch_norm_channels(graph: Graph, node) -> int | str:
    """An inference BatchNormalization's channels, or why kernelgen cannot take it (float or quantized)."""
    shape = graph.shapes.get(node.input[0])
    if shape is None or len(shape) != 4:
        return "its input has no static NCHW shape"
    if int(_attributes(node).get("training_mode", 0)) or any(node.output[1:]):
        return "training mode (it also updates the running mean and variance)"
    return shape[1]


def batch_norm_affine(graph: Graph, node) -> tuple[np.ndarray, np.ndarray]:
    """A BatchNormalization's per-channel filter [C, 1, 1, 1] and bias [C] in float32, rounded step by step as
    onnxruntime's CPU kernel folds them (1 / sqrt(var + eps), times the scale; B - mean * that), so a kernel given
    them computes what onnxruntime does but for the final multiply-add's rounding."""
    scale, bias, mean, var = (graph.constants[t].astype(np.float32) for t in node.input[1:5])
    epsilon = np.float32(_attributes(node).get("epsilon", 1e-5))
    factor = (np.float32(1) / np.sqrt(var + epsilon)) * scale
    return factor.reshape(-1, 1, 1, 1), bias - mean * factor


def unit_variance(epsilon: float) -> np.float32:
    """A variance v with float32(v + epsilon) exactly 1 (so 1 / sqrt(v + epsilon) is exactly 1): what a
    BatchNormalization is given, with mean 0, to compute x * scale + B and nothing else."""
    eps = np.float32(epsilon)
    v = np.float32(1) - eps
    for _ in range(8):
        total = v + eps
        if total == np.float32(1):
            return v
        v = np.nextafter(v, np.float32(-np.inf) if total > 1 else np.float32(np.inf), dtype=np.float32)
    raise ValueError(f"no float32 variance makes {epsilon} + it exactly 1")


def channel_scale(graph: Graph, index: int, source: str | None) -> FloatOp | None:
    """A Mul of an image by one computed value per image and channel (squeeze-excite's scaling) as a mul op whose
    factors are a side input; None for any other Mul (a constant factor, a broadcast of another shape)."""
    node = graph.nodes[index]
    found = channel_factors(graph, index)
    if found is None:
        return None
    image, factor = found
    if node.input[factor] in graph.constants or source not in (None, node.input[image]):
        return None
    channels = graph.shapes[node.input[image]][1]
    return [], index, ConvNode(weight="", bias=None, out_channels=channels, kernel=(1, 1), stride=(1, 1),
                               pad=(0, 0, 0, 0), dilation=(1, 1), groups=channels, kind="mul",
                               scale_by=node.input[factor])


def channel_factors(graph: Graph, index: int) -> tuple[int, int] | None:
    """A Mul of an image [N, C, H, W] by one value per image and channel [N, C, 1, 1]: the positions of the image
    and of the factors among its inputs; None for any other Mul."""
    node = graph.nodes[index]
    if len(node.input) != 2:
        return None
    shapes = [graph.shapes.get(t) for t in node.input]
    for image, factor in ((0, 1), (1, 0)):
        x, s = shapes[image], shapes[factor]
        if x is not None and s is not None and len(x) == 4 and x[2:] != (1, 1) and s == (x[0], x[1], 1, 1):
            return image, factor
    return None


def op_input(graph: Graph, index: int, op: ConvNode) -> str:
    """The tensor an op reads as its input: a mul's image (the operand that is not its factors), else the node's
    first input."""
    node = graph.nodes[index]
    return next(t for t in node.input if t != op.scale_by) if op.kind == "mul" else node.input[0]


def pool_entry(pool: ConvNode) -> Op:
    """A pool op's entry of a config's ops list."""
    if pool.kind == "global_avgpool":
        return Op(kind="global_avgpool")
    keys = [("kernel", pool.kernel), ("stride", pool.stride), ("pad", pool.pad)]
    keys += [("count_include_pad", pool.count_include_pad)] if pool.kind == "avgpool" else []
    return Op(kind=pool.kind, keys=tuple(keys))
