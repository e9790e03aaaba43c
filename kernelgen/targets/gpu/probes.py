"""The device probes of both GPU APIs, described once: the FMA peak (independent multiply-add chains in the widest
vector the device runs at full rate) and STREAM's bandwidth triad (a = b + 3 c over arrays far beyond the caches).
Each API renders the same kernel in its language (ProbeText) and wraps it in its own launch record; the core
times them beside the kernels (measure/probes.py).

FMA chains: a -> a * m + c with m < 1 converges to c / (1 - m): never inf, never denormal; m, c and the trip
count are run-time arguments so that nothing folds at compile time. Each chain's steps are written out `unroll`
times per loop trip. Which shape reaches the peak depends on the host under a CPU driver (PoCL, lavapipe): the
candidates are each API's profile data (profiles.py).

The triad counts GB/s as STREAM does: two arrays read and one written per element (the write's read for
ownership not counted). 32 MiB per array on a GPU (96 MiB in all, six times a 16 MiB L3); on a CPU device
(PoCL, lavapipe) half the host's last-level cache per array where that is larger (measure/probes.triad_array_bytes:
PoCL's triad read 33 GB/s over 32 MiB arrays and 28 over 128 or 512 MiB on a host with a 480 MiB L3), as far as
one axis of work-groups reaches on Vulkan (65,535 groups: 64 MiB an array; lavapipe's own triad read 15.6 GB/s over
32 MiB and 14-15 over 512 MiB there, so its cap costs little).
One 4-float vector per work-item and no loop (lavapipe silently stops a loop after 65,535 back-edges)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...measure.primitives import BANDWIDTH, FMA, Probe
from ...measure.probes import triad_array_bytes
from .api import GpuApi

FMA_M, FMA_C = 0.999, 0.001  # the chains' multiplier and addend
TRIAD_ARRAY_BYTES = 32 * 1024 * 1024
TRIAD_VALUES = (0.0, 1.0, 2.0)  # a, b, c before a run: a becomes 1 + 3 * 2 = 7 everywhere
TRIAD_SCALE = 3.0


def device_triad_array_bytes(cpu: bool) -> int:
    """Each triad array on a device: TRIAD_ARRAY_BYTES on a GPU, at least half the host's last-level cache on a CPU."""
    return triad_array_bytes(TRIAD_ARRAY_BYTES) if cpu else TRIAD_ARRAY_BYTES


@dataclass(frozen=True, slots=True)
class FmaShape:
    """`accumulators` independent variables of `lanes` floats each (a float16, a vec4, a float), each stepped
    `steps` times per work-item, `unroll` steps written out per loop trip."""

    lanes: int
    accumulators: int
    unroll: int
    steps: int

    @property
    def trips(self) -> int:
        return self.steps // self.unroll

    @property
    def name(self) -> str:
        return f"{self.accumulators}x{self.lanes}x{self.unroll}"

    def flops(self, work_items: int) -> int:
        return 2 * self.lanes * self.accumulators * self.steps * work_items  # an FMA: 2 FLOPs a lane


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeText:
    """How one API's language writes the probes: the FMA kernel's lines before and after its chains (with
    {t}: the accumulator type), how it casts to that type, the x it seeds accumulator j from, the loop header;
    and the triad's whole text (with {reads}: the API's way to read b and c)."""

    fma_head: str
    fma_loop: str
    fma_tail: str
    cast: str  # {t} and {value}
    seed: str  # accumulator {j}'s start
    triad: str


def fma_source(api: GpuApi, text: ProbeText, shape: FmaShape) -> str:
    t = api.vector_type(shape.lanes)
    init = [f"    {t} a{j} = {text.cast.format(t=t, value=text.seed.format(j=j))};" for j in range(shape.accumulators)]
    chain = [f"        a{j} = fma(a{j}, m, c);" for _ in range(shape.unroll) for j in range(shape.accumulators)]
    total = " + ".join(f"a{j}" for j in range(shape.accumulators))
    return "\n".join([text.fma_head.format(t=t), *init, text.fma_loop, *chain, "    }",
                      text.fma_tail.format(t=t, total=total), ""])


