"""Hexagon toolchain: clang-19 and ld.lld-19 build freestanding HVX programs; qemu-hexagon runs
them.

Every program is linked with the runtime in templates/hvx/runtime (kg_runtime.h): there is
no libc or compiler-rt for Hexagon on Debian, so the runtime supplies _start, raw Linux
file I/O, printers, QEMU's execution counters, memcpy/memset/memmove and the integer
division helpers clang calls (__hexagon_udivsi3 and friends).

QEMU 7.2 (Debian 12) implements only the v67 CPU with integer HVX, and maps only v67 ELF
flags to a CPU, so binaries of any other arch run with "-cpu v67": that works while they
contain no newer instruction. HVX floating point (qf32, sf, hf) needs v68+ and can be
compiled and inspected with assembly(), never run there.

The compiler is clang-19, or the one KERNELGEN_HEXAGON_CLANG names (another build of clang, or a wrapper around
one). A compiler crash is retried once with the pipeliner off (crash.py); build_noted() and assembly_noted() say
when that happened.
"""
from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ...children import run_child
from ...errors import ToolchainError
from ...toolstatus import ToolStatus
from .crash import PIPELINER_OFF, compiler_crash, workaround_note

CLANG = "clang-19"
CLANG_VARIABLE = "KERNELGEN_HEXAGON_CLANG"  # another clang (a path or a name on PATH) instead of clang-19
LLD = "ld.lld-19"
QEMU = "qemu-hexagon"
INSTALL_HINT = "apt-get install clang-19 lld-19 qemu-user"

# Every CPU that clang-19 accepts with 128-byte HVX (v75 needs clang-20; the "t" tiny
# cores have no HVX). HVX floating point starts at v68.
ARCHES = ("v66", "v67", "v68", "v69", "v71", "v73")
FLOAT_ARCHES = ("v68", "v69", "v71", "v73")
# -Oz always calls compiler-rt's register save/restore stubs (__save_r16_through_r27...),
# which do not exist here; every other level is made to inline them (see _COMMON_FLAGS).
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os")
QEMU_FALLBACK_CPU = "v67"

RUNTIME_HEADER = "kg_runtime.h"
RUNTIME_SOURCES = ("kg_runtime.c", "kg_libcalls.c")
# a network program's C library under qemu-hexagon (templates/_common/program calls it): its headers in LIBC_DIR
LIBC_SOURCES = ("kg_libc.c", "kg_printf.c")
LIBC_DIR = "qemu_libc"
LIBC_HEADERS = ("stdio.h", "stdlib.h", "string.h", "time.h")

_COMMON_FLAGS = (
    "-ffreestanding",
    "-fno-stack-protector",
    # At -Os (and at -O2 for functions with a frame pointer and over 6 saved registers)
    # LLVM calls out-of-line save/restore stubs from compiler-rt; keep them inline.
    "-mllvm",
    "-spill-func-threshold=1000000",
    "-mllvm",
    "-spill-func-threshold-Os=1000000",
    # a crash's preprocessed copy of the kernel would stay in /tmp each time (the message keeps the stack dump)
    "-fno-crash-diagnostics",
)
LINK_FLAGS = ("-nostdlib", "-static", "-fuse-ld=lld")
_VERSION_TIMEOUT = 10.0
_COMPILE_TIMEOUT = 600.0  # clang on one generated kernel and its driver: seconds
_COUNTER_LINE = re.compile(r"^kg_counters (\S+)((?: \w+=\d+)+)\s*$")

__all__ = [
    "ARCHES", "FLOAT_ARCHES", "OPT_LEVELS", "Compiled", "RunResult", "ToolStatus", "assembly", "assembly_noted",
    "available", "build", "build_noted", "clang", "parse_counters", "qemu_cpu", "run", "runtime_dir", "status",
    "target_flags", "vector_spills",
]


@dataclass(frozen=True, slots=True)
class Compiled:
    """What one compiler run made (an executable's path, or assembly text) and the workaround it needed ("": none)."""

    output: str
    workaround: str = ""
    crashed: str = ""  # what crashed before the workaround, "clang-19 crashed in Modulo Software Pipelining"


