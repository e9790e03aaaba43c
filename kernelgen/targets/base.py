"""What every target is: mostly data. A target names its output files and templates;
its toolchain (kernelgen/toolchains) knows how to build and run what it emits."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFile:
    pattern: str  # file name, with {name} for the config name: "{name}.c"
    template: str  # path under templates/: "c/kernel.c.j2"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    name: str
    summary: str
    files: tuple[OutputFile, ...]
    dtypes: tuple[str, ...] = ("float32",)
    comment_open: str = "/*"
    comment_close: str = "*/"
    # Extra template data computed from (config, plan), e.g. hvx's register blocking and
    # requantization; None for targets whose templates read only the plan.
    context: Callable[[Any, Any], dict[str, Any]] | None = None
    includes: tuple[str, ...] = ()  # templates the files include (for depfiles)

    def file_names(self, config_name: str) -> tuple[str, ...]:
        return tuple(f.pattern.format(name=config_name) for f in self.files)
