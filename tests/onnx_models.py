"""Small ONNX models built with onnx.helper for the importer's tests: real block shapes, random weights."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def save(model, path):
    """The model written to `path` (a pathlib.Path), which is returned."""
    import onnx

    onnx.save(model, str(path))
    return path


class Builder:
    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def conv(self, name: str, x: str, c_in: int, c_out: int, k: int, *, stride: int = 1, pad: int = 0,
             groups: int = 1, dilation: int = 1, bias: bool = True, out: str | None = None) -> str:
        w = (self.rng.uniform(-1, 1, (c_out, c_in // groups, k, k)) * np.sqrt(3 / (c_in // groups * k * k)))
        self.inits.append(numpy_helper.from_array(w.astype(np.float32), f"{name}_w"))
        inputs = [x, f"{name}_w"]
        if bias:
            self.inits.append(numpy_helper.from_array(self.rng.uniform(-0.5, 0.5, c_out).astype(np.float32),
                                                      f"{name}_b"))
            inputs.append(f"{name}_b")
        out = out or f"{name}_out"
        self.nodes.append(helper.make_node("Conv", inputs, [out], name=name, kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[pad] * 4, group=groups,
                                           dilations=[dilation, dilation]))
        return out

    def relu(self, name: str, x: str) -> str:
        self.nodes.append(helper.make_node("Relu", [x], [f"{name}_out"], name=name))
        return f"{name}_out"

    def clip(self, name: str, x: str, lo: float, hi: float) -> str:
        for bound, value in (("lo", lo), ("hi", hi)):
            self.inits.append(numpy_helper.from_array(np.array(value, dtype=np.float32), f"{name}_{bound}"))
        self.nodes.append(helper.make_node("Clip", [x, f"{name}_lo", f"{name}_hi"], [f"{name}_out"], name=name))
        return f"{name}_out"

    def add(self, name: str, a: str, b: str) -> str:
        self.nodes.append(helper.make_node("Add", [a, b], [f"{name}_out"], name=name))
        return f"{name}_out"

    def node(self, op_type: str, name: str, inputs: list[str], **attrs) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def model(self, x: str, shape: list[int], y: str):
        graph = helper.make_graph(self.nodes, "test", [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def mobilenet_v2_block(c: int = 16, expand: int = 6, size: int = 14, stride: int = 1):
    """1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 project, + input (stride 1 only)."""
    b = Builder(1)
    hidden = c * expand
    t = b.clip("expand_relu6", b.conv("expand", "x", c, hidden, 1), 0.0, 6.0)
    t = b.clip("dw_relu6", b.conv("depthwise", t, hidden, hidden, 3, stride=stride, pad=1, groups=hidden), 0.0, 6.0)
    t = b.conv("project", t, hidden, c, 1)
    if stride == 1:
        t = b.add("residual_add", t, "x")
    return b.model("x", [1, c, size, size], t)


def mobilenet_v2_stack(size: int = 56, seed: int = 3):
    """MobileNetV2's 56x56 stage and the next, as torchvision's features.2-5 shape them: a 24-channel stride-1
    block twice (the second with its residual add), then a stride-2 block to 32 channels and a 32-channel
    stride-1 block with its add; 12 convs in one chain the graph lets fuse whole."""
    b = Builder(seed)
    t, c = "x", 24
    for k, (c_out, stride) in enumerate(((24, 1), (24, 1), (32, 2), (32, 1))):
        hidden = c * 6
        u = b.clip(f"b{k}_expand_relu6", b.conv(f"b{k}_expand", t, c, hidden, 1), 0.0, 6.0)
        u = b.clip(f"b{k}_dw_relu6", b.conv(f"b{k}_dw", u, hidden, hidden, 3, stride=stride, pad=1, groups=hidden),
                   0.0, 6.0)
        u = b.conv(f"b{k}_project", u, hidden, c_out, 1)
        t = b.add(f"b{k}_add", u, t) if stride == 1 and c == c_out and k > 0 else u
        c = c_out
    return b.model("x", [1, 24, size, size], t)


def resnet_basic_block(c: int = 16, size: int = 10):
    """3x3 + ReLU, 3x3, + input, ReLU."""
    b = Builder(2)
    t = b.relu("relu1", b.conv("conv1", "x", c, c, 3, pad=1))
    t = b.conv("conv2", t, c, c, 3, pad=1)
    t = b.relu("relu2", b.add("add", t, "x"))
    return b.model("x", [1, c, size, size], t)


def with_unsupported_nodes():
    """conv + relu, LRN (not generated), conv (no bias), GlobalAveragePool, Flatten, Gemm, Softmax (not
    generated): two configs, two nodes left."""
    b = Builder(3)
    t = b.relu("stem_relu", b.conv("stem", "x", 3, 8, 3, stride=2, pad=1))
    t = b.node("LRN", "lrn", [t], size=3)
    t = b.conv("conv_after_lrn", t, 8, 8, 3, pad=1, bias=False)
    t = b.node("GlobalAveragePool", "gap", [t])
    t = b.node("Flatten", "flatten", [t])
    b.inits.append(numpy_helper.from_array(np.ones((8, 4), dtype=np.float32), "fc_w"))
    t = b.node("Softmax", "softmax", [b.node("Gemm", "fc", [t, "fc_w"])])
    return b.model("x", [1, 3, 16, 16], t)


def classifier_network(seed: int = 4):
    """ResNet's ends at a small size: a stride-2 7x7 stem conv + relu, a padded 3x3 stride-2 max pool, a basic
    block whose Add takes a 1x1 stride-2 downsample branch (the other branch of a two-branch add), then a global
    average pool, Flatten and the Gemm classifier; odd sizes throughout."""
    b = Builder(seed)
    t = b.relu("stem_relu", b.conv("stem", "x", 3, 6, 7, stride=2, pad=3))
    t = b.node("MaxPool", "pool", [t], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    main = b.relu("block_relu1", b.conv("block_conv1", t, 6, 10, 3, stride=2, pad=1))
    main = b.conv("block_conv2", main, 10, 10, 3, pad=1)
    branch = b.conv("downsample", t, 6, 10, 1, stride=2)
    t = b.relu("block_relu2", b.add("block_add", main, branch))
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.4, 0.4, (7, 10)).astype(np.float32), "fc_w"))
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.2, 0.2, 7).astype(np.float32), "fc_b"))
    t = b.node("Gemm", "fc", [t, "fc_w", "fc_b"], transB=1)
    return b.model("x", [2, 3, 37, 29], t)


def _q(name: str, value, dtype) -> object:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


# int8 weights in the 7 bits onnxruntime's quantizer gives with reduce_range: its uint8 x int8 kernels on x86 without
# VNNI add pairs of products in 16 bits and saturate beyond +-64, and an oracle must be right on every CI host.
# weight_bound=127 makes the full-range weights a default quantize_static writes (test_onnx_import checks that
# validation then says why onnxruntime is not compared).
WEIGHT_BOUND = 64


def qlinear_chain(c: int = 32, k: int = 48, size: int = 10, seed: int = 4, weight_bound: int = WEIGHT_BOUND):
    """Two QLinearConv (uint8 activations, per-channel int8 weights, int32 bias): 3x3 then 1x1."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], [_q("x_s", 0.05, np.float32), _q("x_z", 128, np.uint8), _q("m_s", 0.08, np.float32),
                        _q("m_z", 10, np.uint8), _q("y_s", 0.1, np.float32), _q("y_z", 128, np.uint8)]
    for name, cin, cout, kk, src, s_in, z_in, s_out, z_out in (
            ("qconv1", c, k, 3, "x", "x_s", "x_z", "m_s", "m_z"), ("qconv2", k, c, 1, "qconv1_out", "m_s", "m_z",
                                                                   "y_s", "y_z")):
        inits += [_q(f"{name}_w", rng.integers(-weight_bound, weight_bound + 1, (cout, cin, kk, kk)), np.int8),
                  _q(f"{name}_ws", rng.uniform(0.002, 0.004, cout), np.float32),
                  _q(f"{name}_wz", np.zeros(cout), np.int8),
                  _q(f"{name}_b", rng.integers(-2000, 2000, cout), np.int32)]
        nodes.append(helper.make_node("QLinearConv", [src, s_in, z_in, f"{name}_w", f"{name}_ws", f"{name}_wz", s_out,
                                                      z_out, f"{name}_b"], [f"{name}_out"], name=name,
                                      kernel_shape=[kk, kk], pads=[kk // 2] * 4))
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, size, size])],
                              [helper.make_tensor_value_info("qconv2_out", TensorProto.UINT8, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def qdq_depthwise(c: int = 32, size: int = 9, seed: int = 5):
    """QDQ: DequantizeLinear -> depthwise Conv (float bias) -> Relu -> QuantizeLinear."""
    rng = np.random.default_rng(seed)
    inits = [_q("x_s", 0.05, np.float32), _q("x_z", 128, np.uint8), _q("y_s", 0.03, np.float32),
             _q("y_z", 0, np.uint8), _q("w_q", rng.integers(-WEIGHT_BOUND, WEIGHT_BOUND + 1, (c, 1, 3, 3)), np.int8),
             _q("w_s", rng.uniform(0.005, 0.01, c), np.float32), _q("w_z", np.zeros(c), np.int8),
             _q("b", rng.uniform(-0.3, 0.3, c), np.float32)]
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["x_f"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w_f"], name="dq_w", axis=0),
             helper.make_node("Conv", ["x_f", "w_f", "b"], ["y_f"], name="dw", kernel_shape=[3, 3], pads=[1] * 4,
                              group=c, strides=[2, 2]),
             helper.make_node("Relu", ["y_f"], ["y_r"], name="dw_relu"),
             helper.make_node("QuantizeLinear", ["y_r", "y_s", "y_z"], ["y"], name="q_y")]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _qdq_conv(nodes: list, inits: list, rng, name: str, src: str, cin: int, cout: int, k: int, out_s: str,
              out_z: str, groups: int = 1, activation: str | None = None) -> str:
    """DequantizeLinear(int8 per-channel weights) -> Conv (float bias) [-> Relu | Clip(0, 6)] -> QuantizeLinear;
    returns the quantized result's name."""
    inits += [_q(f"{name}_wq", rng.integers(-WEIGHT_BOUND, WEIGHT_BOUND + 1, (cout, cin // groups, k, k)), np.int8),
              _q(f"{name}_ws", rng.uniform(0.002, 0.004 if groups == 1 else 0.02, cout), np.float32),
              _q(f"{name}_wz", np.zeros(cout), np.int8), _q(f"{name}_b", rng.uniform(-0.5, 0.5, cout), np.float32)]
    nodes.append(helper.make_node("DequantizeLinear", [f"{name}_wq", f"{name}_ws", f"{name}_wz"], [f"{name}_wf"],
                                  name=f"dq_{name}_w", axis=0))
    nodes.append(helper.make_node("Conv", [src, f"{name}_wf", f"{name}_b"], [f"{name}_f"], name=name, group=groups,
                                  kernel_shape=[k, k], pads=[k // 2] * 4))
    result = f"{name}_f"
    if activation == "relu":
        nodes.append(helper.make_node("Relu", [result], [f"{name}_r"], name=f"{name}_relu"))
        result = f"{name}_r"
    elif activation == "relu6":
        inits += [_q(f"{name}_lo", 0.0, np.float32), _q(f"{name}_hi", 6.0, np.float32)]
        nodes.append(helper.make_node("Clip", [result, f"{name}_lo", f"{name}_hi"], [f"{name}_r"], name=f"{name}_relu6"))
        result = f"{name}_r"
    nodes.append(helper.make_node("QuantizeLinear", [result, out_s, out_z], [f"{name}_q"], name=f"q_{name}"))
    return f"{name}_q"


def _qdq_block(name: str, convs, c: int, size: int, seed: int, scales: dict[str, tuple[float, int]],
               add_relu: bool):
    """A QDQ block: convs = (name, cin, cout, k, groups, activation, output scale key) in order, each reading the
    previous result through a DequantizeLinear; the last one's result + the block's input -> [Relu] -> y."""
    rng = np.random.default_rng(seed)
    inits = [item for key, (s, z) in scales.items()
             for item in (_q(f"{key}_s", s, np.float32), _q(f"{key}_z", z, np.uint8))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["x_f"], name="dq_x")]
    source = "x_f"
    for conv, cin, cout, k, groups, activation, key in convs:
        quantized = _qdq_conv(nodes, inits, rng, conv, source, cin, cout, k, f"{key}_s", f"{key}_z", groups, activation)
        source = f"{conv}_dq"
        nodes.append(helper.make_node("DequantizeLinear", [quantized, f"{key}_s", f"{key}_z"], [source],
                                      name=f"dq_{conv}"))
    nodes += [helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["r_f"], name="dq_residual"),
              helper.make_node("Add", [source, "r_f"], ["sum_f"], name="add")]
    total = "sum_f"
    if add_relu:
        nodes.append(helper.make_node("Relu", ["sum_f"], ["sum_r"], name="add_relu"))
        total = "sum_r"
    nodes.append(helper.make_node("QuantizeLinear", [total, "y_s", "y_z"], ["y"], name="q_y"))
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def qdq_resnet_block(c: int = 32, size: int = 10, seed: int = 6):
    """A quantized ResNet basic block as onnxruntime's QDQ quantizer writes it: two 3x3 convs (per-channel int8
    weights, float biases), Relu after the first, the block's input added to the second's quantized result
    (DequantizeLinear of both -> Add -> Relu -> QuantizeLinear)."""
    return _qdq_block("qdq_resnet", [("conv1", c, c, 3, 1, "relu", "m"), ("conv2", c, c, 3, 1, None, "c")], c, size,
                      seed, {"x": (0.05, 128), "m": (0.04, 0), "c": (0.06, 120), "y": (0.07, 0)}, add_relu=True)


def qdq_mobilenet_v2_block(c: int = 16, expand: int = 6, size: int = 9, seed: int = 7):
    """A quantized MobileNetV2 inverted residual (QDQ): 1x1 expand + relu6, 3x3 depthwise + relu6, 1x1 project,
    + the block's input, no activation after the add."""
    wide = c * expand
    return _qdq_block("qdq_mobilenet_v2", [("expand", c, wide, 1, 1, "relu6", "e"),
                                           ("depthwise", wide, wide, 3, wide, "relu6", "d"),
                                           ("project", wide, c, 1, 1, None, "p")], c, size, seed,
                      {"x": (0.05, 128), "e": (0.03, 0), "d": (0.03, 0), "p": (0.06, 125), "y": (0.08, 128)},
                      add_relu=False)


def mobilenet_v2_classifier(seed: int = 12):
    """MobileNetV2's ends at a small size: a stride-2 3x3 stem conv + ReLU6, an inverted residual block (1x1 expand
    + ReLU6, 3x3 depthwise + ReLU6, 1x1 project, + the block's input), a 1x1 conv + ReLU6 to the head's channels,
    then GlobalAveragePool, Flatten and the Gemm classifier; batch 2, channels no multiple of 4 or 32."""
    b = Builder(seed)
    t = b.clip("stem_relu6", b.conv("stem", "x", 3, 10, 3, stride=2, pad=1), 0.0, 6.0)
    u = b.clip("expand_relu6", b.conv("expand", t, 10, 30, 1), 0.0, 6.0)
    u = b.clip("dw_relu6", b.conv("depthwise", u, 30, 30, 3, pad=1, groups=30), 0.0, 6.0)
    t = b.add("block_add", b.conv("project", u, 30, 10, 1), t)
    t = b.clip("head_relu6", b.conv("head", t, 10, 45, 1), 0.0, 6.0)
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.3, 0.3, (9, 45)).astype(np.float32), "fc_w"))
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.2, 0.2, 9).astype(np.float32), "fc_b"))
    t = b.node("Gemm", "fc", [t, "fc_w", "fc_b"], transB=1)
    return b.model("x", [2, 3, 23, 19], t)


