"""`kernelgen bench`: time the generated kernels (GFLOP/s, GB/s counting each tensor once), or with --sweep try a
target's permutations one process each (sweep.py), streaming each result to --output. Registered by commands.py."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..api import TARGETS, jobs
from ..measure.bench import bench
from ..measure.records import BenchOptions, BenchRow
from ..measure.host_steal import NOISY
from .common import configs_argument, device_option, handle_errors, json_option, load_all, number, target_option
from ..measure.context import host_line, run_context
from .network import bench_networks, manifests_in


def _chart_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from ..measure.roofline import chart_problem

    problem = chart_problem(value) if value else ""
    if problem:
        raise click.BadParameter(problem, ctx=ctx, param=param)
    return value


@click.command("bench")
@configs_argument
@target_option
@device_option
@click.option("--repeat", default=5, show_default=True, help="Timed runs per kernel (the median is reported).")
@click.option("--sweep", is_flag=True, help="Try the target's tile and work-group permutations, one process each; "
                                            "mark the best (by time, or by the compiler's estimate for rdna2).")
@click.option("--output", type=click.Path(dir_okay=False), help="With --sweep: append each variant's result to this "
                                                                "JSON Lines file as it finishes; variants it holds are "
                                                                "not measured again (resume).")
@click.option("--variant-timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="With --sweep: give up on a variant after this long (compile and run), record it as timed out.")
@click.option("--run-on", help="The runtime device to time on (index or name substring), for targets with several.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=_chart_path, metavar="FILE.png|FILE.svg",
              help="Also draw the results (format by the extension; needs matplotlib, kernelgen[plot]): a roofline "
                   "of the configs' kernels; for a network, its kernels' roofline and a bar chart of the time each "
                   "step takes.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="For a network on c: the threads of its program and of onnxruntime beside it.")
@click.option("--rounds", default=5, show_default=True, type=click.IntRange(min=1),
              help="For a network on c: rounds of --repeat inferences, the program's then onnxruntime's.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (one row per kernel) instead of text.")
@json_option
@handle_errors
def bench_command(configs: tuple[str, ...], targets: tuple[str, ...], device: str | None, repeat: int, sweep: bool,
                  output: str | None, variant_timeout: float | None, run_on: str | None, plot: str | None,
                  threads: int, rounds: int, as_csv: bool, as_json: bool) -> None:
    """Time generated kernels on this machine's toolchains: GFLOP/s, and GB/s counting each tensor once.

    \b
    A sweep keeps what it measured: Ctrl-C, a crash or a timeout loses nothing already in --output.
    Examples:
      kernelgen bench configs/seed000_3x3.yaml --target c
      kernelgen bench configs/seed002_vulkan_small.yaml --target vulkan --sweep --output sweep.jsonl \\
          --variant-timeout 120
    """
    if (output or variant_timeout) and not sweep:
        raise click.UsageError("--output and --variant-timeout go with --sweep")
    if manifests_in(configs):
        if not as_json:
            click.echo(host_line(targets or ("c",)))
        return bench_networks(configs, targets, device, repeat, as_json, plot, threads, rounds)
    options = BenchOptions(repeat=repeat, sweep=sweep, device=run_on)
    work = [(t, job) for c in load_all(configs, targets, device) for t, job in jobs(c, targets).items()]
    rows: list[BenchRow] = []
    not_measured: list[str] = []
    interrupted = False
    for target, job in work:
        variants = TARGETS[target].sweep_variants(job.config) if sweep else []
        if variants:
            results = _sweep(job.config, target, variants, options, output, variant_timeout)
            rows += [r.row for r in results if r.row is not None]
            not_measured += [f"{r.target:<7} {r.config} {r.variant}: {r.status.value}" +
                             (f" ({r.detail})" if r.detail else "") for r in results if r.row is None]
            if len(results) < len(variants):  # Ctrl-C
                interrupted = True
                break
        else:
            rows += bench(TARGETS[target], job, options)
    _report(rows, work, run_on, plot, as_csv, as_json)
    for line in not_measured:
        click.echo(line, err=True)
    if interrupted:
        click.echo(f"interrupted: the results so far are above{f' and in {output}' if output else ''}", err=True)
        sys.exit(130)


def _sweep(config, target, variants, options, output, timeout):
    from ..measure.sweep import sweep

    def tick(done: int, total: int, result) -> None:
        if sys.stderr.isatty() or output:
            click.echo(f"[{done}/{total}] {target} {config.name} {result.variant}: {result.status.value}", err=True)

    return sweep(config, TARGETS[target], variants, options, Path(output) if output else None, timeout, tick)


def _report(rows: list[BenchRow], work: list, run_on: str | None, plot: str | None, as_csv: bool,
            as_json: bool) -> None:
    compulsory: dict[str, int] = {}
    intensity: dict[str, float] = {}
    for config, the_plan in {job.config.name: (job.config, job.plan) for _, job in work}.values():
        # every tensor moved once: what a depthwise layer, bound by memory, is measured against
        compulsory[config.name] = sum(t.elements for t in the_plan.tensors) * the_plan.element_bytes
        intensity[config.name] = the_plan.flops / compulsory[config.name]
    if plot:
        from ..api import roofline_chart

        points = [(f"{r.config}/{r.target}", intensity[r.config], r.gflops) for r in rows if r.seconds > 0]
        device_peaks = {r.target: r.peak_gflops for r in rows if r.peak_gflops is not None}
        peaks = roofline_chart(Path(plot), points, device_peaks)
        click.echo(f"roofline: {plot} (CPU peak {peaks.gflops:.1f} GFLOP/s, copy bandwidth "
                   f"{peaks.bandwidth_gbs:.1f} GB/s)", err=True)
    records = [{"config": r.config, "target": r.target, "label": r.label, "seconds": number(r.seconds),
                "seconds_min": number(r.spread[0]), "seconds_median": number(r.seconds),
                "seconds_max": number(r.spread[1]), "flops": r.flops, "gflops": number(r.gflops),
                "bytes": compulsory[r.config],
                "gbs": number(compulsory[r.config] / r.seconds / 1e9 if r.seconds > 0 else None),
                "best": r.best, **({"when": r.when} if r.when else {}),
                **({"measured": r.measured} if r.measured else {}),
                **{k: number(v) for k, v in r.measurements().items()}} for r in rows]
    if as_json or as_csv:
        import csv

        if as_json:
            context = run_context(t for t, _ in work)
            if run_on is not None:
                context["run_on"] = run_on  # --run-on picked the runtime device among several
            click.echo(json.dumps({"context": context, "results": records}, indent=2, allow_nan=False))
        else:
            columns = list(dict.fromkeys(k for record in records for k in record))
            click.echo(host_line(t for t, _ in work), err=True)  # the CSV's rows stay rows
            writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(records)
        return
    click.echo(host_line(t for t, _ in work))
    noisy = [r for r in rows if r.steal.get("steal", 0.0) > NOISY]
    if noisy:
        worst = max(r.steal["steal"] for r in noisy)
        click.echo(f"warning: the hypervisor took up to {worst:.1%} of this host's CPU time during {len(noisy)} "
                   f"of {len(rows)} runs (steal); CPU-device times and ratios are not representative", err=True)
    for r in rows:
        extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.measurements().items())
        mark = "  <- best" if r.best else ""
        # Targets measured by counters instead of clocks (hvx under QEMU), or by a compiler's estimate, report
        # no time.
        timing = (f"{r.seconds * 1e3:9.3f} ms (min {r.spread[0] * 1e3:.3f}, max {r.spread[1] * 1e3:.3f})  "
                  f"{r.gflops:8.2f} GFLOP/s  {compulsory[r.config] / r.seconds / 1e9:7.2f} GB/s"
                  if r.seconds > 0 else "(no wall time: counters or a compiler's estimate)")
        click.echo(f"{r.target:<7} {r.label}  {timing}  FLOPs={r.flops} {extra}{mark}")
    for what in dict.fromkeys(r.measured for r in rows if r.measured):  # what each kind of time is, once
        click.echo(what)
    if run_on is None:  # the default device: what the host makes of each target's kernels
        for target in dict.fromkeys(t for t, _ in work):
            for note in TARGETS[target].bench_notes([job for t, job in work if t == target]):
                click.echo(note)
