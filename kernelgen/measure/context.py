"""Where a measurement was taken: the "context" object of `validate`, `bench` and `stats --json`.

Results from different machines look alike; what tells them apart is the host's CPU, the toolchain
versions and the device each target ran on (as Google Benchmark's JSON records them).
"""
from __future__ import annotations

import datetime
import os
import platform
import socket
from collections.abc import Iterable
from typing import Any

from ..registry import TARGETS
from ..version import __version__

# A target's ToolStatus rows named like this are devices, not compilers.
_DEVICE_STATUS = ("opencl-device", "vulkan-device")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
        "host": {"name": socket.gethostname(), "cpu": cpu_model(), "num_cpus": os.cpu_count(),
                 "machine": platform.machine(), "system": f"{platform.system()} {platform.release()}"},
        "python": platform.python_version(),
        "toolchains": toolchains,
        "devices": devices,
    }