@dataclass(frozen=True, slots=True)
class RunResult:
    """One program run under qemu-hexagon; stdout and stderr decoded as UTF-8 (replacing errors)."""

    returncode: int
    stdout: str
    stderr: str


def clang() -> str:
    """The compiler: clang-19, or the one KERNELGEN_HEXAGON_CLANG names."""
    return os.environ.get(CLANG_VARIABLE) or CLANG


def status() -> tuple[ToolStatus, ...]:
    """Status of clang-19 (or KERNELGEN_HEXAGON_CLANG's), ld.lld-19 and qemu-hexagon; never raises."""
    return tuple(_tool_status(tool) for tool in (clang(), LLD, QEMU))


def available() -> bool:
    """True when every tool build() and run() need is installed."""
    return all(tool.found for tool in status())


def build(
    sources: Sequence[Path],
    output: Path,
    *,
    arch: str = "v67",
    include_dirs: Sequence[Path] = (),
    defines: Mapping[str, str | int] | None = None,
    opt: str = "-O2",
    extra_flags: Sequence[str] = (),
) -> Path:
    """Compile and link sources plus the runtime into a static Hexagon executable at output.

    Sources include "kg_runtime.h" and define main(argc, argv). Raises ToolchainError
    with the compiler's output when a tool is missing or compiling or linking fails.
    """
    return Path(build_noted(sources, output, arch=arch, include_dirs=include_dirs, defines=defines, opt=opt,
                            extra_flags=extra_flags).output)


def build_noted(
    sources: Sequence[Path],
    output: Path,
    *,
    arch: str = "v67",
    include_dirs: Sequence[Path] = (),
    defines: Mapping[str, str | int] | None = None,
    opt: str = "-O2",
    extra_flags: Sequence[str] = (),
) -> Compiled:
    """build(), and whether it took a workaround for a compiler crash (Compiled.workaround says which)."""
    _check_options(arch, opt)
    _require(clang(), LLD)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with runtime_dir() as runtime:
        command = [
            clang(),
            *_compile_flags(arch, include_dirs, defines, opt, runtime),
            *LINK_FLAGS,
            *extra_flags,
            *(str(source) for source in sources),
            *(str(runtime / name) for name in RUNTIME_SOURCES),
            "-o",
            str(output),
        ]
        done = _compile(command, f"build {output.name}")
    return Compiled(str(output), done.workaround, done.crashed)


def assembly(
    source: Path,
    *,
    arch: str,
    include_dirs: Sequence[Path] = (),
    defines: Mapping[str, str | int] | None = None,
    opt: str = "-O2",
    extra_flags: Sequence[str] = (),
) -> str:
    """clang -S output for one source (without the runtime), e.g. to look for vrmpy or spills.

    Keep LLVM's verbose comments (no -fno-verbose-asm in extra_flags): vector_spills reads them.
    """
    return assembly_noted(source, arch=arch, include_dirs=include_dirs, defines=defines, opt=opt,
                          extra_flags=extra_flags).output


def assembly_noted(
    source: Path,
    *,
    arch: str,
    include_dirs: Sequence[Path] = (),
    defines: Mapping[str, str | int] | None = None,
    opt: str = "-O2",
    extra_flags: Sequence[str] = (),
) -> Compiled:
    """assembly(), and whether it took a workaround for a compiler crash (Compiled.workaround says which)."""
    _check_options(arch, opt)
    _require(clang())
    with runtime_dir() as runtime:
        command = [
            clang(),
            *_compile_flags(arch, include_dirs, defines, opt, runtime),
            *extra_flags,
            "-S",
            str(source),
            "-o",
            "-",
        ]
        return _compile(command, f"compile {Path(source).name} to assembly")


def vector_spills(assembly_text: str) -> int:
    """How many HVX register spills and reloads assembly() output contains.

    LLVM comments every stack-slot access with its size ("128-byte Folded Spill"); HVX
    vectors are 128 bytes and pairs 256, while scalar callee-saved saves are 4 or 8.
    """
    sizes = re.findall(r"// (\d+)-byte (?:Folded )?(?:Spill|Reload)", assembly_text)
    return sum(1 for size in sizes if int(size) >= 128)


