"""The public Python API: the pipeline with the registered targets plugged in. `import kernelgen` re-exports it.

    import kernelgen
    config = kernelgen.load_config("configs/seed000_3x3.yaml")   # a path, or YAML text
    files = kernelgen.generate(config, "c")                     # {"seed000_3x3.c": text, ...}
    result = kernelgen.validate(config, "c")                    # result.passed
    outputs = kernelgen.run(config, "c", {"input": x, "filter1": w1, "filter2": w2})

The registry is kernelgen/registry.py; this module names no target: what one target alone has (the --gpu parts of
its stats profiles, the host's peaks for a roofline) comes through the Target interface. What this module calls in
the core takes targets as arguments. Each config is planned once and each target renders once per call
(`jobs`); the command line hands those jobs down instead of planning again.
"""
from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from .version import __version__
import kernelgen.config as _config
import kernelgen.config.model as config_model
from .config import Config, with_options
from .errors import ConfigError, ConfigProblem, KernelgenError
from .measure import bench as _bench
from .measure import run as _run
from .measure import sources as _sources
from .measure import validate as _validate
from .measure.records import (BenchOptions, BenchRow, DeviceStats, KernelStats, OpEstimate, Status,
                              ValidationResult, unmeasured)
from .plan_types import Plan
from .planner import plan
from .report import text_report
from .registry import TARGETS, catalog
from .target_choice import choose_targets
from .targets.base import BuildFlags, Job, Target, file_names, templates
from .toolstatus import ToolStatus

if TYPE_CHECKING:
    from .measure.network_bench import NetworkTimes
    from .measure.network_run import NetworkValidation
    from .network.manifest import Network
    from .network.weights import WeightsPlan

__all__ = ["BenchOptions", "BenchRow", "Config", "DeviceStats", "Job", "Plan", "Status", "TARGETS", "Target",
           "ValidationResult", "applicable", "bench", "bench_network", "binaries", "chosen_targets", "dependencies", "fusion_coster", "generate",
           "jobs", "json_schema", "kernel_stats", "load_config", "load_network", "network_files", "network_targets", "network_weights", "output_files", "output_names", "parse_config", "plan",
           "network_chart", "roofline_chart", "run", "skipped", "stats", "stats_parts", "stats_profile", "toolchain", "validate", "validate_job", "validate_network", "with_device",
           "with_sources"]

Targets = Mapping[str, Target]


# ---------------------------------------------------------------- configs

def load_config(path_or_text: str | Path, targets: Targets | None = None) -> Config:
    """A config from a file (a path) or YAML text (a string with a line break), checked against the targets."""
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return parse_config(path_or_text, "<string>", targets)
    return _config.load_config(path_or_text, catalog(targets))


def parse_config(text: str, path: str = "<config>", targets: Targets | None = None) -> Config:
    """A config from YAML text; `path` is the file name its errors name."""
    return _config.parse_config(text, path, catalog(targets))


def json_schema(targets: Targets | None = None) -> dict:
    """The JSON Schema of the config format, with each target's option block."""
    return config_model.json_schema(catalog(targets))


def chosen_targets(config: Config, override: tuple[str, ...] = (), targets: Targets | None = None) -> tuple[str, ...]:
    """The targets to build: the config's `targets:`, each of which must take the config's dtype; or --target's
    (override), of which those that take the dtype (at least one must: `--target c` over configs/*.yaml builds
    the float32 configs and leaves the uint8 ones out, see applicable)."""
    known = targets or TARGETS
    names = override or config.targets
    unknown = [t for t in names if t not in known]
    if unknown:
        raise ConfigError([ConfigProblem(config.path, 1, 1, "targets",
                                         f"unknown target {unknown[0]!r} (expected one of: {', '.join(known)})")])
    choice = choose_targets(config.dtype, names, known)
    if choice.refused and not (override and choice.chosen):
        name = choice.refused[0]
        raise ConfigError([ConfigProblem(config.path, 1, 1, "dtype", f"target {name!r} supports dtype "
                                         f"{', '.join(known[name].dtypes)}, got {config.dtype!r}")])
    return choice.chosen


def applicable(configs: list[Config], override: tuple[str, ...]) -> tuple[list[Config], list[Config]]:
    """Split configs into those one of the --target targets takes (by dtype) and those none does; without
    --target every config is kept (its own `targets:` must take it)."""
    if not override:
        return configs, []
    takes = [c for c in configs if choose_targets(c.dtype, override, TARGETS).chosen]
    return takes, [c for c in configs if c not in takes]


