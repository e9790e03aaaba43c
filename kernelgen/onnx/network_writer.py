"""The network manifest `kernelgen import` writes beside the configs (format: kernelgen/network/manifest.py).

The kernels are the imported configs; everything else the model computes on the way from its inputs to its outputs
is host steps. Which nodes those are follows from the tensors: walking back from the model's outputs and the
kernels' inputs, every node producing a tensor no kernel writes is a host node (a kernel's interior node, the
DequantizeLinear a kernel folds in, is run again on the host when a host node also reads its result). Host nodes
connected to each other are one step (onnxruntime then fuses them as it does in the whole model, a QDQ Add into
QLinearAdd), unless that would make a step wait for itself through a kernel; steps are ordered topologically.
Three kinds of node kernelgen runs itself rather than onnxruntime: a quantized network's input and output
conversions (convert steps), the nodes that only move channels (channel_moves.py: concat, slice and shuffle steps,
which a C driver copies, so Inception's branches, SqueezeNet's fire modules and ShuffleNet's units stay in the
program), and Resize nodes (resize_steps.py: a segmentation head's upsampling, float or a quantized model's).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Protocol

from ..config.reserved import RESERVED
from .channel_moves import ChannelMove, channel_moves, qdq_parameters
from .resize_steps import resize_steps, shape_after
from .graph import Graph, _attributes, node_id
from .layouts import CHANNELS_LAST, channels_last_tensors

# ONNX TensorProto element types the manifest names
_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 10: "float16"}


class Kernel(Protocol):
    name: str
    input: str
    sides: tuple[str, ...]  # the tensors of its side inputs, in the config's order
    output: str
    members: tuple[int, ...]
    layout: str
    text: str


@dataclass(frozen=True, slots=True)
class Manifest:
    text: str  # "" when the network cannot be described
    why: str  # why not ("" when it can)
    converted: tuple[str, ...] = ()  # the nodes its convert steps run
    copied: tuple[str, ...] = ()  # the nodes its concat, slice and shuffle steps run
    resized: tuple[str, ...] = ()  # the nodes its resize steps run (a Resize, the nodes working out its sizes)
    channels_last: frozenset[str] = frozenset()  # the tensors it holds NHWC (layouts.py): their kernels' configs too


def network_yaml(graph: Graph, kernels: list, model_path: str, channels_last: bool = False) -> Manifest:
    """The manifest of `kernels` and the host steps between them. channels_last: the float kernels' targets all
    compute channels innermost, so the tensors only they touch are NHWC (layouts.channels_last_tensors)."""
    if not kernels:
        return Manifest("", "no kernel was imported")
    types = _element_types(graph)
    written = {k.output: k for k in kernels}
    read = {t: k for k in kernels for t in (k.input, *k.sides)}
    available = set(graph.constants) | set(_graph_inputs(graph)) | set(written)
    producer = graph.producers
    host = _host_nodes(graph, available, [*sorted(graph.outputs), *read], set())
    moves = channel_moves(graph, host, types, resize_steps(graph, host, types))
    # a resize step's Shape of a tensor with a static shape reads no value: what only it read is no step's
    shapes_of = {i for m in moves.values() if m.kind == "resize" for i in m.nodes if graph.nodes[i].op_type == "Shape"}
    if shapes_of:
        host = _host_nodes(graph, available, [*sorted(graph.outputs), *read], shapes_of)
        moves = channel_moves(graph, host, types, resize_steps(graph, host, types))
    inputs = set(_graph_inputs(graph))
    entry = {i for i in host if graph.nodes[i].input and graph.nodes[i].input[0] in inputs
             and _conversion(graph, (i,), types) == "quantize"}
    steps = _steps(graph, kernels, host, producer, moves, entry)
    if steps is None:
        return Manifest("", "the kernels and the nodes between them form a cycle")
    tensors: dict[str, None] = dict.fromkeys([*_graph_inputs(graph)])
    for step in steps:
        tensors.update(dict.fromkeys([*step[1], *step[2]]))
    tensors.update(dict.fromkeys(sorted(graph.outputs)))
    shapes = dict(graph.shapes)  # and a resize step's output where its sizes were computed (resize_steps.py)
    for move in moves.values():
        if move.kind == "resize" and move.output not in shapes and move.inputs[0] in types:
            shapes[move.output] = shape_after(graph, move.output)
            types.setdefault(move.output, types[move.inputs[0]])
    shapes = {t: shape for t, shape in shapes.items() if shape is not None}
    missing = [t for t in tensors if t not in shapes or types.get(t) not in _DTYPES]
    if missing:
        return Manifest("", f"tensor {missing[0]!r} has no static shape or a type kernelgen does not name")
    empty = [t for t in tensors if min(shapes[t], default=0) < 1]
    if empty:
        return Manifest("", f"tensor {empty[0]!r} has shape {list(shapes[empty[0]])}: a manifest's tensors "
                            f"hold at least one element")
    float_moves = {nodes for nodes, move in moves.items() if types.get(move.output) == 1}
    nhwc = channels_last_tensors(steps, kernels, [*_graph_inputs(graph), *graph.outputs], shapes,
                                 float_moves) if channels_last else frozenset()
    layouts = ({t: k.layout for k in kernels for t in (k.input, *k.sides)}
               | {k.output: k.layout for k in kernels} | dict.fromkeys(nhwc, CHANNELS_LAST))
    layouts |= _packed_between_moves(moves.values(), layouts, float_moves)
    name = re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", os.path.splitext(os.path.basename(model_path))[0].lower()))
    name = name.strip("_")[:40].rstrip("_")
    name = name if name and name[0].isalpha() and name not in RESERVED else f"net_{name}".rstrip("_")
    lines = [f"# written by `kernelgen import` from {os.path.basename(model_path)}: the network as kernelgen runs it.",
             "# Steps run in order: kernels (a config <name>.yaml beside this file), conversions of a quantized network's",
             "# float input and output, and host steps (ONNX nodes kernelgen does not generate, run by onnxruntime).",
             "# Tensors by their ONNX names and shapes; weights stay in the model.",
             *(["# The model's int8 activations are held as uint8 here: each byte and zero point + 128, the same "
                "values."] if graph.uint8_activations else []),
             f"network: {name}", f"model: {json.dumps(model_path)}",
             f"inputs: [{', '.join(json.dumps(t) for t in _graph_inputs(graph))}]",
             f"outputs: [{', '.join(json.dumps(t) for t in sorted(graph.outputs))}]", "tensors:"]
    for tensor in tensors:
        keys = [f"shape: {list(shapes[tensor])}", f"dtype: {_DTYPES[types[tensor]]}"]
        keys += [f"layout: {layouts[tensor]}"] if tensor in layouts else []
        quant = _quantization(graph, tensor, producer)
        keys += [f"scale: {quant[0]!r}, zero_point: {quant[1]}"] if quant else []
        lines.append(f"  {json.dumps(tensor)}: {{{', '.join(keys)}}}")
    lines.append("steps:")
    converted: list[str] = []
    for what, inputs, outputs in steps:
        if isinstance(what, int):
            kernel = kernels[what]
            lines.append(f"  - kernel: {kernel.name}")
        elif conversion := _conversion(graph, what, types):
            ids = [node_id(graph.nodes[i]) for i in sorted(what)]
            converted += ids
            lines.append(f"  - convert: {conversion}  # {', '.join(map(json.dumps, ids))}")
        elif what in moves:
            lines.append(f"  - {moves[what].key}  # {', '.join(json.dumps(node_id(graph.nodes[i])) for i in what)}")
        else:
            lines.append(f"  - host: [{', '.join(json.dumps(node_id(graph.nodes[i])) for i in what)}]")
            lines.append(f"    ops: [{', '.join(graph.nodes[i].op_type for i in what)}]")
        lines.append(f"    inputs: [{', '.join(json.dumps(t) for t in inputs)}]")
        lines.append(f"    outputs: [{', '.join(json.dumps(t) for t in outputs)}]")
    text = "\n".join(lines) + "\n"
    problem = _schema_problem(text)
    return Manifest("", f"it would not load ({problem})") if problem else \
        Manifest(text, "", tuple(converted), channels_last=nhwc,
                 copied=tuple(node_id(graph.nodes[i]) for nodes, m in moves.items() if m.kind != "resize"
                              for i in nodes),
                 resized=tuple(node_id(graph.nodes[i]) for nodes, m in moves.items() if m.kind == "resize"
                               for i in nodes))


def _schema_problem(text: str) -> str:
    """Why the manifest text fails the manifest's own schema ("" when it passes): the import never writes a
    network.yaml its own plan rejects (a value the model allows and the manifest cannot hold)."""
    from pydantic import ValidationError

    from ..network.manifest import NetworkModel
    from ..config.yamlmarks import YamlProblem, load

    try:
        NetworkModel.model_validate(load(text).data)
    except YamlProblem as problem:
        return problem.message
    except ValidationError as error:
        first = error.errors()[0]
        return f"{'.'.join(str(k) for k in first['loc'])}: {first['msg']}"
    return ""


def _conversion(graph: Graph, nodes, types: dict[str, int]) -> str:
    """"quantize" or "dequantize" for a step kernelgen converts itself (execute.convert), "" otherwise: one
    QuantizeLinear of float32 to uint8 (or DequantizeLinear back) at one constant scale and zero point, a quantized
    network's input or output conversion; or the DequantizeLinear, Flatten, QuantizeLinear, DequantizeLinear that
    ends a quantized classifier on a 1x1 image (SqueezeNet's), all at one scale and zero point: the Flatten moves no
    byte and the requantization gives back each byte, so it is the first DequantizeLinear's, to [N, C]."""
    order = sorted(nodes)
    if len(order) == 4 and [graph.nodes[i].op_type for i in order] == [
            "DequantizeLinear", "Flatten", "QuantizeLinear", "DequantizeLinear"]:
        return "dequantize" if _flattened_tail(graph, order, types) else ""
    if len(order) != 1:
        return ""
    node = graph.nodes[order[0]]
    if node.op_type not in ("QuantizeLinear", "DequantizeLinear") or qdq_parameters(graph, node) is None:
        return ""
    uint8 = node.output[0] if node.op_type == "QuantizeLinear" else node.input[0]
    real = node.input[0] if node.op_type == "QuantizeLinear" else node.output[0]
    if types.get(uint8) != 2 or types.get(real) != 1:
        return ""
    return "quantize" if node.op_type == "QuantizeLinear" else "dequantize"


def _flattened_tail(graph: Graph, order: list[int], types: dict[str, int]) -> bool:
    first, flatten, requantize, last = (graph.nodes[i] for i in order)
    chained = (flatten.input[0] == first.output[0] and requantize.input[0] == flatten.output[0]
               and last.input[0] == requantize.output[0])
    shape = graph.shapes.get(first.input[0])
    parameters = {qdq_parameters(graph, node) for node in (first, requantize, last)}
    return (chained and int(_attributes(flatten).get("axis", 1)) == 1 and shape is not None and len(shape) == 4
            and shape[2:] == (1, 1) and len(parameters) == 1 and None not in parameters
            and types.get(first.input[0]) == 2 and types.get(last.output[0]) == 1)


def _graph_inputs(graph: Graph) -> list[str]:
    initializers = {t.name for t in graph.model.graph.initializer}
    return [i.name for i in graph.model.graph.input if i.name not in initializers]


def _element_types(graph: Graph) -> dict[str, int]:
    g = graph.model.graph
    types = {info.name: info.type.tensor_type.elem_type for info in (*g.input, *g.value_info, *g.output)}
    return types | {t.name: t.data_type for t in g.initializer}


def _quantization(graph: Graph, tensor: str, producer: dict[str, int]) -> tuple[float, int] | None:
    """A uint8 tensor's scale and zero point: from the QuantizeLinear writing it or a DequantizeLinear reading it
    (or the QLinearConv input it is), when they are constants."""
    candidates = []
    if tensor in producer and graph.nodes[producer[tensor]].op_type == "QuantizeLinear":
        candidates.append(graph.nodes[producer[tensor]].input[1:3])
    for reader in graph.consumers.get(tensor, ()):
        node = graph.nodes[reader]
        if node.op_type == "DequantizeLinear" and node.input[0] == tensor:
            candidates.append(node.input[1:3])
        elif node.op_type == "QLinearConv" and node.input[0] == tensor:
            candidates.append(node.input[1:3])
    for names in candidates:
        scale = graph.constants.get(names[0])
        zero = graph.constants.get(names[1]) if len(names) > 1 and names[1] else None
        if scale is not None and scale.size == 1 and (zero is None or zero.size == 1):
            return float(scale.reshape(-1)[0]), 0 if zero is None else int(zero.reshape(-1)[0])
    return None


def _steps(graph: Graph, kernels: list, host: set[int], producer: dict[str, int],
           moves: dict[tuple[int, ...], ChannelMove], entry: set[int]
           ) -> list[tuple[int | tuple[int, ...], list[str], list[str]]] | None:
    """(kernel index or host node indices, inputs, outputs) per step, in an order that respects every read;
    None when no order does. A channel step (`moves`, by its nodes) is a step of its own, reading and writing the
    tensors it names (a QDQ one: uint8); so is each quantization of a network input (`entry`: a convert step,
    though a host node reads its bytes too: a concat of the input with a conv's result). A tensor a kernel reads is
    an output of the step making it, though a node of that step reads it too (the DequantizeLinear a kernel folds
    in, run again on the host)."""
    inside = {i: k for k, kernel in enumerate(kernels) for i in kernel.members}
    moved = {i for nodes in moves for i in nodes}
    components = _components(graph, host - moved - entry, producer) + [(i,) for i in sorted(entry)] + list(moves)
    constant, needs = _from_constants(graph, host - moved)
    singles = [tuple(sorted({i, *needs.get(i, ())})) for i in sorted(host - moved - constant)] + list(moves)
    for attempt in (components, singles):  # joined host steps, else one node each (with what feeds it constants)
        steps: list[tuple[int | tuple[int, ...], list[str], list[str], int]] = []
        for k, kernel in enumerate(kernels):
            steps.append((k, [kernel.input, *kernel.sides], [kernel.output], min(kernel.members)))
        kernel_outputs = {kernel.output for kernel in kernels}
        kernel_inputs = {t for kernel in kernels for t in (kernel.input, *kernel.sides)}
        for nodes in attempt:
            if nodes in moves:
                move = moves[nodes]
                steps.append((nodes, list(move.inputs), [move.output], min(nodes)))
                continue
            produced = [o for i in nodes for o in graph.nodes[i].output if o]
            inputs = [t for i in nodes for t in graph.nodes[i].input
                      if t and t not in produced and t not in graph.constants]
            outputs = [o for o in produced if o in graph.outputs or o in kernel_inputs or any(
                r not in nodes and (r in host or r in inside) for r in graph.consumers.get(o, ()))]
            outputs = [o for o in outputs if o not in kernel_outputs and producer.get(o) not in constant]
            steps.append((tuple(nodes), list(dict.fromkeys(inputs)), outputs, min(nodes)))
        ordered = _topological(steps)
        if ordered is not None:
            return [step[:3] for step in ordered]
    return None


def _host_nodes(graph: Graph, available: set[str], stack: list[str], opaque: set[int]) -> set[int]:
    """The nodes computing the tensors in `stack` from what is `available` (walking back through producers; not
    into the inputs of the `opaque` nodes), Constant nodes aside."""
    host: set[int] = set()
    while stack:
        tensor = stack.pop()
        if tensor in available or tensor not in graph.producers or graph.producers[tensor] in host:
            continue
        index = graph.producers[tensor]
        host.add(index)
        stack += [t for t in graph.nodes[index].input if t] if index not in opaque else []
    return {i for i in host if graph.nodes[i].op_type != "Constant"}


def _packed_between_moves(moves, layouts: dict[str, str], float_moves: set) -> dict[str, str]:
    """The layout of each uint8 tensor that only channel steps touch (a QDQ ShuffleNet's concat -> shuffle ->
    slice): the one the kernels on either side hold, passed along the steps (a copy keeps the layout)."""
    quantized = [m for m in moves if m.nodes not in float_moves]
    known = dict(layouts)
    while True:
        found = {t: held for m in quantized
                 for held in [next((known[u] for u in (*m.inputs, m.output) if u in known), None)] if held
                 for t in (*m.inputs, m.output) if t not in known}
        if not found:
            return {t: known[t] for t in known if t not in layouts}
        known |= found


def _from_constants(graph: Graph, host: set[int]) -> tuple[set[int], dict[int, set[int]]]:
    """The host nodes that compute from constants alone (a DequantizeLinear of a host Gemm's int8 weights), and for
    each other host node those of them it needs: such a node is no step of its own (it would read nothing), it
    runs inside the step of each node that needs it."""
    fed: dict[int, set[int]] = {}  # a node computing from constants -> the ones it reads from, transitively
    for i in sorted(host):  # graph order: a node's producers first
        sources = [graph.producers.get(t) for t in graph.nodes[i].input if t and t not in graph.constants]
        if all(j in fed for j in sources):
            fed[i] = {k for j in sources for k in (j, *fed[j])}
    needs: dict[int, set[int]] = {}
    for i in sorted(host - set(fed)):
        for t in graph.nodes[i].input:
            j = graph.producers.get(t)
            if j in fed:
                needs.setdefault(i, set()).update({j, *fed[j]})
    return set(fed), needs


def _components(graph: Graph, host: set[int], producer: dict[str, int]) -> list[tuple[int, ...]]:
    parent = {i: i for i in host}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in host:
        for t in graph.nodes[i].input:
            j = producer.get(t)
            if j in host:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in sorted(host):
        groups.setdefault(root(i), []).append(i)
    return sorted((tuple(g) for g in groups.values()), key=lambda g: g[0])


def _topological(steps: list) -> list | None:
    """Kahn's order over the steps' tensors, the step whose first node comes first in the graph first (the
    order is the same for the same model)."""
    made_by = {t: k for k, step in enumerate(steps) for t in step[2]}
    waits = [{made_by[t] for t in step[1] if t in made_by and made_by[t] != k} for k, step in enumerate(steps)]
    done: list[int] = []
    while len(done) < len(steps):
        finished = set(done)
        ready = [k for k in range(len(steps)) if k not in finished and waits[k] <= finished]
        if not ready:
            return None
        done.append(min(ready, key=lambda k: (steps[k][3], k)))
    return [steps[k] for k in done]
