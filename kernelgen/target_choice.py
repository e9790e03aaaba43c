"""Which targets build what, by dtype: the one rule the API, `build`/`validate`/`bench` over configs and networks,
and `import` all apply. Targets arrive as data (the registry, or any {name: target}); this module knows none."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol


class TakesDtypes(Protocol):
    """A target as this rule sees it (a Target, or the config loader's TargetInfo)."""

    @property
    def dtypes(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetChoice:
    """The given targets split by whether they take a dtype, and every known target that does."""

    dtype: str
    chosen: tuple[str, ...]  # the given targets that take the dtype, in the order given, once each
    refused: tuple[str, ...]  # the given targets that do not (or that are not known at all)
    takers: tuple[str, ...]  # every known target that takes the dtype, in the known order


def choose_targets(dtype: str, given: Iterable[str], known: Mapping[str, TakesDtypes]) -> TargetChoice:
    """Of `given`, the targets whose dtypes include `dtype`, and those that refuse it; `known`: the targets by
    name."""
    names = tuple(dict.fromkeys(given))
    takes = {name for name, target in known.items() if dtype in target.dtypes}
    return TargetChoice(dtype=dtype, chosen=tuple(n for n in names if n in takes),
                        refused=tuple(n for n in names if n not in takes),
                        takers=tuple(n for n in known if n in takes))
