"""The vulkan target's GLSL text and SPIR-V modules: render the shader source from a
VulkanPlan and compile it once per conv2d (-DKG_OP=<op>) with glslangValidator + spirv-val."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

from ...emit import Comment, render_template
from ...plan import Plan
from .plan import VulkanPlan
from .toolchain import TARGET_ENV, compile_glsl

COMP_TEMPLATE = "vulkan/conv2d.comp.j2"


def glsl_source(plan: Plan, vk: VulkanPlan) -> str:
    """The same text `kernelgen build` writes as <name>.comp (one environment, emit.py's banner)."""
    return render_template(COMP_TEMPLATE, plan, Comment(), vk=vk)


def compile_ops(source: str, vk: VulkanPlan) -> tuple[bytes, ...]:
    return tuple(compile_glsl(source, defines={"KG_OP": str(op.index)}) for op in vk.ops)


@dataclass(frozen=True, slots=True)
class Module:
    op: int
    words: int
    sha256: str
    groups: tuple[int, int, int]
    local: tuple[int, int, int]
    trips: int


class SpirvDigest:
    """Compiled only when a template reads it (the .spirv.txt golden), not for the .comp."""

    def __init__(self, plan: Plan, vk: VulkanPlan) -> None:
        self.plan, self.vk = plan, vk

    @property
    def target_env(self) -> str:
        return TARGET_ENV

    @cached_property
    def modules(self) -> tuple[Module, ...]:
        spirv = compile_ops(glsl_source(self.plan, self.vk), self.vk)
        return tuple(Module(op=op.index, words=len(code) // 4, sha256=hashlib.sha256(code).hexdigest(),
                            groups=op.groups, local=op.wg_size, trips=op.trips)
                     for op, code in zip(self.vk.ops, spirv))
