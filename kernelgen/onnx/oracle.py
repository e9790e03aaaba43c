"""An imported config's second oracle: the model's own weights and biases, and onnxruntime running the
same nodes on the same input. Independent of kernelgen's numpy reference: another implementation of
Conv, Add, Relu and Clip, fed the ONNX graph itself rather than kernelgen's reading of it."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Config
from ..errors import KernelgenError
from .graph import OnnxError, ONNX_EXTRA, Graph, _attributes, node_id, onnx_module
from .converters import float_op
from .layers import unit_variance
from .live_taps import embedded
from .quant import with_gate, with_residual, with_silu
from .u8s8 import (DEFAULT, PAIR_SAFE_WEIGHT, VNNI_FLAGS, QuantOracle, cpu_flags, quant_oracle,  # noqa: F401
                   u8s8_saturation)
from .weights import (WEIGHTED, config_nodes as _nodes, conv_ops, graph_of_config as _graph, kept_taps,  # noqa: F401
                      model_path, quantized_ops as _quantized_ops, weights)


class OracleFailed(KernelgenError):
    """onnxruntime refused or failed to run a config's nodes: validate reports a FAIL row with its message."""


def run_onnxruntime(config: Config, x_nhwc: np.ndarray, tensors: dict[str, np.ndarray]) -> np.ndarray:
    """The config's nodes, cut out of the model into a graph of their own, run by onnxruntime's CPU
    provider on x (logical NHWC); the result in NHWC. `tensors` (filter<j>, bias<j>) replace each Conv's
    weights and bias: what the kernel was given (the model's, rounded to half for float16 storage)."""
    graph = _graph(config)
    nodes = _nodes(config, graph)
    feeds = {_chain_input(config, graph, nodes): x_nhwc} | _side_feeds(config, tensors)
    return _session(config, graph, nodes, feeds, nodes[-1].output[0], _given(config, graph, nodes, tensors))


def run_onnxruntime_float_ops(config: Config, stored: list[np.ndarray], tensors: dict[str, np.ndarray]
                              ) -> list[np.ndarray]:
    """A float config op by op: op j's own nodes (its Conv, pool, Gemm or Mul, and the Add and activation it folds
    in) cut out of the model and run by onnxruntime on what the kernel stored: stored[0] is the chain's input,
    stored[K] op K's output (NHWC; NaN where the kernel never wrote), each residual and side input read from there
    too. The model's own graph decides what each op computes, so a config that differs from its model (a dropped
    bias, a wrong activation, another pad) differs at that op however deep it sits. Each op's result in NHWC."""
    graph = _graph(config)
    nodes = _nodes(config, graph)
    per_op = float_op_nodes(config, graph, nodes)
    given = _given(config, graph, nodes, tensors)
    known = {_chain_input(config, graph, nodes): stored[0]} | _side_feeds(config, tensors)
    out = []
    for j, members in enumerate(per_op):
        produced = {o for n in members for o in n.output}
        reads = dict.fromkeys(t for n in members for t in n.input
                              if t and t not in produced and t not in graph.constants)
        unknown = [t for t in reads if t not in known]
        if unknown:
            raise OracleFailed(f"{config.ops[j].kind} #{j + 1}: its nodes ({', '.join(node_id(n) for n in members)}) "
                               f"read {unknown[0]!r}, which is neither the chain's input, an earlier op's result "
                               f"nor a side input of the config")
        output = members[-1].output[0]
        out.append(_session(config, graph, members, {t: known[t] for t in reads}, output, given))
        if j + 1 < len(stored):
            known[output] = stored[j + 1]
    return out


def float_op_nodes(config: Config, graph: Graph, nodes: list) -> list[list]:
    """The config's nodes (graph order) split into its ops: each op starts at a node that starts a float op (a
    Conv, a pool, a Mul by channel factors, a Gemm, or the Flatten before one) and holds the nodes up to the next
    such start (the Add and activation it folds in). The importer wrote source.nodes this way (importer._group)."""
    index_of = {node_id(n): i for i, n in enumerate(graph.nodes)}
    starts, own = [], set()
    for position, node in enumerate(nodes):
        index = index_of[node_id(node)]
        if index in own:  # a Gemm its Flatten already started
            continue
        found = float_op(graph, index)
        if found is not None and not isinstance(found, str):
            own.add(found[1])
            starts.append(position)
    if len(starts) != len(config.ops) or (starts and starts[0] != 0):
        raise OracleFailed(f"the config has {len(config.ops)} ops, but its source.nodes start {len(starts)} "
                           f"(Conv, pool, Gemm or Mul nodes, graph order): the config no longer matches its model")
    return [nodes[a:b] for a, b in zip(starts, [*starts[1:], len(nodes)])]


