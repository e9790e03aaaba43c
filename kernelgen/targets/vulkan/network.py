"""network.c / network.h for vulkan: gpu/network.py's plan of a float network spelled out for Vulkan, every
dispatch recorded once into one command buffer over the plan's four device memories (the input, the output, the
activation arena, the weights uploaded once at 256-byte boundaries), and what `<network>_run` checks a device for.

What Vulkan adds to the plan: each op's SPIR-V module (the words `kernelgen build` writes as <kernel>.op<j>.spv),
embedded in network.c; each binding's descriptor as the Python runtime makes it (program.stages: a storage
buffer, or a uniform texel buffer of 4- or 3-component texels); the writes each of the plan's barriers must make
visible (every write since the previous barrier). The kernels take no specialization or push constants (each op's
shader is specialized by -DKG_OP when glslang compiles it), so the pipelines are created without either.
"""
from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...errors import KernelgenError
from ...layout import ACTIVATION_DIMS, parse_layout
from ...network.arena import tensor_bytes
from ...network.driver_text import check_c_name, c_string, comment_text, render
from ...network.manifest import Network, Step
from ...network.program import ProgramBuild
from ...network.weights import WeightsPlan
from ..base import Job
from ..gpu.network import (ALIGNMENT, Allocation, Region, concat_refusal, host_program, placement_note,
                           plan_gpu_network)
from ...emit import environment
from .code import compile_ops
from .toolchain import compile_glsl
from .plan import VulkanPlan
from .program import stages

TEMPLATES = ("vulkan/network.h.j2", "vulkan/network.c.j2")
FILES = tuple(Path(template).name.removesuffix(".j2") for template in TEMPLATES)  # network.h, network.c
MEMORIES = ("input", "output", "arena", "weights")
KINDS = {"storage": 0, "texel": 1, "texel3": 2}  # network.c's binding kinds
# (binding kind, dtype) -> the texel buffer view's format and a texel's bytes, as runtime.py makes them
TEXEL_FORMATS = {("texel", "float32"): ("VK_FORMAT_R32G32B32A32_SFLOAT", 16),
                 ("texel3", "float32"): ("VK_FORMAT_R32G32B32_SFLOAT", 12),
                 ("texel", "float16"): ("VK_FORMAT_R16G16B16A16_SFLOAT", 8),
                 ("texel3", "float16"): ("VK_FORMAT_R16G16B16_SFLOAT", 6)}
COPY_TEMPLATE = "vulkan/copy.comp.j2"  # a channel step's part copied on the device (gpu/channel_copies.py)
RESIZE_TEMPLATE = "vulkan/resize.comp.j2"  # a resize step computed on the device (gpu/resize_parts.py)
MAIN = "vulkan/program_main.c.j2"  # the shared main, opening the device and its pipeline cache first
DECLARED = ("open", "run", "close", "gpu", "start", "network")  # what network.h declares after `<net>_`


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingRow:
    region: Region
    memory: int  # index into MEMORIES
    range: int  # bytes the descriptor covers: the region, or its whole texels
    kind: str  # storage, texel, texel3
    format: str  # a texel binding's VkFormat ("" for storage)
    texels: int  # a texel binding's texels (0 for storage)
    tensor: str  # the kernel's buffer name and what it holds, for comments


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchRow:
    index: int
    label: str  # <kernel>.op<j>, for comments and messages
    words: str  # the SPIR-V module as C uint32_t literals
    word_count: int
    bindings: tuple[BindingRow, ...]
    groups: tuple[int, int, int]
    work_group: tuple[int, int, int]
    barrier: bool  # a barrier before it
    visible: tuple[tuple[int, int, int], ...]  # (memory, offset, bytes) of the writes the barrier makes visible
    barrier_why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirements:
    """What a device must have for these kernels (network.c checks each and names the first one missing)."""

    int64: bool  # vulkan.wide_store's 64-bit stores
    float16: bool
    shuffle_lanes: int  # subgroups must hold whole rows of this many lanes (0: no shuffles)
    work_group: tuple[int, int, int]  # the largest extent along each axis
    invocations: int  # the largest work-group
    groups: tuple[int, int, int]  # the most work-groups along each axis
    storage_range: int  # the largest storage binding, bytes
    texel_elements: int  # the largest texel binding, texels
    formats: tuple[str, ...]  # the texel formats the bindings read


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuNetwork:
    """Everything network.c is generated from."""

    sizes: tuple[int, int, int, int]  # bytes of each memory (MEMORIES)
    input_bytes: int
    output_bytes: int
    dispatches: tuple[DispatchRow, ...]
    weights: tuple[Region, ...]  # each weight's region, source_offset: where the file's data section holds it
    requirements: Requirements
    spirv_digest: str  # SHA-256 of every module in dispatch order: the pipeline cache's key
    arena_naive: int
    barriers: int


