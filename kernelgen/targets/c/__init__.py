"""Portable C99: the plan's loop nest, literally, with caches carved from a workspace."""
from __future__ import annotations

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...emit import OutputFile
from ...toolstatus import ToolStatus
from ...validate import Result
from ..base import Target
from .run import bench_c, validate_c
from .toolchain import status


class C(Target):
    name = "c"
    summary = "portable C99 (gcc), caches in a caller-provided workspace"
    files = (OutputFile(pattern="{name}.h", template="c/kernel.h.j2"),
             OutputFile(pattern="{name}.c", template="c/kernel.c.j2"))

    def toolchain(self) -> tuple[ToolStatus, ...]:
        return status()

    def validate(self, config: Config, seed: int) -> Result:
        return validate_c(config, seed, self.render)

    def bench(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        return bench_c(config, options, self.render)
