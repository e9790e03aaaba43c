"""A network on the opencl target: its weights packed as the kernels read them (the same packing as the Python
runtime's host_arrays), and its `<network>_run` program."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ...errors import KernelgenError
from ..base import Job
from .plan import OpenCLPlan


def pack_weights(job: Job[OpenCLPlan], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each filter<j> and bias<j> in the opencl plan's own storage (its layout: output channels in a vector's or a
    texel's lanes, zero-padded), in the storage type (half for float16)."""
    cplan = job.target_plan
    dtype = np.dtype(np.float16 if cplan.dtype == "float16" else np.float32)
    storages = {s.name: s for s in cplan.storages}
    out = {}
    for name, values in logical.items():
        storage = storages.get(name)
        if storage is None:
            raise KernelgenError(f"kernel {cplan.name} takes no {name!r} on opencl")
        array = np.asarray(values, np.float32).reshape(storage.layout.logical_shape)
        out[name] = np.ascontiguousarray(storage.layout.pack(array, sentinel=0.0).astype(dtype)).reshape(storage.shape)
    return out