def refusal(network: Network) -> str:
    """A host or convert step has no place in one command buffer; a concat step has when its kernels write its
    output in place (gpu/concat_alias.py)."""
    other = [s for s in network.steps if s.kind in ("host", "convert")]
    if not other:
        return concat_refusal(network, ALIGNMENT)
    what = "a conversion" if other[0].convert else "ONNX nodes onnxruntime runs"
    return (f"the vulkan network driver runs kernels only: {other[0].label} ({what}) cannot be recorded into its "
            f"command buffer")


def plan_network(network: Network, target: Any, jobs: Mapping[str, Job[VulkanPlan]], weights: WeightsPlan
                 ) -> GpuNetwork:
    """gpu/network.py's plan (regions, dispatch order, barriers) with what Vulkan adds: each binding's descriptor
    kind (program.stages, as the Python runtime binds it), each dispatch's SPIR-V, the writes a barrier makes
    visible, and what a device must have."""
    jobs_of = {step.index: _checked_job(network, step, jobs) for step in network.kernels}
    plan = plan_gpu_network(network, target, jobs, weights, alignment=ALIGNMENT)
    kernel_ops = {}  # step -> (label, SPIR-V, binding kinds, op, dtype, the buffer it writes) of each launch
    for step in network.kernels:
        job = jobs_of[step.index]
        vk = job.target_plan
        spirv = compile_ops(job.files[f"{job.config.name}.comp"], vk)
        kernel_ops[step.index] = iter([(f"{step.config.name}.op{op.index}", code, stage.kinds, op, vk.dtype,
                                        vk.buffers[op.dst].name)
                                       for op, stage, code in zip(vk.ops, stages(vk, spirv), spirv)])
    copy_source = environment().get_template(COPY_TEMPLATE).render()

    def part_module(part) -> bytes:  # a channel copy's shader takes its numbers as defines; a resize's, tables
        if part.kind == "resize":
            return compile_glsl(environment().get_template(RESIZE_TEMPLATE).render(p=part))
        return compile_glsl(copy_source, defines=part.defines)

    per_op = [(d.copy.name, part_module(d.copy), ("storage", "storage"), None, "float32", "output") if d.copy
              else next(kernel_ops[d.step], None) for d in plan.dispatches]
    if None in per_op or any(next(ops, None) for ops in kernel_ops.values()):
        raise KernelgenError(f"network {network.name}: the launches and the shader modules do not pair up")
    rows, written, read = [], [], []
    for dispatch, (label, code, kinds, op, dtype, dst) in zip(plan.dispatches, per_op):
        bound = []
        for binding, kind in zip(dispatch.bindings, kinds):
            format_, texel = TEXEL_FORMATS.get((kind, dtype), ("", 1))
            bound.append(BindingRow(region=binding.region, memory=MEMORIES.index(binding.region.allocation.value),
                                    kind=kind, format=format_, texels=binding.region.size_bytes // texel if format_
                                    else 0, range=binding.region.size_bytes // texel * texel,
                                    tensor=f"{binding.tensor}: {comment_text(binding.region.name)}"))
        # what the shader writes (its dst): the plan counts every temp<j> bound as written, which is safe for the
        # barriers it places; the comments and the visibility say what actually happens
        writes = [b.region for b in dispatch.bindings if b.tensor == dst]
        reads = [b.region for b in dispatch.bindings if b.tensor != dst]
        why = ", ".join(w for w, hit in (
            ("read after write", any(r.overlaps(w) for r in reads for w in written)),
            ("write after write", any(r.overlaps(w) for r in writes for w in written)),
            ("write after read", any(r.overlaps(w) for r in writes for w in read))) if hit)
        visible: tuple = ()
        if dispatch.barrier:  # every write since the last barrier made visible: the tracking starts over
            visible, written, read = tuple(dict.fromkeys(written)), [], []
        written += writes
        read += reads
        words = np.frombuffer(code, "<u4")
        text = ",\n".join("  " + ", ".join(f"0x{w:08x}u" for w in words[i:i + 8]) for i in range(0, len(words), 8))
        rows.append(DispatchRow(index=dispatch.index, label=label, words=text, word_count=len(words),
                                bindings=tuple(bound), groups=dispatch.dispatch.groups,
                                work_group=dispatch.dispatch.work_group, barrier=dispatch.barrier, visible=tuple(
                                    (MEMORIES.index(r.allocation.value), r.offset, r.size_bytes) for r in visible),
                                barrier_why=(why or "a temp<j> bound again (counted as written)")
                                if dispatch.barrier else ""))
    digest = hashlib.sha256()
    for _, code, *_ in per_op:
        digest.update(struct.pack("<Q", len(code)) + code)
    vks = [job.target_plan for job in jobs_of.values()]
    ops = [op for vk in vks for op in vk.ops]
    lanes = [op.shuffle_lanes for op in ops if not op.is_pool and op.shuffle_lanes]
    bindings = [b for d in rows for b in d.bindings]
    grids = [(op.wg_size, op.groups) for op in ops] + [(d.dispatch.work_group, d.dispatch.groups)
                                                       for d in plan.dispatches if d.copy]
    requirements = Requirements(
        int64=any(vk.int64 for vk in vks), float16=any(vk.dtype == "float16" for vk in vks),
        shuffle_lanes=math.lcm(*lanes) if lanes else 0,
        work_group=tuple(max(size[a] for size, _ in grids) for a in range(3)),
        invocations=max(math.prod(size) for size, _ in grids),
        groups=tuple(max(groups[a] for _, groups in grids) for a in range(3)),
        storage_range=max((b.range for b in bindings if not b.format), default=0),
        texel_elements=max((b.texels for b in bindings), default=0),
        formats=tuple(sorted({b.format for b in bindings if b.format})))
    source, sink = network.tensors[network.inputs[0]], network.tensors[network.outputs[0]]
    # a Vulkan buffer holds at least one byte: a network without weights (pools alone) still gets one, unread
    return GpuNetwork(sizes=(plan.input_bytes, plan.output_bytes, max(plan.arena_bytes, ALIGNMENT),
                             max(plan.weights_bytes, ALIGNMENT)),
                      input_bytes=source.nbytes, output_bytes=sink.nbytes, dispatches=tuple(rows),
                      weights=tuple(r for r in plan.regions if r.allocation is Allocation.WEIGHTS),
                      requirements=requirements, spirv_digest=digest.hexdigest(), arena_naive=plan.naive_arena_bytes,
                      barriers=plan.barriers)


