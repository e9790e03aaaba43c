"""How an hvx network's `<network>_run` program builds and runs (network/program.py writes its main and Makefile):
clang-19 for the network's arch, freestanding, with the runtime kernelgen runs its own Hexagon programs on (process
entry, system calls, library calls: templates/hvx/runtime) and the small C library the shared program needs
(kg_libc.c, qemu_libc/), linked static; `make run` runs it under qemu-hexagon and it prints QEMU's packet count of
one run (-DKG_QEMU_COUNTERS). A device build takes network.c, network.h and the kernels into the Hexagon SDK instead
(network.h says how VTCM is obtained there)."""
from __future__ import annotations

from importlib import resources
from typing import Mapping

from ...network.manifest import Network
from ...network.program import ProgramBuild
from ..base import Job
from .plan import HvxPlan
from .toolchain import (LIBC_DIR, LIBC_HEADERS, LIBC_SOURCES, LINK_FLAGS, QEMU, RUNTIME_HEADER, RUNTIME_SOURCES,
                        clang, qemu_cpu, target_flags)

MAIN = "hvx/program_main.c.j2"  # the shared main, with a VTCM block and QEMU's counters
# shipped beside network.c: the kernels include kg_runtime.h; the program links the rest
RUNTIME_FILES = (RUNTIME_HEADER, *RUNTIME_SOURCES, *LIBC_SOURCES, *(f"{LIBC_DIR}/{name}" for name in LIBC_HEADERS))


def runtime_files() -> dict[str, str]:
    """{file name in the network's folder: text} of the runtime, as kernelgen's templates hold it."""
    root = resources.files("kernelgen.templates") / "hvx" / "runtime"
    return {name: (root / name).read_text() for name in RUNTIME_FILES}


def network_program(network: Network, jobs: Mapping[str, Job[HvxPlan]]) -> ProgramBuild:
    arch = next(iter(jobs.values())).target_plan.arch  # one arch for every kernel (network.py refuses others)
    # the Makefile links with CFLAGS too, where the compile-only -mllvm options would each draw a warning
    flags = (*target_flags(arch), "-Wno-unused-command-line-argument", "-isystem", LIBC_DIR, "-DKG_QEMU_COUNTERS")
    return ProgramBuild(compiler=clang(), flags=flags,
                        link=LINK_FLAGS, driver_sources=("network.c", *RUNTIME_SOURCES, *LIBC_SOURCES),
                        runner=f"{QEMU} -cpu {qemu_cpu(arch)} ", main_template=MAIN)
