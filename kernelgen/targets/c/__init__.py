"""Portable C99: the plan's loop nest with caches carved from a workspace, each dense and depthwise conv's compute
a register-blocked micro-kernel (blocking.py), built with the flags of the config's `c:` block (options.py)."""
from __future__ import annotations

import ctypes
import math
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from ...config import Config
from ...errors import ToolchainError
from ...ops.statements import uses
from ...roofs import Roofs
from ...config.model import TargetInfo
from ...emit import OutputFile
from ...measure.records import Timings
from ...measure.tensors import KernelArgs, poisoned
from ...network.manifest import Network
from ...network.program import ProgramBuild, arena_note
from ...network.weights import WeightsPlan
from ...toolstatus import ToolStatus
from ...plan_types import Plan
from ..base import BANDWIDTH, FMA, BuildFlags, Executable, Job, Probe, Target, Traced
from .blocking import CKernel, c_kernel
from .microkernel import IN_PLACE_FILTER, LANES, WIDE, WIDE_ACCUMULATORS
from .network import FILES as NETWORK_FILES, TEMPLATES as NETWORK_TEMPLATES, network_files as network_driver, \
    network_program, pack_weights, workspace_bytes
from .options import OPENMP, CModel, c_options, cflags, speed_flags
from .placement import placed
from .roofline import MachinePeaks, Probes, measure_peaks
from . import process
from .tile_speed import C_TILE_SPEED
from .timing import COLD, WARM, cold_and_warm, measured
from .toolchain import Library, build_shared, compiler_name, status


# `schedule: auto` on the c target: the stripe caches should stay in one core's L2. 512 KiB is the largest L2 of
# the Cortex-A76/A78 cores in today's phones (Arm's TRMs: 256 or 512 KiB); schedule.budget sets another.
L2_BYTES = 512 * 1024
# One core of the hosts these kernels are measured on (an AVX-512 EPYC): an FMA-chain probe and a STREAM triad,
# both measured in one run (issue 30's table); the importer's fusion estimate divides by them.
CPU_ROOFS = Roofs(flops_per_second=116.7e9, bytes_per_second=22.9e9,
                  source="one AVX-512 EPYC core: FMA-chain probe 116.7 GFLOP/s, triad 22.9 GB/s",
                  tile_speed=C_TILE_SPEED)


def l2_budget(options: object) -> tuple[int, str]:
    return L2_BYTES, "c: one CPU core's L2 (512 KiB, a Cortex-A76/A78)"


class CLibrary(Executable[CKernel]):
    """The kernel built with the config's flags into a shared library, called through ctypes (and, for the op-by-op
    check of a chain, a second build with -DKG_TRACE_INTERMEDIATES that also stores each intermediate). Flags with a
    sanitizer build it with a driver into an executable that runs in a child process instead (process.py)."""

    def __init__(self, job: Job[CKernel], workdir: Path):
        super().__init__(job)
        self.workdir = workdir
        self.flags = cflags(c_options(job.config))
        self.in_process = process.in_process(self.flags)
        self._library: Library | None = None
        self._driven: process.Driven | None = None
        self.probes: Probes | None = None  # the triad, built when a benchmark first asks for it

    @property
    def library(self) -> Library:
        """The kernel as shipped, built on first use: validating a chain runs only the traced build."""
        if self.in_process:
            raise ToolchainError(f"{self.job.plan.name}: a build with a sanitizer runs in a child process (validate, "
                                 f"run), not in this one (bench): {' '.join(self.flags)}")
        if self._library is None:
            name = self.job.plan.name
            self._library = Library(build_shared([self.workdir / f"{name}.c"], self.workdir / f"lib{name}.so",
                                                 flags=self.flags))
        return self._library

    def traced(self, args: KernelArgs, poison: int) -> Traced:
        plan = self.job.plan
        flags = (*self.flags, "-DKG_TRACE_INTERMEDIATES")
        shapes = [op.out_shape for op in plan.ops[:-1]]
        buffers = [poisoned(math.prod(shape), np.dtype(np.float32), poison) for shape in shapes]
        arrays = self.arguments(args, poison)
        if self.in_process:
            process.build(plan, self.workdir, flags, arrays, buffers, tag="_trace").call(arrays, buffers)
        else:
            path = build_shared([self.workdir / f"{plan.name}.c"], self.workdir / f"lib{plan.name}_trace.so",
                                flags=flags)
            pointers = (ctypes.c_void_p * len(buffers)).in_dll(ctypes.CDLL(str(path)), f"{plan.name}_trace")
            for j, buffer in enumerate(buffers):
                pointers[j] = buffer.ctypes.data
            Library(path).call(plan.name, arrays)
        return Traced(output=arrays[-2], intermediates=tuple(b.reshape(s) for b, s in zip(buffers, shapes)))

    def arguments(self, args: KernelArgs, poison: int, aligned: bool = True, huge_pages: bool = True
                  ) -> list[np.ndarray]:
        """The kernel's arguments: the inputs, then the output and the workspace filled with `poison`; each starting
        on a 64-byte boundary, as the network arena places every tensor (network/arena.ALIGNMENT), and one of 2 MiB
        or more on transparent huge pages, as the bandwidth probe's arrays (placement.py; `huge_pages` False: 4 KiB
        pages), unless `aligned` is False (numpy's own placement: 16 bytes; a depthwise 112x112x96 then splits half
        its vector loads and stores across cache lines: 5-10% slower in benchmarks/c_speed.py, 15-20% in a C
        harness)."""
        plan = self.job.plan
        arrays = [*args.physical_list(), poisoned(plan.tensors[-1].elements, np.dtype(np.float32), poison),
                  poisoned(self.job.target_plan.workspace_elements, np.dtype(np.float32), poison)]
        return [placed(a, huge_pages) for a in arrays] if aligned else arrays

    def call(self, arrays: list[np.ndarray]) -> None:
        if self.in_process:
            if self._driven is None:
                self._driven = process.build(self.job.plan, self.workdir, self.flags, arrays)
            self._driven.call(arrays)
        else:
            self.library.call(self.job.plan.name, arrays)

    def bind(self, arrays: list[np.ndarray]) -> Callable[[], None]:
        """The call with its pointers ready, for a timed region (Library.bind)."""
        return self.library.bind(self.job.plan.name, arrays)


