"""The layouts the hvx kernels compute on (uint8, and the float32 qf32 variant): activations in 8h x 8w x 32c
blocks, filters in 8i x 32o x 4i blocks; which key of a config keeps a chain off them."""
from __future__ import annotations

from ...config import Config
from ...layout import PadKind

ACTIVATION_LAYOUT = "NHWC8h8w32c"
FILTER_LAYOUT = "OIHW8i32o4i"


def unblocked_key(config: Config) -> str | None:
    """The first config key that keeps the chain off the blocked HVX layouts (None: all blocked)."""
    def plain(layout, name: str) -> bool:
        return layout.name == name and layout.pad_kind is PadKind.NONE

    if not plain(config.input_layout, ACTIVATION_LAYOUT):
        return "input.layout"
    for side in config.side_inputs:
        if not plain(side.layout, ACTIVATION_LAYOUT):
            return f"side_inputs.{side.name}.layout"
    for i, op in enumerate(config.ops):
        if not op.pool and not plain(op.filter_layout, FILTER_LAYOUT):
            return f"ops[{i}].conv2d.filter_layout"
        if not plain(op.output_layout, ACTIVATION_LAYOUT):
            own = f"ops[{i}].conv2d.output_layout"
            last = i == len(config.ops) - 1
            return own if own in config.marks or not last else "output.layout"
    return None if config.schedule.k_block == 32 else "schedule.k_block"
