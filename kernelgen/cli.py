"""The command line: the only modules (this one, and cli_import, cli_init and cli_stats, which it registers)
that print or exit.

Library errors become exit codes here and nowhere else: ConfigError -> 2 (one line per
problem: file:line:col: key: message), any other KernelgenError -> 1.
"""
from __future__ import annotations

import difflib
import functools
import json
import sys
from pathlib import Path
from typing import Callable

import click

from . import __version__
from .api import (TARGETS, applicable, binaries, chosen_targets, dependencies, generate, json_schema, load_config,
                  output_names, skipped, validate_safely, with_device)
from .cli_import import import_command
from .cli_init import init_command
from .cli_stats import devices_command, stats_command
from .config import Config
from .devices import PROFILES
from .diagnostics import render
from .errors import ConfigError, KernelgenError
from .files import depfile_text, display_path, write_if_changed, write_if_changed_bytes
from .host_steal import NOISY
from .planner import plan as make_plan
from .report import json_report, markdown_report, text_report
from .run_context import run_context
from .toolstatus import install_text
from .validate_table import validate_table


def echo_problems(error: ConfigError) -> None:
    """Each problem on stderr; on a terminal with its source line and a caret under the column."""
    for problem in error.problems:
        click.echo(render(problem, with_source=sys.stderr.isatty()), err=True)


