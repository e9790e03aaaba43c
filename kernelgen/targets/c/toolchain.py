"""The C compiler (gcc, or $KERNELGEN_CC): builds emitted C into a shared library and runs the kernel through ctypes
(or, for a sanitizer's build, into an executable that process.py runs)."""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import ToolchainError
from ...toolstatus import ToolStatus

CFLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror")
INSTALL_HINT = "apt-get install gcc"
# The one way to pick another compiler (a name on PATH or a path): the tests build every random kernel with gcc and
# with clang-19, since a kernel must be right under both (issue 44: a gcc 12 bug gave a max pool wrong outputs).
COMPILER_VARIABLE = "KERNELGEN_CC"


def compiler_name() -> str:
    return os.environ.get(COMPILER_VARIABLE) or "gcc"


def compiler() -> str:
    chosen = os.environ.get(COMPILER_VARIABLE)
    if chosen:
        return shutil.which(chosen) or ""
    return shutil.which("gcc") or shutil.which("cc") or ""


def status() -> tuple[ToolStatus, ...]:
    cc, name = compiler(), compiler_name()
    hint = INSTALL_HINT if name == "gcc" else f"install {name}, or unset {COMPILER_VARIABLE}"
    if not cc:
        return (ToolStatus(name=name, found=False, version="", install_hint=hint),)
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return (ToolStatus(name=name, found=True, version=version, install_hint=hint),)


def build_shared(sources: list[Path], output: Path, *, flags: tuple[str, ...] = CFLAGS) -> Path:
    return _build(sources, output, (*flags, "-shared", "-fPIC"))


def build_executable(sources: list[Path], output: Path, *, flags: Sequence[str] = CFLAGS) -> Path:
    return _build(sources, output, tuple(flags))


def _build(sources: list[Path], output: Path, flags: tuple[str, ...]) -> Path:
    cc, name = compiler(), compiler_name()
    if not cc:
        raise ToolchainError(f"{name} not found: {status()[0].install_hint}")
    if "-march=native" in flags:
        flags = (*flags, *native_quirks(cc))
    cmd = [cc, *flags, "-o", str(output), *map(str, sources)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolchainError(f"{name} failed ({' '.join(cmd)}):\n{result.stderr.strip()}")
    return output


# clang 19 on a core with AVX10.1 (a Granite Rapids Xeon) reads -march=native as +avx10.1-256, then warns that it
# promotes that to avx10.1-512 (-Winvalid-feature-combination): a warning about its own reading of the host, not
# about the code, which -Werror turns into a failed build of every kernel. gcc 12 and clang 15 build quietly there.
NATIVE_QUIRK_FLAG = "-Wno-invalid-feature-combination"


@functools.cache
def native_quirks(cc: str) -> tuple[str, ...]:
    """Flags `cc -march=native -Werror` needs to build an empty file on this host: NATIVE_QUIRK_FLAG where the
    compiler warns about its own host features, else none (a compiler that rejects -march=native fails later, on the
    real build, with its own message)."""
    with tempfile.TemporaryDirectory(prefix="kernelgen-cc-") as folder:
        source = Path(folder) / "native.c"
        source.write_text("int kernelgen_native;\n")
        result = subprocess.run([cc, "-march=native", "-Werror", "-c", str(source), "-o", str(Path(folder) / "n.o")],
                                capture_output=True, text=True)
    return (NATIVE_QUIRK_FLAG,) if "-Winvalid-feature-combination" in result.stderr else ()


@dataclass(frozen=True, slots=True)
class Library:
    """A built kernel library; call(name, arrays) passes each array as a pointer."""

    path: Path

    def call(self, symbol: str, arrays: list[np.ndarray]) -> None:
        self.bind(symbol, arrays)()

    def bind(self, symbol: str, arrays: list[np.ndarray]) -> Callable[[], None]:
        """The call with its pointers ready: what a timed region should hold. Right after a probe flushed the caches,
        the Python before a call (the library's stat, the function's lookup, one ctypes conversion per array) misses
        them too: ~0.1 ms in benchmarks/c_speed.py, a tenth of a cold depthwise 112x112x96. The arrays must outlive
        the callable."""
        stat = os.stat(self.path)  # a library rebuilt at the same path is loaded again
        fn = _function(str(self.path), stat.st_ino, stat.st_mtime_ns, symbol, len(arrays))
        for array in arrays:
            if not array.flags.c_contiguous:
                raise ToolchainError(f"{symbol}: arrays passed to C must be contiguous")
        return functools.partial(fn, *(ctypes.c_void_p(array.ctypes.data) for array in arrays))


@functools.lru_cache(maxsize=256)
def _function(path: str, inode: int, mtime_ns: int, symbol: str, arguments: int) -> ctypes._CFuncPtr:
    """The loaded function, once per library: opening the library on every call cost ~0.8 ms here, as long as a
    whole depthwise 576x14x14 kernel, and was counted in its time."""
    fn = getattr(ctypes.CDLL(path), symbol)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * arguments
    return fn
