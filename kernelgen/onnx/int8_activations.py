"""A QDQ model's int8 activations held as uint8: `quantize_static`'s default activation type is int8 (QInt8), the hvx
kernels move uint8 bytes. The two are one quantization seen from two byte encodings: with q_u8 = q_s8 + 128 and
z_u8 = z_s8 + 128,

    (q_u8 - z_u8) * s = (q_s8 - z_s8) * s                         (DequantizeLinear: the same float32)
    clamp(rint(x / s) + z_u8, 0, 255) = clamp(rint(x / s) + z_s8, -128, 127) + 128   (QuantizeLinear)

so every float a DequantizeLinear gives is unchanged, and every activation byte moves by 128. read_graph rewrites the
model in memory, before anything reads it (the importer, the oracle, the host steps): each QuantizeLinear and
DequantizeLinear of an activation with an int8 zero point gets that zero point + 128 as uint8, and its tensor becomes
uint8. Weights (a DequantizeLinear of a constant) stay int8. Only a model whose int8 activations pass from a
QuantizeLinear straight to DequantizeLinear nodes is rewritten (the form the quantizer writes); one whose int8 bytes
meet any other node, or that takes or gives int8 tensors, is left as it is.
"""
from __future__ import annotations

import numpy as np

INT8, UINT8 = 3, 2  # ONNX TensorProto element types
QDQ = ("QuantizeLinear", "DequantizeLinear")


def uint8_activations(model) -> int:
    """Rewrites `model` (an onnx.ModelProto) in place as the docstring above says; the number of int8 activation
    tensors it made uint8 (0: none, or the model is left as it is)."""
    from onnx import numpy_helper

    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    constants = set(initializers) | {o for node in graph.node if node.op_type == "Constant" for o in node.output}
    rewritten, tensors = [], set()
    for node in graph.node:
        if node.op_type not in QDQ or len(node.input) < 3 or node.input[0] in constants:
            continue  # weights stay int8
        zero = initializers.get(node.input[2])
        if zero is None or zero.data_type != INT8:
            continue
        if any(a.name == "output_dtype" for a in node.attribute):
            return 0  # opset 21's explicit output type: not the quantizer's form
        rewritten.append(node)
        tensors.add(node.output[0] if node.op_type == "QuantizeLinear" else node.input[0])
    if not tensors or not _only_between_qdq(graph, tensors, rewritten):
        return 0
    renamed: dict[str, str] = {}
    taken = set(initializers) | {o for node in graph.node for o in node.output}
    for node in rewritten:
        old = node.input[2]
        if old not in renamed:
            name = _unused(f"{old}_as_uint8", taken)
            values = numpy_helper.to_array(initializers[old]).astype(np.int16) + 128
            graph.initializer.append(numpy_helper.from_array(values.astype(np.uint8), name))
            renamed[old] = name
        node.input[2] = renamed[old]
    for info in graph.value_info:
        if info.name in tensors:
            info.type.tensor_type.elem_type = UINT8
    return len(tensors)


def _only_between_qdq(graph, tensors: set[str], rewritten: list) -> bool:
    """Every int8 activation written by a rewritten QuantizeLinear and read only by rewritten DequantizeLinear
    nodes, none of them a graph input or output."""
    chosen = {id(node) for node in rewritten}
    ends = {info.name for info in (*graph.input, *graph.output)}
    if tensors & ends:
        return False
    written = set()
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in tensors and not (id(node) in chosen and node.op_type == "DequantizeLinear" and index == 0):
                return False
        for name in node.output:
            if name in tensors:
                if id(node) not in chosen or node.op_type != "QuantizeLinear":
                    return False
                written.add(name)
    return written == tensors


def _unused(name: str, taken: set[str]) -> str:
    k, candidate = 2, name
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    taken.add(candidate)
    return candidate
