"""onnxruntime on a model's own nodes: a network's host steps (some nodes cut out of the model, fed the tensors the
steps before produced) and the whole model with its intermediate tensors as extra outputs (the end-to-end oracle).
Tensors in ONNX's own layouts (NCHW) and types, by their ONNX names."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .graph import ONNX_EXTRA, Graph, OnnxError, node_id, onnx_module, read_graph

_GRAPHS: dict[Path, Graph] = {}
_NUMPY_TO_ONNX = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.int32): 6,
                  np.dtype(np.int64): 7, np.dtype(np.float16): 10}


def graph_of(path: Path) -> Graph:
    key = Path(path).resolve()
    if key not in _GRAPHS:
        _GRAPHS[key] = read_graph(key)
    return _GRAPHS[key]


def _runtime():
    onnx_module()
    try:
        import onnxruntime
    except ImportError:
        raise OnnxError(f"running host steps needs the onnxruntime package: {ONNX_EXTRA}") from None
    return onnxruntime


class RuntimeRefused(OnnxError):
    """onnxruntime would not load or run a model kernelgen cut out or extended (its own message): the caller
    knows which manifest key is to blame (execute.py)."""


def session(model_bytes: bytes, threads: int = 0, entries: tuple[tuple[str, str], ...] = (),
            basic_if_refused: bool = False, fallbacks: list[str] | None = None):
    """An onnxruntime CPU session with its default optimizations (what a deployment runs); threads 0: its own
    choice (one per core); entries: session config entries (a quantized oracle's, u8s8.QuantOracle).
    basic_if_refused: where that session refuses the model, one with its basic optimizations only (constant folding
    and node eliminations; no fusions). For a model with its intermediates as extra outputs: onnxruntime 1.32 fuses a
    Conv into the Add after it even where the Conv's result is such an output, then cannot find that output and
    refuses the session ("Failed to find node output ... producing output: conv2_out"). `fallbacks` gets why, when
    the session returned is that one."""
    onnxruntime = _runtime()

    def create(level=None):
        options = onnxruntime.SessionOptions()
        for key, value in entries:
            options.add_session_config_entry(key, value)
        options.log_severity_level = 3
        if level is not None:
            options.graph_optimization_level = level
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        return onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])

    try:
        return create()
    except Exception as error:  # its pybind Fail, InvalidGraph, NotImplemented...: all RuntimeError or bare
        refused = RuntimeRefused(f"onnxruntime refuses the model: {_first_line(error)}")
    if basic_if_refused:
        try:
            basic = create(onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC)
        except Exception:
            raise refused from None
        if fallbacks is not None:
            fallbacks.append(f"onnxruntime's basic optimizations only (its default session {refused.args[0][12:]})")
        return basic
    raise refused


def nodes_model(graph: Graph, nodes: tuple[str, ...], inputs: dict[str, np.dtype], outputs: dict[str, np.dtype]
                ) -> bytes:
    """The named nodes (and the Constant nodes and initializers they read) as a model of their own."""
    from onnx import helper

    by_id = {node_id(n): n for n in graph.nodes}
    missing = [n for n in nodes if n not in by_id]
    if missing:
        raise OnnxError(f"{graph.path.name} has no node {missing[0]!r}")
    wanted = set(nodes)
    chosen = [n for n in graph.nodes if node_id(n) in wanted]  # graph order: topological
    produced = {o for n in chosen for o in n.output}
    needed = {i for n in chosen for i in n.input if i and i not in produced and i not in inputs}
    constants, initializers = graph.constant_sources(needed)
    sub = helper.make_graph(
        [*constants, *chosen], "kernelgen_host_step",
        [helper.make_tensor_value_info(name, _NUMPY_TO_ONNX[np.dtype(dtype)], None) for name, dtype in inputs.items()],
        [helper.make_tensor_value_info(name, _NUMPY_TO_ONNX[np.dtype(dtype)], None) for name, dtype in outputs.items()],
        initializers)
    model = helper.make_model(sub, opset_imports=graph.model.opset_import, ir_version=graph.model.ir_version)
    return model.SerializeToString()


def whole_model(graph: Graph, extra_outputs: dict[str, np.dtype]) -> bytes:
    """The model with `extra_outputs` (intermediate tensors) as outputs too."""
    from onnx import helper

    model = type(graph.model)()
    model.CopyFrom(graph.model)
    present = {o.name for o in model.graph.output}
    model.graph.output.extend(helper.make_tensor_value_info(name, _NUMPY_TO_ONNX[np.dtype(dtype)], None)
                              for name, dtype in extra_outputs.items() if name not in present)
    return model.SerializeToString()


def run(session_, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in session_.get_outputs()]
    try:
        return dict(zip(names, session_.run(names, feeds)))
    except Exception as error:  # a feed of the wrong shape or type, a node failing on these values
        raise RuntimeRefused(f"onnxruntime fails to run it: {_first_line(error)}") from None


def _first_line(error: Exception) -> str:
    """onnxruntime's message without its source-file prefix, on one line."""
    text = " ".join(str(error).split())
    return text.split("] : ", 1)[-1] if text.startswith("[ONNXRuntimeError]") else text
