"""The command line's group, `main`, and the commands of its own (plan, build, check, validate, schema, targets):
with common.py and the modules of the commands it registers (bench, run, import_onnx, init, stats; network.py,
which plan, build and validate hand manifests to), the only modules that print or exit.

Library errors become exit codes here and nowhere else (common.handle_errors): ConfigError -> 2 (one line per
problem: file:line:col: error: key: message), any other KernelgenError -> 1.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..version import __version__
from ..api import TARGETS, BuildFlags, binaries, build_flags, dependencies, jobs, json_schema, output_files, output_names, skipped, \
    validate_job, with_sources
from .bench import bench_command
from .common import (StatusLine, configs_argument, device_option, echo_problems, handle_errors,  # noqa: F401
                     json_option, load_all, make_folder, number, progress, target_option)
from .import_onnx import import_command
from .init import init_command
from .run import run_command
from .stats import devices_command, stats_command
from ..config import Config
from ..errors import ConfigError, KernelgenError  # noqa: F401
from ..files import depfile_text, display_path, write_if_changed, write_if_changed_bytes
from ..planner import plan as make_plan
from ..report import json_report, markdown_report, text_report
from ..measure.context import run_context
from ..measure.dump import prepare as prepare_dump
from ..toolstatus import ToolStatus, cmake_status, install_text
from .validate_table import header as table_header, row_lines, skipped_lines, summary_line, width as table_width
from .network import manifests_in, validate_networks, weights_command


def _print_cmake_dir(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(display_path(Path(__file__).resolve().parent.parent / "cmake"))
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernelgen")
@click.option("--cmake-dir", is_flag=True, is_eager=True, expose_value=False, callback=_print_cmake_dir,
              help="Print the folder of kernelgen's CMake package (kernelgenConfig.cmake) and exit: "
                   "cmake -Dkernelgen_DIR=\"$(kernelgen --cmake-dir)\".")
def main() -> None:
    """Generate convolution kernels from YAML configs.

    \b
    Example:
      kernelgen plan configs/seed000_3x3.yaml
      kernelgen build configs/*.yaml -o out/
      kernelgen validate configs/*.yaml --target c
      kernelgen check configs/*.yaml --golden out/
    """


# ---------------------------------------------------------------- plan

@main.command()
@configs_argument
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON instead of text: one object for one config, a list for several.")
@click.option("--format", "fmt", type=click.Choice(["text", "md", "json"]), default="text", show_default=True,
              help="Report format.")
@handle_errors
def plan(configs: tuple[str, ...], as_json: bool, fmt: str) -> None:
    """Print the plan: shapes and layouts, cache usage, loop nest.

    \b
    Several configs give one report after another, each under a line
    "==> CONFIG <==" (text; Markdown: separated by ---); with --json one
    object for one config, a list of them (in argument order) for several.
    A network manifest (network.yaml) gives one line per step and the arena.
    Example:
      kernelgen plan configs/seed000_3x3.yaml --json
      kernelgen plan configs/*.yaml
    """
    if manifests_in(configs):
        from .network import plan_network

        return plan_network(configs, as_json or fmt == "json")
    loaded = load_all(configs)
    plans = [make_plan(config) for config in loaded]  # every config planned before anything is printed
    if as_json or fmt == "json":
        reports = [json_report(p) for p in plans]
        click.echo(json.dumps(reports[0] if len(configs) == 1 else reports, indent=2))
        return
    for index, (config, the_plan) in enumerate(zip(loaded, plans)):
        if fmt == "md":
            click.echo(("\n---\n\n" if index else "") + markdown_report(the_plan), nl=False)
            continue
        if len(loaded) > 1:
            click.echo(("\n" if index else "") + f"==> {config.path} <==")
        click.echo(text_report(the_plan), nl=False)


# ---------------------------------------------------------------- build

@main.command()
@configs_argument
@click.option("-o", "--output", "out_dir", default="out", show_default=True, type=click.Path(file_okay=False),
              help="Folder to write <name>/<target>/... into.")
@target_option
@device_option
@click.option("--depfile", type=click.Path(dir_okay=False), help="Also write a make-style depfile here.")
@click.option("--depfile-target", metavar="FILE",
              help="Name this one file (a stamp) as the depfile's target instead of every output.")
@click.option("--list-outputs", is_flag=True, help="Print the files a build would write, one per line; write nothing.")
@click.option("--list-inputs", is_flag=True,
              help="Print the files whose contents decide what --list-outputs prints (each config; a manifest and its "
                   "kernels' configs), one per line; write nothing.")
@click.option("--list-flags", is_flag=True,
              help="Print the compiler flags each output folder's sources need, one per line (FOLDER, compile or link, "
                   "FLAG; tab-separated); write nothing.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print warnings and errors only (a build system's step: no summary, no advice on compiling).")
@click.option("--embed-weights", is_flag=True,
              help="A network manifest: also write <network>_weights.c, the weights file as a C array the program is "
                   "built with (it then needs no file).")
@handle_errors
def build(configs: tuple[str, ...], out_dir: str, targets: tuple[str, ...], device: str | None, depfile: str | None,
          depfile_target: str | None, list_outputs: bool, list_inputs: bool, list_flags: bool, quiet: bool,
          embed_weights: bool) -> None:
    """Generate sources and plan reports; unchanged files are not rewritten.

    \b
    --list-outputs and --list-inputs are what a build system asks before
    the build (CMake's kernelgen_add_kernels: kernelgen --cmake-dir).
    Example:
      kernelgen build configs/*.yaml -o out/ --depfile out/kernels.d
    """
    if sum((list_outputs, list_inputs, list_flags)) > 1:
        raise click.UsageError("--list-outputs, --list-inputs and --list-flags: give one")
    root = Path(out_dir)
    if list_inputs:
        for path in _inputs(configs, targets, device):
            click.echo(path)
        return
    if list_flags:
        for folder, flags in _flags(configs, targets, device).items():
            for kind, given in (("compile", flags.compile), ("link", flags.link)):
                for flag in given:
                    click.echo(f"{root / folder}\t{kind}\t{flag}")
        return
    if manifests_in(configs):
        from .network import build_networks, network_output_names, write_all

        if list_outputs:
            for rel in network_output_names(configs, targets, device, embed_weights):
                click.echo(str(root / rel))
            return
        files, notes, rules = build_networks(configs, out_dir, targets, device, embed_weights)
        make_folder(root)
        written = write_all(root, files)
        for note in () if quiet else notes:  # the drivers' arenas and how to compile them: a user's reading
            click.echo(note, err=True)
        if depfile:
            _write_depfile(depfile, depfile_target, {str(root / rel): deps for rel, deps in rules.items()})
        if not quiet:
            click.echo(f"{len(files)} files for {len(configs)} network(s) in {root}/ ({written} written, "
                       f"{len(files) - written} unchanged)", err=True)
        return
    if embed_weights:
        raise click.UsageError("--embed-weights: a network manifest's option (its weights); the arguments are configs")
    loaded = load_all(configs, targets, device)
    if list_outputs:
        for config in loaded:
            for name in output_names(config, targets):
                click.echo(str(root / name))
        return
    built = {config.name: jobs(config, targets) for config in loaded}  # each config planned once, rendered once
    generated = {config.name: output_files(config, built[config.name]) for config in loaded}
    make_folder(root)
    written = 0
    rules: dict[str, tuple[str, ...]] = {}
    notes: tuple[str, ...] = ()
    for config in loaded:
        compiled, made_notes = binaries(built[config.name])  # SPIR-V beside the GLSL (never goldens)
        notes += tuple(n for n in made_notes if n not in notes)
        for rel, text in [*generated[config.name].items(), *compiled.items()]:
            written += (write_if_changed_bytes if isinstance(text, bytes) else write_if_changed)(root / rel, text)
            parts = Path(rel).parts
            rules[str(root / rel)] = dependencies(config, parts[1] if len(parts) > 2 else None)
        generated[config.name] = {**generated[config.name], **compiled}
    for note in notes:
        click.echo(note, err=True)
    if depfile:
        _write_depfile(depfile, depfile_target, rules)
    total = sum(len(g) for g in generated.values())
    if not quiet:
        click.echo(f"{total} files for {len(loaded)} config(s) in {root}/ ({written} written, "
                   f"{total - written} unchanged)", err=True)


def _inputs(configs: tuple[str, ...], targets: tuple[str, ...], device: str | None) -> tuple[str, ...]:
    """The files --list-outputs reads, each once: the names of the outputs come from the configs (name, targets) and,
    for a manifest, from the manifest (its network's name) and its kernels' configs. Each is loaded and checked, so a
    bad config is the same error (exit 2) here as in the build."""
    if manifests_in(configs):
        from .network import load_networks

        networks = load_networks(configs, device)
        return tuple(dict.fromkeys(path for network in networks for path in
                                   (network.path, *(step.config.file or step.config.path for step in network.kernels))))
    return tuple(dict.fromkeys(config.file or config.path for config in load_all(configs, targets, device)))


def _flags(configs: tuple[str, ...], targets: tuple[str, ...], device: str | None) -> dict[str, BuildFlags]:
    if manifests_in(configs):
        from .network import network_build_flags

        return network_build_flags(configs, targets, device)
    return {folder: flags for config in load_all(configs, targets, device)
            for folder, flags in build_flags(config, targets).items()}


def _write_depfile(depfile: str, stamp: str | None, rules: dict[str, tuple[str, ...]]) -> None:
    if stamp:
        # One stamp for the whole build: make then needs no restat when unchanged outputs keep their mtime.
        rules = {stamp: tuple(dict.fromkeys(d for deps in rules.values() for d in deps))}
    write_if_changed(Path(depfile), depfile_text(rules))


# ---------------------------------------------------------------- check

@main.command()
@configs_argument
@click.option("--golden", required=True, type=click.Path(file_okay=False), help="Folder of committed outputs (out/).")
@target_option
@click.option("--update", is_flag=True, help="Rewrite stale goldens instead of failing.")
@json_option
@handle_errors
def check(configs: tuple[str, ...], golden: str, targets: tuple[str, ...], update: bool, as_json: bool) -> None:
    """Regenerate and diff against the goldens; exit 1 with a unified diff when stale.

    \b
    Example:
      kernelgen check configs/*.yaml --golden out/
    """
    from .goldens import orphans, remove, stale_files

    root = Path(golden)
    stale, produced = stale_files(load_all(configs, targets), root, targets)
    gone = orphans(root, produced, targets)
    if update:
        for entry in stale:
            write_if_changed(Path(entry["file"]), entry["text"])
        remove(gone, root)
    if as_json:
        click.echo(json.dumps({"stale": [{k: v for k, v in e.items() if k != "text"} for e in stale],
                               "orphans": [str(p) for p in gone], "updated": update,
                               "clean": not stale and not gone}, indent=2))
    else:
        for entry in stale:
            what = "missing" if entry["missing"] else "stale"
            click.echo(f"{what}: {entry['file']} (config {entry['config']}, target {entry['target']})")
            if not update:
                click.echo(entry["diff"], nl=False)
        for path in gone:
            click.echo(f"{'removed' if update else 'orphan'}: {path} (no config produces it)")
        if update and (stale or gone):
            click.echo(f"updated {len(stale)} golden file(s), removed {len(gone)} orphan(s)", err=True)
        elif not stale and not gone:
            click.echo("goldens are up to date", err=True)
    if (stale or gone) and not update:
        sys.exit(1)


# ---------------------------------------------------------------- validate

@main.command()
@configs_argument
@target_option
@device_option
@click.option("--seed", type=int, help="Reuse a seed printed by an earlier run (default: a fresh one per run).")
@click.option("--skip-missing", is_flag=True,
              help="Report targets whose toolchain this machine lacks as 'skipped' instead of failing.")
@click.option("--dump", type=click.Path(file_okay=False), metavar="DIR",
              help="Write each op's output and numpy's for it as .npy: DIR/<config>/<target>/op<j>[.reference].npy.")
@click.option("--sources", type=click.Path(file_okay=False), metavar="DIR",
              help="Validate the kernel sources in DIR (as `kernelgen build` wrote them, perhaps edited by hand) "
                   "instead of generating them: DIR is build's <output>/<name>/<target>/, <output>/<name>/ or "
                   "<output>/ (several configs or targets).")
@click.option("--json", "as_json", is_flag=True,
              help='Print one JSON object when every result is in: {"context": ..., "results": [...]}.')
@click.option("--jsonl", "as_jsonl", is_flag=True,
              help='Print JSON Lines as results finish: {"context": ...} first, then one object per (config, '
                   'target), the objects of --json\'s results.')
@click.option("--oracle", metavar="qnn[:vNN]",
              help="A quantized network.yaml only: also compare every tensor with Qualcomm's HTP simulator "
                   "(onnxruntime-qnn, in this Python or KERNELGEN_QNN_PYTHON's), for the kernels' hvx.arch or vNN "
                   "(v68 to v81); agreement only, never the verdict.")
@handle_errors
def validate(configs: tuple[str, ...], targets: tuple[str, ...], device: str | None, seed: int | None,
             skip_missing: bool, dump: str | None, sources: str | None, as_json: bool, as_jsonl: bool,
             oracle: str | None) -> None:
    """Compile, run on fresh random inputs and compare with numpy; one row per (config, target).

    \b
    Tolerance: float outputs must lie within the rigorous dot-product rounding bound
    gamma_n * sum|x*w| (n = reduction length), each op of a chain on the kernel's own
    input to it ("checked: op-by-op": c and hvx through a build that stores every
    intermediate, opencl and vulkan from their device tensors). "threshold" is the
    largest error allowed over the output's largest magnitude. uint8 is bit-exact;
    an imported model's ops are also run one by one in onnxruntime (exact for
    requantization: float32, within 1 for fixed_point or a residual add).
    A FAIL says what failed ("failure" in JSON: output, conv2d #j, unwritten,
    padding, onnxruntime, toolchain, error); the table shows it in err/bound
    when no ratio over the bound explains it (bit-exact uint8, padding, a build).
    Rows are printed as each result arrives; on a terminal a status line on
    stderr names the config, its phase (compiling, running, comparing) and the
    time so far. Several rows end with a count: "11 rows: 10 passed, 0 failed,
    1 skipped". --skip-missing: a target whose toolchain is missing here is a
    "skipped" row and one line naming what to install, not a FAIL (make demo).
    For a network.yaml, --jsonl is its --json (a line per step).
    With --sources DIR the kernels compiled are the sources in DIR, as build
    wrote them under <output>/<name>/<target>/ and perhaps edited by hand
    (the launch files, .launch.json and .dispatch.txt, must be as built);
    a folder that lacks one of them is exit 2 before anything runs.
    Example:
      kernelgen validate configs/*.yaml --target c
      kernelgen validate configs/*.yaml --jsonl > results.jsonl
      kernelgen validate configs/seed000_3x3.yaml --target c --sources out/seed000_3x3/c
    """
    if as_json and as_jsonl:
        raise click.UsageError("--json and --jsonl: give one (--jsonl streams the objects --json prints at the end)")
    if oracle is not None:
        from ..onnx.qnn import ARCHES

        if oracle not in ("qnn", *(f"qnn:{arch}" for arch in ARCHES)):
            raise click.UsageError(f"--oracle {oracle}: expected qnn or qnn:ARCH, ARCH one of {', '.join(ARCHES)}")
    if manifests_in(configs):
        if sources:
            raise click.UsageError("--sources takes kernel configs, not a network manifest (give each kernel's config)")
        return validate_networks(configs, targets, device, seed, as_json or as_jsonl, oracle)
    if oracle:
        raise click.UsageError("--oracle qnn compares a whole network: give a network.yaml from `kernelgen import`")
    loaded = load_all(configs, targets, device)
    if dump:
        prepare_dump(Path(dump))
    # Plan and render first, once: a config the planner or a target rejects is a config error (exit 2), reported
    # before anything runs, not a FAIL row; the same jobs are then compiled and run (with --sources, each with the
    # sources read from its folder, every folder checked before the first runs).
    work = [(target, job) for config in loaded for target, job in jobs(config, targets).items()]
    work = [(target, with_sources(job, target, sources)) for target, job in work] if sources else work
    size = table_width([c.name for c in loaded])
    if as_jsonl:
        click.echo(json.dumps({"context": run_context(t for t, _ in work)}))
    elif not as_json:
        click.echo(table_header(size))
    results = []
    with StatusLine() as status:
        for index, (target, job) in enumerate(work, start=1):
            status.start(f"validate [{index}/{len(work)}] {job.config.name} on {target}")
            missing = [s for s in TARGETS[target].toolchain() if not s.found and not s.stats_only] \
                if skip_missing else []
            result = skipped(job.config, target, install_text(missing), seed or 0) if missing else \
                validate_job(job, target, seed=seed, dump=Path(dump) if dump else None, phase=status.set_phase)
            results.append(result)
            if as_jsonl:
                status.echo(json.dumps(_json_result(result)))
            elif not as_json:
                for line in row_lines(result, size):
                    status.echo(line)
    if as_json:
        click.echo(json.dumps({"context": run_context(t for t, _ in work),
                               "results": [_json_result(r) for r in results]}, indent=2))
    elif not as_jsonl:
        for line in skipped_lines(results):
            click.echo(line)
        if len(results) > 1:
            click.echo(summary_line(results))
    # compiled (HVX float: QEMU cannot run it), not run (device lacks a feature), skipped (no toolchain):
    # reported as such, neither a pass nor a mismatch.
    if any(r.status.counts_as_failure for r in results):
        sys.exit(1)


def _json_result(r) -> dict:
    """One result as --json's results and --jsonl's lines give it; bound_ratio null where there is none (a
    bit-exact FAIL, a row without a measurement): "failure" says what failed."""
    return {"config": r.config, "target": r.target, "status": r.status.value,
            "max_abs_error": number(r.max_abs_error), "max_rel_error": number(r.max_rel_error),
            "bound_ratio": number(r.bound_ratio), "seed": r.seed, "oracles": list(r.oracles),
            "threshold": number(r.threshold), "checked": r.checked, "detail": r.detail, "failure": list(r.failure)}


# ---------------------------------------------------------------- small commands

@main.command()
def schema() -> None:
    """Print the JSON Schema of the config format (for editors).

    \b
    Example:
      kernelgen schema > schema/kernelgen.schema.json
    """
    click.echo(json.dumps(json_schema(), indent=2))


@main.command()
def targets() -> None:
    """List targets and the status of their toolchains on this machine.

    \b
    Example:
      kernelgen targets
    """
    for name, target in TARGETS.items():
        click.echo(f"{name:<8} {target.summary}")
        for status in target.toolchain():
            _echo_tool(status)
    # not a target, but the CMake package (kernelgen --cmake-dir) is part of what kernelgen ships
    click.echo(f"{'cmake':<8} the CMake package (kernelgen --cmake-dir): find_package(kernelgen), kernelgen_add_kernels")
    _echo_tool(cmake_status())


def _echo_tool(status: ToolStatus) -> None:
    state = (f"found   {status.version}" if status.found else
             f"missing{f' ({status.version})' if status.version else ''}; {status.install_hint}")
    state += " [kernelgen stats only]" if status.stats_only else ""
    click.echo(f"         {status.name:<18} {state}")


main.add_command(bench_command)
main.add_command(run_command)
main.add_command(import_command)
main.add_command(init_command)
main.add_command(stats_command)
main.add_command(devices_command)
main.add_command(weights_command)
