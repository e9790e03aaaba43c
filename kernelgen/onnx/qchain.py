"""Quantized chains of `kernelgen import`: uint8 ops (convs, pools, the classifier: quant.py, qlayers.py) linked
through uint8 tensors, which groups of them one kernel may compute (a residual's tensor must be the group's input,
one of its results or a side input), and the uint8 config of a group (HVX's blocked layouts, the model's own scales
and zero points per op)."""
from __future__ import annotations

import json
import os

import numpy as np

from . import layers
from .graph import Graph
from .converters import quantized_op
from .qlayers import qnext
from .quant import QConv, with_gate, with_residual

QUANT_LAYOUT = "nhwc-8h8w32c"  # a uint8 config's activations: HVX's blocked layout


def qfusable(chain: list[QConv], start: int, stop: int) -> str:
    """Why ops start..stop-1 of a quantized chain cannot be one kernel ("" when they can): each residual reads the
    group's input, one of its results (across no stride) or a tensor from outside the chain (a side input)."""
    made = {op.out_q: k for k, op in enumerate(chain)}  # a chain tensor -> the op computing it
    for k in range(start, stop):
        source = -1 if chain[k].residual == chain[0].in_q else made.get(chain[k].residual)
        if source is None:  # no residual, or a side input: the other branch, from outside the chain
            continue
        if source < start - 1:
            return (f"op {k + 1} adds a tensor from before op {start + 1} (a kernel's residual is its own input, one "
                    f"of its ops' results or a side input)")
        if source >= start and any(op.conv.stride != (1, 1) for op in chain[source + 1:k + 1]):
            return f"op {k + 1} adds op {source + 1}'s result across a stride"
    return ""


def qchain(graph: Graph, first: QConv, taken: set[int]) -> list[QConv]:
    """Quantized ops (convs, pools, the classifier) chained through uint8 tensors that only the next op reads
    (directly, or through one DequantizeLinear; an Add a later op folds in may read it too), with the same weight
    type and zero point (the config's top-level quant). Ends at the first op whose result escapes the chain."""
    ops = [with_gate(graph, with_residual(graph, first, taken), taken)]
    while True:
        following = qnext(graph, ops[-1].out_q)
        op = quantized_op(graph, following[0]) if following is not None else None
        weighted = next((o for o in ops if o.weights is not None), None)
        if not isinstance(op, QConv) or op.in_q != ops[-1].out_q or taken & own_nodes(graph, op) or (
                op.weights is not None and weighted is not None and (
                    op.weights.dtype != weighted.weights.dtype or op.weight_zero_point != weighted.weight_zero_point)):
            break
        ops.append(with_gate(graph, with_residual(graph, op, taken), taken))
    return _cut_escapes(graph, ops)


def own_nodes(graph: Graph, op: QConv) -> set[int]:
    """The nodes only this op computes: its members but the DequantizeLinear nodes, which the ops reading one tensor
    (a block's input read by its global pool and its mul) share."""
    return {m for m in op.members if graph.nodes[m].op_type != "DequantizeLinear"}


def _cut_escapes(graph: Graph, ops: list[QConv]) -> list[QConv]:
    """Ends a quantized chain at the first op whose result (or its dequantized value) is read outside it."""
    while True:
        members = {m for op in ops for m in op.members}
        escaping = None
        for j, op in enumerate(ops[:-1]):
            readers = set(graph.consumers.get(op.out_q, ()))
            readers |= {r for d in readers if graph.nodes[d].op_type == "DequantizeLinear"
                        for r in graph.consumers.get(graph.nodes[d].output[0], ())}
            if op.out_q in graph.outputs or readers - members:
                escaping = j
                break
        if escaping is None:
            return ops
        ops = ops[:escaping + 1]


def qsides(ops: list[QConv]) -> dict[str, str]:
    """A quantized group's side inputs (an Add's other branch from outside the group), ONNX tensor -> config name."""
    inside = {ops[0].in_q, *(op.out_q for op in ops)}
    out: dict[str, str] = {}
    for op in ops:
        for tensor, word in ((op.conv.scale_by, "scale"), (op.residual, "shortcut")):
            if tensor is not None and tensor not in inside and tensor not in out:
                taken = sum(name.startswith(word) for name in out.values())
                out[tensor] = word if not taken else f"{word}_{taken + 1}"
    return out


def side_quantization(ops: list[QConv], tensor: str) -> tuple[float, int]:
    """A side input's scale and zero point, as the op reading it dequantizes it."""
    op = next(o for o in ops if tensor in (o.residual, o.conv.scale_by))
    return (op.residual_scale, op.residual_zero_point) if op.residual == tensor else (op.by_scale, op.by_zero_point)


