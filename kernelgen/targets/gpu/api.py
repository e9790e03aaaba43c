"""Each GPU API's differences from the other, as data: how its language spells a vector type and an index, and its
float arithmetic (its dialect: literals, max and min, the epilogue's operations); what it calls a work-group and a
launch, and how many groups one axis takes; the option keys its sweep sets; whether a vector access may start at
any element. (Which tensors go to images or texel buffers is each
target's plan: dispatch.py's TensorKind for OpenCL, a stage's binding kinds for Vulkan.)
The shared GPU code (pool.py, sweep.py, probes.py, stores.py) is written once against these records."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import kernelgen.expr as E
from ...ops.dialect import C, Dialect, c_float


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuApi:
    name: str  # the target's name: its option block in a config
    launch: str  # what the API calls running a kernel over a grid
    grid_in_groups: bool  # the launch counts work-groups (Vulkan's dispatch), not work-items (OpenCL's NDRange)
    work_group: str  # what it calls the invocations that share local memory
    dialect: Dialect  # its float scalar arithmetic (ops/dialect.py): a kernel's epilogue takes it to its vector type
    count_as_float: str  # a window's count of inside positions as a float expression
    index_text: Callable[[E.Expr], str]  # an index expression in the language
    vector_type: Callable[[int], str]  # a float vector of n lanes (n = 1: the scalar)
    max_groups: int | None  # work-groups along one axis of a launch (None: no limit the API guarantees)
    # a vector load or store may start at any element (OpenCL's vload4 / vstore4), not only at a multiple of its
    # width (a GLSL vec4 buffer indexes whole vectors): stores.py
    vectors_at_any_offset: bool
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


def glsl_dialect(scalar: str, vec: str) -> Dialect:
    """GLSL's spelling of an activation's statements on a vec4 (f16vec4): a literal in the scalar type (float16_t
    does not take a float literal implicitly), and a select as mix over a bvec (greaterThan wants two vectors)."""
    literal = glsl_float if scalar == "float" else (lambda value: f"{scalar}({glsl_float(value)})")
    return Dialect(literal=literal, decl=vec, forms={
        "mul": "{0} * {1}", "add": "{0} + {1}", "muladd": "{0} * {1} + {2}", "max": "max({0}, {1})",
        "min": "min({0}, {1})",
        "select_gt": f"mix({vec}({{3}}), {vec}({{2}}), greaterThan({vec}({{0}}), {vec}({{1}})))",
        "exp": "exp({0})", "div": "{0} / {1}"})


# OpenCL C: C's operators and float literals with an f, and its fmax/fmin builtins for max and min (C's selects
# elsewhere: gcc vectorizes a select); C casts, floatN vectors; an NDRange of any number of work-groups
OPENCL = GpuApi(name="opencl", launch="NDRange", grid_in_groups=False, work_group="local size",
                dialect=Dialect(literal=c_float, decl="float",
                                forms=C.forms | {"max": "fmax({0}, {1})", "min": "fmin({0}, {1})",
                                                 "exp": "exp({0})"}),
                count_as_float="(float)count", index_text=c_index,
                vector_type=lambda n: f"float{n}" if n > 1 else "float", max_groups=None,
                vectors_at_any_offset=True,
                sweep_tile=("tile", "tile"), sweep_size=("local_size", "local"))

# GLSL 450: constructor casts, vecN vectors, shifts for power-of-two divisions; at least 65,535 groups an axis
VULKAN = GpuApi(name="vulkan", launch="dispatch", grid_in_groups=True, work_group="workgroup size",
                dialect=glsl_dialect("float", "float"),
                count_as_float="float(count)", index_text=lambda expr: E.to_c(expr, shifts=True),
                vector_type=lambda n: f"vec{n}" if n > 1 else "float", max_groups=65_535,
                vectors_at_any_offset=False,
                sweep_tile=("ivc_tile", "ivc_tile"), sweep_size=("wg_size", "wg_size"))