def run(
    binary: Path,
    args: Sequence[str],
    *,
    cwd: Path,
    arch: str = "v67",
    timeout: float = 600,
    check: bool = True,
) -> RunResult:
    """Run binary under qemu-hexagon in cwd.

    With check (the default) a nonzero exit, a signal or a timeout raises ToolchainError
    carrying the program's output; without it only a missing QEMU or a timeout raises.
    """
    _check_options(arch)
    _require(QEMU)
    binary = Path(binary).resolve()
    command = [QEMU, "-cpu", qemu_cpu(arch), str(binary), *args]
    try:
        done = run_child(command, what=f"{binary.name} under {QEMU} ({_quote(command)})", verb="finish",
                         timeout=timeout, cwd=cwd)
    except OSError as exc:
        raise ToolchainError(f"cannot run {QEMU}: {exc}; install with: {INSTALL_HINT}") from None
    result = RunResult(done.returncode, _decode(done.stdout), _decode(done.stderr))
    if check and result.returncode != 0:
        raise ToolchainError(
            f"{binary.name} {_describe_exit(result.returncode)} under {QEMU}\n"
            f"command: {_quote(command)}\nstdout:\n{result.stdout}stderr:\n{result.stderr}"
            f"{_undecodable_hint(result.stderr)}"
        )
    return result


def parse_counters(stdout: str) -> dict[str, int]:
    """Counter lines printed by kg_report_counters, as {"<label>.<counter>": value}.

    Counters are packets, instructions and hvx_instructions. Other lines are ignored; a
    malformed kg_counters line or a label reported twice raises ToolchainError.
    """
    counters: dict[str, int] = {}
    for line in stdout.splitlines():
        if not line.startswith("kg_counters"):
            continue
        match = _COUNTER_LINE.match(line)
        if match is None:
            raise ToolchainError(f"malformed counter line: {line!r}")
        label, pairs = match.groups()
        for pair in pairs.split():
            name, value = pair.split("=")
            key = f"{label}.{name}"
            if key in counters:
                raise ToolchainError(f"counter {key} reported twice; label each region uniquely")
            counters[key] = int(value)
    return counters


