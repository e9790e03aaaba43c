"""The vulkan target on this machine: the GLSL `kernelgen build` writes, compiled once per conv2d (-DKG_OP=<op>)
by glslangValidator, dispatched in order with a barrier between dispatches on a Vulkan device (lavapipe here).
Intermediates and the output start from the poison byte.

Timing: GPU time from timestamp queries (the first repeat dropped: lavapipe compiles each pipeline lazily). Each
repeat dispatches the probes the core asks for (probes.py) right before the kernel in one command buffer, so on a CPU device another
process on a shared core slows probe and kernel alike only when both run at the same moment: a peak taken
seconds apart from the kernel gave ratios from 0.28 to 0.48 for the same kernel (seed 002's table measured
0.43-0.46 with the probe at ~80 GFLOP/s and 0.27-0.38 with it at 53-63 GFLOP/s: read the ratio with the peak).
"""
from __future__ import annotations

import numpy as np

from ...errors import ToolchainError
from ...measure.primitives import FMA, Probe
from ...measure.tensors import KernelArgs, poisoned
from ..base import Job, Traced
from ..gpu.dispatch import GpuDispatch, GpuTensor
from ..gpu.program import GpuProgram, open_device
from .code import compile_ops
from .plan import VulkanPlan
from .probes import PROBES
from .runtime import Stage, VulkanRunner


class VulkanProgram(GpuProgram[VulkanPlan]):
    """The job's SPIR-V modules on an open Vulkan device."""

    runner: VulkanRunner
    probe_kernels = PROBES

    def __init__(self, job: Job[VulkanPlan], spirv: tuple[bytes, ...], runner: VulkanRunner):
        super().__init__(job, runner, label=label(job.target_plan))
        self.spirv = spirv
        self.stages = stages(job.target_plan, spirv)

    def output(self, args: KernelArgs, poison: int) -> np.ndarray:
        return self.runner.run_sequence(self.stages, self.buffers(args, poison)).outputs[-1].reshape(-1)

    def traced(self, args: KernelArgs, poison: int) -> Traced:
        """One run with every intermediate (temp<j>, in the core plan's intermediate layouts) unpacked."""
        result = self.runner.run_sequence(self.stages, self.buffers(args, poison))
        vk = self.job.target_plan
        index = {b.name: i for i, b in enumerate(vk.buffers)}
        inter = tuple(t.layout.unpack(result.outputs[index[t.name]][:t.elements].astype(np.float32))
                      for t in self.job.plan.intermediates)
        return Traced(output=result.outputs[-1].reshape(-1), intermediates=inter)

    def probes(self, kind: str) -> tuple[Probe, ...]:
        """On lavapipe, the one FMA shape chosen for this host (probe_choice.py: once, kept in the user's cache),
        so every process takes its ratios against the same probe; elsewhere every candidate (the core chooses)."""
        candidates = super().probes(kind)
        info = self.runner.info
        if kind != FMA or len(candidates) < 2 or "llvmpipe" not in info.name:
            return candidates
        from .lavapipe_host import observe
        from .probe_choice import RUNS, fastest

        def seconds(probe: Probe) -> list[float]:
            return [row[0] for row in self.sequence_times(None, (probe,), RUNS)]

        return (fastest(observe(info.name, info.driver, info.subgroup_size), candidates, seconds),)

    def sequence_times(self, args: KernelArgs | None, probes: tuple[Probe, ...], repeat: int) -> list[tuple[float, ...]]:
        runner = self.runner
        if not runner.info.timestamps:
            raise ToolchainError(f"{runner.info.name} cannot write timestamps; nothing to time")
        buffers = self.buffers(args, 0) if args is not None else []
        firsts = []  # each probe's first buffer
        for p in probes:
            firsts.append(len(buffers))
            buffers += p.kernel.arrays
        stages = [p.kernel.stage(first) for p, first in zip(probes, firsts)] + (self.stages if args is not None else [])
        result = runner.run_sequence(stages, buffers, repeat=repeat + 1)  # the first repeat: lavapipe's pipelines
        if not all(np.isfinite(result.outputs[first]).all() for first in firsts):
            raise ToolchainError("a probe produced non-finite values")
        return [tuple(ns * 1e-9 for ns in times) for times in result.stage_times_ns[1:]]

    def buffers(self, args: KernelArgs, poison: int) -> list[np.ndarray]:
        """input, filter1.., (bias..), temp1.., output as flat arrays of the storage type: inputs padded with
        zeros up to their buffer (a bias to whole pairs of vec4 chunks), a filter the target packs itself packed
        from its logical values, the rest filled with the poison byte."""
        vk = self.job.target_plan
        dtype = np.dtype(np.float16 if vk.dtype == "float16" else np.float32)
        physical = [b.layout.pack(args.logical[b.name]) if b.layout else a
                    for a, b in zip(args.physical_list(), vk.buffers)]
        arrays = [np.pad(np.asarray(a, dtype=dtype).reshape(-1), (0, b.elements - a.size))
                  for a, b in zip(physical, vk.buffers)]
        return arrays + [poisoned(b.elements, dtype, poison) for b in vk.buffers[len(physical):]]


