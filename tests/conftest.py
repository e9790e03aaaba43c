"""Shared fixtures and the one toolchain gate for every test.

`requires_tool("gcc")` skips a test when the tool is missing locally, and turns that
skip into a failure when KERNELGEN_REQUIRE_TOOLCHAINS=1 (CI), so nothing is silently
skipped there.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REQUIRE_TOOLCHAINS = os.environ.get("KERNELGEN_REQUIRE_TOOLCHAINS") == "1"


def _python_module_available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def tool_missing(*tools: str) -> list[str]:
    """Names of tools (executables, or python modules written 'py:name') not found."""
    missing = []
    for tool in tools:
        if tool.startswith("py:"):
            if not _python_module_available(tool[3:]):
                missing.append(tool)
        elif shutil.which(tool) is None:
            missing.append(tool)
    return missing


def requires_tool(*tools: str):
    """Decorator: skip when a tool is missing, fail instead under KERNELGEN_REQUIRE_TOOLCHAINS=1."""
    missing = tool_missing(*tools)

    def decorate(fn):
        if not missing:
            return fn
        reason = f"missing toolchain: {', '.join(missing)}"
        if REQUIRE_TOOLCHAINS:
            def failing(*args, **kwargs):
                pytest.fail(f"{reason} (KERNELGEN_REQUIRE_TOOLCHAINS=1 forbids skipping)")
            failing.__name__ = fn.__name__
            return failing
        return pytest.mark.skip(reason=reason)(fn)

    return decorate


@pytest.fixture
def repo() -> Path:
    return REPO
