"""Names of a conv in seed 002's benchmark style (VulkanOp.bench_name): Input[..]xFilter[..]/Stride[..]/..."""
from __future__ import annotations

from ...plan_types import OpGeometry


def filter_label(g: OpGeometry) -> str:
    """A conv's filter in seed 002's style, [KHxKWxCinxCout] for a dense one; a depthwise filter is one KHxKW slice
    per channel and a grouped one reads Cin/groups channels per output, which the dense form would overstate by
    the channel count (a 3x3 depthwise conv over 88 channels is not Filter[3x3x88x88])."""
    kh, kw = g.kernel
    if g.depthwise:
        return f"Filter[{kh}x{kw}x{g.in_channels} depthwise]"
    if g.groups > 1:
        return f"Filter[{kh}x{kw}x{g.in_channels // g.groups}x{g.out_channels} groups {g.groups}]"
    return f"Filter[{kh}x{kw}x{g.in_channels}x{g.out_channels}]"
