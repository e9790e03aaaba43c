"""The Vulkan bandwidth probe: STREAM's triad, a = b + 3 c, over vec4 arrays far beyond the host's caches,
dispatched as the first stage of the same sequence (one command buffer) as the kernel it judges, so both are
timed under the same load (a CPU device such as lavapipe shares its cores with whatever else runs).

GB/s as STREAM counts it: two arrays read and one written per element (the write's read for ownership not
counted), over the stage's timestamps. 32 MiB per array: 96 MiB in all, six times a 16 MiB L3. One vec4 per
invocation and no loop (lavapipe silently stops a loop after 65,535 back-edges): 2^21 invocations in 32,768
groups of 64, within every device's 65,535 groups per dimension.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from ...errors import ToolchainError
from .runtime import Stage, VulkanRunner
from .toolchain import compile_glsl

ARRAY_BYTES = 32 * 1024 * 1024
LOCAL_SIZE = 64
MAX_GROUPS = 65535
# b and c are read through uniform texel buffers where the device holds that many texels, as the kernels read
# their tensors (access.py): lavapipe gathers texelFetch, while a storage-buffer load is a loop over lanes (this
# triad read 5.4 GB/s through texel buffers against 1.6 through storage buffers, in the same minute)
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
SOURCE = """#version 450
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) writeonly buffer A {{ vec4 a[]; }};
{reads}void main() {{
    uint i = gl_GlobalInvocationID.x;
    a[i] = B(i) + 3.0 * C(i);
}}
"""


@dataclass(frozen=True, slots=True, eq=False)
class BandwidthProbe:
    """The triad as one stage of a sequence: binds buffers[first], [first + 1], [first + 2] = `arrays` (a, b, c)."""

    stage: Stage
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray]
    bytes: int  # per dispatch

    def gbs(self, stage_ns: float) -> float:
        return self.bytes / stage_ns  # bytes per ns = GB/s


def bandwidth_probe(first: int = 0, *, array_bytes: int = ARRAY_BYTES, max_texels: int = 0) -> BandwidthProbe:
    """max_texels: the device's maxTexelBufferElements (0: read through storage buffers)."""
    groups = min(array_bytes // (16 * LOCAL_SIZE), MAX_GROUPS)
    vectors = groups * LOCAL_SIZE
    arrays = (np.zeros((vectors, 4), np.float32), np.ones((vectors, 4), np.float32),
              np.full((vectors, 4), 2.0, np.float32))
    texels = vectors <= max_texels
    source = SOURCE.format(reads=TEXEL_READS if texels else STORAGE_READS)
    kinds = ("storage", "texel", "texel") if texels else ()
    stage = Stage(compile_glsl(source), (first, first + 1, first + 2), (groups, 1, 1), {0: LOCAL_SIZE}, kinds=kinds)
    return BandwidthProbe(stage=stage, arrays=arrays, bytes=3 * vectors * 16)


def bandwidth_gbs(runner: VulkanRunner, *, repeat: int = 5) -> tuple[float, np.ndarray]:
    """The device's triad bandwidth on its own, the median of `repeat` dispatches after a warm-up one (lavapipe's
    first dispatch of a pipeline is slower), and the array `a` it wrote (b + 3 c everywhere)."""
    if not runner.info.timestamps:
        raise ToolchainError(f"{runner.info.name} cannot write timestamps; no bandwidth to measure")
    probe = bandwidth_probe(max_texels=runner.info.max_texel_buffer_elements)
    result = runner.run_sequence([probe.stage], list(probe.arrays), repeat=repeat + 1)
    return statistics.median(probe.gbs(t[0]) for t in result.stage_times_ns[1:]), result.outputs[0]
