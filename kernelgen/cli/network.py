"""`kernelgen build|validate|bench network.yaml`: the commands on a network manifest (kernelgen/network), which
commands.py and bench.py hand over to when their arguments are manifests rather than configs."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..api import (TARGETS, BuildFlags, bench_network, jobs, load_network, network_chart, network_targets,
                   output_files, validate_network, with_device)
from ..errors import ConfigError
from ..files import write_if_changed
from ..measure.network_bench import NetworkTimes
from ..measure.network_run import step_status
from ..measure.program_run import PROGRAM_AGREEMENT
from ..measure.records import Status
from ..network.manifest import Network, is_manifest
from .common import handle_errors, number

if TYPE_CHECKING:
    from ..onnx.qnn import QnnRuntime


def manifests_in(paths: tuple[str, ...]) -> bool:
    """Whether the arguments are all network manifests: the command then runs networks. In a mix (DIR/*.yaml after
    an import) the configs are taken and the manifests left out with a note (common.load_all)."""
    return bool(paths) and all(is_manifest(p) for p in paths)


def load_networks(paths: tuple[str, ...], device: str | None, *, model: bool = False) -> list[Network]:
    """Every manifest loaded, all problems reported together; with `model` (the commands that run it) each also
    checked against its model (network/model_check.py)."""
    from ..network.model_check import check_against_model

    problems, networks = [], []
    for path in paths:
        try:
            networks.append(load_network(path))
            if model:
                check_against_model(networks[-1])
        except ConfigError as error:
            problems += error.problems
    if problems:
        raise ConfigError(problems)
    if device:
        networks = [replace(n, steps=tuple(replace(s, config=with_device(s.config, device)) if s.config else s
                                            for s in n.steps)) for n in networks]
    return networks


# ---------------------------------------------------------------- validate

def validate_networks(paths: tuple[str, ...], targets: tuple[str, ...], device: str | None, seed: int | None,
                      as_json: bool, oracle: str | None = None) -> None:
    """Each network on each target; with `oracle` ("qnn" or "qnn:v68"...) also against Qualcomm's HTP simulator,
    found before anything runs (none here: exit 2 with the line saying how to install it)."""
    failed = False
    networks = load_networks(paths, device, model=True)
    qnn = _qnn_runtime(networks) if oracle else None
    for network in networks:
        for target in network_targets(network, targets):
            simulator = (qnn, _qnn_arch(network, target, oracle)) if qnn else None
            failed |= _validate_one(network, target, seed, as_json, simulator)
    if failed:
        sys.exit(1)


def _qnn_runtime(networks: list[Network]) -> QnnRuntime:
    """The Python that runs the simulator (onnx/qnn.py), after each network is found to have bytes to compare."""
    from ..onnx.qnn import find_qnn

    for network in networks:
        if not any(t.dtype in ("uint8", "int8") for t in network.tensors.values()):
            raise network.problem("tensors", "--oracle qnn compares a quantized (QDQ) network's bytes with "
                                             "Qualcomm's HTP simulator; this network has no uint8 tensor")
    return find_qnn()


def _qnn_arch(network: Network, target: str, oracle: str) -> str:
    """The HTP generation to simulate: --oracle qnn:ARCH's, else the kernels' own arch where the target's options
    name one the simulator has (hvx.arch v68 and later), else v73 (the hvx target's default)."""
    from ..onnx.qnn import ARCHES

    if ":" in oracle:
        return oracle.split(":", 1)[1]
    arch = getattr(TARGETS[target].options(network.kernels[0].config), "arch", None)
    return arch if arch in ARCHES else "v73"


def _validate_one(network: Network, target: str, seed: int | None, as_json: bool,
                  qnn: tuple[QnnRuntime, str] | None = None) -> bool:
    """One line (or JSON record) per step as it finishes, then the network's verdict; True when it failed. qnn:
    (a QnnRuntime, the arch) to compare every step's outputs with the HTP simulator's too (agreement only)."""
    from ..network.htp_check import htp_opinion, summary

    total = len(network.steps)
    validation = validate_network(network, target, seed)
    opinion = htp_opinion(network, validation.feeds, qnn[1], qnn[0]) if qnn else None
    if opinion is not None and not as_json:
        click.echo(opinion.text)
    compared = []
    for run in validation:
        record = run.record
        status, _ = step_status(run)
        htp = opinion.agreements(network, run.values, validation.expected) if opinion is not None else []
        compared += htp
        if as_json:
            click.echo(json.dumps({
                "network": network.name, "target": target, "step": run.step.index, "kind":
                run.step.kind, "name": run.step.label, "status": status,
                "seconds": round(run.seconds, 4), "seed": record.seed if record is not None else None,
                "checked": record.checked if record is not None else "onnxruntime",
                "max_abs_error": number(record.max_abs_error) if record is not None else None,
                "bound_ratio": number(record.bound_ratio) if record is not None else None,
                "detail": record.detail if record is not None else "",
                "failure": list(record.failure) if record is not None else [],
                "agreement": [{"tensor": a.tensor, "max_abs": number(a.max_abs), "relative": number(a.relative),
                               "passed": a.passed, "oracle": a.oracle, "why": a.why} for a in run.agreement],
                **({"qnn": [asdict(a) for a in htp]} if opinion is not None else {})}))
        else:
            agreement = "; ".join(a.text() for a in run.agreement)
            place = f"[{run.step.index + 1:>{len(str(total))}}/{total}]"  # [ 9/19] above [10/19]: columns stay
            click.echo(f"{place} {run.step.label:<48} {target:<7} {status:<8} "
                       f"{run.seconds:6.1f} s  {agreement}")
            if record is not None and record.detail and (not record.passed or record.status is not Status.PASS):
                click.echo(f"    {record.detail}")
            for a in htp:  # under the row, as a record's detail: a second opinion, not a column of the verdict
                click.echo(f"    {a.text()}")
    program = validation.run_program() if not validation.verdict().stopped else None  # what ships: end to end
    if program is not None and not as_json:
        click.echo(f"{'[end]':<{2 * len(str(total)) + 3}} {program.program + ' (make run)':<48} {target:<7} "
                   f"{('pass' if program.passed else 'FAIL') if program.ran else 'not run':<8} "
                   f"{program.seconds:6.1f} s  {program.result()}")
    verdict = validation.verdict()
    if as_json:
        click.echo(json.dumps({"network": network.name, "target": target, "status": verdict.status,
                               "summary": verdict.summary, "oracle": verdict.oracle.text if verdict.oracle else None,
                               "program": None if program is None else {
                                   "name": program.program, "ran": program.ran, "passed": program.passed,
                                   "seconds": round(program.seconds, 4), "max_abs_error": number(program.max_abs),
                                   "relative": number(program.relative), "detail": program.why},
                               **({"qnn": {"arch": opinion.arch, "runtime": opinion.runtime.text,
                                           "failed": opinion.failed, "summary": summary(opinion, compared)}}
                                  if opinion is not None else {})}))
    else:
        click.echo(verdict.summary)
        if opinion is not None:
            click.echo(summary(opinion, compared))
    return verdict.failed


# ---------------------------------------------------------------- bench

def bench_networks(paths: tuple[str, ...], targets: tuple[str, ...], device: str | None, repeat: int,
                   as_json: bool, plot: str | None = None, threads: int = 1, rounds: int = 5) -> None:
    """Each network on each target; with `plot` its chart (one network on one target: that file; several: the file
    name with -<network>-<target> before the extension)."""
    runs = [(network, target) for network in load_networks(paths, device, model=True)
            for target in network_targets(network, targets)]
    for network, target in runs:
        times = _bench_one(network, target, repeat, as_json, threads, rounds)
        if plot:
            path = Path(plot) if len(runs) == 1 else Path(plot).with_name(
                f"{Path(plot).stem}-{network.name}-{target}{Path(plot).suffix}")
            network_chart(path, times)
            click.echo(f"chart: {path} (the kernels' roofline and each step's time)", err=True)


def _bench_one(network: Network, target: str, repeat: int, as_json: bool, threads: int = 1, rounds: int = 5
               ) -> NetworkTimes:
    """Each step's time and share (measure/network_bench.py): a kernel measured by counters instead of a clock (hvx
    under QEMU: packets) is shown by them, and the network's time is then the host steps' alone and says so. A
    target whose program is timed end to end (c) gets that against onnxruntime, round by round."""
    times = bench_network(network, target, repeat, threads, rounds)
    if times.program is not None:
        return _program_report(times, as_json)
    packets = times.packets
    if as_json:
        click.echo(json.dumps({"network": network.name, "target": target, "seconds": number(times.seconds),
                               "counted_packets": packets or None,
                               "onnxruntime_seconds": number(times.onnxruntime_seconds),
                               "steps": [{**asdict(r), "seconds": number(r.seconds), "share": number(r.share)}
                                         for r in times.steps]}, indent=2))
        return times
    click.echo(f"network {network.name} on {target}: {len(times.steps)} steps")
    for r in times.steps:
        seconds = r.seconds
        if r.counted:  # counters, no clock
            what = f"{r.packets:>12,.0f} packets {r.share:6.1%} of the kernels'" if r.packets else "not timed"
            click.echo(f"  [{r.step + 1:>3}] {r.name:<52} {what}  {r.flops / 2 / r.packets:7.1f} "
                       f"useful MACs/packet" if r.packets else f"  [{r.step + 1:>3}] {r.name:<52} {what}")
            continue
        rates = (f"{r.flops / seconds / 1e9:7.2f} GFLOP/s {r.bytes / seconds / 1e9:6.2f} GB/s"
                 if r.kind == "kernel" and seconds > 0 else "")
        if packets and r.kind != "host":  # a conversion or a copy: network.c runs it on the DSP, this ran numpy
            rates = "timed in Python here; the DSP program runs it"
        click.echo(f"  [{r.step + 1:>3}] {r.name:<52} {seconds * 1e3:9.3f} ms {r.share:6.1%}  {rates}")
    total, reference = times.seconds, times.onnxruntime_seconds
    counted = f" (host steps; the kernels: {packets:,.0f} packets counted by the simulator)" if packets else ""
    click.echo(f"  whole network: {total * 1e3:.2f} ms{counted}; onnxruntime {times.onnxruntime} on the same model: "
               f"{reference * 1e3:.2f} ms" + (f" ({total / reference:.2f}x)" if not packets else ""))
    return times


def _program_report(times: NetworkTimes, as_json: bool) -> NetworkTimes:
    timed = times.program
    fields = ("program_cpu", "program_wall", "onnxruntime_cpu", "onnxruntime_wall")
    if timed.threads > 1:
        fields += ("single_cpu", "single_wall")
    medians = {f: timed.median(f) for f in fields}
    ratio_cpu = medians["program_cpu"] / medians["onnxruntime_cpu"]
    ratio_wall = medians["program_wall"] / medians["onnxruntime_wall"]
    agreement = (f"output within {timed.relative:.2e} of onnxruntime's largest magnitude "
                 f"({'pass' if timed.agrees else 'FAIL'}: limit {PROGRAM_AGREEMENT:g})")
    if as_json:
        click.echo(json.dumps({
            "network": times.network, "target": times.target, "threads": timed.threads, "rounds": len(timed.rounds),
            "inferences_per_round": timed.repeat, "onnxruntime": timed.onnxruntime,
            **({"waiting": timed.waiting} if timed.threads > 1 else {}),
            **{f"{f}_seconds": number(v) for f, v in medians.items()},
            "cpu_ratio": number(ratio_cpu), "wall_ratio": number(ratio_wall),
            **({"threads_wall_ratio": number(medians["program_wall"] / medians["single_wall"])}
               if timed.threads > 1 else {}),
            "max_abs": number(timed.max_abs), "relative": number(timed.relative), "agrees": timed.agrees,
            "rounds_seconds": [{f: number(getattr(r, f)) for f in fields} for r in timed.rounds],
            "steps": [{**asdict(r), "seconds": number(r.seconds), "share": number(r.share)} for r in times.steps]},
            indent=2))
        return times
    click.echo(f"network {times.network} on {times.target}: its program end to end, {timed.threads} thread"
               f"{'s' if timed.threads > 1 else ''}, {len(timed.rounds)} rounds of {timed.repeat} inferences "
               f"interleaved with {timed.onnxruntime}")
    if timed.threads > 1:
        click.echo(f"  {timed.waiting}")
    for r in times.steps:
        rates = f"{r.flops / r.seconds / 1e9:7.2f} GFLOP/s" if r.kind == "kernel" and r.seconds > 0 else ""
        click.echo(f"  [{r.step + 1:>3}] {r.name:<52} {r.seconds * 1e3:9.3f} ms {r.share:6.1%}  {rates}")
    click.echo(f"  per inference (medians):  kernelgen CPU {medians['program_cpu'] * 1e3:8.2f} ms  wall "
               f"{medians['program_wall'] * 1e3:8.2f} ms")
    click.echo(f"                            onnxruntime CPU {medians['onnxruntime_cpu'] * 1e3:6.2f} ms  wall "
               f"{medians['onnxruntime_wall'] * 1e3:8.2f} ms")
    if timed.threads > 1:
        click.echo(f"  the same program, 1 thread: CPU {medians['single_cpu'] * 1e3:8.2f} ms  wall "
                   f"{medians['single_wall'] * 1e3:8.2f} ms  ({timed.threads} threads' wall / 1 thread's: "
                   f"{medians['program_wall'] / medians['single_wall']:.2f})")
    click.echo(f"  kernelgen / onnxruntime: CPU {ratio_cpu:.2f}x, wall {ratio_wall:.2f}x; {agreement}")
    if not timed.agrees:
        sys.exit(1)
    return times


# ---------------------------------------------------------------- build

def build_targets(network: Network, targets: tuple[str, ...]) -> tuple[str, ...]:
    """What `build network.yaml` builds: --target's, else every target the kernels' configs name."""
    named = tuple(dict.fromkeys(t for step in network.kernels for t in step.config.targets))
    return network_targets(network, targets or named)


def build_networks(paths: tuple[str, ...], out_dir: str, targets: tuple[str, ...], device: str | None,
                   embed: bool = False) -> tuple[dict[str, str | bytes], list[str], dict[str, tuple[str, ...]]]:
    """Every kernel's files and, under <network>/<target>/, what the target writes for the whole network: the
    weights file, the driver (network.c/network.h) and the program (<network>_run.c, its Makefile): {relative path:
    text or bytes}, a line per network and target about what it got, and what shaped each file (its depfile rule:
    a kernel's config, templates and modules; the network's files, the manifest, its model and all of those)."""
    from ..api import binaries, dependencies
    from ..network.program import program_templates

    files: dict[str, str | bytes] = {}
    notes, rules = [], {}
    for network in load_networks(paths, device):
        for target in build_targets(network, targets):
            built = {s.config.name: jobs(s.config, (target,)) for s in network.kernels}
            shaped_by: dict[str, None] = dict.fromkeys([network.path, str(network.model), *program_templates()])
            for step in network.kernels:
                made = {**output_files(step.config, built[step.config.name]), **binaries(built[step.config.name])[0]}
                files |= made
                deps = dependencies(step.config, target)
                rules |= {rel: deps for rel in made}
                shaped_by.update(dict.fromkeys(deps))
            made, note = network_outputs(network, target, {name: job[target] for name, job in built.items()},
                                         Path(out_dir), embed)
            files |= {f"{network.name}/{target}/{name}": text for name, text in made.items()}
            rules |= {f"{network.name}/{target}/{name}": tuple(shaped_by) for name in made}
            notes.append(note)
    return files, notes, rules


def network_outputs(network: Network, target: str, built: dict, out_dir: Path, embed: bool
                    ) -> tuple[dict[str, str | bytes], str]:
    """What one target writes for the whole network, by file name in <network>/<target>/, and a line saying what
    that is (or why there is no program)."""
    from ..network.program import build_network

    made = build_network(network, TARGETS[target], built, embed)
    if made.weights is None:
        return made.files, f"{network.name} on {target}: the kernels alone; {made.why}"
    folder = out_dir / network.name / target
    memory = TARGETS[target].network_note(network, built)
    if not made.program:
        return made.files, f"{memory}; no program: {made.why}"
    return made.files, f"{memory}; `make -C {folder}` builds {network.name}_run"


def network_output_names(paths: tuple[str, ...], targets: tuple[str, ...], device: str | None,
                         embed: bool = False) -> tuple[str, ...]:
    """The relative paths build_networks writes, by name only (no kernel planned or rendered, no weights packed, no
    SPIR-V compiled: a build system asks this before every build of a large network): each kernel's files, then the
    network's."""
    from ..api import output_names
    from ..network.program import program_names, why_no_program

    names: dict[str, None] = {}
    for network in load_networks(paths, device):
        for target in build_targets(network, targets):
            for step in network.kernels:
                names.update(dict.fromkeys(output_names(step.config, (target,))))
            chosen = TARGETS[target]
            if not chosen.network_file_names or chosen.network_refusal(network):
                continue
            made = [f"{network.name}.weights", *chosen.network_file_names]
            if not why_no_program(network):
                made += program_names(network, embed)
            names.update(dict.fromkeys(f"{network.name}/{target}/{name}" for name in sorted(made)))
    return tuple(names)


def network_build_flags(paths: tuple[str, ...], targets: tuple[str, ...], device: str | None) -> dict[str, BuildFlags]:
    """By output folder, the flags the sources build_networks writes need (build --list-flags): each kernel's, and
    the driver's where the target writes one."""
    from ..api import build_flags, network_build_flags as driver_flags

    flags: dict[str, BuildFlags] = {}
    for network in load_networks(paths, device):
        for target in build_targets(network, targets):
            for step in network.kernels:
                flags |= build_flags(step.config, (target,))
            if TARGETS[target].network_file_names and not TARGETS[target].network_refusal(network):
                made = driver_flags(network, target)
                if made.compile or made.link:
                    flags[f"{network.name}/{target}"] = made
    return flags


def write_all(root: Path, files: dict[str, str | bytes]) -> int:
    from ..files import write_if_changed_bytes

    return sum((write_if_changed_bytes if isinstance(t, bytes) else write_if_changed)(root / rel, t)
               for rel, t in files.items())


# ---------------------------------------------------------------- plan

def plan_network(paths: tuple[str, ...], as_json: bool) -> None:
    """Each manifest: one line per step (a kernel's ops, executed/useful FLOPs, traffic and workspace; a host step's
    nodes), then the tensors' bytes and, planned from their lifetimes, the arena the steps share. --json: one object
    for one manifest, a list for several (as plan does for configs)."""
    networks = load_networks(paths, None)
    summaries = [_network_summary(network) for network in networks]
    if as_json:
        click.echo(json.dumps(summaries[0] if len(paths) == 1 else summaries, indent=2))
        return
    for index, (network, summary) in enumerate(zip(networks, summaries)):
        if len(networks) > 1:
            click.echo(("\n" if index else "") + f"==> {network.path} <==")
        _echo_network_plan(network, summary)


def _network_summary(network: Network) -> dict:
    from ..api import plan
    from ..network.arena import plan_arena

    plans = {s.index: plan(s.config) for s in network.kernels}
    arena = plan_arena(network, {k: p.workspace_bytes for k, p in plans.items()})
    rows = []
    for step in network.steps:
        if step.config is not None:
            p = plans[step.index]
            rows.append({"step": step.index, "kind": "kernel", "name": step.label, "ops": len(p.ops),
                         "flops": p.flops, "executed_flops": p.executed_flops, "traffic_bytes": p.traffic.total,
                         "workspace_bytes": p.workspace_bytes, "inputs": list(step.inputs),
                         "outputs": list(step.outputs)})
        else:
            rows.append({"step": step.index, "kind": step.kind, "name": step.label,
                         "nodes": list(step.nodes),
                         "inputs": list(step.inputs), "outputs": list(step.outputs)})
    return {"network": network.name, "model": str(network.model), "steps": rows, "arena_bytes": arena.size_bytes,
            "naive_bytes": arena.naive_bytes, "peak_bytes": arena.peak_bytes}


def _echo_network_plan(network: Network, summary: dict) -> None:
    rows = summary["steps"]
    click.echo(f"network {network.name} ({network.path}): {len(network.kernels)} kernels, "
               f"{len(network.steps) - len(network.kernels)} host steps, model {network.model}")
    for r in rows:
        if r["kind"] == "kernel":
            click.echo(f"  [{r['step'] + 1:>3}] {r['name']:<52} {r['ops']:>2} op(s)  executed/useful "
                       f"{r['executed_flops'] / r['flops']:.2f}  {r['traffic_bytes'] / 1e6:7.2f} MB moved  workspace "
                       f"{r['workspace_bytes'] / 1024:.0f} KiB")
        else:
            click.echo(f"  [{r['step'] + 1:>3}] {r['name']:<52} host: {', '.join(r['nodes'])}")
    click.echo(f"arena: {summary['arena_bytes']:,} bytes for the tensors between steps and the kernels' workspaces "
               f"(each alone: {summary['naive_bytes']:,}; the most alive at once: {summary['peak_bytes']:,})")


# ---------------------------------------------------------------- weights

@click.command("weights")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--target", "target", metavar="NAME", help="The target whose kernels' layouts the weights are packed in "
                                                         "(default: the first the manifest's configs name).")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The weights file to write (<network>.weights, as `kernelgen build` writes it).")
@handle_errors
def weights_command(manifest: str, target: str | None, output: str) -> None:
    """Write a network's weights file alone: every kernel's weights, packed in its layout.

    \b
    It is the file `kernelgen build network.yaml` writes beside the program; the
    program refuses one from another build (another model, config or target).
    Example:
      kernelgen weights net/network.yaml --target c -o mobilenet.weights
    """
    from ..api import network_weights
    from ..network.weights import write_weights

    if not is_manifest(manifest):
        raise click.UsageError(f"{manifest}: expected a network manifest (network.yaml from `kernelgen import`)")
    (network,) = load_networks((manifest,), None)
    chosen = build_targets(network, (target,) if target else ())[0]
    built = {s.config.name: jobs(s.config, (chosen,))[chosen] for s in network.kernels}
    plan, data = network_weights(network, chosen, built)
    write_weights(output, plan, data)
    click.echo(f"{output}: {len(plan.tensors)} tensors of {network.name} for {chosen}, {plan.data_bytes:,} bytes of "
               f"weights, digest {plan.digest_hex[:16]}...", err=True)
