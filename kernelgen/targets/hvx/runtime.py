"""The hvx target on this machine: clang-19 builds the kernel with a generated driver, qemu-hexagon runs it.

The driver (templates/hvx/driver.c.j2) reads the packed inputs from files, runs the kernel once per poison byte
with the output and the workspace pre-filled by it, writes each run's output and prints QEMU's counters (c20/c21/
c22: packets, instructions, HVX instructions) around the kernel call and, built with -DKG_PROFILE_COMPUTE, around
the stripe compute alone. Runs of one driver share one QEMU start (seconds each).

Timing is QEMU's deterministic counters, not a clock: MACs are the schedule's executed multiply-accumulates
(plan.executed_flops / 2: halo rows and chain recompute included, layout padding and tail pixels not), so MACs
per packet measures the machine and the useful MACs (plan.flops / 2) what the schedule costs on top.

The qf32 variant (hvx.float_compute: qf32) is only compiled, for its arch, and its assembly checked for HVX
float multiplies: QEMU 7.2 has no HVX float, so it validates as 'compiled', never 'pass'.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...emit import Comment, render_template
from ...errors import ToolchainError
from ...measure.records import Timings
from ...measure.tensors import KernelArgs, poisons
from ..base import Executable, Job
from .options import QF32_ARCHES, hvx_options
from .plan import HvxPlan
from .toolchain import Compiled, assembly, assembly_noted, build_noted, parse_counters, run, vector_spills

QF32_MULTIPLY = re.compile(r"\.qf32\s*=\s*vmpy\(")
VRMPY_MACS_PER_PACKET = 256  # two 128-MAC vrmpy per packet (the two HVX multiply slots)
# QEMU runs ~10^7 Hexagon instructions per second; the float32 scalar nest spends ~9 per MAC (seed 000's 3x3
# chain: ~25 min of one core), so the time limit grows with the work.
QEMU_MACS_PER_SECOND = 2e5
CTYPES = {np.dtype(np.uint8): "uint8_t", np.dtype(np.int8): "int8_t", np.dtype(np.int32): "int32_t",
          np.dtype(np.float32): "float"}


@dataclass(frozen=True, slots=True)
class Arg:
    """One array the driver reads from a file (named after the plan's tensor) and passes to the kernel."""

    name: str
    ctype: str
    elements: int


class HvxProgram(Executable[HvxPlan]):
    """The kernel's sources in a work folder, and the drivers built so far (one per set of poisons and
    profiling), each a Hexagon executable for qemu-hexagon."""

    def __init__(self, job: Job[HvxPlan], workdir: Path, *, compile_only: str = ""):
        super().__init__(job, compile_only=compile_only)
        self.workdir = workdir
        self.arch = hvx_options(job.config).arch
        self._binaries: dict[tuple[tuple[int, ...], bool, bool], Path] = {}
        self._shipped_crashed = False  # the kernel as shipped needed the pipeliner off (toolchain.py)

    @property
    def uint8(self) -> bool:
        return self.job.plan.dtype == "uint8"

    def arguments(self) -> tuple[Arg, ...]:
        """The kernel's inputs as the driver declares them: the plan's tensors but the output, their bytes flat
        (quantized filters in the weights' type, int32 biases as they are)."""
        out = []
        signed = self.uint8 and self.job.config.quant.weight_dtype == "int8"
        for tensor in self.job.plan.tensors[:-1]:
            dtype = np.dtype(np.int32 if self.uint8 and tensor.name.startswith("bias") else
                             np.int8 if self.uint8 and signed and tensor.name.startswith("filter") else
                             np.uint8 if self.uint8 else np.float32)
            out.append(Arg(name=tensor.name, ctype=CTYPES[dtype], elements=tensor.elements))
        return tuple(out)

    def trace_shapes(self) -> tuple[tuple[int, ...], ...]:
        """The intermediates a chain's kernel stores when built with KG_TRACE_INTERMEDIATES: float32 after each
        store of the plan's loop nest (as the c target), uint8 once a stripe holds all of an op's channels."""
        return tuple(op.out_shape for op in self.job.plan.ops[:-1])

    def binary(self, runs: tuple[int, ...], profile: bool = False, trace: bool = False) -> Path:
        """The driver that runs the kernel once per poison byte in `runs` (built on first use); with `trace`, a
        build that also writes each intermediate op's output."""
        key = (runs, profile, trace)
        if key not in self._binaries:
            plan, hp = self.job.plan, self.job.target_plan
            name = f"driver_{'_'.join(f'{r:02x}' for r in runs)}{'_profile' if profile else ''}" \
                   f"{'_trace' if trace else ''}"
            traces = [math.prod(shape) for shape in self.trace_shapes()] if trace else []
            source = render_template("hvx/driver.c.j2", plan, Comment(), hvx=hp, args=self.arguments(), runs=runs,
                                     kernel=hp.kernel.name, out_ctype="uint8_t" if self.uint8 else "float",
                                     out_elements=plan.tensors[-1].elements, traces=traces,
                                     workspace_ctype="uint8_t" if self.uint8 else "float")
            (self.workdir / f"{name}.c").write_text(source)
            defines = {"KG_PROFILE_COMPUTE": 1} if profile else {}
            defines |= {"KG_TRACE_INTERMEDIATES": 1} if trace else {}
            built = build_noted([self.workdir / f"{name}.c", self.workdir / f"{plan.name}.c"], self.workdir / name,
                                arch=self.arch, include_dirs=[self.workdir], defines=defines or None)
            self._note(built, defines)
            self._binaries[key] = Path(built.output)
        return self._binaries[key]

    def _note(self, built: Compiled, defines: dict[str, int]) -> None:
        """A compiler crash worked around (toolchain.py) is said beside the verdict, once. A crash of a build with
        the check's or the profile's defines only (-DKG_TRACE_INTERMEDIATES: seen on a valid chain whose shipped
        build compiled) says so: the user's build of the kernel needs no workaround then."""
        if not built.crashed:
            return
        if not defines:
            note, self._shipped_crashed = built.workaround, True
        elif self._shipped_crashed:
            return  # the shipped build's note says it
        else:
            flags = " ".join(f"-D{name}" for name in defines)
            note = (f"{built.crashed} on the kernel built with {flags} (not on the kernel as shipped, which built "
                    f"as usual); that build was made with the pipeliner off")
        if note not in self.notes:
            self.notes = (*self.notes, note)

    def execute(self, args: KernelArgs, runs: tuple[int, ...], profile: bool = False, trace: bool = False
                ) -> tuple[list[np.ndarray], str, tuple[np.ndarray, ...]]:
        """One QEMU run of the driver: each poisoned run's output, the counters it printed and, with `trace`,
        each intermediate op's output (logical NHWC)."""
        binary = self.binary(runs, profile, trace)
        for name, array in args.physical.items():
            np.ascontiguousarray(array).tofile(self.workdir / f"{name}.bin")
        outs = [f"out{i}.bin" for i in range(len(runs))]
        shapes = self.trace_shapes() if trace else ()
        traces = [f"trace{i}.bin" for i in range(len(shapes))]
        timeout = 600 + len(runs) * self.job.plan.executed_flops / 2 / QEMU_MACS_PER_SECOND
        done = run(binary, [f"{name}.bin" for name in args.physical] + outs + traces, cwd=self.workdir,
                   arch=self.arch, timeout=timeout)
        dtype = np.uint8 if self.uint8 else np.float32
        kept = tuple(np.fromfile(self.workdir / name, dtype=dtype).reshape(shape)
                     for name, shape in zip(traces, shapes))
        return [np.fromfile(self.workdir / name, dtype=dtype) for name in outs], done.stdout, kept


def compile_program(job: Job[HvxPlan], workdir: Path) -> HvxProgram:
    for name, text in job.files.items():
        (workdir / name).write_text(text)
    options = hvx_options(job.config)
    if job.config.dtype == "float32" and options.float_compute == "qf32":
        return HvxProgram(job, workdir, compile_only=_qf32_check(job, workdir, options.arch))
    program = HvxProgram(job, workdir)
    program.binary(poisons(job.config.dtype))  # a kernel that does not build fails here, not at its first run
    return program


def _qf32_check(job: Job[HvxPlan], workdir: Path, arch: str) -> str:
    """What the compile-only qf32 variant shows: its assembly holds qf32 multiplies (else ToolchainError)."""
    if arch not in QF32_ARCHES:
        raise ToolchainError(f"qf32 needs hvx.arch v68 or later, got {arch}")
    if job.target_plan.qf32 is None:
        raise ToolchainError("no qf32 variant for these layouts")
    compiled = assembly_noted(workdir / f"{job.plan.name}.c", arch=arch, include_dirs=[workdir])
    multiplies = len(QF32_MULTIPLY.findall(compiled.output))
    if not multiplies:
        raise ToolchainError(f"the qf32 variant built for {arch} has no qf32 vmpy in its assembly")
    return (f"compile-only: QEMU 7.2 has no HVX float; qf32 variant built for {arch}, {multiplies} qf32 vmpy in "
            f"its assembly{f'; {compiled.workaround}' if compiled.workaround else ''}")


def counters(program: HvxProgram, args: KernelArgs) -> dict[str, int]:
    """{kernel.packets, ..., compute.packets, ..., asm.vector_spills} of one run."""
    # The kernel's counters come from the build a user runs: the stripe-compute counters' own reads (~20 packets
    # a stripe call) took 17% of the 576-channel 14x14 stride-2 depthwise conv's packets. Those counters live in
    # the HVX helpers (uint8) and come from a second run of the build with them; float32 runs the plan's scalar nest.
    _, stdout, _ = program.execute(args, (0xA5,))
    raw = parse_counters(stdout)
    if program.uint8:
        _, profiled, _ = program.execute(args, (0xA5,), profile=True)
        raw |= {key: value for key, value in parse_counters(profiled).items() if key.startswith("compute")}
    raw["asm.vector_spills"] = vector_spills(assembly(program.workdir / f"{program.job.plan.name}.c",
                                                      arch=program.arch, include_dirs=[program.workdir]))
    return {key.replace("kernel0", "kernel").replace("compute0", "compute"): value for key, value in raw.items()}


def timings(program: HvxProgram, args: KernelArgs) -> tuple[Timings, ...]:
    plan = program.job.plan
    c = counters(program, args)
    executed, useful = plan.executed_flops // 2, plan.flops // 2
    metrics: dict[str, float] = {
        "packets": c["kernel.packets"], "instructions": c["kernel.instructions"],
        "hvx_instructions": c["kernel.hvx_instructions"], "macs": executed, "useful_macs": useful,
        "macs_per_packet": executed / c["kernel.packets"], "useful_macs_per_packet": useful / c["kernel.packets"]}
    if "compute.packets" in c:  # without cache reads, channel sums and write-back
        metrics |= {"compute_packets": c["compute.packets"], "compute_instructions": c["compute.instructions"],
                    "compute_hvx_instructions": c["compute.hvx_instructions"],
                    "compute_macs_per_packet": executed / max(c["compute.packets"], 1)}
    if program.uint8:
        # one packet issues at most two vrmpy (128 byte-MACs each): 256 MACs per packet is the limit
        metrics["vrmpy_limit_share"] = useful / c["kernel.packets"] / VRMPY_MACS_PER_PACKET
        # every tensor once (input, filters, biases, output): what a depthwise layer, bound by memory, moves
        moved = sum(t.elements * (4 if t.name.startswith("bias") else 1) for t in plan.tensors)
        metrics["bytes_per_packet"] = moved / c["kernel.packets"]
    metrics["vector_spills"] = c["asm.vector_spills"]
    label = f"{plan.name} ({plan.dtype}, {program.arch}, qemu-hexagon counters)"
    rows = [Timings(label=label, metrics=metrics)]  # no wall time: QEMU's counters are the measurement
    if program.compile_only:
        asm = assembly(program.workdir / f"{plan.name}.c", arch=program.arch, include_dirs=[program.workdir])
        rows.append(Timings(label=f"{plan.name}_qf32 (compile-only: QEMU 7.2 has no HVX float)",
                            metrics={"vector_spills": vector_spills(asm)}))
    return tuple(rows)
