"""Writing outputs: atomic (temp file + rename) and lazy (unchanged bytes are not
rewritten, so mtimes stay put and make does nothing); make-style depfiles; reading a
config's bytes (bounded); file names as text that can always be printed."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import KernelgenError


class WriteError(KernelgenError):
    """An output could not be written (no such folder, a file where a folder should be, no
    permission, disk full); nothing is left half-written: the temp file is removed."""

    def __init__(self, path: str | Path, error: OSError) -> None:
        self.path, self.reason = display_path(path), error.strerror or str(error)
        super().__init__(f"cannot write {self.path}: {self.reason}")


def display_path(path: str | Path) -> str:
    """A file name as printable UTF-8 text: bytes that are not UTF-8 (which Python carries as
    surrogates) become \\xNN, so banners, messages and JSON never fail to encode."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def read_head(path: str | Path, limit: int) -> bytes:
    """At most limit + 1 bytes of a file: enough to tell it is too big, and /dev/zero ends."""
    with open(path, "rb") as handle:
        return handle.read(limit + 1)


class FileRefused(Exception):
    """Why read_regular read no file: the message, without the path (each caller places it)."""


def read_regular(path: str | Path, limit: int, expected: str, limit_reason: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Anything else is refused before a byte is read: a
    folder, a device (a link to /dev/zero would read until memory ran out), a FIFO (opened with O_NONBLOCK, so
    the open returns at once instead of waiting for a writer), a file larger than `limit` (`limit_reason` says
    why that is the limit), or one that grows past it while being read. `expected` names what the file should be."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileRefused("no such file") from None
    except OSError as error:
        raise FileRefused(f"cannot read it ({error.strerror or error})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else \
            "a device or socket"
        raise FileRefused(f"expected a regular file ({expected}), got {kind}")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit:
            raise FileRefused(f"{info.st_size:,} bytes: larger than {limit_reason} ({limit:,} bytes at most)")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileRefused(f"it grew past {limit:,} bytes while being read")
    return data


def write_if_changed(path: Path, text: str) -> bool:
    """Write text to path atomically unless it already holds exactly these bytes. A file name that is
    not UTF-8 (carried as surrogates, in a depfile) is written back as its own bytes."""
    return write_if_changed_bytes(path, text.encode("utf-8", "surrogateescape"))


def write_if_changed_bytes(path: Path, data: bytes) -> bool:
    """The same for bytes; any OSError becomes a WriteError naming path."""
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    try:
        _replace(path, data)
    except OSError as error:
        raise WriteError(path, error) from None
    return True


def _replace(path: Path, data: bytes) -> None:
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