def with_device(config: Config, device: str) -> Config:
    """The config with `device` as the profile of every target whose option block takes that one
    (vulkan.device, opencl.device: the defaults follow it); other targets unchanged."""
    from pydantic import ValidationError

    for name, options in config.options.items():
        if "device" not in type(options).model_fields:
            continue
        try:  # what the config set stays marked as set (stats names it), the rest follows the new profile
            given = options.model_dump(exclude_unset=True)
            config = with_options(config, name, type(options).model_validate({**given, "device": device}))
        except ValidationError:  # a profile this target has no use for (lavapipe for opencl)
            continue
    return config


# ---------------------------------------------------------------- generation

def jobs(config: Config, override: tuple[str, ...] = (), targets: Targets | None = None) -> dict[str, Job]:
    """The config planned once and rendered once by each chosen target: {target name: Job}."""
    known = targets or TARGETS
    names = chosen_targets(config, override, known)
    the_plan = plan(config)
    return {name: known[name].build(config, the_plan) for name in names}


def generate(config: Config, target: str, targets: Targets | None = None) -> dict[str, str]:
    """One target's files, {file name: text}, as `kernelgen build` writes them under <name>/<target>/."""
    return dict(jobs(config, (target,), targets)[target].files)


def output_files(config: Config, built: Mapping[str, Job]) -> dict[str, str]:
    """Every file `kernelgen build` writes for a config's jobs, as {relative path: text}: the plan report and
    each target's files. Pure."""
    the_plan = next(iter(built.values())).plan if built else plan(config)
    banner = (f"# Generated by kernelgen {__version__} from {Path(config.path).name}. Do not edit: change the config "
              f"and run `kernelgen build`.\n")
    files = {f"{config.name}/plan.txt": banner + text_report(the_plan)}
    for name, job in built.items():
        files |= {f"{config.name}/{name}/{file_name}": text for file_name, text in job.files.items()}
    return files


def binaries(built: Mapping[str, Job], targets: Targets | None = None) -> tuple[dict[str, bytes], tuple[str, ...]]:
    """The compiled files `kernelgen build` writes beside the sources ({relative path: bytes}) and a note per
    target that could not make its own here."""
    known = targets or TARGETS
    files, notes = {}, []
    for name, job in built.items():
        made, note = known[name].binaries(job)
        files |= {f"{job.config.name}/{name}/{file_name}": data for file_name, data in made.items()}
        notes += [note] if note else []
    return files, tuple(dict.fromkeys(notes))


def output_names(config: Config, override: tuple[str, ...] = (), targets: Targets | None = None) -> tuple[str, ...]:
    """The files a build would produce on this machine (compiled ones included: SPIR-V when glslang is here), without
    planning or rendering."""
    known = targets or TARGETS
    names = [f"{config.name}/plan.txt"]
    for name in chosen_targets(config, override, known):
        made = (*file_names(known[name], config.name), *known[name].binary_names(config))
        names += [f"{config.name}/{name}/{f}" for f in made]
    return tuple(names)


def build_flags(config: Config, override: tuple[str, ...] = (), targets: Targets | None = None
                ) -> dict[str, BuildFlags]:
    """By output folder (`<config>/<target>`): the flags each target's generated sources need in a user's build
    (CMake's kernelgen_add_kernels gives them to those sources); targets that need none are left out."""
    known = targets or TARGETS
    flags = {name: known[name].build_flags(config) for name in chosen_targets(config, override, known)}
    return {f"{config.name}/{name}": f for name, f in flags.items() if f.compile or f.link}


def dependencies(config: Config, target: str | None, targets: Targets | None = None) -> tuple[str, ...]:
    """What shaped an output: its config, the templates of its target, kernelgen's modules."""
    package = Path(__file__).resolve().parent
    modules = sorted(str(p) for p in package.rglob("*.py"))
    templates_of = [str(p) for p in templates((targets or TARGETS)[target])] if target else []
    return (str(Path(config.file or config.path)), *templates_of, *modules)


# ---------------------------------------------------------------- on this machine

def toolchain(target: str) -> tuple[ToolStatus, ...]:
    return TARGETS[target].toolchain()


def validate(config: Config, target: str, seed: int | None = None, sources: str | Path | None = None
             ) -> ValidationResult:
    """Build, run on fresh inputs (or `seed`'s), compare with numpy (and onnxruntime for an imported model);
    `.passed` says whether it matched. With `sources`, the kernel sources in that folder (as `kernelgen build` wrote
    them, perhaps edited: see with_sources) instead of generated ones. Toolchain failures raise."""
    job = jobs(config, (target,))[target]
    job = with_sources(job, target, sources) if sources is not None else job
    return _validate.validate(TARGETS[target], job, _seed(seed))


