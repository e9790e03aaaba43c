"""The bundled targets, one package each (c, hvx, opencl, vulkan) behind the interface in base.py. The list of
them is kernelgen/registry.py; TARGETS and catalog are re-exported here for code that looks them up by this
package's name."""
from __future__ import annotations

from ..registry import TARGETS, catalog
from .base import Target

__all__ = ["TARGETS", "Target", "catalog"]
