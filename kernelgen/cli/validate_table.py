"""The text `kernelgen validate` prints: one row per (config, target), the detail of each finding under it,
and one line per target skipped for a missing toolchain saying what to install."""
from __future__ import annotations

from ..measure.records import Status, ValidationResult


def _cell(value: float, spec: str, size: int) -> str:
    """A measurement, or "-" for a row without one (compiled only, skipped): never nan."""
    return f"{'-':>{size}}" if value != value else f"{value:>{size}{spec}}"


def validate_table(results: list[ValidationResult]) -> list[str]:
    width = max([28, *(len(r.config) + 1 for r in results)])  # a long name widens the column, never breaks it
    lines = [f"{'config':<{width}} {'target':<8} {'status':<8} {'max abs err':>12} {'max rel err':>12} "
             f"{'err/bound':>10} {'threshold':>10} {'checked':<9} {'seed':>11}"]
    for r in results:
        seed = "-" if r.status is Status.SKIPPED else str(r.seed)
        lines.append(f"{r.config:<{width}} {r.target:<8} {r.status.value:<8} {_cell(r.max_abs_error, '.3e', 12)} "
                     f"{_cell(r.max_rel_error, '.3e', 12)} {_cell(r.bound_ratio, '.2e', 10)} "
                     f"{_cell(r.threshold, '.2e', 10)} {r.checked or '-':<9} {seed:>11}")
        if r.detail and r.status is not Status.SKIPPED:
            lines.append(f"    {r.detail}")
    for target, detail in dict.fromkeys((r.target, r.detail) for r in results if r.status is Status.SKIPPED):
        count = sum(r.target == target and r.status is Status.SKIPPED for r in results)
        lines.append(f"{target}: skipped for {count} config(s), {detail}")
    return lines
