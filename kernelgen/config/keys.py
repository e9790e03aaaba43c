"""Which key of a config file gives a value the planner or a target derived: where an error about it points.

A target finds a problem in a tensor's layout or an option long after the file was read; the key it names must
be the one the user can edit (config.problem then finds its line and column), not the block around it.
"""
from __future__ import annotations

from . import Config


def output_layout_key(config: Config, index: int) -> str:
    """The key that gives op `index`'s output (0-based) its layout: the op's own output_layout; for the last op,
    output.layout; else input.layout, which an intermediate (and an output without a layout) keeps."""
    kind = config.ops[index].kind
    own = f"ops[{index}].{_avg_key(config, index) if kind == 'avgpool' else kind}.output_layout"
    if own in config.marks:
        return own
    if index == len(config.ops) - 1 and "output.layout" in config.marks:
        return "output.layout"
    return "input.layout"


def _avg_key(config: Config, index: int) -> str:
    """An avgpool op is spelled avgpool or global_avgpool in the file."""
    return "global_avgpool" if any(k.startswith(f"ops[{index}].global_avgpool") for k in config.marks) else "avgpool"


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
