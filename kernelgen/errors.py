"""Errors raised as data by the library; the command line (kernelgen/cli/) alone turns them into messages and exit codes."""
from __future__ import annotations

from dataclasses import dataclass


class KernelgenError(Exception):
    """Base of every error kernelgen raises on purpose."""

    exit_code = 1


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem in one config file, located as precisely as the YAML marks allow."""

    path: str
    line: int  # 1-based
    column: int  # 1-based
    key: str  # dotted path such as ops[1].conv2d.stride, or "" for the document
    message: str  # "expected a positive int or [h, w], got 0"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        return f"{where}: error: {self.key}: {self.message}" if self.key else f"{where}: error: {self.message}"


class ConfigError(KernelgenError):
    """A config (or a schedule it asks for) is invalid; carries every problem found."""

    exit_code = 2

    def __init__(self, problems: list[ConfigProblem] | tuple[ConfigProblem, ...]):
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class NoScheduleFits(ConfigError):
    """`schedule: auto` found no schedule whose caches fit the budget: the smallest needs `needed` bytes."""

    def __init__(self, problems: list[ConfigProblem] | tuple[ConfigProblem, ...], needed: int, budget: int):
        super().__init__(problems)
        self.needed, self.budget = needed, budget


class ToolchainError(KernelgenError):
    """A compiler, runtime or device failed or is missing; the message says what to install."""


class MismatchError(KernelgenError):
    """A kernel ran but its output disagreed with the numpy reference."""
