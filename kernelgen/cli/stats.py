"""`kernelgen stats CONFIG --target vulkan --device rdna2`: what a real GPU compiler makes of each op's kernel,
registered by commands.py. Prints and exits like the other commands."""
from __future__ import annotations

import json

import click

from ..api import TARGETS, kernel_stats, load_config, stats_parts, stats_profile, with_device
from ..errors import KernelgenError
from ..measure.context import run_context
from ..measure.records import DeviceStats
from ..network.manifest import is_manifest
from .common import device_choice, handle_errors, json_option
from .stats_report import kernel_record, network_stats, print_estimates

KEYS = DeviceStats.statistics()
GPU_PROFILE = stats_parts()  # --gpu: each part and its profile


def _parts_help() -> str:
    """Each profile's parts, its default (the first) marked: "adreno-6xx: a660 (default), a630; ..."."""
    parts: dict[str, list[str]] = {}
    for part, profile in GPU_PROFILE.items():
        parts.setdefault(profile, []).append(part)
    return "; ".join(f"{profile}: {', '.join([f'{names[0]} (default)', *names[1:]] if len(names) > 1 else names)}"
                     for profile, names in parts.items())


@click.command("stats")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--target", "target", required=True, metavar="NAME",
              help="The target whose kernels are compiled (one with a device compiler).")
@device_choice("The device profile (kernelgen devices) as on every command: its tiles are compiled, and its own "
               "compiler judges them (rdna2: RADV's ACO; adreno-7xx, adreno-6xx: Turnip's ir3; mali-valhall: "
               "PanVK's Valhall compiler). Default: the config's own vulkan/opencl.device.")
@click.option("--gpu", type=click.Choice(sorted(GPU_PROFILE)), default=None,
              help=f"The part a profile covering several is compiled for ({_parts_help()}).")
@click.option("--compare-tiles", is_flag=True,
              help="Also compile the target's sweep tiles (at the default workgroup size) and say where one is "
                   "estimated faster than the default tile (a compile per tile and kernel).")
