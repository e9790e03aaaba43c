"""Child processes that compile or run generated code (glslang, RADV's statistics child, clang, qemu-hexagon):
each in its own process group, killed with its group when it outlives its time limit, and never left behind.

A compiler given a pathological shader can run for many minutes and gigabytes (issue 32: RADV's ACO on a
4,096-accumulator tile). Three things keep that bounded:
- a time limit: on expiry the whole group is killed with SIGKILL and ToolchainError says "<what> did not
  <verb> in N s";
- its own process group (start_new_session), so that the kill reaches whatever the child started;
- PR_SET_PDEATHSIG (Linux prctl): the kernel sends the child SIGKILL when kernelgen dies, even by SIGKILL,
  when no Python code runs to clean up.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import ToolchainError

PR_SET_PDEATHSIG = 1  # linux/prctl.h

__all__ = ["run_child"]


def run_child(argv: Sequence[str], *, what: str, timeout: float, verb: str = "compile", cwd: Path | None = None,
              env: Mapping[str, str] | None = None, text: bool = False) -> subprocess.CompletedProcess:
    """Run argv to completion with stdout and stderr captured, like subprocess.run(check=False).

    Past `timeout` seconds the child's process group is killed and ToolchainError reads
    "<what> did not <verb> in <timeout> s". A missing executable raises OSError, as subprocess.run does.
    """
    process = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text,
                               start_new_session=True, preexec_fn=_die_with(os.getpid()))
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        tail = _tail(stderr)
        raise ToolchainError(f"{what} did not {verb} in {timeout:g} s (killed){': ' + tail if tail else ''}") \
            from None
    except BaseException:  # KeyboardInterrupt, or anything else while waiting: the child goes too
        _kill_group(process)
        process.wait()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _die_with(parent: int):
    """The child's first act after fork: ask for SIGKILL when its parent dies; if the parent is already gone
    (it died between fork and prctl), die now."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def prepare() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return prepare


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # its own group (start_new_session): the child and its children
    except ProcessLookupError:
        pass


def _tail(output: bytes | str | None, limit: int = 600) -> str:
    if not output:
        return ""
    text = output if isinstance(output, str) else output.decode("utf-8", errors="replace")
    return text.strip()[-limit:]