def with_sources(job: Job, target: str, folder: str | Path) -> Job:
    """The job with the kernel sources found in `folder` (`kernelgen build`'s <output>/<name>/<target>/, its
    <output>/<name>/ or its <output>/) in place of the rendered ones (measure/sources.py); the files that describe
    the launch must be as rendered. Raises SourcesError (exit 2 at the command line) when the folder lacks a file the
    target writes or holds another config's."""
    return _sources.with_sources(job, target, Path(folder))


def validate_job(job: Job, target: str, seed: int | None = None, dump: Path | None = None,
                 phase: Callable[[str], None] | None = None) -> ValidationResult:
    """validate() of a job already planned and rendered, with toolchain failures reported as a FAIL row; `dump`:
    a folder for each op's output and its reference (.npy); `phase` hears each step begin ("compiling", "running",
    "comparing": validate's progress on a terminal)."""
    return _validate.validate_safely(TARGETS[target], job, _seed(seed), dump, phase)


def skipped(config: Config, target: str, detail: str, seed: int = 0) -> ValidationResult:
    return unmeasured(config.name, target, seed, Status.SKIPPED, detail)


def bench(config: Config, target: str, repeat: int = 5, *, sweep: bool = False,
          run_on: str | None = None) -> list[BenchRow]:
    """Time the target's kernels on this machine: one row per kernel (median, min and max of `repeat` runs; c: two,
    the first as a network is judged, then cold or warm, BenchRow.when); with
    sweep, every permutation the target sweeps (one process each), the best marked. `run_on` picks the runtime
    device among several (an index or a name substring)."""
    if target not in TARGETS:
        raise KernelgenError(f"target {target!r} has no benchmark")
    options = BenchOptions(repeat=repeat, sweep=sweep, device=run_on)
    variants = TARGETS[target].sweep_variants(config) if sweep else []
    if not variants:
        return _bench.bench(TARGETS[target], jobs(config, (target,))[target], options)
    from .measure.sweep import sweep as run_sweep

    return [r.row for r in run_sweep(config, TARGETS[target], variants, options) if r.row is not None]