@dataclass(frozen=True, slots=True)
class ProbeKernels:
    """One API's probes: its FMA probe of a shape and its triad, each made for a device (its info record), and
    the FMA shapes its profile tries."""

    fma: Callable[[Any, FmaShape], Probe]
    bandwidth: Callable[[Any], Probe]
    shapes: tuple[FmaShape, ...]

    def candidates(self, info: Any, kind: str) -> tuple[Probe, ...]:
        if kind == FMA:
            return tuple(self.fma(info, shape) for shape in self.shapes)
        return (self.bandwidth(info),) if kind == BANDWIDTH else ()


@dataclass(frozen=True, slots=True)
class TriadGrid:
    vectors: int  # 4-float vectors per array: one a work-item
    work_group: int

    @property
    def groups(self) -> int:
        return self.vectors // self.work_group

    @property
    def bytes(self) -> int:
        return 3 * self.vectors * 16  # b and c read, a written, per run


def triad_grid(api: GpuApi, work_group: int, array_bytes: int = TRIAD_ARRAY_BYTES) -> TriadGrid:
    """Whole work-groups of vectors, within the API's groups along one axis."""
    groups = array_bytes // (16 * work_group)
    return TriadGrid(min(groups, api.max_groups or groups) * work_group, work_group)


# Each API's spelling of the probes.
OPENCL_TEXT = ProbeText(
    fma_head="__kernel void fma_peak(__global {t} *out, const float ms, const float cs, const int trips)\n{{\n"
             "    const {t} m = ({t})(ms), c = ({t})(cs);\n"
             "    const float x = (float)get_global_id(0) * 1e-6f;",
    fma_loop="    for (int i = 0; i < trips; ++i) {",
    fma_tail="    out[get_global_id(0)] = {total};\n}}",
    cast="({t})({value})", seed="x + {j}.0f",
    triad="__kernel void bandwidth_triad(__global float4 *restrict a, __global const float4 *restrict b,\n"
          "                              __global const float4 *restrict c)\n{{\n"
          "    const size_t i = get_global_id(0);\n    a[i] = b[i] + 3.0f * c[i];\n}}\n")
VULKAN_TEXT = ProbeText(
    fma_head="#version 450\nlayout(local_size_x_id = 0) in;\n"
             "layout(std430, binding = 0) writeonly buffer Out {{ vec4 result[]; }};\n"
             "layout(push_constant) uniform Push {{ float m; float c; uint trips; }} p;\n"
             "void main() {{\n    uint gid = gl_GlobalInvocationID.x;\n    float x = float(gid & 255u) / 4096.0;\n"
             "    {t} m = {t}(p.m);\n    {t} c = {t}(p.c);",
    fma_loop="    for (uint i = 0u; i < p.trips; ++i) {",
    fma_tail="    result[gid] = vec4({total});\n}}",
    cast="{t}({value})", seed="x + {j}.0 / 64.0",
    triad="#version 450\nlayout(local_size_x_id = 0) in;\n"
          "layout(std430, binding = 0) writeonly buffer A {{ vec4 a[]; }};\n"
          "{reads}void main() {{\n    uint i = gl_GlobalInvocationID.x;\n    a[i] = B(i) + 3.0 * C(i);\n}}\n")
# the Vulkan triad's reads of b and c: uniform texel buffers, or storage buffers past maxTexelBufferElements
TEXEL_READS = """layout(binding = 1) uniform samplerBuffer b;
layout(binding = 2) uniform samplerBuffer c;
#define B(i) texelFetch(b, int(i))
#define C(i) texelFetch(c, int(i))
"""
STORAGE_READS = """layout(std430, binding = 1) readonly buffer BufferB { vec4 b[]; };
layout(std430, binding = 2) readonly buffer BufferC { vec4 c[]; };
#define B(i) b[i]
#define C(i) c[i]
"""
