"""Writing outputs: atomic (temp file + rename) and lazy (unchanged bytes are not
rewritten, so mtimes stay put and make does nothing); make-style depfiles."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_if_changed(path: Path, text: str) -> bool:
    """Write text to path atomically unless it already holds exactly these bytes."""
    return write_if_changed_bytes(path, text.encode("utf-8"))


def write_if_changed_bytes(path: Path, data: bytes) -> bool:
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique temp file in the same directory: concurrent builds never see a torn file,
    # and os.replace is atomic on POSIX within one filesystem.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True


def _escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def depfile_text(rules: dict[str, tuple[str, ...]]) -> str:
    """Make rules `target: prereq ...`, one per output, plus empty rules for each prerequisite
    so deleting a template does not break the build (like gcc -MP)."""
    lines = []
    prereqs: dict[str, None] = {}
    for target in sorted(rules):
        deps = rules[target]
        lines.append(f"{_escape(target)}: " + " \\\n  ".join(_escape(d) for d in deps))
        prereqs.update(dict.fromkeys(deps))
    lines += [f"\n{_escape(p)}:" for p in sorted(prereqs)]
    return "\n".join(lines) + "\n"
