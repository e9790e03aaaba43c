"""`kernelgen check`: the goldens in out/ against what the configs generate now. Files that are stale or
missing, and orphans: files no config produces any more (a renamed config's folder). Compiled modules
(.spv) are never goldens: they depend on the installed compiler's version."""
from __future__ import annotations

import difflib
from pathlib import Path

from ..api import jobs, output_files
from ..config import Config

NOT_GOLDEN = {".spv"}


def stale_files(configs: list[Config], root: Path, targets: tuple[str, ...]) -> tuple[list[dict], set[Path]]:
    """(an entry per stale or missing golden, the paths every config produces)."""
    stale, produced = [], set()
    for config in configs:
        for rel, text in output_files(config, jobs(config, targets)).items():
            path = root / rel
            produced.add(path)
            try:
                old = path.read_text(encoding="utf-8")
            except OSError:
                old = None
            if old == text:
                continue
            parts = Path(rel).parts
            stale.append({"config": config.path, "name": config.name, "target": parts[1] if len(parts) > 2 else "plan",
                          "file": str(path), "missing": old is None, "text": text,
                          "diff": "".join(difflib.unified_diff((old or "").splitlines(keepends=True),
                                                               text.splitlines(keepends=True),
                                                               fromfile=f"{path} (golden)",
                                                               tofile=f"{path} (generated)"))})
    return stale, produced


def orphans(root: Path, produced: set[Path], targets: tuple[str, ...]) -> list[Path]:
    """Files under root that no config of this run produces (check every config at once: `configs/*.yaml`).
    With --target, only those targets' folders are looked at."""
    if not root.is_dir():
        return []
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path in produced or path.suffix in NOT_GOLDEN:
            continue
        parts = path.relative_to(root).parts
        if targets and (len(parts) < 3 or parts[1] not in targets):
            continue
        found.append(path)
    return found


def remove(paths: list[Path], root: Path) -> None:
    """Delete orphan files, then the folders they leave empty (never root itself)."""
    for path in paths:
        path.unlink()
    for folder in sorted({p.parent for p in paths}, key=lambda p: -len(p.parts)):
        while folder != root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent
