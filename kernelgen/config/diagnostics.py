"""A config problem as editors, CI annotators and people read it: `file:line:col: error: key: message`, and on a
terminal the offending line with a caret under the column (the layout of gcc's and clang's diagnostics)."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigProblem


def source_line(path: str, line: int) -> str | None:
    """Line `line` (1-based) of the file, or None when there is no such file or line (a config given as text)."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ValueError):
        return None
    return lines[line - 1] if 1 <= line <= len(lines) else None


def render(problem: ConfigProblem, with_source: bool) -> str:
    """The one-line diagnostic, followed (with_source) by the source line and a caret under the column."""
    text = str(problem)
    source = source_line(problem.path, problem.line) if with_source else None
    if source is None:
        return text
    gutter = f"{problem.line:>5} | "
    # Tabs stay tabs under the caret so it lines up however the terminal expands them.
    lead = "".join("\t" if ch == "\t" else " " for ch in source[:max(problem.column - 1, 0)])
    return f"{text}\n{gutter}{source}\n{' ' * (len(gutter) - 2)}| {lead}^"