def stages(vk: VulkanPlan, spirv: tuple[bytes, ...]) -> list[Stage]:
    """One dispatch per op. Bindings 0-2: src, flt, dst; 3: the bias; 4: the residual, when the op has them."""
    out = []
    for op, code in zip(vk.ops, spirv):
        if op.is_pool:  # bindings 0, 1: src, dst; 2: a mul's factors
            factors = (op.scale,) if op.scale >= 0 else ()
            out.append(Stage(code, (op.src, op.dst, *factors), op.groups, kinds=("storage",) * (2 + len(factors))))
            continue
        extra = [b for b in (op.bias, op.res_buffer) if b >= 0]
        out.append(Stage(code, (op.src, op.filter, op.dst, *extra), op.groups,
                         kinds=("texel3" if op.x.rgb else "texel" if op.x.texel else "storage", "texel" if op.f.texel else "storage", "storage",
                                *("storage",) * len(extra))))
    return out


def check_device(vk: VulkanPlan, info) -> None:
    if vk.dtype == "float16" and not (info.shader_float16 and info.storage_16bit):
        raise ToolchainError(f"{info.name} lacks shaderFloat16 or 16-bit storage: the float16 kernels need both")
    if vk.int64 and not info.shader_int64:
        raise ToolchainError(f"{info.name} lacks shaderInt64, which vulkan.wide_store's 64-bit-word stores need; "
                             f"set wide_store: false")
    for op in vk.ops:
        if not op.is_pool and op.shuffle_lanes and info.subgroup_size % op.shuffle_lanes:
            # a lavapipe narrower than the profile's 8 lanes (128-bit vectors: an SSE4-only host, or
            # LP_NATIVE_VECTOR_WIDTH=128) runs the same kernel with workgroup rows as wide as its subgroups
            raise ToolchainError(f"{info.name}'s subgroups of {info.subgroup_size} do not hold whole rows of "
                                 f"{op.shuffle_lanes} invocations, which op {op.index}'s input shuffles need: set "
                                 f"vulkan.wg_size to [{info.subgroup_size}, 1, 1] for this device")
        if any(s > m for s, m in zip(op.wg_size, info.max_workgroup_size)) or \
                np.prod(op.wg_size) > info.max_workgroup_invocations:
            raise ToolchainError(f"workgroup {list(op.wg_size)} exceeds {info.name}'s limits")


def compile_program(job: Job[VulkanPlan], device: str | None) -> VulkanProgram:
    vk = job.target_plan
    spirv = compile_ops(job.files[f"{job.config.name}.comp"], vk)
    return VulkanProgram(job, spirv, open_device(VulkanRunner, device, lambda opened: check_device(vk, opened.info)))


def label(vk: VulkanPlan) -> str:
    """Seed 002's style: Input[1x258x258x16]xFilter[3x3x16x256]/Stride[1x1]/Tile[2x8x16]/WGSize[4x2x2]/f32."""
    return " -> ".join(op.label for op in vk.ops) + f"/{vk.short}"


def launches(job: Job) -> tuple[tuple[GpuTensor, ...], tuple[GpuDispatch, ...]]:
    """The buffers and one dispatch per op (its SPIR-V module, <name>.op<j>.spv), API-neutral; how each binding is
    read (storage or texel) is the stage's (stages())."""
    vk: VulkanPlan = job.target_plan
    names = [b.name for b in vk.buffers]
    bound = [(op.src, op.dst, *((op.scale,) if op.scale >= 0 else ())) if op.is_pool else
             (op.src, op.filter, op.dst, *(b for b in (op.bias, op.res_buffer) if b >= 0)) for op in vk.ops]
    return (vk.buffers,
            tuple(GpuDispatch(kernel=f"{job.config.name}.op{op.index}", tensors=tuple(names[i] for i in binding),
                              work_group=op.wg_size, groups=op.groups) for op, binding in zip(vk.ops, bound)))
