"""The Vulkan device probes: gpu/probes.py's FMA chains and bandwidth triad in GLSL, each compiled once and bound
to buffers of its own, dispatched by the core's timing as the first stages of the same command buffer as the
kernels, so both are timed under the same load (a CPU device such as lavapipe shares its cores with whatever else
runs). The triad's b and c are read through uniform texel buffers where the device holds that many texels, as the
kernels read their tensors (access.py): lavapipe gathers texelFetch, while a storage-buffer load is a loop over
lanes (this triad read 5.4 GB/s through texel buffers against 1.6 through storage buffers, in the same minute)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...measure.primitives import BANDWIDTH, FMA, Probe
from ..gpu.api import VULKAN
from ..gpu.probes import (FMA_C, FMA_M, STORAGE_READS, TEXEL_READS, TRIAD_VALUES, VULKAN_TEXT, FmaShape, ProbeKernels,
                          device_triad_array_bytes, fma_source, triad_grid)
from ..gpu.profiles import VULKAN_FMA_SHAPES, VULKAN_PROBE_SIZES, ProbeSizes
from .device import DeviceInfo
from .runtime import Stage
from .toolchain import compile_glsl

@dataclass(frozen=True, slots=True, eq=False)
class ProbeStage:
    """A probe as a stage binding its own buffers (`arrays`, in binding order) after the kernel's."""

    spirv: bytes
    groups: tuple[int, int, int]
    arrays: tuple[np.ndarray, ...]
    local_size: int
    push: bytes = b""
    kinds: tuple[str, ...] = ()

    def stage(self, first: int) -> Stage:
        """The dispatch with its buffers bound from buffers[first] on."""
        bindings = tuple(range(first, first + len(self.arrays)))
        return Stage(self.spirv, bindings, self.groups, {0: self.local_size}, self.push, kinds=self.kinds)


@lru_cache(maxsize=16)
def _spirv(source: str) -> bytes:
    return compile_glsl(source)


def fma_probe(info: DeviceInfo, shape: FmaShape, sizes: ProbeSizes = VULKAN_PROBE_SIZES) -> Probe:
    push = np.array([FMA_M, FMA_C], np.float32).tobytes() + np.uint32(shape.trips).tobytes()
    invocations = sizes.fma_items()
    stage = ProbeStage(_spirv(fma_source(VULKAN, VULKAN_TEXT, shape)), (sizes.fma_groups, 1, 1),
                       (np.zeros((invocations, 4), np.float32),), sizes.fma_work_group, push)
    return Probe(kind=FMA, work=shape.flops(invocations), device=info.name, shape=shape.name, kernel=stage)


def bandwidth_probe(info: DeviceInfo, *, array_bytes: int | None = None) -> Probe:
    """Texel reads where the device's maxTexelBufferElements holds the arrays, else storage buffers."""
    array_bytes = array_bytes or device_triad_array_bytes(info.cpu)  # a CPU device's pass its host's caches
    grid = triad_grid(VULKAN, VULKAN_PROBE_SIZES.triad_work_group, array_bytes)
    texels = grid.vectors <= info.max_texel_buffer_elements
    source = VULKAN_TEXT.triad.format(reads=TEXEL_READS if texels else STORAGE_READS)
    stage = ProbeStage(_spirv(source), (grid.groups, 1, 1),
                       tuple(np.full((grid.vectors, 4), value, np.float32) for value in TRIAD_VALUES), VULKAN_PROBE_SIZES.triad_work_group,
                       kinds=("storage", "texel", "texel") if texels else ())
    return Probe(kind=BANDWIDTH, work=grid.bytes, device=info.name, shape="triad", kernel=stage)


PROBES = ProbeKernels(fma_probe, bandwidth_probe, VULKAN_FMA_SHAPES)