@functools.cache
def qemu_cpu(arch: str) -> str:
    """The -cpu model for an arch: itself when QEMU knows it, else v67 (QEMU 7.2 knows only v67)."""
    try:
        done = subprocess.run(
            [QEMU, "-cpu", "help"], capture_output=True, timeout=_VERSION_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return QEMU_FALLBACK_CPU
    models = set(re.findall(r"\bv\d+\b", _decode(done.stdout) + _decode(done.stderr)))
    return arch if arch in models else QEMU_FALLBACK_CPU


@contextmanager
def runtime_dir() -> Iterator[Path]:
    """A directory holding the runtime's header and sources, however the package is installed."""
    root = resources.files("kernelgen.templates") / "hvx" / "runtime"
    if isinstance(root, Path):
        yield root
        return
    # Zipped or otherwise virtual installs: clang needs real files.
    with tempfile.TemporaryDirectory(prefix="kg_runtime_") as tmp:
        for name in (RUNTIME_HEADER, *RUNTIME_SOURCES):
            (Path(tmp) / name).write_bytes((root / name).read_bytes())
        yield Path(tmp)


def kernel_flags(arch: str, opt: str = "-O2") -> tuple[str, ...]:
    """What the kernels need of any Hexagon clang: the arch they were planned for (its HVX instructions: qf32 needs
    v68) and 128-byte vectors (the generated HVX_Vector is 128 bytes), at the optimisation level validation used."""
    return (f"-mcpu=hexagon{arch}", "-mhvx", "-mhvx-length=128b", opt)


def _compile_flags(
    arch: str,
    include_dirs: Sequence[Path],
    defines: Mapping[str, str | int] | None,
    opt: str,
    runtime: Path,
) -> list[str]:
    flags = [*target_flags(arch, opt), f"-I{runtime}"]
    flags += [f"-I{directory}" for directory in include_dirs]
    flags += [f"-D{name}={value}" for name, value in (defines or {}).items()]
    return flags


def target_flags(arch: str, opt: str = "-O2") -> tuple[str, ...]:
    """What every compile for `arch` takes (a Makefile's CFLAGS too)."""
    return ("--target=hexagon", *kernel_flags(arch, opt), *_COMMON_FLAGS)


def _check_options(arch: str, opt: str = "-O2") -> None:
    if arch not in ARCHES:
        choices = ", ".join(ARCHES)
        raise ToolchainError(f"Hexagon arch {arch!r} is not supported; use one of {choices}")
    if opt not in OPT_LEVELS:
        choices = ", ".join(OPT_LEVELS)
        raise ToolchainError(f"optimisation level {opt!r} is not supported; use one of {choices}")


def _compile(command: list[str], what: str) -> Compiled:
    """Run clang and return its stdout, or raise with its diagnostics and any symbol hint. A crash (not a
    diagnostic) is retried once with the pipeliner off; Compiled.workaround then says so."""
    done = _run_clang(command, what)
    if done.returncode == 0:
        return Compiled(_decode(done.stdout))
    diagnostics = _decode(done.stderr)
    crash = compiler_crash(done.returncode, diagnostics)
    if crash is None:
        raise ToolchainError(
            f"{command[0]} failed to {what}\ncommand: {_quote(command)}\n"
            f"{diagnostics}{_missing_symbol_hint(diagnostics)}"
        )
    retry = [command[0], *PIPELINER_OFF, *command[1:]]
    again = _run_clang(retry, what)
    if again.returncode == 0:
        compiler = Path(command[0]).name
        return Compiled(_decode(again.stdout), workaround_note(compiler, crash), f"{compiler} {crash}")
    raise ToolchainError(
        f"{command[0]} {crash} (a compiler bug, not an error in the kernel) to {what}, and failed again with the "
        f"pipeliner off\ncommand: {_quote(command)}\n{diagnostics}\nwith the pipeliner off: {_quote(retry)}\n"
        f"{_decode(again.stderr)}"
    )


def _run_clang(command: list[str], what: str):
    try:
        return run_child(command, what=f"{command[0]} ({what})", timeout=_COMPILE_TIMEOUT)
    except OSError as exc:
        raise ToolchainError(f"cannot run {command[0]}: {exc}; install with: {INSTALL_HINT}") from None


def _missing_symbol_hint(diagnostics: str) -> str:
    symbols = sorted(set(re.findall(r"undefined symbol: (\S+)", diagnostics)) - {"main"})
    if not symbols:
        return ""
    return (
        f"hint: {', '.join(symbols)} would come from libc or compiler-rt, which freestanding "
        "Hexagon programs lack; the kernelgen runtime provides only memcpy, memset, memmove and "
        "integer division (no double division, no math functions)\n"
    )


def _require(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise ToolchainError(f"missing {', '.join(missing)}; install with: {INSTALL_HINT}")


def _tool_status(tool: str) -> ToolStatus:
    path = shutil.which(tool)
    if path is None:
        return ToolStatus(tool, False, "", INSTALL_HINT)
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, timeout=_VERSION_TIMEOUT, check=False
        )
        lines = [line.strip() for line in _decode(done.stdout).splitlines() if line.strip()]
        version = lines[0] if lines else ""
    except (OSError, subprocess.SubprocessError):
        version = ""
    return ToolStatus(tool, True, version, INSTALL_HINT)


def _describe_exit(returncode: int) -> str:
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"was killed by {name}"


def _undecodable_hint(stderr: str) -> str:
    # QEMU 7.2 meets an instruction its v67 model lacks (HVX qf32/sf/hf, v68+) with a
    # failed assertion in its decoder, then dies by a signal.
    if "decode_packet: assertion failed" not in stderr:
        return ""
    return (
        f"hint: {QEMU} could not decode an instruction; the binary uses instructions its CPU "
        "model lacks (HVX floating point needs v68+, which QEMU 7.2 does not implement)\n"
    )


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _quote(command: Sequence[str]) -> str:
    return shlex.join(command)