def squeeze_excite_network(seed: int = 6):
    """MobileNetV3's block at a small size: 1x1 expand + HardSwish, 3x3 depthwise + ReLU, squeeze-excite (global
    pool, 1x1 conv + ReLU, 1x1 conv + HardSigmoid, Mul with the block's tensor as torchvision writes it: scale *
    input), 1x1 project + the block's input; then the head (1x1 conv + HardSwish, global pool, Flatten, Gemm)."""
    b = Builder(seed)
    t = b.node("HardSwish", "expand_hs", [b.conv("expand", "x", 6, 18, 1)])
    t = b.relu("dw_relu", b.conv("dw", t, 18, 18, 3, pad=1, groups=18))
    s = b.node("GlobalAveragePool", "se_pool", [t])
    s = b.relu("se_relu", b.conv("se_fc1", s, 18, 8, 1))
    s = b.node("HardSigmoid", "se_gate", [b.conv("se_fc2", s, 8, 18, 1)], alpha=1 / 6, beta=0.5)
    t = b.node("Mul", "se_mul", [s, t])
    t = b.add("block_add", b.conv("project", t, 18, 6, 1), "x")
    t = b.node("HardSwish", "head_hs", [b.conv("head", t, 6, 12, 1)])
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.5, 0.5, (5, 12)).astype(np.float32), "fc_w"))
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.2, 0.2, 5).astype(np.float32), "fc_b"))
    return b.model("x", [2, 6, 9, 7], b.node("Gemm", "fc", [t, "fc_w", "fc_b"], transB=1))


