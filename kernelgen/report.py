"""Plan -> the report of seed 000 (shapes and layouts, cache usage, loop nest) as text,
Markdown or one JSON object. All numbers come from the Plan; nothing is recomputed here.
"""
from __future__ import annotations

import math

from pathlib import Path
from typing import Any

from .ops import OPS
from .plan_types import Block, Guard, Halo, Loop, LoopOrder, Node, Pipeline, Plan, Section, Stmt


def _shape(values: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _tensor_rows(plan: Plan) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    first = plan.tensors[0]
    padded = plan.ops[0].in_shape
    pad = plan.ops[0].pad
    rows.append(("Input", "Logical", "NHWC", _shape(first.logical_shape), "", ""))
    if any(pad):
        padded_shape = (padded[0], padded[1] + pad[0] + pad[2], padded[2] + pad[1] + pad[3], padded[3])
        rows.append(("Padded Input", "Logical", "NHWC", _shape(padded_shape) + " (zeros added in the cache read)", "", ""))
    # Seed 000's order: each filter, then the tensor its op produces.
    result = [first]
    for index, filt in enumerate(t for t in plan.tensors[1:-1] if t.name.startswith("filter")):
        result.append(filt)
        if index < len(plan.intermediates):
            result.append(plan.intermediates[index])
    result += [t for t in plan.tensors if t.name.startswith("bias")]
    result.append(plan.tensors[-1])
    for tensor in result:
        title = "Packed Input" if tensor.name == "input" else tensor.title
        rows.append((title, "Physical", tensor.physical_layout, _shape(tensor.physical_shape),
                     tensor.logical_layout, _shape(tensor.logical_shape)))
    return rows


def _cache_rows(plan: Plan) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for cache in plan.caches:
        where = f"reuses {cache.aliases}" if cache.aliases else f"workspace + {cache.offset}"
        rows.append((cache.name, _shape(cache.logical_shape), f"{cache.physical_layout} {_shape(cache.physical_shape)}",
                     str(cache.elements), str(cache.bytes), where))
    return rows


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(header), fmt(tuple("-" * w for w in widths)), *(fmt(r) for r in rows)]


def _md_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows)]


