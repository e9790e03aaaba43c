"""Vulkan toolchain: GLSL -> SPIR-V (glslangValidator, spirv-val, spirv-dis) and the status
of every tool the target needs. Devices: device.py; dispatches: runtime.py; the FMA and
bandwidth probes: probes.py.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...children import run_child
from ...errors import ToolchainError
from ...files import write_if_changed_bytes
from ...toolstatus import ToolStatus
from .device import import_vulkan, list_devices

# glslang's vulkan1.1 target emits SPIR-V 1.3, which every Vulkan 1.1+ driver accepts.
TARGET_ENV = "vulkan1.1"
_INSTALL = {
    "glslangValidator": "apt-get install glslang-tools",
    "spirv-val": "apt-get install spirv-tools",
    "spirv-dis": "apt-get install spirv-tools",
    "python:vulkan": "pip install 'kernelgen[vulkan]'",
    "vulkan-device": "apt-get install libvulkan1 mesa-vulkan-drivers (lavapipe, a CPU device)",
}
_STAGES = ("comp", "vert", "frag", "geom", "tesc", "tese")
_MACRO = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOOL_TIMEOUT_S = 120
def _run_tool(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one tool in `cwd`; a missing executable becomes a ToolchainError with a hint."""
    if shutil.which(argv[0]) is None:
        raise ToolchainError(f"{argv[0]} not found: {_INSTALL[argv[0]]}")
    return run_child(argv, what=argv[0], verb="compile" if argv[0] == "glslangValidator" else "finish",
                     timeout=_TOOL_TIMEOUT_S, cwd=cwd, text=True)


def _tool_version(name: str, flag: str) -> ToolStatus:
    hint = _INSTALL[name]
    if shutil.which(name) is None:
        return ToolStatus(name, False, "", hint)
    try:
        out = run_child([name, flag], what=f"{name} {flag}", verb="finish", timeout=_TOOL_TIMEOUT_S, text=True).stdout
    except (OSError, ToolchainError) as exc:
        return ToolStatus(name, False, f"does not run: {exc}", hint)
    return ToolStatus(name, True, (out.strip().splitlines() or [""])[0], hint)


def _binding_status() -> ToolStatus:
    hint = _INSTALL["python:vulkan"]
    try:
        version = importlib.metadata.version("vulkan")
        import_vulkan()
    except importlib.metadata.PackageNotFoundError:
        return ToolStatus("python:vulkan", False, "", hint)
    except ToolchainError as exc:  # installed, but libvulkan.so.1 is missing
        return ToolStatus("python:vulkan", False, str(exc), hint)
    return ToolStatus("python:vulkan", True, version, hint)


def _device_status() -> ToolStatus:
    hint = _INSTALL["vulkan-device"]
    try:
        importlib.metadata.version("vulkan")
    except importlib.metadata.PackageNotFoundError:  # the drivers may well be there: the binding is what is missing
        return ToolStatus("vulkan-device", False, "not checked: the Python package 'vulkan' is missing",
                          _INSTALL["python:vulkan"])
    try:
        devices = list_devices()
    except ToolchainError as exc:
        return ToolStatus("vulkan-device", False, str(exc), hint)
    if not devices:
        return ToolStatus("vulkan-device", False, "no Vulkan 1.2 device", hint)
    first = devices[0]
    return ToolStatus("vulkan-device", True,
                      f"{first.name}; {first.driver}; Vulkan {first.api_version}", hint)


def status() -> tuple[ToolStatus, ...]:
    """glslangValidator, spirv-val, spirv-dis, the `vulkan` package and the first device.

    Never raises: a failed probe is reported as not found, with the reason as version.
    """
    return (_tool_version("glslangValidator", "-dumpfullversion"),
            _tool_version("spirv-val", "--version"),
            _tool_version("spirv-dis", "--version"),
            _binding_status(),
            _device_status())


def compile_glsl(source: str, *, stage: str = "comp",
                 defines: dict[str, str] | None = None) -> bytes:
    """GLSL source -> validated SPIR-V bytes, cached on disk by content (like ccache).

    `kernelgen build` compiles every shader for its SPIR-V golden; the cache keeps repeated
    builds within the tool's speed budget. The key covers the source, stage, defines and the
    compiler's version, so a new glslang never serves stale SPIR-V.
    """
    key = hashlib.sha256(repr((source, stage, sorted((defines or {}).items()), _glslang_version())).encode())
    cached = _cache_dir() / f"{key.hexdigest()}.spv"
    try:
        return cached.read_bytes()
    except OSError:
        pass
    spirv = _compile_uncached(source, stage=stage, defines=defines)
    try:
        write_if_changed_bytes(cached, spirv)
    except OSError:
        pass  # a read-only cache folder only costs speed
    return spirv


def _cache_dir() -> Path:
    root = os.environ.get("KERNELGEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelgen")
    return Path(root) / "spirv"


@functools.lru_cache(maxsize=1)
def _glslang_version() -> str:
    done = run_child(["glslangValidator", "--version"], what="glslangValidator --version", verb="finish",
                     timeout=_TOOL_TIMEOUT_S, text=True) if shutil.which("glslangValidator") else None
    return done.stdout.strip() if done else ""


def _compile_uncached(source: str, *, stage: str, defines: dict[str, str] | None) -> bytes:
    """Compiles in a temporary directory under the fixed name kernel.<stage>, so that error
    messages ("ERROR: kernel.comp:3: 'y' : undeclared identifier") do not depend on it."""
    if stage not in _STAGES:
        raise ToolchainError(f"unknown shader stage {stage!r}; expected {', '.join(_STAGES)}")
    bad = [name for name in defines or {} if not _MACRO.match(name)]
    if bad:
        raise ToolchainError(f"invalid macro names {bad}")
    flags = [f"-D{name}={value}" for name, value in sorted((defines or {}).items())]
    with tempfile.TemporaryDirectory(prefix="kernelgen-glsl-") as tmp:
        cwd = Path(tmp)
        (cwd / f"kernel.{stage}").write_text(source, encoding="utf-8")
        done = _run_tool(["glslangValidator", "-V", "--target-env", TARGET_ENV, *flags,
                          "-o", "kernel.spv", f"kernel.{stage}"], cwd)
        if done.returncode != 0:
            raise ToolchainError(f"glslangValidator failed:\n{(done.stdout + done.stderr).strip()}")
        checked = _run_tool(["spirv-val", "--target-env", TARGET_ENV, "kernel.spv"], cwd)
        if checked.returncode != 0:
            raise ToolchainError(f"spirv-val rejected the SPIR-V:\n"
                                 f"{(checked.stdout + checked.stderr).strip()}")
        return (cwd / "kernel.spv").read_bytes()


def disassemble(spirv: bytes) -> str:
    """spirv-dis text without the header comments.

    The header names the generator's version, so leaving it out keeps goldens stable
    across glslang releases that emit the same code.
    """
    with tempfile.TemporaryDirectory(prefix="kernelgen-spv-") as tmp:
        cwd = Path(tmp)
        (cwd / "kernel.spv").write_bytes(spirv)
        done = _run_tool(["spirv-dis", "--no-color", "--no-header", "-o", "kernel.spvasm",
                          "kernel.spv"], cwd)
        if done.returncode != 0:
            raise ToolchainError(f"spirv-dis failed:\n{(done.stdout + done.stderr).strip()}")
        return (cwd / "kernel.spvasm").read_text(encoding="utf-8")
