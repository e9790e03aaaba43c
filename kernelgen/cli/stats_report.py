"""`kernelgen stats` on a network manifest (issue 47): every kernel of the network compiled by the device's own
compiler, the verdict per op (registers, spills, occupancy against the profile's target, a flag where either
fails), and the estimated time per op, kernel and network on the part (targets/vulkan/estimate.py states the
model), with the part's figures beside it. stats.py hands over to it; it prints, and exits through handle_errors."""
from __future__ import annotations

import json
import os

import click

from ..api import TARGETS, kernel_stats
from ..measure.context import run_context
from ..measure.records import KernelStats
from ..network.manifest import Network

MODEL = ("estimate: per op max(compute, memory); compute = the compiler's count for one pass over the shader x "
         "passes of its innermost loop x invocations / cores / clock (busiest unit; every pass charged the whole "
         "shader: an upper bound; Valhall's load/store instructions at a quarter cycle per thread, a warp's vec4 access "
         "being 4 of the unit's 64-byte lines, not Mesa's 1); memory = every tensor the op binds moved once / DRAM bandwidth (a lower bound); "
         "kernel = sum of ops, network = sum of kernels (no dispatch overhead)")


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f}"


def network_stats(network: Network, target: str, device: str, gpu: str | None, compare_tiles: bool,
                  as_json: bool) -> None:
    known = TARGETS[target]
    compiler = known.stats_compiler(device, gpu)
    kernels: list[KernelStats] = []
    for number, step in enumerate(network.kernels, 1):
        start = cpu_seconds()
        kernels.append(kernel_stats(step.config, target, device, gpu, compare_tiles=compare_tiles))
        click.echo(f"# [{number}/{len(network.kernels)}] {step.config.name}: {len(kernels[-1].rows)} op(s), "
                   f"{cpu_seconds() - start:.1f} s CPU (the compilers' child processes included)", err=True)
    assumptions = known.stats_assumptions(device, gpu)
    if as_json:
        context = run_context([target], {f"{target}-stats": f"{device} ({compiler})"})
        click.echo(json.dumps({"context": context, "results": [{
            "network": network.name, "target": target, "device": device, "compiler": compiler,
            "assumptions": assumptions, "model": MODEL, "seconds": sum(k.seconds for k in kernels),
            "kernels": [kernel_record(k) for k in kernels]}]}, indent=2))
    else:
        print_network(network, kernels, device, compiler, assumptions)
    for kernel in kernels:
        for line in warnings(kernel, device):
            click.echo(f"warning: {line}", err=True)


def kernel_record(kernel: KernelStats) -> dict:
    estimates = {e.op: e.as_dict() for e in kernel.estimates}
    return {"name": kernel.name, "seconds": kernel.seconds, "target_occupancy": kernel.target_occupancy,
            "ops": [row.as_dict() | {"flags": list(kernel.flags(row)), "estimate": estimates.get(row.op)}
                    for row in kernel.rows],
            "variants": [{"tiles": label, "seconds": list(seconds)} for label, seconds in kernel.variants],
            "best_tiles_seconds": kernel.best_tiles_seconds if kernel.variants else None}


def print_network(network: Network, kernels: list[KernelStats], device: str, compiler: str,
                  assumptions: str) -> None:
    unit = kernels[0].occupancy_unit if kernels else "waves"
    target = kernels[0].target_occupancy if kernels else None
    click.echo(f"{network.name}: {len(kernels)} kernels compiled for {device} by {compiler}")
    click.echo(f"part: {assumptions or 'no figures: no time estimate'}; target occupancy "
               f"{target if target is not None else '-'} {unit}")
    click.echo(MODEL)
    click.echo(f"{'kernel / op':<34} {'regs':>4} {unit:>7} {'spill:fill':>10} {'invocations':>11} {'passes':>6} "
               f"{'compute ms':>10} {'memory ms':>9} {'est ms':>8} {'bound':>5}  flags")
    for kernel in kernels:
        print_kernel(kernel)
    flagged = [k.name for k in kernels if k.flagged]
    total = sum(k.seconds for k in kernels)
    click.echo(f"{network.name} on {device}: estimated {ms(total)} ms for {len(kernels)} kernels; "
               f"{sum(r.spills for k in kernels for r in k.rows)} spills, "
               f"{len(flagged)} kernel(s) flagged{': ' + ', '.join(flagged) if flagged else ''}")
    for kernel in kernels:
        print_faster(kernel, device)


def print_faster(kernel: KernelStats, device: str) -> None:
    """Where a tile variant is estimated faster than an op's default tile, and the kernel with every op at its
    fastest tile."""
    if not kernel.variants:
        return
    for default, label, seconds in kernel.faster_tiles():
        click.echo(f"{device}: {kernel.name} op {default.op} estimated {ms(seconds)} ms with {label} vs "
                   f"{ms(default.seconds)} ms default")
    click.echo(f"{device}: {kernel.name} estimated {ms(kernel.best_tiles_seconds)} ms with each op at its fastest "
               f"of {len(kernel.variants)} tiles, {ms(kernel.seconds)} ms with the defaults")

def print_kernel(kernel: KernelStats) -> None:
    estimates = {e.op: e for e in kernel.estimates}
    click.echo(f"{kernel.name:<34} {'':>4} {'':>7} {'':>10} {'':>11} {'':>6} {'':>10} {'':>9} "
               f"{ms(kernel.seconds) if kernel.estimates else '-':>8}")
    for row in kernel.rows:
        e = estimates.get(row.op)
        numbers = (f"{e.invocations:>11} {e.passes:>6} {ms(e.compute_seconds):>10} {ms(e.memory_seconds):>9} "
                   f"{ms(e.seconds):>8} {e.bound:>5}") if e else f"{'-':>11} {'-':>6} {'-':>10} {'-':>9} {'-':>8} {'-':>5}"
        spills = f"{row.spilled_vgprs}:{row.fills}"
        click.echo(f"  op {row.op:<29} {row.vgprs:>4} {row.waves:>7} {spills:>10} {numbers}  "
                   f"{' '.join(kernel.flags(row))}")


def warnings(kernel: KernelStats, device: str) -> list[str]:
    out = []
    for row in kernel.rows:
        for flag in kernel.flags(row):
            what = (f"spills {row.spilled_vgprs} registers, fills {row.fills}" if flag == "SPILLS" else
                    f"holds {row.waves} {kernel.occupancy_unit}, under the target {kernel.target_occupancy}")
            out.append(f"{kernel.name} op {row.op} ({row.label}) {what} at {row.vgprs} registers on {device}")
    return out


def print_estimates(kernel: KernelStats, device: str, assumptions: str) -> None:
    """`stats CONFIG`'s lines after the compiler's table: each op's estimate, the kernel's, and a faster tile."""
    click.echo(f"part: {assumptions}; target occupancy {kernel.target_occupancy} {kernel.occupancy_unit}")
    click.echo(MODEL)
    for e in kernel.estimates:
        click.echo(f"  op {e.op}: {e.invocations} invocations x {e.passes} passes, compute {ms(e.compute_seconds)} "
                   f"ms, memory {ms(e.memory_seconds)} ms ({e.traffic_bytes} bytes): {ms(e.seconds)} ms, {e.bound} "
                   f"bound")
    click.echo(f"{kernel.name} on {device}: estimated {ms(kernel.seconds)} ms")
    for label, times in kernel.variants:
        click.echo(f"  {label}: " + ", ".join(f"op {e.op} {ms(t) + ' ms' if t is not None else 'spills or no plan'}"
                                              for e, t in zip(kernel.estimates, times)))
    print_faster(kernel, device)
