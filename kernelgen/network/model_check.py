"""A manifest against the model it names, before anything runs it: every tensor is one of the model's, of the
model's shape and type; every network input is one of the model's inputs; every host node is one of its nodes.

manifest.py checks a manifest on its own (plan and build need no model); the commands that run the model
(validate, bench) check it here too, so a manifest edited by hand or pointing at another model is an error at the
manifest's line and key (exit 2), not onnxruntime's refusal deep inside a run.
"""
from __future__ import annotations

from ..errors import ConfigError, ConfigProblem
from ..onnx.graph import OnnxError, node_id
from .manifest import Network

# ONNX's TensorProto element types kernelgen's manifests name
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 10: "float16"}


def check_against_model(network: Network) -> None:
    """ConfigError listing every disagreement between the manifest and its model."""
    from ..onnx import subgraph

    try:
        graph = subgraph.graph_of(network.model)
    except OnnxError as error:
        raise network.problem("model", f"cannot read the model: {error}") from None
    model = network.model.name
    types = _types(graph.model.graph)
    graph_inputs = {i.name for i in graph.model.graph.input} - set(graph.constants)
    problems: list[ConfigProblem] = []

    def fail(key: str, message: str) -> None:
        problems.extend(network.problem(key, message).problems)

    for name, tensor in network.tensors.items():
        if name not in types and name not in graph.producers:
            fail(f"tensors.{name}", f"{model} has no tensor {name!r} (does model: name the model this manifest "
                                    f"was imported from?)")
            continue
        shape = graph.shapes.get(name)
        if shape is not None and tuple(shape) != tensor.shape:
            fail(f"tensors.{name}.shape", f"expected {list(shape)}, the shape of {name!r} in {model}, got "
                                          f"{list(tensor.shape)}")
        dtype = types.get(name)
        if dtype is not None and dtype != tensor.dtype:
            fail(f"tensors.{name}.dtype", f"expected {dtype}, the type of {name!r} in {model}, got {tensor.dtype}")
    for k, name in enumerate(network.inputs):
        if name in network.tensors and name not in graph_inputs:
            fail(f"inputs[{k}]", f"{name!r} is not an input of {model} (its inputs: "
                                 f"{', '.join(sorted(graph_inputs)) or 'none'})")
    ids = {node_id(n) for n in graph.nodes}
    for step in network.steps:
        for i, node in enumerate(step.nodes):
            if node not in ids:
                fail(f"steps[{step.index}].host[{i}]", f"{model} has no node {node!r} (a host step names the "
                                                       f"model's nodes)")
    if problems:
        raise ConfigError(sorted(problems, key=lambda p: (p.line, p.column)))


def _types(graph) -> dict[str, str]:
    """Each tensor's element type as the model declares it (inputs, inferred values, outputs, initializers)."""
    types = {t.name: ONNX_DTYPES.get(t.data_type, f"ONNX type {t.data_type}") for t in graph.initializer}
    for info in (*graph.input, *graph.value_info, *graph.output):
        elem = info.type.tensor_type.elem_type
        if elem:
            types[info.name] = ONNX_DTYPES.get(elem, f"ONNX type {elem}")
    return types