def efficientnet_network(seed: int = 13):
    """EfficientNet's MBConv block at a small size, as torchvision exports it: 1x1 expand + SiLU (a Sigmoid and a
    Mul of the conv's result by it), 3x3 depthwise + SiLU, squeeze-excite (global pool, 1x1 conv + SiLU, 1x1 conv +
    Sigmoid, Mul with the block's tensor), 1x1 project + the block's input; then the head (1x1 conv + SiLU, global
    pool, Flatten, Gemm)."""
    b = Builder(seed)

    def silu(name: str, t: str) -> str:
        return b.node("Mul", name, [t, b.node("Sigmoid", f"{name}_sigmoid", [t])])

    t = silu("expand_silu", b.conv("expand", "x", 8, 24, 1))
    t = silu("dw_silu", b.conv("dw", t, 24, 24, 3, pad=1, groups=24))
    s = b.node("GlobalAveragePool", "se_pool", [t])
    s = silu("se_silu", b.conv("se_fc1", s, 24, 6, 1))
    s = b.node("Sigmoid", "se_gate", [b.conv("se_fc2", s, 6, 24, 1)])
    t = b.node("Mul", "se_mul", [t, s])
    t = b.add("block_add", b.conv("project", t, 24, 8, 1), "x")
    t = silu("head_silu", b.conv("head", t, 8, 16, 1))
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.5, 0.5, (5, 16)).astype(np.float32), "fc_w"))
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.2, 0.2, 5).astype(np.float32), "fc_b"))
    return b.model("x", [2, 8, 9, 7], b.node("Gemm", "fc", [t, "fc_w", "fc_b"], transB=1))


