"""The YAML file of an imported group's config (group_config.GroupConfig): the one writer, used only when the
configs are written (candidate groups are costed as records, never as text). Flow mappings one line per top-level
key and per op, as a person would write them, with comments saying where each value came from."""
from __future__ import annotations

import json
import os
from typing import Any

from .group_config import GroupConfig

FLOAT_HEADER = "the model's own weights, NCHW tensors as ONNX stores them"
FLOAT_NHWC_HEADER = ("the model's own weights, NHWC tensors between two kernels of the network (channels innermost, "
                     "as they compute), NCHW as ONNX stores them elsewhere")
QUANT_HEADER = ("quantized (uint8 activations, {} weights), the model's own scales, zero points, weights and "
                "biases")
FLOAT_SIDES = "tensors from outside the group: an Add's other branch, a Mul's factors"
QUANT_SIDES = "an Add's other branch, from outside the group"


def config_text(group: GroupConfig) -> str:
    data = group.data()
    layouts = {group.layout, group.output_layout, *(side.layout for side in group.sides)}
    what = QUANT_HEADER.format(group.quant.weight_dtype) if group.quant is not None else \
        FLOAT_NHWC_HEADER if "NHWC" in layouts else FLOAT_HEADER
    lines = [f"# imported by `kernelgen import` from {os.path.basename(group.model)}: {what}", f"name: {group.name}"]
    if group.quant is not None:
        lines.append("dtype: uint8")
    lines.append(f"input: {_flow(data['input'])}")
    if group.sides:
        lines.append(f"side_inputs:  # {FLOAT_SIDES if group.quant is None else QUANT_SIDES}")
        for side in group.sides:
            lines.append(f"  {side.name}: {_flow(data['side_inputs'][side.name])}  # {json.dumps(side.tensor)}")
    if group.quant is not None:
        first, _, rest = _flow(data["quant"]).rpartition(", requantization: ")
        why = ("onnxruntime's float scale and rounding: bit-exact with it" if group.quant.requantization == "float32"
               else "a float32 scale s_in * s_w / s_out is past [2^-16, 0.5), which the kernels take: within 1 of "
                    "onnxruntime")
        lines += [f"quant: {first},", f"       requantization: {rest}  # {why}"]
    lines.append("ops:")
    lines += [f"  - {kind}: {_flow(keys)}" for op in data["ops"] for kind, keys in op.items()]
    lines.append(f"output: {_flow(data['output'])}")
    if "schedule" in data:
        lines.append(f"schedule: {data['schedule']}")
    lines.append(f"targets: {_flow(data['targets'])}")
    if "source" in data:  # names from the model: JSON strings, whatever characters they hold
        source = data["source"]
        mapped = f", sides: {{{', '.join(f'{k}: {json.dumps(t)}' for k, t in source['sides'].items())}}}" \
            if "sides" in source else ""
        lines.append(f"source: {{onnx: {json.dumps(source['onnx'])}, nodes: "
                     f"[{', '.join(json.dumps(n) for n in source['nodes'])}]{mapped}}}")
    return "\n".join(lines) + "\n"


def _flow(value: Any, key: str = "") -> str:
    """A value in YAML's flow style: floats as Python's shortest round-trip repr, an activation that is no name as
    JSON (a clamp's [lo, hi], {"hardsigmoid": {...}})."""
    if key == "activation" and not isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return f"[{', '.join(_flow(v) for v in value)}]"
    if isinstance(value, dict):
        return f"{{{', '.join(f'{k}: {_flow(v, k)}' for k, v in value.items())}}}"
    return str(value)
