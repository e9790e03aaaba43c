"""Quantized chains of `kernelgen import`: uint8 ops (convs, pools, the classifier: quant.py, qlayers.py) linked
through uint8 tensors, which groups of them one kernel may compute (a residual's tensor must be the group's input,
one of its results or a side input), and the uint8 config of a group (HVX's blocked layouts, the model's own scales
and zero points per op)."""
from __future__ import annotations

import numpy as np

from ..ops import OPS
from . import layers
from .graph import Graph
from .group_config import GroupConfig, GroupQuant, Op, Side
from .converters import quantized_op
from .qlayers import qnext
from ..quant_float import MAX_SCALE, MIN_SCALE, float_scale
from .quant import QConv, with_gate, with_residual, with_silu

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
    ops = [with_gate(graph, with_silu(graph, with_residual(graph, first, taken), taken), taken)]
    while True:
        following = qnext(graph, ops[-1].out_q)
        op = quantized_op(graph, following[0]) if following is not None else None
        weighted = next((o for o in ops if o.weights is not None), None)
        if not isinstance(op, QConv) or op.in_q != ops[-1].out_q or taken & own_nodes(graph, op) or (
                op.weights is not None and weighted is not None and (
                    op.weights.dtype != weighted.weights.dtype or op.weight_zero_point != weighted.weight_zero_point)):
            break
        ops.append(with_gate(graph, with_silu(graph, with_residual(graph, op, taken), taken), taken))
    return cut_quantized_escapes(graph, ops)


def own_nodes(graph: Graph, op: QConv) -> set[int]:
    """The nodes only this op computes: its members but the DequantizeLinear nodes, which the ops reading one tensor
    (a block's input read by its global pool and its mul) share."""
    return {m for m in op.members if graph.nodes[m].op_type != "DequantizeLinear"}


def cut_quantized_escapes(graph: Graph, ops: list[QConv]) -> list[QConv]:
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


def quant_group(graph: Graph, name: str, ops: list[QConv], model_path: str, nodes: tuple[str, ...],
                targets: tuple[str, ...]) -> GroupConfig:
    """A uint8 config (for a target that takes uint8: HVX's blocked layouts), the model's scales and zero points
    per op."""
    first = ops[0]
    weighted = next((op for op in ops if op.weights is not None), None)
    weight_dtype = "uint8" if weighted is not None and weighted.weights.dtype == np.uint8 else "int8"
    sides = qsides(ops)
    results = {op.out_q: k for k, op in enumerate(ops, start=1)}
    entries = []
    for op in ops:
        cv = op.conv
        out = {"output_scale": op.y_scale, "output_zero_point": op.y_zero_point}
        if OPS[cv.kind].KEEPS_QUANT:  # a max pool: the bytes keep their quantization
            entries.append(layers.pool_entry(cv))
        elif cv.kind == "mul":
            entries.append(Op(kind="mul", keys=(("by", sides[cv.scale_by]), ("quant", out))))
        elif cv.kind == "avgpool":  # its window as a float pool's, then the sums' requantization
            entries.append(Op(kind="avgpool", keys=(*layers.pool_entry(cv).keys, ("quant", out))))
        elif cv.kind != "conv2d":
            entries.append(Op(kind=cv.kind, keys=(("quant", out),)))
        else:
            entries.append(Op(kind="conv2d", keys=_qconv_keys(op, first, sides, results, out)))
    return GroupConfig(name=name, model=model_path, input_shape=graph.shapes[first.in_q], layout=QUANT_LAYOUT,
                       ops=tuple(entries), targets=targets, schedule="auto", nodes=nodes,
                       quant=GroupQuant(input_scale=first.x_scale, input_zero_point=first.x_zero_point,
                                        weight_dtype=weight_dtype,
                                        weight_zero_point=weighted.weight_zero_point if weighted is not None else 0,
                                        requantization="float32" if _float_scales_fit(ops) else "fixed_point"),
                       sides=tuple(_side(graph, ops, tensor, side) for tensor, side in sides.items()))


def _float_scales_fit(ops: list[QConv]) -> bool:
    """Every conv's float32 scale f32(f32(s_in * s_w) / s_out) within what the kernels requantize by in float32's
    way ([2^-16, 0.5): quant_float.py); a classifier whose weights barely move its output (a tiny s_w) is not."""
    return all(MIN_SCALE <= float_scale(op.x_scale, s_w, op.conv_scale or op.y_scale) < MAX_SCALE
               for op in ops if op.weights is not None and op.conv.kind == "conv2d" for s_w in op.weight_scales)


def _side(graph: Graph, ops: list[QConv], tensor: str, name: str) -> Side:
    scale, zero_point = side_quantization(ops, tensor)
    return Side(name=name, tensor=tensor, shape=graph.shapes[tensor], scale=scale, zero_point=zero_point)


def _qconv_keys(op: QConv, first: QConv, sides: dict[str, str], results: dict[str, int], out: dict
                ) -> tuple[tuple[str, object], ...]:
    cv, scales = op.conv, op.weight_scales
    keys = [("out_channels", cv.out_channels), ("kernel", cv.kernel), ("stride", cv.stride), ("pad", cv.pad),
            ("dilation", cv.dilation)]
    keys += [("groups", cv.groups)] if cv.groups > 1 else []
    keys += [("bias", True)] if op.bias is not None else []
    if op.residual is not None:
        keys.append(("residual", "input" if op.residual == first.in_q else sides.get(op.residual)
                     or results[op.residual]))
    keys += [("activation", op.activation)] if op.activation != "none" else []
    conv = {"conv_scale": op.conv_scale, "conv_zero_point": op.conv_zero_point} if op.conv_scale is not None else {}
    if op.gate_scale is not None:
        conv |= {"gate_scale": op.gate_scale, "gate_zero_point": op.gate_zero_point}
    quant = {"weight_scale": scales[0] if len(set(scales)) == 1 else scales, **out, **conv}
    return (*keys, ("filter_layout", "oihw-8i32o4i"), ("quant", quant))
