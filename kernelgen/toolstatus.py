"""What every toolchain reports about itself for `kernelgen targets` and test gating."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ToolStatus:
    name: str
    found: bool
    version: str
    install_hint: str
    # A compiler only `kernelgen stats` (and build --device's spill warnings) use, such as Mesa's Turnip and PanVK:
    # validate --skip-missing runs the target without it.
    stats_only: bool = False


def install_text(missing: list[ToolStatus]) -> str:
    """'missing a, b; install: apt-get install p q' with each package once (one package often brings several
    tools) and other hints (pip) after it."""
    apt = "apt-get install "
    packages = dict.fromkeys(p for s in missing if s.install_hint.startswith(apt)
                             for p in s.install_hint[len(apt):].split())
    others = dict.fromkeys(s.install_hint for s in missing if not s.install_hint.startswith(apt))
    hints = ([apt + " ".join(packages)] if packages else []) + list(others)
    return f"missing {', '.join(s.name for s in missing)}; install: {'; '.join(hints)}"


# kernelgen/cmake/kernelgenConfig.cmake refuses older CMakes (add_custom_command(DEPFILE) with the Makefile
# generators and cmake_path() arrived in 3.20)
CMAKE_MINIMUM = (3, 20)
CMAKE_HINT = "apt-get install cmake"


def cmake_status() -> ToolStatus:
    """cmake, which the CMake package (`kernelgen --cmake-dir`) is read by: not a target's toolchain, but a user of
    find_package(kernelgen) needs it, at least CMAKE_MINIMUM (an older one is reported missing, with its version)."""
    program = shutil.which("cmake")
    if not program:
        return ToolStatus(name="cmake", found=False, version="", install_hint=CMAKE_HINT)
    try:
        lines = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        lines = []
    version = lines[0] if lines else ""
    number = re.search(r"(\d+)\.(\d+)", version)
    if number and (int(number[1]), int(number[2])) >= CMAKE_MINIMUM:
        return ToolStatus(name="cmake", found=True, version=version, install_hint=CMAKE_HINT)
    needed = ".".join(map(str, CMAKE_MINIMUM))
    return ToolStatus(name="cmake", found=False, version=version or "unreadable version",
                      install_hint=f"the CMake package needs cmake {needed} or newer: {CMAKE_HINT} (or pip install cmake)")
