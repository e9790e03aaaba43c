"""A compiler crash is not a kernel error: how the Hexagon toolchain tells one from a diagnostic, and the one
workaround it tries.

clang-19's Hexagon back end has crashed (SIGSEGV) in its modulo scheduler, MachinePipeliner ("Modulo Software
Pipelining"), on a valid generated kernel (issue 44). The pipeliner only reorders a loop's instructions across
iterations, so a build without it computes the same results (a slower schedule, never other arithmetic): the
toolchain retries such a crash once with `-mllvm -enable-pipeliner=false` (LLVM's MachinePipeliner.cpp option
"enable-pipeliner", default on) and says so beside the verdict.

A crash is told apart from a diagnostic by what clang prints when LLVM itself fails (its crash handler's "PLEASE
submit a bug report" and "Stack dump:"), or by a signal ending the compiler (a negative return code from
subprocess, or 128 + the signal's number from a shell wrapper that ran it).
"""
from __future__ import annotations

import re
import signal
from dataclasses import dataclass

# what a user adds to their own compile line for the same workaround
PIPELINER_OFF = ("-mllvm", "-enable-pipeliner=false")
_CRASH_MARKERS = ("PLEASE submit a bug report", "Stack dump:")
_CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)
# LLVM's pretty stack trace names each pass it is inside, outermost first: "3.\tRunning pass 'Modulo Software
# Pipelining' on function '@kernel'"
_PASS = re.compile(r"Running pass '([^']+)'")


@dataclass(frozen=True, slots=True)
class Crash:
    """How a compiler run crashed: the innermost LLVM pass its stack dump names, and the signal, when known."""

    pass_name: str  # "" when the dump names none
    signal_name: str  # "" when none is known (clang caught the crash and exited 1)

    def __str__(self) -> str:
        where = f" in {self.pass_name}" if self.pass_name else ""
        return f"crashed{where}{f' ({self.signal_name})' if self.signal_name else ''}"


def compiler_crash(returncode: int, stderr: str) -> Crash | None:
    """The crash a failed compiler run shows, or None when it failed with diagnostics (an error in the source)."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    by_signal = number in {int(s) for s in _CRASH_SIGNALS} or returncode < 0
    if not by_signal and not any(marker in stderr for marker in _CRASH_MARKERS):
        return None
    passes = _PASS.findall(stderr)
    return Crash(pass_name=passes[-1] if passes else "", signal_name=_signal_name(number) if by_signal else "")


def workaround_note(compiler: str, crash: Crash) -> str:
    """What a result says beside its verdict when the retry without the pipeliner built the kernel."""
    return (f"{compiler} {crash}; built with the pipeliner off (add {' '.join(PIPELINER_OFF)} where you compile "
            f"this kernel)")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
