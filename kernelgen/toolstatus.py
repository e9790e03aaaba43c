"""What every toolchain reports about itself for `kernelgen targets` and test gating."""
from __future__ import annotations

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