class C(Target[CKernel, CLibrary]):
    name = "c"
    summary = "portable C99 (gcc -O3 -march=native), register-blocked micro-kernels, caches in a caller-provided workspace"
    files = (OutputFile(pattern="{name}.h", template="c/kernel.h.j2"),
             OutputFile(pattern="{name}.c", template="c/kernel.c.j2"))
    # the micro-kernels' vector macros, and what `kernelgen build network.yaml` renders beside the kernels (depfiles)
    includes = ("c/vector.h.j2", "c/expf.h.j2", *NETWORK_TEMPLATES)
    loop_orders = ("channels_outer", "rows_outer")  # the plan's loop nest
    options_model = CModel

    def info(self) -> TargetInfo:
        return TargetInfo(name=self.name, dtypes=self.dtypes, options=self.options_model, default_budget=l2_budget,
                          roofs=CPU_ROOFS, loop_orders=self.loop_orders, default_schedule="auto",
                          channels_last_caches=True, channel_striped_inputs=True,
                          dense_filter_layout=IN_PLACE_FILTER)

    def toolchain(self) -> tuple[ToolStatus, ...]:
        """gcc, and the flags kernels build with by default (what a validate/bench JSON context records)."""
        found = status()
        if not all(s.found for s in found):
            return found
        flags = " ".join(cflags(CModel()))
        return (*found, ToolStatus(name="cflags", found=True, version=f"{flags} (default; c: {{cflags: [...]}} replaces "
                                                                      f"the optimisation flags)", install_hint=""))

    def host_peaks(self) -> MachinePeaks:
        return measure_peaks(self)

    def build_flags(self, config: Config) -> BuildFlags:
        options = c_options(config)
        return BuildFlags(compile=speed_flags(options), link=OPENMP if options.threads > 1 else ())

    def target_plan(self, config: Config, plan: Plan) -> CKernel:
        return c_kernel(config, plan, c_options(config).threads)

    def context(self, config: Config, plan: Plan, target_plan: CKernel) -> dict:
        return {"c": {"kernel": target_plan.kernel, "notes": target_plan.notes, "lanes": LANES, "wide_lanes": WIDE, "wide_accumulators": WIDE_ACCUMULATORS,
                      "tiled": target_plan.vectors,
                      # kg_expf (templates/c/expf.h.j2) where an epilogue takes an exp: a sigmoid or silu
                      "exp": any(uses(op.act.statements(), "exp") for op in config.ops),
                      "threads": target_plan.threads, "workspace_elements": target_plan.workspace_elements,
                      "workspace_bytes": target_plan.workspace_elements * plan.element_bytes,
                      "thread_elements": target_plan.thread_elements, "stream": target_plan.streams}}

    network_file_names = NETWORK_FILES
    program_timers = True

    def network_files(self, network: Network, jobs: Mapping[str, Job[CKernel]], weights: WeightsPlan
                      ) -> dict[str, str]:
        # network.c/.h: the kernels in order over one arena (network.py); network.c's banner says its flags
        return network_driver(network, jobs, weights, self.network_flags(network).banner_line())

    def network_note(self, network: Network, jobs: Mapping[str, Job[CKernel]]) -> str:
        return arena_note(network, jobs, workspace_bytes)  # a kernel's workspace: a copy per thread (stripe_team.py)

    def network_program(self, network: Network, jobs: Mapping[str, Job[CKernel]]) -> ProgramBuild:
        return network_program(network, jobs)  # gcc with each kernel's flags (network.py)

    def pack_weights(self, job: Job[CKernel], logical: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return pack_weights(job, logical)  # the layout engine's numpy pack: the kernel's own pack functions' bytes

    def compile(self, job: Job[CKernel], workdir: Path, device: str | None = None) -> CLibrary:
        for name, text in job.files.items():
            (workdir / name).write_text(text)
        return CLibrary(job, workdir)  # gcc runs on first use: the shipped build, or the traced one for a chain

    def run(self, executable: CLibrary, args: KernelArgs, poison: int) -> np.ndarray:
        arrays = executable.arguments(args, poison)
        executable.call(arrays)
        return arrays[-2]

    def run_traced(self, executable: CLibrary, args: KernelArgs, poison: int) -> Traced:
        return executable.traced(args, poison)  # intermediates live in the stripe caches: a -DKG_TRACE_INTERMEDIATES build

    def probes(self, executable: CLibrary, kind: str) -> tuple[Probe, ...]:
        """One core's FMA chains and STREAM triad (roofline.Probes), built once per library: a kernel's GFLOP/s is
        judged against the first, a memory-bound kernel's GB/s against the second."""
        if kind not in (FMA, BANDWIDTH):
            return ()
        return self._probes(executable).records(kind)

    @staticmethod
    def _probes(executable: CLibrary) -> Probes:
        if executable.probes is None:
            # 2^20 steps of 8 chains: 134 MFLOP, a millisecond or two, as long as the kernels it is beside
            # built for the kernel's machine flags (-march, -mno-avx512f): its peak is of the kernel's vectors
            machine = tuple(f for f in executable.flags if f.startswith("-m")) or ("-march=native",)
            executable.probes = Probes(executable.workdir, iterations=1 << 20, machine=machine)
        return executable.probes

    def time(self, executable: CLibrary, args: KernelArgs | None, repeat: int,
             probes: tuple[Probe, ...] = ()) -> tuple[Timings, ...]:
        """The kernel cold and warm each repeat, after the probes (timing.py): two Timings, the one the kernel was
        judged by before first (a memory-bound kernel cold, after the triad; a dense one warm)."""
        arrays = executable.arguments(args, 0) if args is not None else None  # alive while the call runs on them
        call = executable.bind(arrays) if arrays is not None else None
        threads = c_options(executable.job.config).threads if call is not None else 1
        flush = self._probes(executable).triad if call is not None else None
        times = cold_and_warm(call, probes, flush, repeat, threads)
        if call is None:
            return (Timings(label="probes", probe_seconds=times.probes),)
        plan = executable.job.plan
        flags = " ".join(f for f in executable.flags if not f.startswith(("-W", "-std")))
        label = f"{plan.name} ({compiler_name()} {flags}, {threads} thread{'s' if threads > 1 else ''})"
        # a kernel streaming its output past the caches (streaming.py) leaves a warm run only its input to find
        streamed = "; its output streamed past the caches (a warm run finds only its input there)" \
            if executable.job.target_plan.streams else ""
        rows = {when: Timings(label=f"{label} {when}", seconds=seconds, probe_seconds=times.probes, when=when,
                              measured=f"{measured(when, threads)}; {self._probes(executable).describe}{streamed}",
                              metrics={"executed_flops": plan.executed_flops})
                for when, seconds in ((COLD, times.cold), (WARM, times.warm))}
        first = COLD if plan.memory_bound else WARM
        return (rows[first], *(t for when, t in rows.items() if when != first))