def network_files(network: Network, target: Any, jobs: Mapping[str, Job[VulkanPlan]], weights: WeightsPlan
                  ) -> dict[str, str]:
    """{"network.h": ..., "network.c": ...} for a float network whose kernels' vulkan jobs are `jobs` (by config
    name) and whose weights file `weights` describes."""
    check_c_name(network)
    refused = refusal(network)
    if refused:
        first = min((s for s in network.steps if not s.is_kernel), key=lambda s: (s.concat, s.index))
        raise network.problem(f"steps[{first.index}]", refused)
    gpu = plan_network(network, target, jobs, weights)
    net = network.name
    context: dict[str, Any] = dict(
        net=net, upper=net.upper(), guard=f"KERNELGEN_{net.upper()}_NETWORK_H", gpu=gpu, memories=MEMORIES,
        kinds=KINDS, alignment=ALIGNMENT, digest=weights.digest_hex, weights_bytes=weights.data_bytes,
        steps=len(network.steps),
        source=comment_text(network.inputs[0]), sink=comment_text(network.outputs[0]),
        program=c_string(f"{net}_run"), manifest=comment_text(Path(network.path).name))
    return {name: render(template, context) for name, template in zip(FILES, TEMPLATES)}


def memory_note(network: Network, target: Any, jobs: Mapping[str, Job[VulkanPlan]]) -> str:
    """A line about the device memory network.c runs in (build prints it)."""
    plan = plan_gpu_network(network, target, jobs, alignment=ALIGNMENT)
    moves = placement_note(network, ALIGNMENT)
    return (f"{network.name}: network.c records {len(plan.dispatches)} dispatches of {len(network.steps)} steps into "
            f"one command buffer ({plan.barriers} barriers), the activations and each kernel's intermediates in a "
            f"{plan.arena_bytes:,}-byte device arena (each alone: {plan.naive_arena_bytes:,} bytes)"
            + (f"; {moves}" if moves else ""))


