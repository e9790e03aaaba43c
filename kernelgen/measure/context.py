"""Where a measurement was taken: the "context" object of `validate`, `bench` and `stats --json`.

Results from different machines look alike; what tells them apart is the host's CPU, the toolchain
versions and the device each target ran on (as Google Benchmark's JSON records them).
"""
from __future__ import annotations

import datetime
import os
import platform
import re
import socket
from collections.abc import Iterable
from typing import Any

from ..cpuinfo import first_processor, model_text
from ..registry import TARGETS
from ..version import __version__

# A target's ToolStatus rows named like this are devices, not compilers.
_DEVICE_STATUS = ("opencl-device", "vulkan-device")


def cpu_model() -> str:
    """The CPU's model name with its family, model and stepping numbers from /proc/cpuinfo (Linux; a hypervisor
    often shows a generic name), else what platform knows."""
    return model_text(first_processor()) or platform.processor() or platform.machine()


# The CPU features a measurement depends on: the c kernels' and lavapipe's code is 256-bit AVX2 with FMA, or
# AVX-512 where the core has it (x86); NEON and SVE on arm64.
WATCHED_FLAGS = {"x86_64": ("avx2", "avx512f", "fma"), "aarch64": ("asimd", "asimdhp", "sve")}


def cpu_flags() -> dict[str, bool]:
    """Each watched flag of this CPU's architecture: whether /proc/cpuinfo lists it (empty where neither)."""
    watched = WATCHED_FLAGS.get(platform.machine(), ())
    present: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith(("flags", "Features")):
                    present = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return {flag: flag in present for flag in watched}


def lavapipe_mesa(targets: Iterable[str]) -> str | None:
    """'Mesa 22.3.6 (LLVM 15.0.6)' when one of the targets' devices here is lavapipe (Mesa's llvmpipe), else None.
    Asks each target's device status (a Vulkan target's opens the loader once)."""
    for target in dict.fromkeys(targets):
        for status in TARGETS[target].toolchain() if target in TARGETS else ():
            if status.name in _DEVICE_STATUS and status.found and "llvmpipe" in status.version:
                found = re.search(r"Mesa \S+( \(LLVM [^)]*\))?", status.version)
                return found.group(0) if found else status.version
    return None


def host_line(targets: Iterable[str] = ()) -> str:
    """One line naming where a benchmark ran, printed first by `kernelgen bench` and every benchmarks/ script:
    the CPU model, its watched flags, its CPU count and, where one of `targets` runs on lavapipe, Mesa's version.
    Two runs on different hosts look alike without it (issue 50)."""
    flags = ", ".join(flag if present else f"no {flag}" for flag, present in cpu_flags().items())
    line = f"host: {cpu_model()} ({flags + '; ' if flags else ''}{os.cpu_count()} logical CPUs)"
    mesa = lavapipe_mesa(targets)
    return line + (f"; lavapipe: {mesa}" if mesa else "")


def run_context(targets: Iterable[str], extra_devices: dict[str, str] | None = None) -> dict[str, Any]:
    """The context of one run over `targets`: kernelgen, host, Python, each target's tool versions and device.

    `extra_devices` names devices a command chose itself (bench --device, stats --device)."""
    toolchains: dict[str, dict[str, str]] = {}
    devices: dict[str, str] = {}
    for target in dict.fromkeys(targets):
        for status in TARGETS[target].toolchain():
            version = status.version if status.found else "not found"
            if status.name in _DEVICE_STATUS:
                devices[target] = version
            else:
                toolchains.setdefault(target, {})[status.name] = version
    devices.update(extra_devices or {})
    return {
        "kernelgen_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": {"name": socket.gethostname(), "cpu": cpu_model(), "cpu_flags": cpu_flags(), "num_cpus": os.cpu_count(),
                 "machine": platform.machine(), "system": f"{platform.system()} {platform.release()}"},
        "python": platform.python_version(),
        "toolchains": toolchains,
        "devices": devices,
    }