def _handle_errors(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as error:
            echo_problems(error)
            sys.exit(2)
        except KernelgenError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(error.exit_code)
    return wrapper


def _load_all(paths: tuple[str, ...], targets: tuple[str, ...] = (), device: str | None = None) -> list[Config]:
    """Load every config first and report all problems together, before writing anything. With --target, the
    configs none of those targets takes (by dtype) are left out with a note; none left is a config error."""
    configs, problems = [], []
    for path in paths:
        try:
            configs.append(load_config(path))
        except ConfigError as error:
            problems += error.problems
    if problems:
        raise ConfigError(problems)
    names: dict[str, str] = {}
    for config in configs:
        if config.name in names and names[config.name] != config.path:
            raise ConfigError([_problem(config, "name", f"{config.name!r} is also the name of {names[config.name]}; "
                                                        f"names must be unique (they name output folders)")])
        names[config.name] = config.path
    if device:
        configs = [with_device(c, device) for c in configs]
    kept, left_out = applicable(configs, targets)
    if not kept and left_out:
        chosen_targets(left_out[0], targets)  # raises: dtype, with the dtypes the targets take
    if left_out:
        click.echo(f"note: --target {', '.join(targets)} takes none of: "
                   + ", ".join(f"{c.name} ({c.dtype})" for c in left_out), err=True)
    return kept


def _number(value):
    """JSON has no NaN: a measurement that does not exist (skipped run, no wall time) is null."""
    return value if not isinstance(value, float) or value == value and abs(value) != float("inf") else None


def _problem(config: Config, key: str, message: str):
    from .errors import ConfigProblem

    return ConfigProblem(config.path, 1, 1, key, message)


configs_argument = click.argument("configs", nargs=-1, required=True, type=click.Path(dir_okay=False))
def _known_targets(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    """A --target typo is a usage error naming the known targets (registered ones included)."""
    for name in value:
        if name not in TARGETS:
            hint = difflib.get_close_matches(name, list(TARGETS), n=1)
            raise click.BadParameter(f"unknown target {name!r}{f' (did you mean {hint[0]!r}?)' if hint else ''}; "
                                     f"known targets: {', '.join(TARGETS)}")
    return value


target_option = click.option("--target", "targets", multiple=True, metavar="NAME", callback=_known_targets,
                             help=f"Target to use (repeatable); overrides the config's targets. One of: {', '.join(TARGETS)}.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
device_option = click.option("--device", type=click.Choice(sorted(PROFILES)), help="A device profile (kernelgen "
                             "devices) for every target that takes it, over the configs' vulkan/opencl.device.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernelgen")
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
@click.argument("config", type=click.Path(dir_okay=False))
@json_option
@click.option("--format", "fmt", type=click.Choice(["text", "md", "json"]), default="text", show_default=True,
              help="Report format.")
@_handle_errors
def plan(config: str, as_json: bool, fmt: str) -> None:
    """Print the plan: shapes and layouts, cache usage, loop nest.

    \b
    Example:
      kernelgen plan configs/seed000_3x3.yaml --json
    """
    the_plan = make_plan(_load_all((config,))[0])
    if as_json or fmt == "json":
        click.echo(json.dumps(json_report(the_plan), indent=2))
    elif fmt == "md":
        click.echo(markdown_report(the_plan), nl=False)
    else:
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
@_handle_errors
def build(configs: tuple[str, ...], out_dir: str, targets: tuple[str, ...], device: str | None, depfile: str | None,
          depfile_target: str | None, list_outputs: bool) -> None:
    """Generate sources and plan reports; unchanged files are not rewritten.

    \b
    Example:
      kernelgen build configs/*.yaml -o out/ --depfile out/kernels.d
    """
    loaded = _load_all(configs, targets, device)
    root = Path(out_dir)
    if list_outputs:
        for config in loaded:
            for name in output_names(config, targets):
                click.echo(str(root / name))
        return
    generated = {config.name: generate(config, targets) for config in loaded}
    _make_folder(root)
    written = 0
    rules: dict[str, tuple[str, ...]] = {}
    notes: tuple[str, ...] = ()
    for config in loaded:
        compiled, made_notes = binaries(config, targets)  # SPIR-V beside the GLSL (never goldens)
        notes += tuple(n for n in made_notes if n not in notes)
        for rel, text in [*generated[config.name].items(), *compiled.items()]:
            written += (write_if_changed_bytes if isinstance(text, bytes) else write_if_changed)(root / rel, text)
            parts = Path(rel).parts
            rules[str(root / rel)] = dependencies(config, parts[1] if len(parts) > 2 else None)
        generated[config.name] = {**generated[config.name], **compiled}
    for note in notes:
        click.echo(note, err=True)
    if depfile:
        if depfile_target:
            # One stamp for the whole build: make then needs no restat when unchanged outputs keep their mtime.
            rules = {depfile_target: tuple(dict.fromkeys(d for deps in rules.values() for d in deps))}
        write_if_changed(Path(depfile), depfile_text(rules))
    total = sum(len(g) for g in generated.values())
    click.echo(f"{total} files for {len(loaded)} config(s) in {root}/ ({written} written, {total - written} unchanged)",
               err=True)


def _make_folder(root: Path) -> None:
    """Create the output folder before writing any file, so a bad -o is a usage error (exit 2)
    with nothing written; a write that fails later (disk full) is a WriteError (exit 1)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise click.BadParameter(f"cannot create folder {display_path(root)}: {error.strerror or error}",
                                 param_hint="'-o' / '--output'") from None


# ---------------------------------------------------------------- check

@main.command()
@configs_argument
@click.option("--golden", required=True, type=click.Path(file_okay=False), help="Folder of committed outputs (out/).")
@target_option
@click.option("--update", is_flag=True, help="Rewrite stale goldens instead of failing.")
@json_option
@_handle_errors
def check(configs: tuple[str, ...], golden: str, targets: tuple[str, ...], update: bool, as_json: bool) -> None:
    """Regenerate and diff against the goldens; exit 1 with a unified diff when stale.

    \b
    Example:
      kernelgen check configs/*.yaml --golden out/
    """
    from .goldens import orphans, remove, stale_files

    root = Path(golden)
    stale, produced = stale_files(_load_all(configs, targets), root, targets)
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

def _progress(items: list, label: str):
    """A progress bar on a terminal; silent otherwise (CI logs stay clean)."""
    if sys.stderr.isatty() and len(items) > 1:
        return click.progressbar(items, label=label, file=sys.stderr)
    from contextlib import nullcontext

    return nullcontext(items)


@main.command()
@configs_argument
@target_option
@device_option
@click.option("--seed", type=int, help="Reuse a seed printed by an earlier run (default: a fresh one per run).")
@click.option("--skip-missing", is_flag=True,
              help="Report targets whose toolchain this machine lacks as 'skipped' instead of failing.")
@json_option
@_handle_errors
def validate(configs: tuple[str, ...], targets: tuple[str, ...], device: str | None, seed: int | None,
             skip_missing: bool, as_json: bool) -> None:
    """Compile, run on fresh random inputs and compare with numpy; one row per (config, target).

    \b
    Tolerance: float32 outputs must lie within the rigorous dot-product rounding bound
    gamma_n * sum|x*w| (n = reduction length), propagated through chains.
    Example:
      kernelgen validate configs/*.yaml --target c
    """
    loaded = _load_all(configs, targets, device)
    for config in loaded:
        # Plan and render first: a config the planner or a target rejects is a config error (exit 2),
        # reported before anything runs, not a FAIL row.
        generate(config, targets)
    jobs = [(c, t) for c in loaded for t in chosen_targets(c, targets)]
    results = []
    with _progress(jobs, "validating") as bar:
        for config, target in bar:
            missing = [s for s in TARGETS[target].toolchain() if not s.found] if skip_missing else []
            if missing:
                results.append(skipped(config, target, install_text(missing), seed or 0))
                continue
            results.append(validate_safely(config, target, seed=seed))
    if as_json:
        click.echo(json.dumps({"context": run_context(t for _, t in jobs), "results": [
                               {"config": r.config, "target": r.target, "status": r.status,
                                "max_abs_error": _number(r.max_abs_error), "max_rel_error": _number(r.max_rel_error),
                                "bound_ratio": _number(r.bound_ratio), "seed": r.seed, "oracles": list(r.oracles),
                                "detail": r.detail}
                               for r in results]}, indent=2))
    else:
        for line in validate_table(results):
            click.echo(line)
    # compiled (HVX float: QEMU cannot run it), not run (device lacks a feature), skipped (no toolchain):
    # reported as such, neither a pass nor a mismatch.
    if any(r.status not in ("pass", "skipped", "compiled", "not run") for r in results):
        sys.exit(1)


# ---------------------------------------------------------------- bench

@main.command()
@configs_argument
@target_option
@device_option
@click.option("--repeat", default=5, show_default=True, help="Timed runs per kernel (the median is reported).")
@click.option("--sweep", is_flag=True, help="Try the target's tile and work-group permutations; mark the best.")
@click.option("--run-on", help="The runtime device to time on (index or name substring), for targets with several.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Also draw a roofline chart (PNG) of the results.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (one row per kernel) instead of text.")
@json_option
@_handle_errors
def bench(configs: tuple[str, ...], targets: tuple[str, ...], device: str | None, repeat: int, sweep: bool,
          run_on: str | None, plot: str | None, as_csv: bool, as_json: bool) -> None:
    """Time generated kernels on this machine's toolchains: GFLOP/s, and GB/s counting each tensor once.

    \b
    Example:
      kernelgen bench configs/seed000_3x3.yaml --target c
    """
    from .api import BenchOptions, bench as run_bench

    options = BenchOptions(repeat=repeat, sweep=sweep, device=run_on)
    jobs = [(c, t) for c in _load_all(configs, targets, device) for t in chosen_targets(c, targets)]
    rows = []
    intensity: dict[str, float] = {}
    compulsory: dict[str, int] = {}
    with _progress(jobs, "benchmarking") as bar:
        for config, target in bar:
            rows += run_bench(config, target, options)
            the_plan = make_plan(config)
            # every tensor moved once: what a depthwise layer, bound by memory, is measured against
            compulsory[config.name] = sum(t.elements for t in the_plan.tensors) * the_plan.element_bytes
            intensity[config.name] = the_plan.flops / compulsory[config.name]
    if plot:
        from .targets.c.roofline import measure_peaks, plot_roofline

        peaks = measure_peaks()
        points = [(f"{r.config}/{r.target}", intensity[r.config], r.gflops) for r in rows if r.seconds > 0]
        device_peaks = {r.target: float(r.metrics["peak_gflops"]) for r in rows if "peak_gflops" in r.metrics}
        plot_roofline(Path(plot), points, peaks, device_peaks)
        click.echo(f"roofline: {plot} (CPU peak {peaks.gflops:.1f} GFLOP/s, copy bandwidth "
                   f"{peaks.bandwidth_gbs:.1f} GB/s)", err=True)
    records = [{"config": r.config, "target": r.target, "label": r.label, "seconds": _number(r.seconds),
                "seconds_min": _number(r.spread[0]), "seconds_median": _number(r.seconds),
                "seconds_max": _number(r.spread[1]), "flops": r.flops, "gflops": _number(r.gflops),
                "bytes": compulsory[r.config],
                "gbs": _number(compulsory[r.config] / r.seconds / 1e9 if r.seconds > 0 else None),
                "best": r.best, **{k: _number(v) for k, v in r.metrics.items()}} for r in rows]
    if as_json or as_csv:
        import csv

        if as_json:
            context = run_context(t for _, t in jobs)
            if run_on is not None:
                context["run_on"] = run_on  # --run-on picked the runtime device among several
            click.echo(json.dumps({"context": context, "results": records}, indent=2, allow_nan=False))
        else:
            columns = list(dict.fromkeys(k for record in records for k in record))
            writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(records)
        return
    noisy = [r for r in rows if r.metrics.get("steal", 0.0) > NOISY]
    if noisy:
        worst = max(r.metrics["steal"] for r in noisy)
        click.echo(f"warning: the hypervisor took up to {worst:.1%} of this host's CPU time during {len(noisy)} "
                   f"of {len(rows)} runs (steal); CPU-device times and ratios are not representative", err=True)
    for r in rows:
        extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.metrics.items())
        mark = "  <- best" if r.best else ""
        # Targets measured by counters instead of clocks (hvx under QEMU) report no time.
        timing = (f"{r.seconds * 1e3:9.3f} ms (min {r.spread[0] * 1e3:.3f}, max {r.spread[1] * 1e3:.3f})  "
                  f"{r.gflops:8.2f} GFLOP/s  {compulsory[r.config] / r.seconds / 1e9:7.2f} GB/s"
                  if r.seconds > 0 else "(no wall time: counters)")
        click.echo(f"{r.target:<7} {r.label}  {timing}  FLOPs={r.flops} {extra}{mark}")


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
            state = (f"found   {status.version}" if status.found else
                     f"missing{f' ({status.version})' if status.version else ''}; {status.install_hint}")
            click.echo(f"         {status.name:<18} {state}")


main.add_command(import_command)
main.add_command(init_command)
main.add_command(stats_command)
main.add_command(devices_command)