def pack_weights(job: Job[VulkanPlan], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each weight as its binding holds it (VulkanProgram.buffers): a filter in the target's own packing where it
    has one (filters.py), else the plan's layout; zeros past the layout up to the binding's elements (a bias is
    read in whole pairs of vec4 chunks)."""
    vk = job.target_plan
    buffers = {b.name: b for b in vk.buffers}
    dtype = np.dtype(np.float16 if vk.dtype == "float16" else np.float32)
    out = {}
    for name, values in logical.items():
        if name not in buffers:
            raise KernelgenError(f"kernel {job.plan.name} takes no {name!r}")
        tensor, buffer = job.plan.tensor(name), buffers[name]
        layout = buffer.layout or tensor.layout
        flat = layout.pack(np.asarray(values, np.float32).reshape(tensor.logical_shape), sentinel=0.0).reshape(-1)
        out[name] = np.pad(flat.astype(dtype), (0, buffer.elements - flat.size))
    return out


def _checked_job(network: Network, step: Step, jobs: Mapping[str, Job[VulkanPlan]]) -> Job[VulkanPlan]:
    """The kernel's job, once it reads and writes its tensors in the layouts the manifest gives them (the next
    kernel reads the bytes as they are)."""
    config = step.config
    job = jobs.get(config.name)
    if job is None:
        raise KernelgenError(f"network {network.name}: no vulkan job for kernel {config.name} (step {step.index})")
    if any(config.name == f"{network.name}_{word}" for word in DECLARED):
        raise config.problem("name", f"kernel {config.name} would clash with network.h's {config.name}: rename it")
    keys = ("input.layout", *(f"side_inputs.{side.name}.layout" for side in config.side_inputs), "output.layout")
    params = ("input", *(side.param for side in config.side_inputs), "output")
    for key, param, name in zip(keys, params, (*step.inputs, step.outputs[0])):
        tensor = network.tensors[name]
        held = job.plan.tensor(param).layout.layout
        wanted = parse_layout(tensor.layout or "NCHW", ACTIVATION_DIMS)
        if held.outputs != wanted.outputs or held.separators != wanted.separators:
            raise config.problem(key, f"{config.name}'s {param} is {held.name}, but the manifest holds {name!r} in "
                                      f"{tensor.layout or 'NCHW'}: the kernels of one network must agree on the "
                                      f"layouts of the tensors they pass on")
    ends = [network.tensors[t] for t in (*network.inputs, *network.outputs)]
    for tensor in ends:
        if tensor.dtype != "float32" or tensor_bytes(tensor) != tensor.nbytes:
            raise network.problem("inputs" if tensor.name in network.inputs else "outputs",
                                  f"the vulkan network program reads and writes unpadded float32 tensors; "
                                  f"{tensor.name!r} is {tensor.dtype} in {tensor.layout}")
    return job


def network_program(network: Network, jobs: Mapping[str, Job[VulkanPlan]]) -> ProgramBuild:
    """Over the Vulkan loader (libvulkan-dev's headers, -lvulkan); `make clean` removes the pipeline cache the
    program writes beside itself."""
    return host_program(network, link=("-lvulkan", "-lm"), main_template=MAIN, cache=f"{network.name}.vkcache")
