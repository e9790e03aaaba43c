"""The registry of targets: one explicit dict, no scanning (STYLE.md). Only the command line
and the public API (kernelgen.api) import it; the core receives targets as data."""
from __future__ import annotations

from ..config_model import Catalog
from .base import Target
from .c import C
from .hvx import Hvx
from .opencl import OpenCL
from .vulkan import Vulkan

TARGETS: dict[str, Target] = {"c": C(), "hvx": Hvx(), "opencl": OpenCL(), "vulkan": Vulkan()}


def catalog(targets: dict[str, Target] | None = None) -> Catalog:
    """What the config loader needs to know of each registered target."""
    return tuple(t.info() for t in (targets or TARGETS).values())


__all__ = ["TARGETS", "Target", "catalog"]
