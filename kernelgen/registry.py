"""The registry of targets: each bundled target's name and the class that implements it, one explicit table
(STYLE.md: no scanning of file names, no installed entry points).

It sits below the public API and the measurement code, so both can look a target up without one reaching up
into the other. A target's package is imported the first time it is looked up: `run_context(["c"])` loads the c
target alone. Tests and plug-ins add their own with `TARGETS[name] = target` (monkeypatch.setitem)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from importlib import import_module
from typing import Any

from .config.model import Catalog

# A kernelgen.targets.base.Target; not imported here even for type checking, so that nothing below the API (this
# module, measure/context.py) has an edge to a target's code (tests/test_architecture.py, arch_check).
Target = Any

# name -> "module:class"; the order is the order `kernelgen targets` lists them and --target's help names them.
BUNDLED = {
    "c": "kernelgen.targets.c:C",
    "hvx": "kernelgen.targets.hvx:Hvx",
    "opencl": "kernelgen.targets.opencl:OpenCL",
    "vulkan": "kernelgen.targets.vulkan:Vulkan",
}


class Registry(MutableMapping[str, Target]):
    """{name: Target}, each bundled target made on its first lookup and kept."""

    def __init__(self, entries: Mapping[str, str]) -> None:
        self._entries: dict[str, str | Target] = dict(entries)

    def __getitem__(self, name: str) -> Target:
        entry = self._entries[name]
        if isinstance(entry, str):
            module, _, cls = entry.partition(":")
            entry = self._entries[name] = getattr(import_module(module), cls)()
        return entry

    def __setitem__(self, name: str, target: Target) -> None:
        self._entries[name] = target

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:  # without loading the target
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({list(self._entries)})"


TARGETS = Registry(BUNDLED)


def catalog(targets: Mapping[str, Target] | None = None) -> Catalog:
    """What the config loader needs to know of each registered target."""
    return tuple(t.info() for t in (targets or TARGETS).values())


__all__ = ["BUNDLED", "Registry", "TARGETS", "catalog"]
