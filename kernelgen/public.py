"""The names `import kernelgen` offers notebooks and build scripts (kernelgen/__init__.py loads this module on
first use): a config from a file or a string, its plan, one target's files, validation, benchmarks."""
from __future__ import annotations

from pathlib import Path

from . import api
from .bench import BenchOptions, BenchRow
from .config import Config
from .plan import Plan
from .validate import Result


def load_config(path_or_text: str | Path) -> Config:
    """A config from a file (a path) or from YAML text (a string holding a line break)."""
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return api.parse_config(path_or_text, "<string>")
    return api.load_config(path_or_text)


def plan(config: Config) -> Plan:
    """Shapes, layouts, caches, the loop nest, FLOPs and traffic (what `kernelgen plan` prints)."""
    from .planner import plan as make_plan

    return make_plan(config)


def generate(config: Config, target: str) -> dict[str, str]:
    """One target's files, {file name: text}, as `kernelgen build` writes them under <name>/<target>/."""
    prefix = f"{config.name}/{target}/"
    return {rel[len(prefix):]: text for rel, text in api.generate(config, (target,)).items() if rel.startswith(prefix)}


def validate(config: Config, target: str, seed: int | None = None) -> Result:
    """Build, run on fresh inputs (or `seed`'s), compare with numpy; `.passed` says whether it matched."""
    return api.validate(config, target, seed=seed)


def bench(config: Config, target: str, repeat: int = 5, sweep: bool = False) -> list[BenchRow]:
    """Time the target's kernels on this machine: one row per kernel (median, min and max of `repeat` runs)."""
    return api.bench(config, target, BenchOptions(repeat=repeat, sweep=sweep))
