"""Which key of a config file gives a value the planner or a target derived: where an error about it points.

A target finds a problem in a tensor's layout or an option long after the file was read; the key it names must
be the one the user can edit (config.problem then finds its line and column), not the block around it.
"""
from __future__ import annotations

from ..ops import OPS
from . import Config


def output_layout_key(config: Config, index: int) -> str:
    """The key that gives op `index`'s output (0-based) its layout: the op's own output_layout; for the last op,
    output.layout; else input.layout, which an intermediate (and an output without a layout) keeps."""
    own = f"ops[{index}].{_op_key(config, index)}.output_layout"
    if own in config.marks:
        return own
    if index == len(config.ops) - 1 and "output.layout" in config.marks:
        return "output.layout"
    return "input.layout"


def _op_key(config: Config, index: int) -> str:
    """Op `index`'s key in the file: one of the OPS keys whose records make its kind (an avgpool is spelled avgpool
    or global_avgpool)."""
    kind = config.ops[index].kind
    return next((key for key, record in OPS.items() if record.KIND == kind and any(
        mark.startswith(f"ops[{index}].{key}.") for mark in config.marks)), kind)


def tensor_layout_key(config: Config, name: str) -> str:
    """The layout key of a plan tensor by its name: input, side_<name>, temp<j> (op j's output, 1-based) or
    output."""
    if name == "input":
        return "input.layout"
    if name.startswith("side_"):
        return f"side_inputs.{name.removeprefix('side_')}.layout"
    if name == "output":
        return output_layout_key(config, len(config.ops) - 1)
    return output_layout_key(config, int(name.removeprefix("temp")) - 1)
