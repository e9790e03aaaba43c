"""Toolchains per target: each reports its status; imports of optional packages happen inside."""
from typing import Callable

from . import gcc, hexagon, opencl, vulkan
from .status import ToolStatus

TOOLCHAINS: dict[str, Callable[[], tuple[ToolStatus, ...]]] = {"c": gcc.status, "hvx": hexagon.status,
                                                                 "opencl": opencl.status, "vulkan": vulkan.status}

__all__ = ["TOOLCHAINS", "ToolStatus"]
