"""The registry of targets: one explicit dict, no scanning (STYLE.md)."""
from .base import Target
from .c import C
from .opencl import OPENCL
from .hvx import HVX
from .vulkan import VULKAN

TARGETS: dict[str, Target] = {"c": C, "hvx": HVX, "opencl": OPENCL, "vulkan": VULKAN}

__all__ = ["TARGETS", "Target"]
