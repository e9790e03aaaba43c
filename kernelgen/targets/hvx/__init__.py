"""Hexagon HVX (clang-19, 128-byte vectors): the plan's schedule with HVX stripe compute.

uint8: vrmpy (32 output channels x 4 input channels per instruction) with zero-point
corrections and fixed-point requantization; float32: the plan's loop nest as scalar C,
plus an HVX qf32 variant for v68+ (compile-only under QEMU 7.2). Arithmetic: plan.py.
"""
from __future__ import annotations

from typing import Any

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...config_model import TargetInfo
from ...emit import OutputFile
from ...plan import Plan
from ...toolstatus import ToolStatus
from ...validate import Result
from ..base import Target
from .bench import bench_hvx
from .options import NAME, HvxModel, default_budget
from .plan import HvxPlan, hvx_plan
from .toolchain import status
from .validate import validate_hvx


class Hvx(Target):
    name = NAME
    summary = "Hexagon HVX C (clang-19, qemu-hexagon): uint8 vrmpy, float32 scalar + qf32 (v68+)"
    files = (OutputFile(pattern="{name}.h", template="hvx/kernel.h.j2"),
             OutputFile(pattern="{name}.c", template="hvx/kernel.c.j2"))
    dtypes = ("float32", "uint8")
    includes = ("hvx/conv2d_uint8.c.j2", "hvx/conv2d_float32.c.j2", "hvx/helpers.c.j2")
    options_model = HvxModel

    def info(self) -> TargetInfo:
        # `schedule: auto` means "fit the VTCM": the hvx target owns that budget.
        return TargetInfo(name=self.name, dtypes=self.dtypes, options=self.options_model,
                          default_budget=default_budget)

    def target_plan(self, config: Config, plan: Plan) -> HvxPlan:
        return hvx_plan(config, plan)

    def context(self, config: Config, plan: Plan) -> dict[str, Any]:
        return {"hvx": self.target_plan(config, plan)}

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def validate(self, config: Config, seed: int) -> Result:
        return validate_hvx(config, seed, self.render)

    def bench(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        return bench_hvx(config, options, self.render)
