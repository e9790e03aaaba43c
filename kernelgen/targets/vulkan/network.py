"""network.c / network.h for vulkan: a float network's dispatches recorded once into one command buffer over four
device allocations, and what `<network>_run` checks a device for before it runs them.

- memory 0, the network's input and 1, its output: the caller's tensors, copied in and out around each submit;
- memory 2, the activation arena: every tensor between steps at offsets from kernelgen.network.arena (the
  manifest's lifetimes), and each kernel's intermediates (temp<j>) as that step's workspace, all at ALIGNMENT;
- memory 3, the weights: the data section of `<network>.weights`, each tensor copied once to an ALIGNMENT
  boundary (the file aligns them to 64 bytes; a binding's offset must be a multiple of the device's
  minStorageBufferOffsetAlignment and minTexelBufferOffsetAlignment, which Vulkan caps at 256).

Each op of each kernel is one dispatch of its SPIR-V module (the words `kernelgen build` writes as
<kernel>.op<j>.spv), embedded in network.c, its bindings as the Python runtime makes them (program.stages: storage
buffers, or uniform texel buffers of 4 or 3 components). A barrier goes before a dispatch only when it reads or
writes bytes a dispatch since the last barrier wrote, or writes bytes one read (the arena reuses memory): two
independent dispatches in a row get none.

The kernels take no specialization or push constants (the shaders are specialized by -DKG_OP at compile time), so
the pipelines are created without either.
"""
from __future__ import annotations

import hashlib
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...errors import KernelgenError
from ...layout import ACTIVATION_DIMS, parse_layout
from ...network.arena import plan_arena, tensor_bytes
from ...network.driver_text import c_string, comment_text, render
from ...network.manifest import Network, Step
from ...network.program import ProgramBuild
from ...network.weights import WeightsPlan
from ..base import Job
from ..gpu.dispatch import Role
from .code import compile_ops
from .plan import VulkanPlan
from .program import stages

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
TEMPLATES = ("vulkan/network.h.j2", "vulkan/network.c.j2")
FILES = tuple(Path(template).name.removesuffix(".j2") for template in TEMPLATES)  # network.h, network.c
ALIGNMENT = 256  # bytes: Vulkan's largest minStorageBufferOffsetAlignment / minTexelBufferOffsetAlignment
MEMORIES = ("input", "output", "arena", "weights")
KINDS = {"storage": 0, "texel": 1, "texel3": 2}  # network.c's binding kinds
# (binding kind, dtype) -> the texel buffer view's format and a texel's bytes, as runtime.py makes them
TEXEL_FORMATS = {("texel", "float32"): ("VK_FORMAT_R32G32B32A32_SFLOAT", 16),
                 ("texel3", "float32"): ("VK_FORMAT_R32G32B32_SFLOAT", 12),
                 ("texel", "float16"): ("VK_FORMAT_R16G16B16A16_SFLOAT", 8),
                 ("texel3", "float16"): ("VK_FORMAT_R16G16B16_SFLOAT", 6)}
MAIN = "vulkan/program_main.c.j2"  # the shared main, opening the device and its pipeline cache first
DECLARED = ("open", "run", "close", "gpu", "start", "network")  # what network.h declares after `<net>_`


@dataclass(frozen=True, slots=True, kw_only=True)
class Region:
    memory: int  # index into MEMORIES
    offset: int
    size: int

    def overlaps(self, other: Region) -> bool:
        return self.memory == other.memory and self.offset < other.offset + other.size and \
            other.offset < self.offset + self.size


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingRow:
    region: Region
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
    visible: tuple[Region, ...]  # the writes that barrier makes visible (none: write after read alone)
    barrier_why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightCopy:
    """One weight: where the file's data section holds it, where the device's weights memory gets it."""

    label: str
    file_offset: int
    device_offset: int
    nbytes: int


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
    weights: tuple[WeightCopy, ...]
    requirements: Requirements
    spirv_digest: str  # SHA-256 of every module in dispatch order: the pipeline cache's key
    arena_naive: int
    barriers: int


def refusal(network: Network) -> str:
    """A host or convert step has no place in one command buffer."""
    other = [s for s in network.steps if not s.is_kernel]
    if not other:
        return ""
    return (f"the vulkan network driver runs kernels only: {other[0].label} ({'a conversion' if other[0].convert else 'ONNX nodes onnxruntime runs'}) "
            f"cannot be recorded into its command buffer")