def quant_yaml(graph: Graph, name: str, ops: list[QConv], model_path: str, nodes: tuple[str, ...],
               targets: tuple[str, ...]) -> str:
    """A uint8 config (for a target that takes uint8: HVX's blocked layouts), the model's scales and zero points
    per op."""
    first = ops[0]
    n, c, h, w = (*graph.shapes[first.in_q], 1, 1)[:4]  # [N, C]: a 1x1 image
    weighted = next(op for op in ops if op.weights is not None) if any(op.weights is not None for op in ops) else None
    weight_dtype = "uint8" if weighted is not None and weighted.weights.dtype == np.uint8 else "int8"
    weight_zero_point = weighted.weight_zero_point if weighted is not None else 0
    lines = [f"# imported by `kernelgen import` from {os.path.basename(model_path)}: quantized (uint8 activations, "
             f"{weight_dtype} weights), the model's own scales, zero points, weights and biases",
             f"name: {name}", "dtype: uint8", f"input: {{shape: [{n}, {h}, {w}, {c}], layout: {QUANT_LAYOUT}}}"]
    sides = qsides(ops)
    if sides:
        lines.append("side_inputs:  # an Add's other branch, from outside the group")
        for tensor, side in sides.items():
            scale, zero_point = side_quantization(ops, tensor)
            sn, sc, sh, sw = graph.shapes[tensor]
            lines.append(f"  {side}: {{shape: [{sn}, {sh}, {sw}, {sc}], layout: {QUANT_LAYOUT}, scale: "
                         f"{scale!r}, zero_point: {zero_point}}}  # {json.dumps(tensor)}")
    lines += [f"quant: {{input_scale: {first.x_scale!r}, input_zero_point: {first.x_zero_point}, weight_dtype: "
              f"{weight_dtype}, weight_zero_point: {weight_zero_point},",
              "       requantization: float32}  # onnxruntime's float scale and rounding: bit-exact with it", "ops:"]
    results = {op.out_q: k for k, op in enumerate(ops, start=1)}
    for op in ops:
        cv = op.conv
        if cv.kind == "maxpool":  # the bytes keep their quantization
            lines.append(f"  - {layers.pool_yaml(cv)}")
            continue
        if cv.kind != "conv2d":
            head = f"mul: {{by: {sides[cv.scale_by]}, " if cv.kind == "mul" else "global_avgpool: {"
            lines.append(f"  - {head}quant: {{output_scale: {op.y_scale!r}, output_zero_point: {op.y_zero_point}}}}}")
            continue
        scales = op.weight_scales
        scale_text = repr(scales[0]) if len(set(scales)) == 1 else "[" + ", ".join(repr(x) for x in scales) + "]"
        keys = [f"out_channels: {cv.out_channels}", f"kernel: {list(cv.kernel)}", f"stride: {list(cv.stride)}",
                f"pad: {list(cv.pad)}", f"dilation: {list(cv.dilation)}"]
        keys += [f"groups: {cv.groups}"] if cv.groups > 1 else []
        keys += ["bias: true"] if op.bias is not None else []
        if op.residual is not None:
            keys.append(f"residual: {'input' if op.residual == first.in_q else sides.get(op.residual) or results[op.residual]}")
        if op.activation != "none":
            keys.append(f"activation: {op.activation if isinstance(op.activation, str) else json.dumps(op.activation)}")
        conv_quant = (f", conv_scale: {op.conv_scale!r}, conv_zero_point: {op.conv_zero_point}"
                      if op.conv_scale is not None else "")
        keys += ["filter_layout: oihw-8i32o4i", f"quant: {{weight_scale: {scale_text}, output_scale: {op.y_scale!r}, "
                                                 f"output_zero_point: {op.y_zero_point}{conv_quant}}}"]
        lines.append(f"  - conv2d: {{{', '.join(keys)}}}")
    lines += [f"output: {{layout: {QUANT_LAYOUT}}}", "schedule: auto", f"targets: [{', '.join(targets)}]"]
    if nodes:  # a candidate group being costed has no source: it is planned, never run
        mapped = f", sides: {{{', '.join(f'{v}: {json.dumps(t)}' for t, v in sides.items())}}}" if sides else ""
        lines.append(f"source: {{onnx: {json.dumps(model_path)}, nodes: [{', '.join(json.dumps(i) for i in nodes)}]"
                     f"{mapped}}}")
    return "\n".join(lines) + "\n"
