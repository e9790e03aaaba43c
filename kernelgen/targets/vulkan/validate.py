"""Validation of the `vulkan` target: pack -> SPIR-V on a Vulkan device (lavapipe) -> unpack
-> compare with numpy.

The GLSL that runs is the text `kernelgen build` writes, compiled once per conv2d and
dispatched in order with a barrier between dispatches (VulkanRunner.run_sequence).
Intermediates and the output start as NaN, so an element no dispatch writes fails.
"""
from __future__ import annotations

import numpy as np

from ... import reference
from ...config import Config
from ...errors import ToolchainError
from ...planner import plan as make_plan
from ...plan import Plan
from ...validate import Inputs, Result, compare, make_inputs
from .code import compile_ops, glsl_source
from .options import NAME
from .plan import VulkanPlan, plan_vulkan
from .runtime import Stage, VulkanRunner

# Unit roundoff of IEEE binary16. float16 kernels store every tensor in half (each stored
# value rounds by at most 2^-11) and accumulate in f16vec4 arithmetic (each operation
# rounds by at most 2^-11), so both bounds take 2^-11. float32 kernels: 2^-24 arithmetic,
# exact storage.
HALF_UNIT_ROUNDOFF = 2.0 ** -11


def numpy_dtype(vk: VulkanPlan) -> type:
    return np.float16 if vk.dtype == "float16" else np.float32


def buffers(plan: Plan, vk: VulkanPlan, physical: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """input, filter1.., temp1.., output as flat arrays; temps and output pre-filled with NaN."""
    dtype = numpy_dtype(vk)
    # inputs padded with zeros up to their buffer (a bias to whole pairs of vec4 chunks)
    arrays = [np.pad(np.asarray(a, dtype=dtype).reshape(-1), (0, b.elements - a.size))
              for a, b in zip(physical, vk.buffers)]
    arrays += [np.full(b.elements, np.nan, dtype=dtype) for b in vk.buffers[len(physical):]]
    return arrays


def stages(vk: VulkanPlan, spirv: tuple[bytes, ...]) -> list:
    # bindings 0-2: src, flt, dst; 3: the bias; 4: the residual (the chain's input), when the op has them
    out = []
    for op, code in zip(vk.ops, spirv):
        extra = [b for b in (op.bias, op.res_buffer) if b >= 0]
        out.append(Stage(code, (op.src, op.filter, op.dst, *extra), op.groups,
                         kinds=("texel" if op.x.texel else "storage", "texel" if op.f.texel else "storage", "storage",
                                *("storage",) * len(extra))))
    return out


def check_device(vk: VulkanPlan, info) -> None:
    if vk.dtype == "float16" and not (info.shader_float16 and info.storage_16bit):
        raise ToolchainError(f"{info.name} lacks shaderFloat16 or 16-bit storage: the float16 kernels need both")
    if vk.int64 and not info.shader_int64:
        raise ToolchainError(f"{info.name} lacks shaderInt64, which vulkan.wide_store's 64-bit-word stores need; "
                             f"set wide_store: false")
    for op in vk.ops:
        if any(s > m for s, m in zip(op.wg_size, info.max_workgroup_size)) or \
                np.prod(op.wg_size) > info.max_workgroup_invocations:
            raise ToolchainError(f"workgroup {list(op.wg_size)} exceeds {info.name}'s limits")


def validate_vulkan(config: Config, seed: int, *, device: int | str | None = None) -> Result:
    the_plan = make_plan(config)
    vk = plan_vulkan(config, the_plan)
    inputs = make_inputs(the_plan, np.random.default_rng(seed), config)
    if config.dtype == "float16":
        # Inputs exactly representable in half, so the reference sees what the device reads.
        logical = tuple(a.astype(np.float16).astype(np.float32) for a in inputs.logical)
        physical = tuple(t.layout.pack(a) for t, a in zip(the_plan.tensors, logical))
        inputs = Inputs(logical, physical)
    spirv = compile_ops(glsl_source(the_plan, vk), vk)
    arrays = buffers(the_plan, vk, inputs.physical)
    with VulkanRunner(device) as runner:
        check_device(vk, runner.info)
        result = runner.run_sequence(stages(vk, spirv), arrays)
    output = result.outputs[-1].astype(np.float32).reshape(the_plan.tensors[-1].layout.flat_shape)
    half = config.dtype == "float16"
    return compare(config, the_plan, NAME, seed, inputs, output,
                   accumulate_roundoff=HALF_UNIT_ROUNDOFF if half else reference.FLOAT32_UNIT_ROUNDOFF,
                   storage_roundoff=HALF_UNIT_ROUNDOFF if half else 0.0)
