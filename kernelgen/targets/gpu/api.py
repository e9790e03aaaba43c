"""Each GPU API's differences from the other, as data: how its language spells a float literal, a vector type and
an index; what it calls a work-group and a launch; how its kernels read tensors; the option keys its sweep sets.
The shared GPU code (pool.py, sweep.py, probes.py) is written once against these records."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import kernelgen.expr as E
from ...planner.packing import c_float


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuApi:
    name: str  # the target's name: its option block in a config
    language: str
    launch: str  # what the API calls running a kernel over a grid
    work_group: str  # what it calls the invocations that share local memory
    tensor_reads: str  # where its kernels read tensors from (a note for reports)
    float_literal: Callable[[float], str]
    count_as_float: str  # a window's count of inside positions as a float expression
    index_text: Callable[[E.Expr], str]  # an index expression in the language
    vector_type: Callable[[int], str]  # a float vector of n lanes (n = 1: the scalar)
    max_groups: int | None  # work-groups along one axis of a launch (None: no limit the API guarantees)
    sweep_tile: tuple[str, str]  # (option key, label) of the per-work-item tile a sweep varies
    sweep_size: tuple[str, str]  # (option key, label) of the work-group size


def c_index(expr: E.Expr) -> str:
    """C text of an expression, without one pair of outer parentheses."""
    text = E.to_c(expr)
    return text[1:-1] if text.startswith("(") and text.endswith(")") and text.count("(") == 1 else text


def glsl_float(value: float) -> str:
    """A GLSL float literal that round-trips (repr keeps every digit; GLSL wants a point or exponent)."""
    text = repr(float(value))
    return text if any(ch in text for ch in ".e") else text + ".0"


OPENCL = GpuApi(name="opencl", language="OpenCL C", launch="NDRange", work_group="local size",
                tensor_reads="image2d textures or __global buffers", float_literal=c_float,
                count_as_float="(float)count", index_text=c_index,
                vector_type=lambda n: f"float{n}" if n > 1 else "float", max_groups=None,
                sweep_tile=("tile", "tile"), sweep_size=("local_size", "local"))

VULKAN = GpuApi(name="vulkan", language="GLSL 450", launch="dispatch", work_group="workgroup size",
                tensor_reads="uniform texel buffers or storage buffers", float_literal=glsl_float,
                count_as_float="float(count)", index_text=lambda expr: E.to_c(expr, shifts=True),
                vector_type=lambda n: f"vec{n}" if n > 1 else "float", max_groups=65_535,
                sweep_tile=("ivc_tile", "ivc_tile"), sweep_size=("wg_size", "wg_size"))
