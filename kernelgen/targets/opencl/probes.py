"""The OpenCL device probes: gpu/probes.py's FMA chains and bandwidth triad in OpenCL C, each a launch on tensors
of its own (prefixed: no clash with a kernel's), timed by the core in the same sequence as the kernels (launched
first, on the same queue, so both run under the same load). The launch names its work-group size: left to PoCL,
2,048 work-items went out as one or two groups and the FMA probe read 212 or 425 GFLOP/s from one launch to the
next (one core or both). In the triad every element is one work-item: PoCL packs consecutive work-items into
vector lanes and the work-groups over every core, as it does a kernel's."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...measure.primitives import BANDWIDTH, FMA, Probe
from ..gpu.api import OPENCL
from ..gpu.probes import (FMA_C, FMA_M, OPENCL_TEXT, TRIAD_VALUES, FmaShape, ProbeKernels, device_triad_array_bytes,
                          fma_source, triad_grid)
from ..gpu.profiles import OPENCL_FMA_SHAPES, OPENCL_PROBE_SIZES, ProbeSizes
from .args import BufferArg, Launch, ScalarArg
from .toolchain import DeviceInfo

@dataclass(frozen=True, slots=True, eq=False)
class ProbeLaunch:
    """A probe as one launch of a sequence and the tensors it names."""

    launch: Launch
    tensors: dict[str, BufferArg]


def fma_probe(info: DeviceInfo, shape: FmaShape, sizes: ProbeSizes = OPENCL_PROBE_SIZES) -> Probe:
    work_items = sizes.fma_items(info.compute_units)
    tensors = {"probe_fma": BufferArg(np.zeros((work_items, shape.lanes), np.float32))}
    launch = Launch(fma_source(OPENCL, OPENCL_TEXT, shape), "fma_peak",
                    ("probe_fma", ScalarArg(FMA_M), ScalarArg(FMA_C), ScalarArg(shape.trips, "int32")),
                    (work_items,), (sizes.fma_work_group,))
    return Probe(kind=FMA, work=shape.flops(work_items), device=info.name, shape=shape.name,
                 kernel=ProbeLaunch(launch, tensors))


def bandwidth_probe(info: DeviceInfo, *, array_bytes: int | None = None, read_back: bool = False) -> Probe:
    """The triad on fresh arrays; read_back returns `a` (a test checks it holds b + 3 c everywhere)."""
    array_bytes = array_bytes or device_triad_array_bytes(info.cpu)  # a CPU device's pass its host's caches
    grid = triad_grid(OPENCL, OPENCL_PROBE_SIZES.triad_work_group, array_bytes)
    names = ("bandwidth_a", "bandwidth_b", "bandwidth_c")
    tensors = {name: BufferArg(np.full((grid.vectors, 4), value, np.float32), output=read_back and name == names[0])
               for name, value in zip(names, TRIAD_VALUES)}
    launch = Launch(OPENCL_TEXT.triad.format(), "bandwidth_triad", names, (grid.vectors,),
                    (OPENCL_PROBE_SIZES.triad_work_group,))
    return Probe(kind=BANDWIDTH, work=grid.bytes, device=info.name, shape="triad",
                 kernel=ProbeLaunch(launch, tensors))


PROBES = ProbeKernels(fma_probe, bandwidth_probe, OPENCL_FMA_SHAPES)
