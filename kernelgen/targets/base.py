"""What every target is: one class per folder, implementing the stages the core calls.

config (its option block, checked by `options`) -> the core plan -> `target_plan` (the
target's own tiling on top of it) -> `context` (what its templates render from) -> `render`
-> `toolchain` / `validate` / `bench`. The registry in targets/__init__.py is the only place
that lists targets; the core receives them as data (`info()` for the config loader).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from ..bench import BenchOptions, BenchRow
from ..config import Config, options_of
from ..config_model import TargetInfo
from ..emit import Comment, OutputFile, render, template_files
from ..plan import Plan
from ..toolstatus import ToolStatus
from ..validate import Result


class Target(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]
    files: ClassVar[tuple[OutputFile, ...]]
    dtypes: ClassVar[tuple[str, ...]] = ("float32",)
    comment: ClassVar[Comment] = Comment()
    includes: ClassVar[tuple[str, ...]] = ()  # templates the files include (for depfiles)
    options_model: ClassVar[type[BaseModel] | None] = None  # the model of its `<name>:` block, if it has one
    # A target that lives outside kernelgen (a plugin, a test) keeps its templates in a folder of its own;
    # None: kernelgen's templates/ (the bundled targets).
    template_root: ClassVar[Path | None] = None

    # ------------------------------------------------------------ config

    def info(self) -> TargetInfo:
        """What the config loader needs to know of this target."""
        return TargetInfo(name=self.name, dtypes=self.dtypes, options=self.options_model)

    def options(self, config: Config) -> Any:
        """This target's option block, as its model checked it when the config was loaded."""
        return options_of(config, self.name)

    # ------------------------------------------------------------ generation

    def target_plan(self, config: Config, plan: Plan) -> Any:
        """The target's own tiling on top of the core plan (None: the core plan is all it needs)."""
        return None

    def context(self, config: Config, plan: Plan) -> dict[str, Any]:
        """Template data beyond the plan."""
        return {}

    def render(self, config: Config, plan: Plan) -> dict[str, str]:
        """Every file this target writes for a config, by file name."""
        return render(plan, self.files, self.comment, self.context(config, plan), self.template_root)

    def file_names(self, config_name: str) -> tuple[str, ...]:
        return tuple(f.pattern.format(name=config_name) for f in self.files)

    def templates(self) -> tuple[Path, ...]:
        """Every template file its output depends on (for depfiles)."""
        return template_files([f.template for f in self.files] + list(self.includes), self.template_root)

    # ------------------------------------------------------------ toolchain

    @abstractmethod
    def toolchain(self) -> tuple[ToolStatus, ...]:
        """The tools this target builds and runs with, found or not."""

    @abstractmethod
    def validate(self, config: Config, seed: int) -> Result:
        """Build, run on inputs drawn from `seed`, compare with the numpy reference."""

    @abstractmethod
    def bench(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        """Time the generated kernels on this machine."""

    def sweep_variants(self, config: Config) -> list[tuple[str, Config]]:
        """The permutations `bench --sweep` tries, each a key (what a resumed sweep matches) and the config with
        that tile / work-group; [] for a target without any."""
        return []

    def sweep_measure(self, config: Config, options: BenchOptions) -> list[BenchRow]:
        """One sweep variant's row, first: its time (bench), or a static estimate for a device that is not here
        (metrics['rank'], lower is better)."""
        return self.bench(config, options)

    # A target whose kernels a real device compiler can judge without the device names those devices here.
    stats_devices: ClassVar[tuple[str, ...]] = ()

    def stats(self, config: Config, device: str) -> list[dict[str, Any]]:
        """Per op, what `device`'s compiler makes of the kernel (registers, spills, occupancy, code size)."""
        raise NotImplementedError(f"the {self.name} target has no compiler statistics")

    def binaries(self, config: Config, plan: Plan) -> tuple[dict[str, bytes], str]:
        """Compiled artifacts `kernelgen build` writes beside the sources (never goldens: they depend on the
        compiler's version), and a note when they cannot be made here ("": nothing to say)."""
        return {}, ""
