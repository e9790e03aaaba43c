"""Hexagon HVX (clang-19, 128-byte vectors): the plan's schedule with HVX stripe compute.

uint8: vrmpy (32 output channels x 4 input channels per instruction) with zero-point
corrections and fixed-point requantization; float32: the plan's loop nest as scalar C,
plus an HVX qf32 variant for v68+ (compile-only under QEMU 7.2). Arithmetic: hvx_plan.py.
"""
from __future__ import annotations

from typing import Any

from .base import OutputFile, Target


def _context(config: Any, plan: Any) -> dict[str, Any]:
    from ..hvx_plan import hvx_plan  # imports the planner; keep the registry import light

    return {"hvx": hvx_plan(config, plan)}


HVX = Target(
    name="hvx",
    summary="Hexagon HVX C (clang-19, qemu-hexagon): uint8 vrmpy, float32 scalar + qf32 (v68+)",
    files=(OutputFile(pattern="{name}.h", template="hvx/kernel.h.j2"),
           OutputFile(pattern="{name}.c", template="hvx/kernel.c.j2")),
    dtypes=("float32", "uint8"),
    context=_context,
    includes=("hvx/conv2d_uint8.c.j2", "hvx/conv2d_float32.c.j2", "hvx/helpers.c.j2"),
)
