"""The vulkan target's GLSL text and SPIR-V modules: render the shader source from a
VulkanPlan and compile it once per conv2d (-DKG_OP=<op>) with glslangValidator + spirv-val."""
from __future__ import annotations

from ...emit import Comment, render_template
from ...plan import Plan
from .plan import VulkanPlan
from .toolchain import compile_glsl

COMP_TEMPLATE = "vulkan/conv2d.comp.j2"


def glsl_source(plan: Plan, vk: VulkanPlan) -> str:
    """The same text `kernelgen build` writes as <name>.comp (one environment, emit.py's banner)."""
    return render_template(COMP_TEMPLATE, plan, Comment(), vk=vk)


def compile_ops(source: str, vk: VulkanPlan) -> tuple[bytes, ...]:
    return tuple(compile_glsl(source, defines={"KG_OP": str(op.index)}) for op in vk.ops)
