"""A kernel built with a small driver (templates/c/driver.c.j2) into an executable and run in a child process:
how a build with `-fsanitize=...` among its flags runs. Python cannot load it through ctypes (AddressSanitizer's
runtime must come first in its process), and with -fno-sanitize-recover a finding ends the process, which must not
be the caller's. The driver gives every argument an allocation of exactly its size, so a read or write past an
array is a heap overflow the sanitizer names."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...emit import Comment, render_template
from ...errors import ToolchainError
from ...plan_types import Plan
from .toolchain import build_executable

DRIVER = "c/driver.c.j2"
TIMEOUT_SECONDS = 600  # a sanitized kernel of the test suite's sizes runs in well under a second
# leak checks need ptrace, which containers often forbid (and the driver frees what it allocates); a finding's
# report with its stack, and exit code 1 whatever the sanitizer
SANITIZER_OPTIONS = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=1",
                     "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=1"}


def in_process(flags: Sequence[str]) -> bool:
    """Whether a build with these flags must run in a child process: any sanitizer."""
    return any(flag.startswith("-fsanitize=") for flag in flags)


@dataclass(frozen=True, slots=True)
class Driven:
    """An executable: the kernel and its driver, built with the same flags."""

    path: Path
    plan: Plan

    def call(self, arrays: list[np.ndarray], traces: Sequence[np.ndarray] = ()) -> None:
        """Run the kernel on `arrays` (its arguments, in order): the output (arrays[-2]) and `traces` come back
        filled in place, as from a call through ctypes."""
        workdir = self.path.parent
        arguments, results = workdir / f"{self.path.name}.in", workdir / f"{self.path.name}.out"
        with open(arguments, "wb") as f:
            for array in (*arrays, *traces):
                f.write(np.ascontiguousarray(array).tobytes())
        run = subprocess.run([str(self.path), str(arguments), str(results)], capture_output=True, text=True,
                             env={**os.environ, **SANITIZER_OPTIONS}, timeout=TIMEOUT_SECONDS)
        if run.returncode != 0:
            raise ToolchainError(f"{self.plan.name}: the kernel built with sanitizers failed (exit {run.returncode}):\n"
                                 f"{run.stderr.strip()}")
        data = results.read_bytes()
        offset = 0
        for array in (arrays[-2], *traces):
            array.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, np.uint8, array.nbytes, offset)
            offset += array.nbytes


def build(plan: Plan, workdir: Path, flags: Sequence[str], arguments: Sequence[np.ndarray],
          traces: Sequence[np.ndarray] = (), tag: str = "") -> Driven:
    """The kernel in workdir/<name>.c (as compile() wrote it) with its driver, for arguments and traces of these
    sizes; `tag` names a second build beside the first (the traced one)."""
    driver = workdir / f"{plan.name}_driver{tag}.c"
    context = {"c": {"arguments": [a.nbytes for a in arguments], "traces": [t.nbytes for t in traces]}}
    driver.write_text(render_template(DRIVER, plan, Comment(), **context))
    path = build_executable([workdir / f"{plan.name}.c", driver], workdir / f"{plan.name}_driver{tag}", flags=flags)
    return Driven(path=path, plan=plan)
