"""Toolchains per target: each reports its status; imports of optional packages happen inside."""
from typing import Callable

from . import gcc
from .status import ToolStatus

TOOLCHAINS: dict[str, Callable[[], tuple[ToolStatus, ...]]] = {"c": gcc.status}

__all__ = ["TOOLCHAINS", "ToolStatus"]