def plan_network(network: Network, jobs: Mapping[str, Job[VulkanPlan]], weights: WeightsPlan) -> GpuNetwork:
    jobs_of = {step.index: _checked_job(network, step, jobs) for step in network.kernels}
    temps = {k: _temp_regions(job.target_plan) for k, job in jobs_of.items()}
    arena = plan_arena(network, {k: _workspace_bytes(t) for k, t in temps.items()}, alignment=ALIGNMENT)
    copies, weights_bytes = _weight_copies(weights)
    device_weight = {(c.label): c for c in copies}
    ends: dict[str, int] = {}  # a network input or output: the largest binding of it (a kernel may round it up)
    dispatches = []
    for step in network.kernels:
        job = jobs_of[step.index]
        vk = job.target_plan
        spirv = compile_ops(job.files[f"{job.config.name}.comp"], vk)
        names = _tensor_names(step)
        for op, stage, code in zip(vk.ops, stages(vk, spirv), spirv):
            bound = []
            for number, kind in zip(stage.bindings, stage.kinds):
                tensor = vk.buffers[number]
                nbytes = tensor.elements * np.dtype(vk.dtype).itemsize
                if tensor.role in (Role.FILTER, Role.BIAS):
                    copy = device_weight[f"{step.config.name}.{tensor.name}"]
                    if copy.nbytes != nbytes:
                        raise KernelgenError(f"kernel {step.config.name}: {tensor.name} binds {nbytes} bytes, the "
                                             f"weights file holds {copy.nbytes}")
                    region = Region(memory=3, offset=copy.device_offset, size=nbytes)
                elif tensor.role is Role.TEMP:
                    offset, size = temps[step.index][tensor.name]
                    region = Region(memory=2, offset=arena.workspaces[step.index] + offset, size=size)
                else:
                    name = names[tensor.name]
                    region = _tensor_region(network, arena, name, nbytes, ends)
                format_, texel = TEXEL_FORMATS.get((kind, vk.dtype), ("", 1))
                bound.append(BindingRow(region=region, kind=kind, format=format_,
                                        texels=nbytes // texel if format_ else 0,
                                        tensor=f"{tensor.name}: {comment_text(names.get(tensor.name, tensor.name))}"))
            dst = vk.buffers[op.dst].name
            writes = tuple(b.region for b, number in zip(bound, stage.bindings) if vk.buffers[number].name == dst)
            dispatches.append((f"{step.config.name}.op{op.index}", code, tuple(bound), writes, op))
    rows_out, barriers = _with_barriers(dispatches)
    sizes = (max(ends.get(network.inputs[0], 0), 4), max(ends.get(network.outputs[0], 0), 4),
             max(arena.size_bytes, 4), max(weights_bytes, 4))
    digest = hashlib.sha256()
    for _, code, *_ in dispatches:
        digest.update(struct.pack("<Q", len(code)) + code)
    storage = [b.region.size for d in rows_out for b in d.bindings if b.kind == "storage"]
    texels = [b.texels for d in rows_out for b in d.bindings]
    vks = [job.target_plan for job in jobs_of.values()]
    ops = [op for vk in vks for op in vk.ops]
    requirements = Requirements(
        int64=any(vk.int64 for vk in vks), float16=any(vk.dtype == "float16" for vk in vks),
        shuffle_lanes=math.lcm(*(op.shuffle_lanes for op in ops if not op.is_pool and op.shuffle_lanes), 1)
        if any(not op.is_pool and op.shuffle_lanes for op in ops) else 0,
        work_group=tuple(max(op.wg_size[a] for op in ops) for a in range(3)),
        invocations=max(math.prod(op.wg_size) for op in ops),
        groups=tuple(max(op.groups[a] for op in ops) for a in range(3)),
        storage_range=max(storage, default=0), texel_elements=max(texels, default=0),
        formats=tuple(sorted({b.format for d in rows_out for b in d.bindings if b.format})))
    source, sink = network.tensors[network.inputs[0]], network.tensors[network.outputs[0]]
    return GpuNetwork(sizes=sizes, input_bytes=source.nbytes, output_bytes=sink.nbytes, dispatches=rows_out,
                      weights=copies, requirements=requirements, spirv_digest=digest.hexdigest(),
                      arena_naive=arena.naive_bytes, barriers=sum(1 for d in rows_out if d.barrier))


def network_files(network: Network, jobs: Mapping[str, Job[VulkanPlan]], weights: WeightsPlan) -> dict[str, str]:
    """{"network.h": ..., "network.c": ...} for a float network whose kernels' vulkan jobs are `jobs` (by config
    name) and whose weights file `weights` describes."""
    if not NAME.match(network.name):
        raise network.problem("network", f"expected a C identifier of lower-case letters, digits and _ (it names "
                                         f"network.c's functions), got {network.name!r}")
    refused = refusal(network)
    if refused:
        raise network.problem(f"steps[{next(s.index for s in network.steps if not s.is_kernel)}]", refused)
    gpu = plan_network(network, jobs, weights)
    net = network.name
    context: dict[str, Any] = dict(
        net=net, upper=net.upper(), guard=f"KERNELGEN_{net.upper()}_NETWORK_H", gpu=gpu, memories=MEMORIES,
        kinds=KINDS, alignment=ALIGNMENT, digest=weights.digest_hex, weights_bytes=weights.data_bytes, steps=len(network.steps),
        source=comment_text(network.inputs[0]), sink=comment_text(network.outputs[0]),
        program=c_string(f"{net}_run"), manifest=comment_text(Path(network.path).name))
    return {name: render(template, context) for name, template in zip(FILES, TEMPLATES)}