def _nest_lines(nodes: tuple[Node, ...], depth: int) -> list[str]:
    pad = "  " * depth
    lines: list[str] = []
    for node in nodes:
        if isinstance(node, Loop):
            note = f"  // {node.comment}" if node.comment else ""
            lines.append(f"{pad}for ({node.var}: int32, 0, {node.extent}) {{{note}")
            lines += _nest_lines(node.body, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(node, Guard):
            lines.append(f"{pad}if ({node.cond}) {{")
            lines += _nest_lines(node.body, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(node, Block):
            lines.append(f"{pad}{{  // {node.label}")
            lines += _nest_lines(node.body, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(node, Section):
            lines.append("")
            lines.append(f"{pad}// {node.label}")
            lines += _nest_lines(node.body, depth)
        elif node.summary:  # a statement without a summary (a validation build's trace) is not the schedule
            lines.append(f"{pad}{node.summary}")
    return lines


TENSOR_HEADER = ("Tensor", "Type", "Layout", "Shape", "Logical Layout", "Logical Shape")
CACHE_HEADER = ("Cache", "Window (logical)", "Physical", "Elements", "Bytes", "Storage")


def _schedule_text(plan: Plan) -> str:
    width = f"w_split={plan.w_split} w_block={plan.w_block}" if plan.w_split else "full width"
    ko, ho, wo = plan.stripe_counts
    chunks = f" c_split={plan.c_split} (chunks of {plan.c_block} input channels)" if plan.c_split > 1 else ""
    head = f"k_split={plan.k_split} h_split={plan.h_split} k_block={plan.k_block} h_block={plan.h_block} {width}{chunks}; "
    if plan.order is LoopOrder.ROWS_OUTER:
        return (head + f"order rows_outer: {ho * wo} row stripe(s) = {ho} x {wo} (rows x columns), each computing "
                       f"the last op's output channels in {ko} block(s) of {plan.k_split * plan.k_block}")
    return head + f"{ko * ho * wo} stripe(s) = {ko} x {ho} x {wo} (channels x rows x columns)"


def _search_lines(plan: Plan) -> list[str]:
    search = plan.search
    if search is None:
        return []
    c = search.chosen

    def fitted(candidate) -> str:  # what else the search chose besides the splits
        return (f"{f' c_split={candidate.c_split}' if 'c_split' in search.fitted else ''}"
                f"{f' order={candidate.order}' if 'order' in search.fitted else ''}"
                f"{f' k_block={candidate.k_block}' if 'k_block' in search.fitted else ''}"
                f"{f' h_block={candidate.h_block}' if 'h_block' in search.fitted else ''}")

    lines = [f"budget: {search.budget} bytes ({search.budget_source}); fitted {', '.join(search.fitted) or 'nothing'} "
             f"over {search.tried} candidates; chose k_split={c.k_split} h_split={c.h_split} w_split={c.w_split}"
             f"{fitted(c)}: {c.stripes} stripe(s), caches {c.workspace_bytes} bytes, traffic {c.traffic_bytes} bytes"]
    lines += [f"  why: {search.why}"] if search.why else []
    for other in (*search.runners_up, *search.too_big):
        lines.append(f"  runner-up k_split={other.k_split} h_split={other.h_split} w_split={other.w_split}"
                     f"{fitted(other)}: {other.stripes} stripe(s), caches {other.workspace_bytes} bytes, traffic "
                     f"{other.traffic_bytes} bytes: {other.verdict}")
    return lines


def unfused_activation_bytes(plan: Plan) -> int:
    """Activation traffic of running each op as its own kernel: every intermediate written and read back."""
    elements = sum(math.prod(op.in_shape) + math.prod(op.out_shape) * (2 if op.epilogue.residual is not None else 1)
                   for op in plan.ops)
    return elements * plan.element_bytes


def _residual_text(residual: int | str) -> str:
    return residual if isinstance(residual, str) else "input" if residual == 0 else f"conv2d #{residual}"


def _epilogue_text(op) -> str:
    """', then + bias, relu6' when the op has an epilogue; nothing otherwise (the goldens stay)."""
    e = op.epilogue
    steps = ((["+ bias"] if e.bias else []) + ([f"+ {_residual_text(e.residual)}"]
                                                 if e.residual is not None else [])
             + ([e.activation] if e.activated else []))
    if op.pool:
        return ", count_include_pad" if OPS[op.kind].MEAN and op.count_include_pad else ""
    depthwise = op.groups == op.in_channels
    grouped = (f", {'depthwise' if depthwise else 'groups'} {op.groups}"
               + (f" (channel multiplier {op.out_channels // op.in_channels})" if depthwise and
                  op.out_channels > op.in_channels else "")) if op.groups > 1 else ""
    return grouped + (f", then {', '.join(steps)}" if steps else "")


def _summary_lines(plan: Plan) -> list[str]:
    origin = f"{plan.schedule_origin}: " if plan.schedule_origin else ""
    lines = [f"schedule: {origin}{_schedule_text(plan)}", *_search_lines(plan)]
    for op in plan.ops:
        lines.append(f"{op.label}: {_shape(op.in_shape)} -> {_shape(op.out_shape)}, kernel {op.kernel[0]}x"
                     f"{op.kernel[1]}, stride {list(op.stride)}, pad {list(op.pad)}"
                     + ("" if op.pool else f", dilation {list(op.dilation)}") + _epilogue_text(op))
    lines.append(f"FLOPs: {plan.flops} useful, {plan.executed_flops} executed "
                 f"({plan.executed_flops / plan.flops:.2f}x, halo rows and chain recompute)")
    t = plan.traffic
    lines.append(f"traffic between memory and caches: {t.total} bytes (input {t.input_bytes}, filters "
                 f"{'and biases ' if any(op.epilogue.bias for op in plan.ops) else ''}{t.filter_bytes}, output "
                 f"{t.output_bytes})")
    if len(plan.ops) > 1:
        fused, alone = t.input_bytes + t.output_bytes, unfused_activation_bytes(plan)
        lines.append(f"fusion: activations move {fused} bytes (input and output, halos included) against {alone} "
                     f"for the {len(plan.ops)} ops run one by one (each op's input and output once through "
                     f"memory): " + (f"{alone - fused} saved ({1 - fused / alone:.1%})" if fused <= alone else
                                      f"{fused - alone} more (channel stripes and halo rows reload the input)")
                     + "; filters not compared (their reloads follow the tiling either way)")
    if plan.halo is Halo.REUSE:
        lines.append(f"halo reuse: input bytes loaded {t.input_bytes} with reuse, {plan.reload_input_bytes} without "
                     f"({plan.reload_input_bytes - t.input_bytes} saved)")
    if plan.pipeline is Pipeline.DOUBLE_BUFFER:
        lines.append(f"pipeline (double buffer): {'; '.join(plan.timeline)}")
    for p in plan.pad_strategies:
        lines.append(f"padding, {p.loop}: {p.strategy} ({p.why})")
    return lines


def text_report(plan: Plan) -> str:
    lines = [f"kernelgen plan: {plan.name} ({Path(plan.config_path).name}, {plan.dtype})", "", *_summary_lines(plan), "",
             "Shapes and Layouts", "", *_table(TENSOR_HEADER, _tensor_rows(plan)), "", "Cache Usage", "",
             *_table(CACHE_HEADER, _cache_rows(plan)), "",
             f"workspace: {plan.workspace_elements} elements = {plan.workspace_bytes} bytes "
             f"(buffers aligned to {plan.alignment_bytes} bytes)"]
    lines += [f"note: {n}" for n in plan.notes]
    lines += ["", "Loop Nest", *_nest_lines(plan.kernel.body, 1)]
    return "\n".join(lines) + "\n"


def markdown_report(plan: Plan) -> str:
    lines = [f"# kernelgen plan: `{plan.name}`", "", *(f"- {line}" for line in _summary_lines(plan)), "",
             "## Shapes and Layouts", "", *_md_table(TENSOR_HEADER, _tensor_rows(plan)), "",
             "## Cache Usage", "", *_md_table(CACHE_HEADER, _cache_rows(plan)), "",
             f"Workspace: {plan.workspace_elements} elements = {plan.workspace_bytes} bytes.", ""]
    lines += [f"- note: {n}" for n in plan.notes]
    lines += ["", "## Loop Nest", "", "```", *_nest_lines(plan.kernel.body, 0), "```"]
    return "\n".join(lines) + "\n"


def _nest_json(nodes: tuple[Node, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for node in nodes:
        if isinstance(node, Loop):
            out.append({"var": node.var, "extent": node.extent, "comment": node.comment, "body": _nest_json(node.body)})
        elif isinstance(node, Guard):
            out.append({"if": node.cond, "body": _nest_json(node.body)})
        elif isinstance(node, Block):
            out.append({"block": node.label, "body": _nest_json(node.body)})
        elif isinstance(node, Section):
            out.append({"section": node.label, "body": _nest_json(node.body)})
        elif isinstance(node, Stmt) and node.summary:
            out.append({"stmt": node.summary})
    return out


def json_report(plan: Plan) -> dict[str, Any]:
    tensors = [{"name": t.name, "title": t.title, "logical_layout": t.logical_layout,
                "logical_shape": list(t.logical_shape), "physical_layout": t.physical_layout,
                "physical_shape": list(t.physical_shape), "elements": t.elements, "scope": "global"}
               for t in plan.tensors]
    tensors += [{"name": t.name, "title": t.title, "logical_layout": t.logical_layout,
                 "logical_shape": list(t.logical_shape), "physical_layout": t.physical_layout,
                 "physical_shape": list(t.physical_shape), "elements": t.elements, "scope": "cache"}
                for t in plan.intermediates]
    return {
        "name": plan.name, "config": plan.config_path, "dtype": plan.dtype,
        "schedule": {"k_split": plan.k_split, "h_split": plan.h_split, "w_split": plan.w_split,
                     "k_block": plan.k_block, "h_block": plan.h_block, "w_block": plan.w_block,
                     "stripes": list(plan.stripe_counts), "pipeline": plan.pipeline, "halo": plan.halo,
                     "order": plan.order, "origin": plan.schedule_origin},
        "search": None if plan.search is None else {
            "budget": plan.search.budget, "budget_source": plan.search.budget_source,
            "fitted": list(plan.search.fitted), "tried": plan.search.tried,
            "candidates": [{"k_split": c.k_split, "h_split": c.h_split, "w_split": c.w_split, "stripes": c.stripes,
                            "order": c.order, "k_block": c.k_block, "h_block": c.h_block,
                            "workspace_bytes": c.workspace_bytes, "traffic_bytes": c.traffic_bytes,
                            "executed_flops": c.executed_flops, "verdict": c.verdict}
                           for c in (plan.search.chosen, *plan.search.runners_up, *plan.search.too_big)]},
        "timeline": list(plan.timeline),
        "reload_input_bytes": plan.reload_input_bytes,
        "pad_strategies": [{"loop": p.loop, "strategy": p.strategy, "why": p.why} for p in plan.pad_strategies],
        "flops": plan.flops, "executed_flops": plan.executed_flops,
        "traffic": {"input_bytes": plan.traffic.input_bytes, "filter_bytes": plan.traffic.filter_bytes,
                    "output_bytes": plan.traffic.output_bytes, "total_bytes": plan.traffic.total},
        "ops": [{"index": o.index, "kind": o.kind, "in_shape": list(o.in_shape), "out_shape": list(o.out_shape),
                 "kernel": list(o.kernel), "stride": list(o.stride), "pad": list(o.pad),
                 "dilation": list(o.dilation), "flops": o.flops, "groups": o.groups, "bias": o.epilogue.bias,
                 "residual": o.epilogue.residual, "activation": o.epilogue.activation}
                for o in plan.ops],
        "tensors": tensors,
        "caches": [{"name": c.name, "elements": c.elements, "bytes": c.bytes, "logical_shape": list(c.logical_shape),
                    "physical_layout": c.physical_layout, "physical_shape": list(c.physical_shape),
                    "offset": c.offset, "aliases": c.aliases} for c in plan.caches],
        "workspace": {"elements": plan.workspace_elements, "bytes": plan.workspace_bytes,
                      "alignment_bytes": plan.alignment_bytes},
        "notes": list(plan.notes),
        "loops": _nest_json(plan.kernel.body),
    }
