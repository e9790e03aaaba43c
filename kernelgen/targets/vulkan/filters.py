"""The vulkan target's own filter packing, for a config whose filter layout does not keep 4 output channels
together (OIHW, the ONNX order `kernelgen import` writes). Pure.

Every multiply-add of the conv reads a vec4 of 4 output channels of the filter. With OIHW those are 4 scalars a
whole filter apart, read through a storage buffer: lavapipe gathers each lane with a branch, and the 3x3
64x64x128 -> 128 conv measured 0.26-0.30 of the FMA probe against 0.80-0.85 for the same conv with an HWIO filter
(one texelFetch per vec4; both in one run, on a host busy with other work). Filters are constants, packed once
on the host, so the target packs any other layout into h, w, i, o with the output channels padded with zeros to
a multiple of 4, and says so in the dispatch notes (the filter<j> binding takes that order, not the config's).
"""
from __future__ import annotations

from ...layout import FILTER_DIMS, TensorLayout, parse_layout
from .access import vec_ok

PACKING = "o, i, h, w -> h, w, i, o // 4, o % 4"


def packed_filter(layout: TensorLayout) -> TensorLayout | None:
    """The target's packing of a filter whose layout has no aligned vec4 of output channels; None when it has
    (HWIO, OHWI-style blocked layouts with 4-channel runs): the kernel then reads the config's layout."""
    if vec_ok(layout, 0):
        return None
    return parse_layout(PACKING, FILTER_DIMS, pad=0.0).bind(layout.logical_shape)