def memory_note(network: Network, jobs: Mapping[str, Job[VulkanPlan]]) -> str:
    """A line about the device memory network.c runs in (build prints it)."""
    jobs_of = {step.index: jobs[step.config.name] for step in network.kernels}
    temps = {k: _workspace_bytes(_temp_regions(job.target_plan)) for k, job in jobs_of.items()}
    arena = plan_arena(network, temps, alignment=ALIGNMENT)
    dispatches = sum(len(job.target_plan.ops) for job in jobs_of.values())
    return (f"{network.name}: network.c records {dispatches} dispatches of {len(network.steps)} steps into one "
            f"command buffer, the activations and each kernel's intermediates in a {arena.size_bytes:,}-byte device "
            f"arena (each alone: {arena.naive_bytes:,} bytes)")


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


def _tensor_names(step: Step) -> dict[str, str]:
    """A kernel's buffer names -> the manifest's tensors they are."""
    config = step.config
    return {"input": step.inputs[0], "output": step.outputs[0],
            **{side.param: name for side, name in zip(config.side_inputs, step.inputs[1:])}}


def _temp_regions(vk: VulkanPlan) -> dict[str, tuple[int, int]]:
    """Each intermediate's (offset, bytes) inside its step's workspace."""
    out, offset = {}, 0
    for tensor in vk.buffers:
        if tensor.role is Role.TEMP:
            size = tensor.elements * np.dtype(vk.dtype).itemsize
            out[tensor.name] = (offset, size)
            offset += -(-size // ALIGNMENT) * ALIGNMENT
    return out


def _workspace_bytes(temps: Mapping[str, tuple[int, int]]) -> int:
    """A step's workspace: up to the end of its last intermediate."""
    return max((offset + size for offset, size in temps.values()), default=0)


def _tensor_region(network: Network, arena, name: str, nbytes: int, ends: dict[str, int]) -> Region:
    if name in network.inputs or name in network.outputs:
        ends[name] = max(ends.get(name, 0), nbytes)
        return Region(memory=0 if name in network.inputs else 1, offset=0, size=nbytes)
    room = -(-tensor_bytes(network.tensors[name]) // ALIGNMENT) * ALIGNMENT
    if nbytes > room:  # a binding rounded up to whole texels reaches into the next buffer's bytes
        raise KernelgenError(f"{name!r} is bound as {nbytes} bytes, more than the {room} the arena gives it")
    return Region(memory=2, offset=arena.offsets[name], size=nbytes)


def _weight_copies(weights: WeightsPlan) -> tuple[tuple[WeightCopy, ...], int]:
    copies, offset = [], 0
    for w in weights.tensors:
        copies.append(WeightCopy(label=f"{w.kernel}.{w.tensor}", file_offset=w.offset, device_offset=offset,
                                 nbytes=w.nbytes))
        offset += -(-w.nbytes // ALIGNMENT) * ALIGNMENT
    return tuple(copies), offset


def _with_barriers(dispatches) -> tuple[tuple[DispatchRow, ...], int]:
    """The dispatches in order, each with the barrier the data flow needs before it: when it reads bytes a
    dispatch since the last barrier wrote (read after write), writes bytes one wrote (write after write) or read
    (write after read: the arena hands a dead tensor's bytes to a new one). The barrier makes every write since
    the last one visible, so the tracking starts over after it."""
    rows, written, read = [], [], []
    for index, (label, code, bound, writes, op) in enumerate(dispatches):
        reads = [b.region for b in bound if b.region not in writes]
        raw = any(r.overlaps(w) for r in reads for w in written)
        waw = any(r.overlaps(w) for r in writes for w in written)
        war = any(r.overlaps(w) for r in writes for w in read)
        visible: tuple[Region, ...] = ()
        why = ""
        if raw or waw or war:
            visible = tuple(dict.fromkeys(written))  # none: write after read alone, an execution dependency
            why = ", ".join(w for w, hit in (("read after write", raw), ("write after write", waw),
                                             ("write after read", war)) if hit)
            written, read = [], []
        written += writes
        read += reads
        words = np.frombuffer(code, "<u4")
        text = ",\n".join("  " + ", ".join(f"0x{w:08x}u" for w in words[i:i + 8]) for i in range(0, len(words), 8))
        rows.append(DispatchRow(index=index, label=label, words=text, word_count=len(words), bindings=bound,
                                groups=op.groups, work_group=op.wg_size, barrier=bool(why), visible=visible,
                                barrier_why=why))
    return tuple(rows), sum(1 for r in rows if r.barrier)


def network_program(network: Network, jobs: Mapping[str, Job[VulkanPlan]]) -> ProgramBuild:
    """The host program in C99 over the Vulkan loader (libvulkan-dev's headers, -lvulkan); no kernel C sources (the
    kernels are network.c's SPIR-V). `make clean` removes the pipeline cache the program writes beside itself."""
    return ProgramBuild(compiler="gcc", flags=("-std=c99", "-O2", "-Wall", "-Wextra"),
                        kernel_sources={step.config.name: () for step in network.kernels},
                        link=("-lvulkan", "-lm"), main_template=MAIN, clean=(f"{network.name}.vkcache",))
