"""Config -> every file `kernelgen build` writes for it, as {relative path: text}. Pure."""
from __future__ import annotations

from pathlib import Path

from .config import Config
from .emit import render, template_files
from .errors import ConfigError, ConfigProblem
from .planner import plan
from .report import text_report
from .targets import TARGETS


def chosen_targets(config: Config, override: tuple[str, ...] = ()) -> tuple[str, ...]:
    names = override or config.targets
    unknown = [t for t in names if t not in TARGETS]
    if unknown:
        raise ConfigError([ConfigProblem(config.path, 1, 1, "targets",
                                         f"unknown target {unknown[0]!r} (expected one of: {', '.join(TARGETS)})")])
    for name in names:
        if config.dtype not in TARGETS[name].dtypes:
            raise ConfigError([ConfigProblem(config.path, 1, 1, "dtype", f"target {name!r} supports dtype "
                                             f"{', '.join(TARGETS[name].dtypes)}, got {config.dtype!r}")])
    return tuple(dict.fromkeys(names))


def generate(config: Config, targets: tuple[str, ...] = ()) -> dict[str, str]:
    the_plan = plan(config)
    files = {f"{config.name}/plan.txt": text_report(the_plan)}
    for name in chosen_targets(config, targets):
        for file_name, text in render(the_plan, TARGETS[name]).items():
            files[f"{config.name}/{name}/{file_name}"] = text
    return files


def output_names(config: Config, targets: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The files generate() would produce, without planning or rendering."""
    names = [f"{config.name}/plan.txt"]
    for name in chosen_targets(config, targets):
        names += [f"{config.name}/{name}/{f}" for f in TARGETS[name].file_names(config.name)]
    return tuple(names)


def dependencies(config: Config, target: str | None) -> tuple[str, ...]:
    """What shaped an output: its config, the templates of its target, kernelgen's modules."""
    package = Path(__file__).resolve().parent
    modules = sorted(str(p) for p in package.rglob("*.py"))
    templates = [str(p) for p in template_files(TARGETS[target])] if target else []
    return (str(Path(config.path)), *templates, *modules)
