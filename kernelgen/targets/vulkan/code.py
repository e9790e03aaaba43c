"""The vulkan target's GLSL text and SPIR-V modules: render the shader source from a
VulkanPlan (the target renders it as <name>.comp) and compile it once per conv2d (-DKG_OP=<op>) with glslangValidator + spirv-val."""
from __future__ import annotations

from .plan import VulkanPlan
from .toolchain import compile_glsl

COMP_TEMPLATE = "vulkan/conv2d.comp.j2"


def compile_ops(source: str, vk: VulkanPlan) -> tuple[bytes, ...]:
    return tuple(compile_glsl(source, defines={"KG_OP": str(op.index)}) for op in vk.ops)
