"""The OpenCL bandwidth probe: STREAM's triad, a = b + 3 c, over float4 arrays far beyond the host's caches,
launched first in the same sequence (the same queue) as the kernel it judges, so both run under the same load.

GB/s as STREAM counts it: two arrays read and one written per element (the write's read for ownership not
counted), over the launch's profiling time. 32 MiB per array: 96 MiB in all, six times a 16 MiB L3, so the
arrays come from memory. Every element is one work-item: PoCL packs consecutive work-items into vector lanes
and the work-groups over every core, as it does a kernel's.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from .args import BufferArg, Launch
from .toolchain import OpenCLRunner

ARRAY_BYTES = 32 * 1024 * 1024
LOCAL_SIZE = 256
SCALE = 3.0  # a = b + SCALE * c: with b = 1 and c = 2 every element of a becomes 7
SOURCE = """__kernel void bandwidth_triad(__global float4 *restrict a, __global const float4 *restrict b,
                              __global const float4 *restrict c)
{
    const size_t i = get_global_id(0);
    a[i] = b[i] + 3.0f * c[i];
}
"""


@dataclass(frozen=True, slots=True, eq=False)
class BandwidthProbe:
    """The triad as one launch of a sequence on the tensors named in `tensors` (prefixed: no clash with a
    kernel's), and the bytes one launch moves."""

    launch: Launch
    tensors: dict[str, BufferArg]
    bytes: int

    def gbs(self, launch_ns: float) -> float:
        return self.bytes / launch_ns  # bytes per ns = GB/s


def bandwidth_probe(*, array_bytes: int = ARRAY_BYTES, read_back: bool = False) -> BandwidthProbe:
    """The probe on fresh arrays; read_back returns `a` (a test checks it holds b + 3 c everywhere)."""
    vectors = array_bytes // 16
    vectors -= vectors % LOCAL_SIZE
    names = ("bandwidth_a", "bandwidth_b", "bandwidth_c")
    arrays = (np.zeros((vectors, 4), np.float32), np.ones((vectors, 4), np.float32),
              np.full((vectors, 4), 2.0, np.float32))
    tensors = {name: BufferArg(array, output=read_back and name == names[0]) for name, array in zip(names, arrays)}
    launch = Launch(SOURCE, "bandwidth_triad", names, (vectors,), (LOCAL_SIZE,))
    return BandwidthProbe(launch=launch, tensors=tensors, bytes=3 * vectors * 16)


def bandwidth_gbs(runner: OpenCLRunner, *, runs: int = 5) -> float:
    """The device's triad bandwidth on its own: the median of `runs` launches after a warm-up one (PoCL's JIT)."""
    probe = bandwidth_probe()
    result = runner.run_sequence([probe.launch], probe.tensors, repeat=runs + 1)
    return statistics.median(probe.gbs(t) for t in result.kernel_times_ns[1:])