def batch_norm(b: Builder, name: str, x: str, channels: int, epsilon: float = 1e-5) -> str:
    rng = b.rng
    stats = {"scale": rng.uniform(0.5, 1.5, channels), "bias": rng.uniform(-0.5, 0.5, channels),
             "mean": rng.uniform(-0.3, 0.3, channels), "var": rng.uniform(0.5, 2.0, channels)}
    for key, value in stats.items():
        b.inits.append(numpy_helper.from_array(value.astype(np.float32), f"{name}_{key}"))
    return b.node("BatchNormalization", name, [x, *(f"{name}_{key}" for key in stats)], epsilon=epsilon)


def dense_block(b: Builder, x: str, channels: int, growth: int, layers: int, name: str,
                single_concat: bool = False) -> tuple[str, int]:
    """DenseNet's block as torchvision exports it: each layer a Concat of every feature so far, then BN, ReLU,
    1x1 conv (its BN folded), ReLU, 3x3 conv; the block's output the Concat of all of them."""
    features = [x]
    for k in range(layers):
        one = len(features) == 1 and not single_concat  # torchvision's torch.cat([x], 1): a Concat of one input
        cat = features[0] if one else b.node("Concat", f"{name}_l{k}_cat", features, axis=1)
        width = channels + k * growth
        t = b.relu(f"{name}_l{k}_r1", batch_norm(b, f"{name}_l{k}_norm1", cat, width, epsilon=1e-3))
        t = b.relu(f"{name}_l{k}_r2", b.conv(f"{name}_l{k}_conv1", t, width, 2 * growth, 1))
        features.append(b.conv(f"{name}_l{k}_conv2", t, 2 * growth, growth, 3, pad=1, bias=False))
    return b.node("Concat", f"{name}_out_cat", features, axis=1), channels + layers * growth


