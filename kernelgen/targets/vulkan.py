"""Vulkan GLSL 450 compute (seed 002's uVkCompute kernel): one shader source per config,
one dispatch per conv2d (compiled with -DKG_OP=<op>), plus the SPIR-V digest of each op."""
from __future__ import annotations

from .base import OutputFile, Target

COMP_TEMPLATE = "vulkan/conv2d.comp.j2"


def _dispatch_plan(config, plan):  # tiles, dispatch sizes, index text; the SPIR-V digest on demand
    from ..vulkan_code import SpirvDigest
    from ..vulkan_plan import plan_vulkan

    vk = plan_vulkan(config, plan)
    return {"vk": vk, "spirv": SpirvDigest(plan, vk)}


VULKAN = Target(
    name="vulkan",
    summary="Vulkan GLSL 450 compute (glslangValidator -> SPIR-V, lavapipe): seed 002 tiles, vec4 channels",
    files=(OutputFile(pattern="{name}.comp", template=COMP_TEMPLATE),
           OutputFile(pattern="{name}.spirv.txt", template="vulkan/spirv.txt.j2")),
    dtypes=("float32", "float16"),
    context=_dispatch_plan,
)
