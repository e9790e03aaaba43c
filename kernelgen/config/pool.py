"""Meaning checks of the pooling ops of a config (`maxpool`, `avgpool`, `global_avgpool`): each becomes a filterless
op of the chain whose output channel k reads input channel k's window. Split from config.py, which calls `pool` with
its checker (problem reporting, the sliding-window geometry and the output layout)."""
from __future__ import annotations

from typing import Any

import kernelgen.config.model as M
from ..layout import Layout

Shape = tuple[int, int, int, int]


def pool(checker: Any, keys: tuple, model, last: bool, input_layout: Layout | None, in_shape: Shape
         ) -> dict[str, Any] | None:
    """The op's fields (config.Conv2d's keywords), or None after reporting a problem through the config's checker
    (its problem, pair, window and output_layout)."""
    kind = keys[-1]
    n, height, width, channels = in_shape
    uint8 = checker.model.dtype == "uint8"
    if uint8 and kind not in ("maxpool", "global_avgpool", "mul"):
        checker.problem(keys, f"expected conv2d, maxpool, global_avgpool or mul ops with dtype uint8 (a quantized "
                              f"{kind} is not generated yet), got {kind}")
        return None
    scale_by = None
    if kind == "mul":
        sides = {side.name: side.shape for side in checker.sides}
        scale_by, want = model.by, (n, 1, 1, channels)
        if scale_by not in sides or sides[scale_by] != want:
            got = f"{list(sides[scale_by])}" if scale_by in sides else "no such side input"
            checker.problem((*keys, "by"), f"expected a side input of shape {list(want)} (one value per image and "
                                           f"channel; side_inputs: {', '.join(sides) or 'none declared'}), got "
                                           f"{scale_by!r}: {got}")
            return None
        kernel, stride, pad_spec = (1, 1), (1, 1), 0
    elif kind == "global_avgpool":
        kernel, stride, pad_spec = (height, width), (1, 1), 0
    else:
        fields = type(model).model_fields
        kernel = checker.pair((*keys, "kernel"), model.kernel, fields["kernel"].description)
        stride = checker.pair((*keys, "stride"), model.stride, fields["stride"].description)
        pad_spec = model.pad
    fitted = checker.window(keys, kernel, stride, (1, 1), pad_spec, in_shape)
    if fitted is None:
        return None
    pad, (out_h, out_w) = fitted
    # ONNX: a pad as large as the window would make windows of padding alone (no maximum; a mean over nothing)
    if max(pad[0], pad[2]) >= kernel[0] or max(pad[1], pad[3]) >= kernel[1]:
        checker.problem((*keys, "pad"), f"expected pads smaller than the {kernel[0]}x{kernel[1]} window (a window "
                                        f"of padding alone has no {'maximum' if kind == 'maxpool' else 'mean'}), got "
                                        f"{list(pad)}")
        return None
    out_shape = (n, out_h, out_w, channels)
    output_layout = checker.output_layout(keys, model.output_layout, last, input_layout, out_shape)
    if output_layout is None:
        return None
    quant = getattr(model, "quant", None)
    if quant is not None and not uint8:
        checker.problem((*keys, "quant"), f"expected a quant block only with dtype uint8, got {checker.model.dtype}")
        return None
    return dict(quant=None if quant is None else M.OpQuantModel(output_scale=quant.output_scale,
                                                                output_zero_point=quant.output_zero_point),
                out_channels=channels, kernel=kernel, stride=stride, pad=pad, dilation=(1, 1), filter_layout=None,
                output_layout=output_layout, groups=channels,
                kind={"maxpool": "maxpool", "mul": "mul"}.get(kind, "avgpool"),
                count_include_pad=bool(getattr(model, "count_include_pad", False)), scale_by=scale_by)
