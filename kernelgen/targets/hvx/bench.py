"""Bench of the hvx target: QEMU's deterministic counters, not time.

The driver reads c20/c21/c22 (packets, instructions, HVX instructions) around the kernel
call, and, built with -DKG_PROFILE_COMPUTE, around every conv helper (the stripe compute
without cache reads, sums and write-back). MACs are the schedule's executed
multiply-accumulates (plan.executed_flops / 2: halo rows and chain recompute included,
layout padding and tail pixels not), so MACs per packet measures the machine, and the
useful MACs (plan.flops / 2) say what the schedule costs on top.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ...bench import BenchOptions, BenchRow
from ...config import Config
from ...planner import plan as make_plan
from ...validate import make_inputs
from .options import NAME, hvx_options
from .toolchain import assembly, parse_counters, vector_spills
from .validate import Render, build_and_run, prepare, qf32_assembly, quant_inputs


VRMPY_MACS_PER_PACKET = 256  # two 128-MAC vrmpy per packet (the two HVX multiply slots)


def counters(config: Config, render: Render) -> dict[str, int]:
    """{kernel.packets, ..., compute.packets, ...} of one run on fixed inputs."""
    plan = make_plan(config)
    rng = np.random.default_rng(0)
    if config.dtype == "uint8":
        _, arrays, names = quant_inputs(config, plan, rng)
    else:
        arrays = [np.ascontiguousarray(p).reshape(-1) for p in make_inputs(plan, rng).physical]
        names = [t.name for t in plan.tensors[:-1]]
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-bench-hvx-{plan.name}-") as tmp:
        program = prepare(config, Path(tmp), arrays, names, (0xA5,), render)
        arch = hvx_options(config).arch
        # The stripe-compute counters live in the HVX helpers (uint8); float32 runs the plan's scalar nest.
        _, stdout = build_and_run(program, arch, profile=config.dtype == "uint8")
        raw = parse_counters(stdout)
        raw["asm.vector_spills"] = vector_spills(assembly(Path(tmp) / f"{plan.name}.c", arch=arch,
                                                          include_dirs=[Path(tmp)]))
    return {key.replace("kernel0", "kernel").replace("compute0", "compute"): value for key, value in raw.items()}


def bench_hvx(config: Config, options: BenchOptions, render: Render) -> list[BenchRow]:
    plan = make_plan(config)
    hvx = hvx_options(config)
    c = counters(config, render)
    executed = plan.executed_flops // 2
    useful = plan.flops // 2
    label = f"{plan.name} ({config.dtype}, {hvx.arch}, qemu-hexagon counters)"
    metrics: dict[str, float] = {
        "packets": c["kernel.packets"], "instructions": c["kernel.instructions"],
        "hvx_instructions": c["kernel.hvx_instructions"], "macs": executed, "useful_macs": useful,
        "macs_per_packet": executed / c["kernel.packets"], "useful_macs_per_packet": useful / c["kernel.packets"]}
    if "compute.packets" in c:  # without cache reads, channel sums and write-back
        metrics |= {"compute_packets": c["compute.packets"], "compute_instructions": c["compute.instructions"],
                    "compute_hvx_instructions": c["compute.hvx_instructions"],
                    "compute_macs_per_packet": executed / max(c["compute.packets"], 1)}
    if config.dtype == "uint8":
        # one packet issues at most two vrmpy (128 byte-MACs each): 256 MACs per packet is the limit
        metrics["vrmpy_limit_share"] = useful / c["kernel.packets"] / VRMPY_MACS_PER_PACKET
        # every tensor once (input, filters, biases, output): what a depthwise layer, bound by memory, moves
        moved = sum(t.elements * (4 if t.name.startswith("bias") else 1) for t in plan.tensors)
        metrics["bytes_per_packet"] = moved / c["kernel.packets"]
    metrics["vector_spills"] = c["asm.vector_spills"]
    # No wall time: QEMU's counters are the measurement (seconds stays NaN).
    rows = [BenchRow(config=config.name, target=NAME, label=label, seconds=float("nan"), flops=plan.flops,
                     metrics=metrics)]
    if config.dtype == "float32" and hvx.float_compute == "qf32":
        with tempfile.TemporaryDirectory(prefix="kernelgen-bench-qf32-") as tmp:
            asm = qf32_assembly(config, Path(tmp), hvx.arch, render)
        rows.append(BenchRow(config=config.name, target=NAME, label=f"{plan.name}_qf32 (compile-only: QEMU 7.2 "
                             f"has no HVX float)", seconds=float("nan"), flops=plan.flops,
                             metrics={"vector_spills": vector_spills(asm)}))
    return rows
