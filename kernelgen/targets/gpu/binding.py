"""The Python binding of a GPU API (pyopencl, vulkan), imported only when a device is used, so that
`import kernelgen` works without it; a missing one is a ToolchainError that says what to install."""
from __future__ import annotations

import importlib
from types import ModuleType

from ...errors import ToolchainError


def import_binding(module: str, missing: str, *, loader: tuple[str, str] | None = None) -> ModuleType:
    """`missing`: the error when the package is not installed; `loader`: (what, how to install it) for a binding
    that loads its driver's loader while importing (vulkan dlopens libvulkan.so.1), which fails with OSError."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ToolchainError(missing) from exc
    except OSError as exc:
        if loader is None:
            raise
        raise ToolchainError(f"the {loader[0]} loader cannot be loaded ({exc}): {loader[1]}") from exc
