"""What every toolchain reports about itself for `kernelgen targets` and test gating."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ToolStatus:
    name: str
    found: bool
    version: str
    install_hint: str