def run(config: Config, target: str, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The generated kernel run on your tensors (input and side_<name> in the order of their layout's letters, as
    `kernelgen run` takes them: NCHW for an imported config; OIHW filters), the layout engine packing and unpacking
    them; {"output": array} in the output layout's letter order. Bad input raises ConfigError naming the tensor and
    the shape and dtype expected."""
    job = jobs(config, (target,))[target]
    outputs = _run.run(TARGETS[target], job, _run.checked_inputs(config, job.plan, inputs, listed=True)).outputs
    return {name: _run.as_listed(config, array) for name, array in outputs.items()}


def stats(config: Config, target: str, device: str | None = None, gpu: str | None = None) -> tuple[DeviceStats, ...]:
    """Per op, what the compiler behind the target's device profile makes of its kernel (registers, spills,
    occupancy): the config's own profile, or `device`, which becomes the profile first (as --device does on every
    command: its tiles are compiled, by its compiler); `gpu` picks one part of a profile that covers several
    (adreno-7xx: a740, a730; adreno-6xx: a660, a630, a618; mali-valhall: g610). Raises KernelgenError when no
    compiler here judges it."""
    config = with_device(config, device) if device else config
    judge = stats_profile(config, target, device)
    return TARGETS[target].stats(jobs(config, (target,))[target], judge, gpu)


def kernel_stats(config: Config, target: str, device: str | None = None, gpu: str | None = None, *,
                 compare_tiles: bool = False) -> KernelStats:
    """`stats` with the verdict and the estimate: per op the compiler's statistics, the occupancy the part's
    profile targets, and (where the part's figures are known) each op's estimated time; with `compare_tiles`, the
    target's tile variants (tile_variants) compiled and estimated too, each a compile of the whole kernel."""
    config = with_device(config, device) if device else config
    judge = stats_profile(config, target, device)
    known = TARGETS[target]
    job = jobs(config, (target,))[target]
    rows = known.stats(job, judge, gpu)
    estimates = known.time_estimate(job, rows, judge, gpu)
    variants = tuple(_variant_seconds(known, job, estimates, label, variant, judge, gpu)
                     for label, variant in known.tile_variants(config)) if compare_tiles and estimates else ()
    target, unit = known.stats_target_occupancy(judge, gpu) or (None, "waves")
    return KernelStats(name=config.name, rows=rows, estimates=estimates, target_occupancy=target,
                       occupancy_unit=unit, variants=variants)


def _variant_seconds(known: Target, default: Job, estimates: tuple[OpEstimate, ...], label: str, config: Config,
                     device: str, gpu: str | None) -> tuple[str, tuple[float | None, ...]]:
    """One tile variant's estimated time per op: None where the op spills with that tile (it would not be chosen),
    all None when the problem cannot take the tile; the default's own times when the variant plans its tiles."""
    none = (None,) * len(estimates)
    try:
        job = jobs(config, (known.name,))[known.name]
        if job.target_plan == default.target_plan:
            return label, tuple(e.seconds for e in estimates)
        rows = known.stats(job, device, gpu)
    except KernelgenError:
        return label, none
    timed = known.time_estimate(job, rows, device, gpu)
    return label, tuple(None if r.spills or r.fills else e.seconds for r, e in zip(rows, timed, strict=True))


def stats_parts() -> dict[str, str]:
    """The GPUs `stats` can compile for where a profile covers several (--gpu), each with its profile."""
    return {part: profile for target in TARGETS.values() for part, profile in target.stats_parts().items()}


def stats_profile(config: Config, target: str, device: str | None = None) -> str:
    """The device profile `stats` compiles the target's kernels for (the config's, or `device` once with_device
    set it), checked: the target must take that profile and have a compiler for it here."""
    known = TARGETS[target]
    if not known.stats_devices:
        raise KernelgenError(f"the {target} target has compiler statistics for no device")
    options = known.options(config)
    profile = getattr(options, "device", None)
    if device and profile != device:
        raise KernelgenError(f"the {target} target takes no {device!r} profile (it takes "
                             f"{', '.join(map(repr, _profiles(options)))})")
    if profile not in known.stats_devices:
        given = f"got {device!r}" if device else f"and the config's {target}.device is {profile!r}"
        plural = "s" if len(known.stats_devices) > 1 else ""
        raise KernelgenError(f"the {target} target has compiler statistics for the {', '.join(known.stats_devices)} "
                             f"profile{plural} only, {given} (--device {known.stats_devices[0]} compiles the kernels "
                             f"with that profile's tiles)")
    return profile


def _profiles(options) -> tuple[str, ...]:
    from typing import get_args

    return get_args(type(options).model_fields["device"].annotation)


def _host_peaks():
    """This CPU's peaks, measured now by the first target that probes the host (Target.host_peaks)."""
    peaks = next((p for p in (t.host_peaks() for t in TARGETS.values()) if p is not None), None)
    if peaks is None:
        raise KernelgenError("no registered target measures this CPU's peaks (the c target does, with gcc)")
    return peaks


def roofline_chart(path: Path, points: list[tuple[str, float, float]], device_peaks: dict[str, float]):
    """Draw the roofline (PNG or SVG) of (label, FLOP per byte, GFLOP/s) points under this CPU's peaks, measured
    in this run, and each target's device peak; returns the CPU peaks."""
    from .measure.roofline import plot_roofline

    peaks = _host_peaks()
    plot_roofline(path, points, peaks, device_peaks)
    return peaks


def network_chart(path: Path, times: NetworkTimes) -> None:
    """A benched network's chart: its kernels on this CPU's roofs, measured in this run (timed kernels only: a
    kernel counted by a simulator has no GFLOP/s), and each step's time, or packets when the kernels are counted."""
    from .measure.roofline import Bar, plot_network

    counted = times.packets > 0
    bars = [Bar(label=f"[{r.step + 1}] {r.name}", value=(r.packets or 0) if r.counted else r.seconds * 1e3,
                kind=r.kind) for r in times.steps if r.counted == counted]
    points = [(str(r.step + 1), r.flops / r.bytes, r.flops / r.seconds / 1e9) for r in times.steps
              if r.kind == "kernel" and not r.counted and r.seconds > 0 and r.bytes > 0]
    title = (f"{times.network} on {times.target}: {times.seconds * 1e3:.2f} ms a run in its steps; onnxruntime "
             f"{times.onnxruntime} {times.onnxruntime_seconds * 1e3:.2f} ms" if not counted else
             f"{times.network} on {times.target}: {times.packets:,.0f} packets counted by the simulator")
    plot_network(path, title, bars, "packets" if counted else "ms", points, _host_peaks() if points else None, {})


def fusion_coster(target: str):
    """For `kernelgen import`: a candidate group (onnx/group_config.py, schedule: auto) -> its cost on `target`
    (onnx/fusion.py), or None when the target has no roofs or budget to estimate with."""
    from .onnx.coster import group_coster

    return group_coster(TARGETS[target].info(), catalog())


def _seed(seed: int | None) -> int:
    return secrets.randbits(32) if seed is None else seed


# ---------------------------------------------------------------- networks

def load_network(path: str | Path, targets: Targets | None = None):
    """A network manifest (network.yaml) with each kernel's config loaded and checked (kernelgen/network)."""
    from .network.manifest import load_network as _load_network

    return _load_network(path, lambda file: load_config(file, targets))


def validate_network(network: Network, target: str, seed: int | None = None) -> NetworkValidation:
    """Run a network end to end (kernelgen/measure/network_run.py): each kernel validated on `target` on its real
    input (the step before's output), host steps in onnxruntime, every tensor compared with onnxruntime running the
    whole model on the same input. Iterating it yields one StepRun per step as it finishes (it stops after a kernel
    that cannot run here); its verdict() then judges the network."""
    from .measure.network_run import NetworkValidation

    chosen = TARGETS[network_targets(network, (target,))[0]]
    return NetworkValidation(chosen, network, _network_jobs(chosen, network), _seed(seed))


def bench_network(network: Network, target: str, repeat: int = 5, threads: int = 1, rounds: int = 5) -> NetworkTimes:
    """A network timed on `target` against onnxruntime: the c program end to end, round by round, with `threads`;
    else step by step (kernelgen/measure/network_bench.py)."""
    from .measure.network_bench import bench_network as _bench_network

    chosen = TARGETS[network_targets(network, (target,))[0]]
    return _bench_network(chosen, network, _network_jobs(chosen, network, threads), repeat, threads=threads,
                          rounds=rounds)


def _network_jobs(target: Target, network: Network, threads: int = 0) -> dict[str, Job]:
    """Each kernel step's config planned and built for `target` once, by name (the network loops' jobs); `threads`
    (0: the configs') replaces each config's where the target's options take threads (c)."""
    configs = [s.config for s in network.kernels]
    if threads and "threads" in getattr(type(configs[0].options.get(target.name)), "model_fields", {}):
        configs = [with_options(c, target.name, c.options[target.name].model_copy(update={"threads": threads}))
                   for c in configs]
    return {config.name: target.build(config, plan(config)) for config in configs}


def network_targets(network: Network, override: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The targets a network's kernels run on: --target's (override), else the first kernel's own `targets:` (an
    import writes one); every one must take every kernel's dtype (ConfigError at the step that it does not)."""
    unknown = [t for t in override if t not in TARGETS]
    if unknown:
        raise KernelgenError(f"unknown target {unknown[0]!r} (expected one of: {', '.join(TARGETS)})")
    chosen = override or network.kernels[0].config.targets[:1]
    choices = {s.config.dtype: choose_targets(s.config.dtype, chosen, TARGETS) for s in network.kernels}
    for target in chosen:
        for step in network.kernels:
            if target in choices[step.config.dtype].refused:
                raise network.problem(f"steps[{step.index}].kernel", f"kernel {step.config.name} is "
                                      f"{step.config.dtype}; the {target} target takes "
                                      f"{', '.join(TARGETS[target].dtypes)}")
    return chosen


def network_build_flags(network: Network, target: str) -> BuildFlags:
    """The flags of a network's driver (network.c): its first kernel's, so the driver and the kernels it calls are
    built alike (it loops over steps and does little arithmetic of its own)."""
    return TARGETS[target].network_flags(network)


def network_weights(network, target: str, built: Mapping[str, Job]) -> tuple[WeightsPlan, bytes]:
    """The weights every kernel of `network` takes, packed by `target` for its jobs (`built`, by config name): where
    each tensor lies, and the data section of `<network>.weights` (kernelgen/network/weights.py)."""
    from .network.weights import pack_network_weights

    return pack_network_weights(network, built, TARGETS[target])


def network_files(network, target: str, built: Mapping[str, Job], weights: WeightsPlan | None = None
                  ) -> tuple[dict[str, str], str] | None:
    """A target's driver of the whole network (c: network.c/network.h over one planned arena, reading the weights
    where `weights` put them; None: packed here) and a line about it; None when the target writes none (its
    kernels are the whole output)."""
    known = TARGETS[target]
    if type(known).network_files is Target.network_files:
        return None
    files = known.network_files(network, built, weights or network_weights(network, target, built)[0])
    return files, known.network_note(network, built)