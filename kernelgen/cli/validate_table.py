"""The text `kernelgen validate` prints: one row per (config, target), the detail of each finding under it,
one line per target skipped for a missing toolchain saying what to install, and for several rows a summary line
(passed, failed, skipped). Rows can be printed one by one as their results arrive (header, row_lines, then
skipped_lines and summary_line) or all at once (validate_table)."""
from __future__ import annotations

import math

from ..measure.records import Status, ValidationResult

RATIO_WIDTH = 12  # "onnxruntime", "conv2d #12+1"


def _cell(value: float, spec: str, size: int) -> str:
    """A measurement, or "-" for a row without one (compiled only, skipped): never nan."""
    return f"{'-':>{size}}" if value != value else f"{value:>{size}{spec}}"


def _ratio_cell(r: ValidationResult, size: int) -> str:
    """err/bound, or for a FAIL that no ratio over the bound explains (bit-exact uint8, padding, unwritten
    elements, a failed build) what failed, in short (its record's `failure`): never inf."""
    explained = math.isfinite(r.bound_ratio) and r.bound_ratio > 1.0
    if r.status is Status.FAIL and r.failure and not explained:
        more = f"+{len(r.failure) - 1}" if len(r.failure) > 1 else ""  # the detail line under the row names all
        return f"{r.failure[0] + more:>{size}}"
    return _cell(r.bound_ratio if math.isfinite(r.bound_ratio) else math.nan, ".2e", size)


def width(configs: list[str]) -> int:
    """The config column: a long name widens it, never breaks it (known before any result: rows stream)."""
    return max([28, *(len(c) + 1 for c in configs)])


def header(width: int) -> str:
    return (f"{'config':<{width}} {'target':<8} {'status':<8} {'max abs err':>12} {'max rel err':>12} "
            f"{'err/bound':>{RATIO_WIDTH}} {'threshold':>10} {'checked':<9} {'seed':>11}")


def row_lines(r: ValidationResult, width: int) -> list[str]:
    """A result's row, and the detail of its findings under it (a skipped row's detail goes to skipped_lines)."""
    seed = "-" if r.status is Status.SKIPPED else str(r.seed)
    lines = [f"{r.config:<{width}} {r.target:<8} {r.status.value:<8} {_cell(r.max_abs_error, '.3e', 12)} "
             f"{_cell(r.max_rel_error, '.3e', 12)} {_ratio_cell(r, RATIO_WIDTH)} "
             f"{_cell(r.threshold, '.2e', 10)} {r.checked or '-':<9} {seed:>11}"]
    if r.detail and r.status is not Status.SKIPPED:
        lines.append(f"    {r.detail}")
    return lines


def skipped_lines(results: list[ValidationResult]) -> list[str]:
    lines = []
    for target, detail in dict.fromkeys((r.target, r.detail) for r in results if r.status is Status.SKIPPED):
        count = sum(r.target == target and r.status is Status.SKIPPED for r in results)
        lines.append(f"{target}: skipped for {count} config(s), {detail}")
    return lines


def summary_line(results: list[ValidationResult]) -> str:
    """The table's last line when it has several rows: passed, failed and skipped always (a reader looks for
    those three), built-but-not-run statuses only when there are some."""
    count = {status: sum(r.status is status for r in results) for status in Status}
    more = [f"{count[s]} {s.value}" for s in (Status.COMPILED, Status.NOT_RUN) if count[s]]
    return ", ".join([f"{len(results)} rows: {count[Status.PASS]} passed", f"{count[Status.FAIL]} failed",
                      f"{count[Status.SKIPPED]} skipped", *more])


def validate_table(results: list[ValidationResult]) -> list[str]:
    size = width([r.config for r in results])
    return [header(size), *(line for r in results for line in row_lines(r, size)), *skipped_lines(results),
            *([summary_line(results)] if len(results) > 1 else [])]
