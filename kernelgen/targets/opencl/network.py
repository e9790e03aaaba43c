"""A network on the opencl target: its weights packed as the kernels read them (the Python runtime's host_arrays
packing), and its host code: network.h / network.c over the OpenCL 1.2 ICD loader, spelling out the API-neutral plan
of targets/gpu/network.py (four device allocations, a sub-buffer per region, every dispatch's arguments set once, one
in-order queue), the kernels' .cl sources embedded, their program binaries cached on disk; and the `<network>_run`
program around it (templates/opencl/program_main.c.j2).

A tensor the texture variant keeps in an image2d (a filter in texels, an activation with an axis separator) is an
image object of its own, not a part of the arena (OpenCL 1.2 has no image over a buffer's bytes without
cl_khr_image2d_from_buffer): the arena keeps its bytes unused. Not yet: half storage, and a network input or output
in an image; build writes such a network's kernels alone and says why (refusal)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...errors import KernelgenError
from ...expr import Var
from ...layout import Layout
from ...emit import environment
from ...network.driver_text import check_c_name, c_string, comment_text, render
from ...network.manifest import Network, Tensor
from ...network.program import ProgramBuild
from ...network.weights import WeightsPlan
from ..base import Job
from ..gpu.dispatch import TensorKind
from ..gpu.network import (Allocation, GpuNetworkPlan, concat_refusal, host_program, placement_note,
                           plan_gpu_network)
from .plan import OpenCLPlan

DRIVER = ("opencl/network.h.j2", "opencl/network.c.j2")
HEADERS = ("kg_sha256.h",)  # copied as they are
FILES = (*(Path(t).name.removesuffix(".j2") for t in DRIVER), *HEADERS)
MAIN = "opencl/program_main.c.j2"
COPY_TEMPLATE = "opencl/copy.cl.j2"  # the channel steps' parts copied on the device (gpu/channel_copies.py)
RESIZE_TEMPLATE = "opencl/resize.cl.j2"  # the resize steps computed on the device (gpu/resize_parts.py)
COPIES = "kg_copies"  # that program's name
# every one the network's files come from
TEMPLATES = (*DRIVER, *(f"opencl/{name}" for name in HEADERS), MAIN, COPY_TEMPLATE)
BUILD_OPTIONS = "-w"  # as the Python runtime builds them (toolchain.ALWAYS_BUILD_OPTIONS, less its arg info)
NCHW = (Var("n"), Var("c"), Var("h"), Var("w"))  # logical NHWC stored as ONNX stores it
ALLOCATION_INDEX = {Allocation.INPUT: 0, Allocation.OUTPUT: 1, Allocation.ARENA: 2, Allocation.WEIGHTS: 3}


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


def refusal(network: Network) -> str:
    """Why network.c cannot run this network yet ("" when it can): a host step, half storage, or a network input or
    output the kernels do not hold as ONNX does (an image, a padded or blocked layout)."""
    hosts = [s for s in network.steps if s.kind in ("host", "convert")]
    if hosts:
        return (f"step {hosts[0].index} ({hosts[0].label}) runs on the host; the opencl network runs kernels only "
                f"(their tensors stay on the device)")
    in_place = concat_refusal(network)
    if in_place:
        return in_place
    for step in network.kernels:
        config = step.config
        if config.dtype != "float32":
            return f"kernel {config.name} is {config.dtype}; network.c drives float32 kernels (half storage: not yet)"
        ends = [(name, config.input_layout) for name in step.inputs[:1] if name in network.inputs]
        ends += [(name, config.ops[-1].output_layout) for name in step.outputs if name in network.outputs]
        for name, layout in ends:
            why = _not_onnx(network.tensors[name], layout)
            if why:
                return f"kernel {config.name} holds the network's {name!r} {why}; network.c copies it as ONNX holds it"
    return ""


def _not_onnx(tensor: Tensor, layout: Layout) -> str:
    if len(tensor.shape) not in (2, 4):
        return f"of rank {len(tensor.shape)}"
    n, c, h, w = (*tensor.shape, 1, 1)[:4]
    bound = layout.bind((n, h, w, c))
    if bound.layout.outputs != NCHW or bound.layout.separators or bound.padding:
        return f"in {bound.layout.name}{' with padding' if bound.padding else ''}, not NCHW"
    return ""


def network_files(network: Network, target: Any, jobs: Mapping[str, Job[OpenCLPlan]], weights: WeightsPlan
                  ) -> dict[str, str]:
    """{"network.h", "network.c", "kg_sha256.h"}: the network's device memory, programs and dispatches (`target`:
    the opencl target, whose launches the plan reads)."""
    check_c_name(network)
    why = refusal(network)
    if why:
        raise KernelgenError(f"network {network.name}: {why}")
    plan = plan_gpu_network(network, target, jobs, weights)
    context = _context(network, jobs, weights, plan)
    files = {Path(t).name.removesuffix(".j2"): render(t, context) for t in DRIVER}
    files |= {name: environment().get_template(f"opencl/{name}").render() for name in HEADERS}
    return files


def _context(network: Network, jobs: Mapping[str, Job[OpenCLPlan]], weights: WeightsPlan,
             plan: GpuNetworkPlan) -> dict[str, Any]:
    net = network.name
    programs = {step.config.name: k for k, step in enumerate(network.kernels)}  # a launch's kernel -> program
    texts = [(name, jobs[name].files[f"{name}.cl"]) for name in programs]
    copies = [d.copy for d in plan.dispatches if d.copy]
    if copies:  # one more program: a kernel function per part a channel step copies (gpu/channel_copies.py) and
        # per resize step (gpu/resize_parts.py)
        programs |= {part.name: len(texts) for part in copies}
        moved = [p for p in copies if p.kind == "copy"]
        resized = [p for p in copies if p.kind == "resize"]
        texts.append((COPIES, "\n".join(environment().get_template(template).render(parts=parts)
                                        for template, parts in ((COPY_TEMPLATE, moved), (RESIZE_TEMPLATE, resized))
                                        if parts)))
    sources = [dict(index=k, name=name, lines=tuple(c_string(line + "\n") for line in text.splitlines()))
               for k, (name, text) in enumerate(texts)]
    regions = [dict(index=r.index, name=c_string(r.name), comment=comment_text(r.name),
                    allocation=ALLOCATION_INDEX[r.allocation], where=str(r.allocation), offset=r.offset,
                    bytes=r.size_bytes, source_offset=r.source_offset,
                    texels=r.tensor.texels if r.kind is TensorKind.IMAGE else (0, 0))
               for r in plan.regions]
    dispatches = [dict(index=d.index, program=programs[d.kernel], step=d.step, function=d.dispatch.kernel,
                       global_size=d.dispatch.global_size, local_size=d.dispatch.work_group,
                       work_items=math.prod(d.dispatch.work_group), args=tuple(b.region.index for b in d.bindings),
                       arg_names=tuple(f"{b.tensor}={comment_text(b.region.name)}" for b in d.bindings))
                  for d in plan.dispatches]
    ends = [dict(name=name, comment=comment_text(name), region=plan.region(name).index,
                 bytes=network.tensors[name].nbytes) for name in network.inputs + network.outputs]
    return dict(net=net, upper=net.upper(), guard=f"KERNELGEN_{net.upper()}_OPENCL_NETWORK_H",
                manifest=comment_text(Path(network.path).name), plan=plan, sources=sources, regions=regions,
                dispatches=dispatches, inputs=ends[:len(network.inputs)], outputs=ends[len(network.inputs):],
                max_args=max(len(d["args"]) for d in dispatches), weights_bytes=weights.data_bytes,
                digest=weights.digest_hex, options=BUILD_OPTIONS)


def network_note(network: Network, target: Any, jobs: Mapping[str, Job[OpenCLPlan]]) -> str:
    """What build says of the device memory (the weights placed as the file would, without packing them)."""
    plan = plan_gpu_network(network, target, jobs)
    programs = len(network.kernels) + any(d.copy for d in plan.dispatches)
    moves = placement_note(network)
    return (f"{network.name}: network.c runs {len(plan.dispatches)} OpenCL kernels of {programs} "
            f"program{'s' if programs != 1 else ''} "
            f"over a {plan.arena_bytes:,}-byte device arena (each tensor and intermediate alone: "
            f"{plan.naive_arena_bytes:,} bytes) and {plan.weights_bytes:,} bytes of weights" +
            (f"; {moves}" if moves else ""))


def network_program(network: Network, jobs: Mapping[str, Job[OpenCLPlan]]) -> ProgramBuild:
    """Over the OpenCL ICD loader; `make clean` removes the program binary cache too."""
    return host_program(network, link=("-lOpenCL",), main_template=MAIN, cache=f"{network.name}.clcache")