def _given(config: Config, graph: Graph, nodes: list, tensors: dict[str, np.ndarray]
           ) -> dict[str, np.ndarray]:
    """What each Conv or Gemm of a float config runs with in place of the model's weights and bias: the kernel's
    own filter<j> and bias<j> (the model's, rounded to half for float16 storage). A bias the config does not
    declare stays the model's: then the model says what the config left out."""
    given = {}
    weighted = [n for n in nodes if n.op_type in WEIGHTED and config.dtype != "uint8"]
    for j, node in zip(conv_ops(config), weighted):
        w = tensors[f"filter{j}"]
        if node.op_type == "BatchNormalization":  # x * filter + bias exactly: mean 0, a variance that makes 1
            variance = unit_variance(_attributes(node).get("epsilon", 1e-5))
            given |= {node.input[1]: w.reshape(-1), node.input[2]: tensors[f"bias{j}"],
                      node.input[3]: np.zeros(w.shape[0], np.float32),
                      node.input[4]: np.full(w.shape[0], variance, np.float32)}
            continue
        if node.op_type == "Gemm":  # back to B's own shape: [K, C], or [C, K] without transB
            w = w.reshape(w.shape[0], -1) if _attributes(node).get("transB", 0) else w.reshape(w.shape[0], -1).T
        model = graph.constants.get(node.input[1])
        if node.op_type == "Conv" and model is not None and w.shape != model.shape:  # taps that read padding alone
            taps = kept_taps(graph, node)
            w = w if taps is None else embedded(w, taps, model.shape)
        given[node.input[1]] = w
        if len(node.input) > 2 and node.input[2] and f"bias{j}" in tensors:
            given[node.input[2]] = tensors[f"bias{j}"]
    return given