def densenet_network(seed: int = 14):
    """DenseNet's shape at a small size: a stem conv, a dense block (Concats, each layer's BN + ReLU before its
    1x1 conv), a transition (BN, ReLU, 1x1 conv, 2x2 average pool), a second block, the final BN + ReLU, global
    pool and classifier."""
    b = Builder(seed)
    x = b.relu("stem_r", b.conv("stem", "x", 3, 8, 3, pad=1))
    block, width = dense_block(b, x, 8, 4, 2, "db1", single_concat=True)
    t = b.relu("tr_r", batch_norm(b, "tr_norm", block, width))
    t = b.node("AveragePool", "tr_pool", [b.conv("tr_conv", t, width, 8, 1, bias=False)], kernel_shape=[2, 2],
               strides=[2, 2])
    block, width = dense_block(b, t, 8, 4, 2, "db2", single_concat=True)
    t = b.relu("final_r", batch_norm(b, "final_norm", block, width))
    pooled = b.node("Flatten", "flat", [b.node("GlobalAveragePool", "pool", [t])], axis=1)
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.3, 0.3, (5, width)).astype(np.float32), "fc_w"))
    return b.model("x", [1, 3, 12, 10], b.node("Gemm", "fc", [pooled, "fc_w"], transB=1))


def quantized(model, per_channel: bool, seed: int = 0, full_range: bool = False):
    """`model` as onnxruntime's quantize_static writes it in QDQ form (uint8 activations, int8 weights; 7-bit weights
    on an x86 host without VNNI, whose uint8 x int8 kernels would saturate otherwise, unless full_range: then
    quantize_static's defaults, weights up to +-127 on every host), calibrated on random normal inputs."""
    import tempfile

    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from kernelgen.onnx.oracle import VNNI_FLAGS, cpu_flags

    (x,) = model.graph.input
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]

    class Random(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(seed)
            self.batches = iter([{x.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as folder:
        source, target = f"{folder}/float.onnx", f"{folder}/qdq.onnx"
        onnx.save(model, source)
        quantize_static(source, target, Random(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        reduce_range=not full_range and not (cpu_flags() & set(VNNI_FLAGS)))
        return onnx.load(target)


def small_resnet(seed: int = 8):
    """ResNet18's structure at toy size: a stride-2 stem conv + ReLU, a MaxPool that also returns its argmax
    indices (a host step: kernelgen's pools return values only), a basic block (its residual add fuses), a
    downsampling block whose Add joins two conv branches (+ ReLU) and the classifier head GlobalAveragePool ->
    Flatten -> Gemm (fused with the block). Four kernels and one host step in a network manifest."""
    b = Builder(seed)
    t = b.relu("stem_relu", b.conv("stem", "x", 3, 8, 3, stride=2, pad=1))
    b.nodes.append(helper.make_node("MaxPool", [t], ["pool_out", "pool_indices"], name="pool", kernel_shape=[3, 3],
                                    strides=[2, 2], pads=[1, 1, 1, 1]))
    t = "pool_out"
    u = b.relu("block1_relu1", b.conv("block1_conv1", t, 8, 8, 3, pad=1))
    t = b.relu("block1_relu2", b.add("block1_add", b.conv("block1_conv2", u, 8, 8, 3, pad=1), t))
    u = b.relu("block2_relu1", b.conv("block2_conv1", t, 8, 16, 3, stride=2, pad=1))
    u = b.conv("block2_conv2", u, 16, 16, 3, pad=1)
    t = b.relu("block2_relu2", b.add("block2_add", u, b.conv("block2_down", t, 8, 16, 1, stride=2)))
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.3, 0.3, (10, 16)).astype(np.float32), "fc_w"))
    t = b.node("Gemm", "fc", [t, "fc_w"], transB=1)
    return b.model("x", [1, 3, 32, 32], t)


def qdq_network(c: int = 16, size: int = 12, seed: int = 9):
    """A QDQ network as onnxruntime's quantizer writes one, float in and out: QuantizeLinear of the input, a 3x3
    stem conv + ReLU (int8 per-channel weights), MaxPool between DequantizeLinear and QuantizeLinear (it fuses), a
    basic block whose residual add fuses, then DequantizeLinear -> GlobalAveragePool of floats (a host step)."""
    rng = np.random.default_rng(seed)
    scales = {"x": (0.03, 128), "m": (0.04, 0), "a": (0.05, 0), "b": (0.06, 120), "y": (0.07, 0)}
    inits = [item for key, (s, z) in scales.items()
             for item in (_q(f"{key}_s", s, np.float32), _q(f"{key}_z", z, np.uint8))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["x_q"], name="q_x"),
             helper.make_node("DequantizeLinear", ["x_q", "x_s", "x_z"], ["x_f"], name="dq_x")]
    stem = _qdq_conv(nodes, inits, rng, "stem", "x_f", 8, c, 3, "m_s", "m_z", activation="relu")
    nodes += [helper.make_node("DequantizeLinear", [stem, "m_s", "m_z"], ["stem_dq"], name="dq_stem"),
              helper.make_node("MaxPool", ["stem_dq"], ["pool_f"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("QuantizeLinear", ["pool_f", "m_s", "m_z"], ["pool_q"], name="q_pool"),
              helper.make_node("DequantizeLinear", ["pool_q", "m_s", "m_z"], ["pool_dq"], name="dq_pool")]
    a = _qdq_conv(nodes, inits, rng, "conv_a", "pool_dq", c, c, 3, "a_s", "a_z", activation="relu")
    nodes.append(helper.make_node("DequantizeLinear", [a, "a_s", "a_z"], ["a_f"], name="dq_a"))
    b = _qdq_conv(nodes, inits, rng, "conv_b", "a_f", c, c, 3, "b_s", "b_z")
    nodes += [helper.make_node("DequantizeLinear", [b, "b_s", "b_z"], ["b_f"], name="dq_b"),
              helper.make_node("DequantizeLinear", ["pool_q", "m_s", "m_z"], ["res_f"], name="dq_res"),
              helper.make_node("Add", ["b_f", "res_f"], ["sum_f"], name="add"),
              helper.make_node("Relu", ["sum_f"], ["sum_r"], name="add_relu"),
              helper.make_node("QuantizeLinear", ["sum_r", "y_s", "y_z"], ["y_q"], name="q_y"),
              helper.make_node("DequantizeLinear", ["y_q", "y_s", "y_z"], ["y_f"], name="dq_y"),
              helper.make_node("GlobalAveragePool", ["y_f"], ["out"], name="gap")]
    graph = helper.make_graph(nodes, "qdq_network", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                   [1, 8, size, size])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def qdq_concat_network(size: int = 12, seed: int = 12):
    """SqueezeNet's fire modules in the QDQ form onnxruntime's quantizer writes, float in and out: a 3x3 stem, then
    branches of 32, 48 and 16 channels whose DequantizeLinear results a Concat joins and one QuantizeLinear
    requantizes (each branch at its own scale and zero point, the first at the concat's own); a 1x1 squeeze, a
    second Concat of two 32-channel branches; a 1x1 classifier, GlobalAveragePool and a Flatten between
    DequantizeLinear and QuantizeLinear at one scale, as SqueezeNet ends."""
    rng = np.random.default_rng(seed)
    scales = {"x": (0.03, 128), "m": (0.04, 0), "b0": (0.05, 7), "b1": (0.031, 0), "b2": (0.09, 40),
              "cat": (0.05, 7), "s": (0.06, 3), "e0": (0.045, 0), "e1": (0.02, 12), "cat2": (0.05, 0),
              "y": (0.07, 0), "g": (0.03, 5)}
    inits = [item for key, (scale, z) in scales.items()
             for item in (_q(f"{key}_s", scale, np.float32), _q(f"{key}_z", z, np.uint8))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["x_q"], name="q_x"),
             helper.make_node("DequantizeLinear", ["x_q", "x_s", "x_z"], ["x_f"], name="dq_x")]

    def dq(tensor: str, key: str) -> str:  # one for each reader, as the quantizer writes them
        name = f"dq{len(nodes)}_{tensor}"
        nodes.append(helper.make_node("DequantizeLinear", [tensor, f"{key}_s", f"{key}_z"], [name], name=name))
        return name

    def concat(name: str, branches: list[tuple[str, str]], key: str) -> str:
        nodes.append(helper.make_node("Concat", [dq(t, k) for t, k in branches], [f"{name}_f"], name=name, axis=1))
        nodes.append(helper.make_node("QuantizeLinear", [f"{name}_f", f"{key}_s", f"{key}_z"], [f"{name}_q"],
                                      name=f"q_{name}"))
        return f"{name}_q"

    stem = _qdq_conv(nodes, inits, rng, "stem", "x_f", 8, 24, 3, "m_s", "m_z", activation="relu")
    branches = [(_qdq_conv(nodes, inits, rng, f"b{i}", dq(stem, "m"), 24, width, k, f"b{i}_s", f"b{i}_z",
                           activation="relu"), f"b{i}") for i, (width, k) in enumerate(((32, 1), (48, 3), (16, 1)))]
    cat = concat("cat", branches, "cat")
    squeeze = _qdq_conv(nodes, inits, rng, "squeeze", dq(cat, "cat"), 96, 16, 1, "s_s", "s_z", activation="relu")
    expands = [(_qdq_conv(nodes, inits, rng, f"e{i}", dq(squeeze, "s"), 16, 32, k, f"e{i}_s", f"e{i}_z",
                          activation="relu"), f"e{i}") for i, k in enumerate((1, 3))]
    cat2 = concat("cat2", expands, "cat2")
    y = _qdq_conv(nodes, inits, rng, "classifier", dq(cat2, "cat2"), 64, 10, 1, "y_s", "y_z", activation="relu")
    nodes += [helper.make_node("GlobalAveragePool", [dq(y, "y")], ["gap_f"], name="gap"),
              helper.make_node("QuantizeLinear", ["gap_f", "g_s", "g_z"], ["gap_q"], name="q_gap")]
    nodes += [helper.make_node("Flatten", [dq("gap_q", "g")], ["flat_f"], name="flatten", axis=1),
              helper.make_node("QuantizeLinear", ["flat_f", "g_s", "g_z"], ["flat_q"], name="q_flat"),
              helper.make_node("DequantizeLinear", ["flat_q", "g_s", "g_z"], ["out"], name="dq_out")]
    graph = helper.make_graph(nodes, "qdq_concat", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  [1, 8, size, size])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def torchvision_named_stack(size: int = 12, seed: int = 10):
    """A stem conv and three MobileNetV2-like blocks (1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 project; the
    channels change, so no residual add) named as torch.onnx's TorchScript exporter names torchvision's nodes:
    /features/features.3/conv/conv.0/conv.0.0/Conv, the scope repeated at each level."""
    b = Builder(seed)
    stem = "/features/features.0/features.0"
    t = b.clip(f"{stem}.2/Clip", b.conv(f"{stem}.0/Conv", "x", 3, 8, 3, pad=1), 0.0, 6.0)
    c = 8
    for k, c_out in ((1, 12), (2, 16), (3, 20)):
        block = f"/features/features.{k}/conv/conv"
        t = b.clip(f"{block}.0/conv.0.2/Clip", b.conv(f"{block}.0/conv.0.0/Conv", t, c, c * 2, 1), 0.0, 6.0)
        t = b.clip(f"{block}.1/conv.1.2/Clip", b.conv(f"{block}.1/conv.1.0/Conv", t, c * 2, c * 2, 3, pad=1,
                                                      groups=c * 2), 0.0, 6.0)
        t, c = b.conv(f"{block}.2/Conv", t, c * 2, c_out, 1), c_out
    return b.model("x", [1, 3, size, size], t)


def mixed_float_and_qdq(c: int = 8, size: int = 6, seed: int = 11):
    """A float conv + ReLU, its result quantized (QuantizeLinear), then a QDQ conv (int8 weights) -> uint8 output:
    one float32 config and one uint8 config."""
    rng = np.random.default_rng(seed)
    b = Builder(seed)
    t = b.relu("float_relu", b.conv("float_conv", "x", c, c, 3, pad=1))
    inits = [_q("m_s", 0.04, np.float32), _q("m_z", 0, np.uint8), _q("y_s", 0.05, np.float32), _q("y_z", 0, np.uint8)]
    nodes = [helper.make_node("QuantizeLinear", [t, "m_s", "m_z"], ["m_q"], name="q_m"),
             helper.make_node("DequantizeLinear", ["m_q", "m_s", "m_z"], ["m_f"], name="dq_m")]
    y = _qdq_conv(nodes, inits, rng, "qconv", "m_f", c, c, 3, "y_s", "y_z", activation="relu")
    graph = helper.make_graph(b.nodes + nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                      [1, c, size, size])],
                              [helper.make_tensor_value_info(y, TensorProto.UINT8, None)], b.inits + inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def single_conv(weight: list[int], channels: int = 8, size: int = 6, bias: list[int] | None = None, **attrs):
    """One Conv node named `conv` on a [1, channels, size, size] input, its attributes as given (no kernel_shape
    unless given): for the hostile nodes onnxruntime refuses. Weights and bias of the shapes given, whatever they
    are."""
    rng = np.random.default_rng(12)
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, weight).astype(np.float32), "w")]
    inputs = ["x", "w"]
    if bias is not None:
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, bias).astype(np.float32), "b"))
        inputs.append("b")
    node = helper.make_node("Conv", inputs, ["y"], name="conv", **attrs)
    graph = helper.make_graph([node], "hostile", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def qdq_resize_network(channels: int, in_hw: tuple[int, int], out_hw: tuple[int, int], conv: tuple[float, int],
                       resized: tuple[float, int], seed: int = 15, in_channels: int = 8):
    """A float input of `in_channels` quantized, a QDQ 1x1 conv to `channels` quantized at `conv` (scale, zero point), a linear
    half_pixel Resize to `out_hw` between a DequantizeLinear and a QuantizeLinear at `resized`, and the result
    dequantized: a uint8 resize step between packed tensors whose scales the test chooses (equal ones put many
    results exactly on a rounding tie)."""
    rng = np.random.default_rng(seed)
    inits = [_q("x_s", 0.03, np.float32), _q("x_z", 128, np.uint8), _q("m_s", conv[0], np.float32),
             _q("m_z", conv[1], np.uint8), _q("y_s", resized[0], np.float32), _q("y_z", resized[1], np.uint8),
             helper.make_tensor("sizes", TensorProto.INT64, [4], [1, channels, *out_hw])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["x_q"], name="q_x"),
             helper.make_node("DequantizeLinear", ["x_q", "x_s", "x_z"], ["x_f"], name="dq_x")]
    quantized = _qdq_conv(nodes, inits, rng, "mix", "x_f", in_channels, channels, 1, "m_s", "m_z")
    nodes += [helper.make_node("DequantizeLinear", [quantized, "m_s", "m_z"], ["mix_dq"], name="dq_mix"),
              helper.make_node("Resize", ["mix_dq", "", "", "sizes"], ["up_f"], name="up", mode="linear",
                               coordinate_transformation_mode="half_pixel"),
              helper.make_node("QuantizeLinear", ["up_f", "y_s", "y_z"], ["up_q"], name="q_up"),
              helper.make_node("DequantizeLinear", ["up_q", "y_s", "y_z"], ["y"], name="dq_up")]
    graph = helper.make_graph(nodes, "qdq_resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  [1, in_channels, *in_hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
