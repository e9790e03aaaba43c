"""Shared fixtures and the one toolchain gate for every test.

`requires_tool("gcc")` skips a test when the tool is missing locally, and turns that
skip into a failure when KERNELGEN_REQUIRE_TOOLCHAINS=1 (CI), so nothing is silently
skipped there.

The tools a test needs also mark it `slow` (at collection, pytest_collection_modifyitems): one that needs an
emulated device's tool (EMULATORS: QEMU, PoCL, lavapipe) always, so `pytest -m 'not slow'` runs no kernel on an
emulator; one that needs a compiler (BUILDERS: gcc, clang, cmake) unless it is marked `quick` (the few that keep
the c target's compile-and-run in the quick set); and one that asks for tools inside (require_tools, whose tools
depend on its parameters) likewise unless `quick`.
"""
from __future__ import annotations

import functools
import inspect
import os
import shutil
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REQUIRE_TOOLCHAINS = os.environ.get("KERNELGEN_REQUIRE_TOOLCHAINS") == "1"

# Under `make test` (CI) pytest inherits the outer make's MAKELEVEL and MAKEFLAGS, and every make a test runs would
# then be a sub-make: it prints "make[1]: Entering/Leaving directory" around its output (after the demo's summary
# line) and may look for a jobserver it is not part of. The tests run make as a user's shell does.
for _name in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"):
    os.environ.pop(_name, None)


# The tools that stand for an emulated device: qemu-hexagon (hvx), PoCL behind pyopencl, lavapipe behind vulkan.
EMULATORS = frozenset({"qemu-hexagon", "py:pyopencl", "py:vulkan"})
# The tools that build native code: a test needing one compiles (seconds each on a busy two-core host).
BUILDERS = frozenset({"gcc", "g++", "clang-19", "ld.lld-19", "cmake", "make", "ninja"})
# The tools kernelgen never depends on, which a user may install for a second opinion: a test needing one skips
# when it is missing even under KERNELGEN_REQUIRE_TOOLCHAINS=1 (CI does not install them). "qnn:htp": Qualcomm's
# HTP simulator through onnxruntime-qnn (this Python's, or KERNELGEN_QNN_PYTHON's: kernelgen/onnx/qnn.py).
OPTIONAL = frozenset({"qnn:htp"})


def _python_module_available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@functools.lru_cache(maxsize=None)
def _qnn_found() -> bool:
    """Whether kernelgen finds onnxruntime-qnn (a child process probes it: once per session)."""
    from kernelgen.onnx.qnn import QnnMissing, find_qnn

    try:
        find_qnn()
    except QnnMissing:
        return False
    return True


def tool_missing(*tools: str) -> list[str]:
    """Names of tools (executables, or python modules written 'py:name') not found."""
    missing = []
    for tool in tools:
        if tool == "mesa:rusticl":  # `make mesa-compilers`' OpenCL driver (its shims are mesa:turnip's, mesa:panvk's)
            from kernelgen.targets.opencl.rusticl_pin import is_installed as rusticl_installed

            if not rusticl_installed():
                missing.append(tool)
        elif tool.startswith("mesa:"):  # a compiler `make mesa-compilers` builds (mesa:turnip, mesa:panvk)
            from kernelgen.targets.vulkan.mesa_pin import DRIVERS, is_installed

            if not any(d.tool == tool[5:] and is_installed(d) for d in DRIVERS):
                missing.append(tool)
        elif tool == "qnn:htp":
            if not _qnn_found():
                missing.append(tool)
        elif tool.startswith("py:"):
            if not _python_module_available(tool[3:]):
                missing.append(tool)
        elif shutil.which(tool) is None:
            missing.append(tool)
    return missing


def requires_tool(*tools: str):
    """Decorator: skip when a tool is missing, fail instead under KERNELGEN_REQUIRE_TOOLCHAINS=1."""
    missing = tool_missing(*tools)

    def decorate(fn):
        fn.kernelgen_tools = (*getattr(fn, "kernelgen_tools", ()), *tools)  # the slow marker reads them
        if not missing:
            return fn
        reason = f"missing toolchain: {', '.join(missing)}"
        if REQUIRE_TOOLCHAINS and not OPTIONAL.issuperset(missing):
            def failing(*args, **kwargs):
                pytest.fail(f"{reason} (KERNELGEN_REQUIRE_TOOLCHAINS=1 forbids skipping)")
            failing.__name__ = fn.__name__
            return failing
        return pytest.mark.skip(reason=reason)(fn)

    return decorate


def require_tools(*tools: str) -> None:
    """requires_tool inside a test (a parametrized one, whose tools depend on its target): skip when a tool is
    missing, fail instead under KERNELGEN_REQUIRE_TOOLCHAINS=1."""
    missing = tool_missing(*tools)
    if missing:
        reason = f"missing toolchain: {', '.join(missing)}"
        if REQUIRE_TOOLCHAINS and not OPTIONAL.issuperset(missing):
            pytest.fail(f"{reason} (KERNELGEN_REQUIRE_TOOLCHAINS=1 forbids skipping)")
        pytest.skip(reason)


def count_calls(fn):
    """fn()'s result and the Python function calls it made: work counted, not timed (the suite must pass on a
    busy host; speed belongs in benchmarks/)."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += event == "call"

    sys.setprofile(profile)
    try:
        return fn(), count
    finally:
        sys.setprofile(None)


# A small quantized 1x1 conv in HVX's packed layouts: seconds under qemu-hexagon.
SMALL_UINT8 = """\
name: {name}
dtype: uint8
input: {{shape: [1, 6, 8, 32], layout: nhwc-8h8w32c}}
quant: {{input_scale: 0.05, input_zero_point: 128, weight_scale: 0.01, output_scale: 0.1, output_zero_point: 100}}
ops:
  - conv2d: {{out_channels: 32, kernel: 1, filter_layout: oihw-8i32o4i{bias}}}
output: {{layout: nhwc-8h8w32c}}
schedule: {{k_split: 1, h_split: 1}}
targets: [hvx]
"""


@pytest.fixture
def repo() -> Path:
    return REPO


# ---------------------------------------------------------------- hostile inputs: a command that hangs

class Hang(BaseException):
    """A command ran too long. Not an OSError (as TimeoutError is): the code under test must not catch it."""


@contextmanager
def time_limit(seconds: int):
    def expired(signum, frame):
        raise Hang(f"a command ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------- the slow marker, kept by the tools a test needs

@functools.cache
def _asks_for_tools(fn) -> bool:
    try:
        return "require_tools(" in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def _is_slow(item) -> bool:
    fn = getattr(item, "function", None)
    tools = set(getattr(fn, "kernelgen_tools", ()))
    if EMULATORS & tools:
        return True
    return (bool(BUILDERS & tools) or _asks_for_tools(fn)) and item.get_closest_marker("quick") is None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is None and _is_slow(item):
            item.add_marker(pytest.mark.slow)