@json_option
@handle_errors
def stats_command(config: str, target: str, device: str | None, gpu: str | None, compare_tiles: bool,
                  as_json: bool) -> None:
    """Registers, spills, occupancy and code size of each op, from the device's own compiler.

    \b
    --device NAME sets the profile as build, validate and bench do: the kernels
    compiled are the ones `build --device NAME` writes (the profile's default
    tiles, unless the config sets its own), and the report names that profile
    (--json: "profile", and "config_sets", the options the config sets itself).
    Without --device the config's own profile is compiled, if a compiler here
    judges it.
    adreno-7xx / adreno-6xx: Turnip's ir3 compiler over Mesa's noop DRM shim (make
    mesa-compilers builds it), as --gpu a740 or a730 / a660, a630 or a618: vec4
    registers, max waves per core, instructions, spill stores and fills.
    mali-valhall: PanVK's Valhall compiler as a Mali G610 (shaderdb): work
    registers (32 or 64), threads (2 = full occupancy), instructions, cycle
    estimate, spills and fills.
    rdna2: Mesa's RADV compiles for a null RDNA2 device (no GPU needed) and its ACO compiler reports
    VGPRs, SGPRs, spilled VGPRs/SGPRs, scratch bytes, waves per SIMD, code bytes and its static latency
    and inverse-throughput estimates. A kernel that spills here would crawl on a real GPU.
    On the mobile profiles each op's estimated time on the part (its figures
    printed beside it: cores, lanes, clock, DRAM bandwidth) follows from the
    compiler's own counts; --compare-tiles estimates the sweep's tiles too.
    CONFIG may be a network manifest (kernelgen import): every kernel of the
    network, flagged where it spills or misses the target occupancy, and the
    network's estimated time (--device required).
    Example:
      kernelgen stats configs/seed002_vulkan.yaml --target vulkan --device rdna2
      kernelgen stats net/mobilenet_v2.yaml --target vulkan --device mali-valhall
    """
    if target not in TARGETS:
        raise click.BadParameter(f"unknown target {target!r} (expected one of: {', '.join(TARGETS)})",
                                 param_hint="--target")
    if is_manifest(config):
        _network(config, target, device, gpu, compare_tiles, as_json)
        return
    loaded = load_config(config)
    loaded = with_device(loaded, device) if device else loaded
    try:
        profile = stats_profile(loaded, target, device)
    except KernelgenError as error:
        raise (click.BadParameter(str(error), param_hint="--device") if device else click.UsageError(str(error))) \
            from None
    if gpu is not None and GPU_PROFILE[gpu] != profile:
        raise click.BadParameter(f"{gpu} is a part of the {GPU_PROFILE[gpu]} profile, not of {profile}",
                                 param_hint="--gpu")
    kernel = kernel_stats(loaded, target, gpu=gpu, compare_tiles=compare_tiles)
    rows = kernel.rows
    compiler = TARGETS[target].stats_compiler(profile, gpu)
    options = TARGETS[target].options(loaded)
    given = sorted((options.model_fields_set if options is not None else set()) - {"device"})
    tiles = (f"the {profile} profile's defaults and the config's {', '.join(given)}" if given
             else f"the {profile} profile's default tiles")
    if as_json:
        context = run_context([target], {f"{target}-stats": f"{profile} ({compiler})"})
        click.echo(json.dumps({"context": context, "results": [{
            "config": loaded.name, "target": target, "device": profile, "profile": profile, "config_sets": given,
            "ops": [r.as_dict() for r in rows], "assumptions": TARGETS[target].stats_assumptions(profile, gpu),
            **{k: v for k, v in kernel_record(kernel).items() if k != "ops"},
            "estimates": [e.as_dict() for e in kernel.estimates]}]}, indent=2))
    else:
        click.echo(f"{loaded.name}: {target} kernels with {tiles}, compiled for {profile} by {compiler}")
        for row in rows:
            click.echo(f"  op {row.op}: {row.label}")
        click.echo(f"{'op':>3} " + " ".join(f"{k:>18}" for k in KEYS))
        for row in rows:
            click.echo(f"{row.op:>3} " + " ".join(f"{getattr(row, k):>18}" for k in KEYS))
        if kernel.estimates:
            print_estimates(kernel, profile, TARGETS[target].stats_assumptions(profile, gpu))
    for row in rows:
        warning = TARGETS[target].spill_warning(row, profile, compiler)
        if warning:
            click.echo(f"warning: {warning}", err=True)


def _network(manifest: str, target: str, device: str | None, gpu: str | None, compare_tiles: bool,
             as_json: bool) -> None:
    """A manifest: every kernel of the network, for --device (required: the kernels' own profile is lavapipe's)."""
    from .network import load_networks

    if device is None:
        raise click.UsageError(f"{manifest} is a network manifest: give --device (one of "
                               f"{', '.join(TARGETS[target].stats_devices)}) to compile its kernels for")
    if gpu is not None and GPU_PROFILE[gpu] != device:
        raise click.BadParameter(f"{gpu} is a part of the {GPU_PROFILE[gpu]} profile, not of {device}",
                                 param_hint="--gpu")
    (network,) = load_networks((manifest,), device)
    network_stats(network, target, device, gpu, compare_tiles, as_json)


@click.command("devices")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def devices_command(as_json: bool) -> None:
    """The device profiles the targets take their defaults from, each number with its source.

    \b
    A config picks one with `vulkan: {device: NAME}` (default lavapipe) or `opencl: {device: NAME}`
    (default pocl-cpu); --device NAME on build, validate, bench, run and stats picks one over it.
    Example:
      kernelgen devices
    """
    from dataclasses import asdict

    from ..devices import PROFILES

    if as_json:
        click.echo(json.dumps({name: asdict(p) for name, p in PROFILES.items()}, indent=2))
        return
    facts = ("subgroup", "register_budget", "local_memory_bytes", "max_workgroup", "max_image", "fp16_arithmetic",
             "int64", "vector_width", "textures", "texture_filters")
    for p in PROFILES.values():
        click.echo(f"{p.name}: {p.description}")
        for fact in facts:
            value = getattr(p, fact)
            value = "x".join(map(str, value)) if isinstance(value, tuple) else ("-" if value is None else value)
            source = p.sources.get(fact, "")
            click.echo(f"  {fact:<19} {str(value):<12} {source}")