def _side_feeds(config: Config, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The config's side inputs by the model's tensor names (NHWC, as the kernel was given them)."""
    return {config.source.sides[side.name]: tensors[side.param] for side in config.side_inputs}


@dataclass(frozen=True, slots=True)
class OpRun:
    """One op of a uint8 config as onnxruntime ran it: its output (NHWC), and the float32 arithmetic its optimized
    graph kept (the op types of a DequantizeLinear -> Conv -> QuantizeLinear it did not fuse into QLinearConv, as
    with a float bias and a Clip between: a sum of dequantized products rounded in float32, not integers)."""

    output: np.ndarray
    in_float: tuple[str, ...] = ()


# the nodes whose float32 arithmetic rounds a sum or product differently from the integer operators (a max, a
# clip or a transpose changes no value; a HardSwish or HardSigmoid gate is a table of onnxruntime's float bytes)
FLOAT_ARITHMETIC = frozenset({"Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "Add", "Sum", "Mul",
                              "AveragePool", "GlobalAveragePool", "BatchNormalization",
                              "QLinearAveragePool"})  # the last dequantizes, sums and divides in float32


def run_onnxruntime_ops(config: Config, sources: list[np.ndarray], sides: dict[str, np.ndarray] | None = None,
                        oracle: QuantOracle = DEFAULT) -> list[OpRun]:
    """A uint8 config op by op: op j's nodes alone (its quantized conv, pool or Gemm, and its residual add) run by
    onnxruntime on sources[j - 1] (the chain's input or op j - 1's output, NHWC bytes) and, for a residual, on the
    tensor it names (sources[K], or a side input by its config name); each op's result in NHWC. What each of
    kernelgen's requantizations is held to on its own input. `oracle`: the session that is exact on this host
    (u8s8.quant_oracle)."""
    graph = _graph(config)
    wanted = set(config.source.nodes)
    outside = {i for i, n in enumerate(graph.nodes) if node_id(n) not in wanted}  # an Add another config folded
    ops = [with_gate(graph, with_silu(graph, with_residual(graph, op, outside), outside), outside)  # as imported
           for op in _quantized_ops(config, graph)]
    tensors = {ops[0].in_q: 0, **{q.out_q: k for k, q in enumerate(ops, start=1)}}
    side_of = {tensor: name for name, tensor in config.source.sides.items()}
    out = []
    for j, q in enumerate(ops):
        feeds = {q.in_q: sources[j]}
        for read in (q.residual, q.conv.scale_by):  # an add's other operand, a mul's factors
            if read is not None:
                feeds.setdefault(read, sides[side_of[read]] if read in side_of else sources[tensors[read]])
        kept: list[str] = []
        y = _session(config, graph, [graph.nodes[i] for i in sorted(q.members)], feeds, q.out_q, {}, oracle.entries,
                     kept)
        out.append(OpRun(y, tuple(dict.fromkeys(t for t in kept if t in FLOAT_ARITHMETIC))))
    return out


def float_arithmetic(config: Config, oracle: QuantOracle = DEFAULT) -> tuple[str, ...]:
    """The float32 arithmetic (FLOAT_ARITHMETIC op types) onnxruntime's optimized graph keeps for a uint8 config's
    nodes: what its whole-model reference computes in float for them (a network's step, execute.py)."""
    graph = _graph(config)
    nodes = _nodes(config, graph)
    feeds = {_chain_input(config, graph, nodes): np.zeros(config.input_shape, np.uint8)}
    feeds |= {config.source.sides[side.name]: np.zeros(side.shape, np.uint8) for side in config.side_inputs}
    kept: list[str] = []
    _session(config, graph, nodes, feeds, _quantized_ops(config, graph)[-1].out_q, {}, oracle.entries, kept)
    return tuple(dict.fromkeys(t for t in kept if t in FLOAT_ARITHMETIC))


def _session(config: Config, graph: Graph, nodes: list, feeds: dict[str, np.ndarray], output: str,
             given: dict[str, np.ndarray], entries: tuple[tuple[str, str], ...] = (),
             optimized: list[str] | None = None) -> np.ndarray:
    """`nodes` as a model of their own (feeds: NHWC arrays for the tensors they read from outside), run by
    onnxruntime's CPU provider with its default optimizations (a DequantizeLinear -> Conv -> QuantizeLinear
    group becomes the QLinearConv the deployed model runs); `output` in NHWC. entries: session config entries (a
    quantized oracle's, u8s8.QuantOracle); optimized: a list that gets the op types of the graph onnxruntime ran."""
    onnx_module()  # the package, or a clear error naming the extra
    from onnx import TensorProto, helper, numpy_helper

    try:
        import onnxruntime
    except ImportError:
        raise OnnxError(f"checking against onnxruntime needs the onnxruntime package: {ONNX_EXTRA}") from None
    produced = {o for n in nodes for o in n.output}
    needed = {i for n in nodes for i in n.input if i and i not in produced}
    constants, initializers = graph.constant_sources(needed - set(given))
    initializers += [numpy_helper.from_array(np.asarray(given[name], dtype=np.float32), name)
                     for name in sorted(needed & set(given))]
    uint8 = config.dtype == "uint8"
    element = TensorProto.UINT8 if uint8 else TensorProto.FLOAT
    arrays = {name: np.ascontiguousarray(x.transpose(0, 3, 1, 2).astype(np.uint8 if uint8 else np.float32))
              for name, x in feeds.items()}
    # a tensor ONNX holds as [N, C] (a Gemm's input or output) is the kernel's 1x1 image
    arrays = {name: a.reshape(graph.shapes[name]) if len(graph.shapes.get(name, a.shape)) == 2 else a
              for name, a in arrays.items()}
    sub = helper.make_graph(
        [*constants, *nodes], f"{config.name}_oracle",
        [helper.make_tensor_value_info(name, element, list(x.shape)) for name, x in arrays.items()],
        [helper.make_tensor_value_info(output, element, None)], initializers)
    model = helper.make_model(sub, opset_imports=graph.model.opset_import, ir_version=graph.model.ir_version)
    options = onnxruntime.SessionOptions()
    for key, value in entries:
        options.add_session_config_entry(key, value)
    options.log_severity_level = 4  # fatal only: an error it logs is the message OracleFailed carries
    with tempfile.TemporaryDirectory() as folder:
        if optimized is not None:
            options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        try:
            session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                   providers=["CPUExecutionProvider"])
            (y,) = session.run(None, arrays)
        except Exception as error:  # onnxruntime raises its own Exception subclasses (Fail, InvalidArgument, ...)
            raise OracleFailed(f"onnxruntime could not run {', '.join(node_id(n) for n in nodes)}: "
                               f"{_ort_message(error)}") from None
        if optimized is not None:
            import onnx

            optimized += [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    y = np.asarray(y, dtype=np.int32 if uint8 else np.float64)
    if y.ndim == 2:  # a Gemm's [N, K]: the 1x1 image the kernel writes
        y = y[:, :, None, None]
    return y.transpose(0, 2, 3, 1)


def _ort_message(error: Exception) -> str:
    """The reason in an onnxruntime error: its Status Message when it has one, without the status preamble."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text.split("Status Message: ", 1)[1] if "Status Message: " in text else text.split(" : ", 3)[-1]


def _chain_input(config: Config, graph: Graph, nodes: list) -> str:
    """The tensor the first node reads: a float op's input (a Mul's image, not its side input of factors), or the
    uint8 tensor a quantized config's first op reads."""
    if config.dtype == "uint8":
        return _quantized_ops(config, graph)[0].in_q
    sides = set(config.source.sides.values())
    return next(t for t in nodes[0].input if t not in sides)  # a mul's image, not its factors
