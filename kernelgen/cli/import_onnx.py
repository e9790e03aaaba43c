"""`kernelgen import MODEL.onnx -o DIR`: the command line of the ONNX importer (kernelgen.onnx.importer),
registered by commands.py. Prints and exits like the other commands."""
from __future__ import annotations

import re

import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import click

from ..api import TARGETS
from ..config.model import ConfigModel
from ..errors import ConfigError, KernelgenError
from ..files import display_path, write_if_changed
from ..onnx.fusion import DEFAULT_MAX_OPS, GroupCost
from ..onnx.graph import OnnxError
from ..target_choice import choose_targets
from .common import echo_problems

PLUMBING = ("QuantizeLinear", "DequantizeLinear")  # the Q/DQ around a quantized model's ops: nothing to act on
CONVS = ("Conv", "QLinearConv")
KIND = {"float32": "float", "uint8": "quantized"}
# float convs without --target: the targets a config without `targets:` builds
DEFAULT_FLOAT = tuple(ConfigModel.model_fields["targets"].default)


def _choose_targets(model: str, given: tuple[str, ...], found: dict[str, tuple[str, ...]]
                    ) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """The targets each dtype's configs get, and one line per dtype saying which and why. Without --target:
    float convs the default, quantized convs the first target that takes uint8. With --target: of the given
    targets, those that take the config's dtype; a dtype none of them takes is exit 2, naming the targets that do
    (a model with float and quantized convs needs a given target for each)."""
    chosen, lines = {}, []
    for dtype, convs in found.items():
        kind = f"{len(convs)} {KIND.get(dtype, dtype)} conv{'s' if len(convs) > 1 else ''} ({dtype})"
        choice = choose_targets(dtype, given, TARGETS)
        takes = choice.takers
        if not takes:
            raise OnnxError(f"{Path(model).name} has {kind} and no registered target takes {dtype}")
        if given:
            chosen[dtype] = choice.chosen
            if not chosen[dtype]:
                raise OnnxError(_none_given_takes(model, kind, dtype, given, takes, len(found)))
            why = "as given (--target)" if chosen[dtype] == given else \
                f"of --target {' '.join(given)}, those that take {dtype}"
        elif dtype == "float32":
            chosen[dtype] = tuple(t for t in DEFAULT_FLOAT if t in takes) or takes[:1]
            why = "the default, as for a config without `targets:` (--target to choose)"
        else:
            chosen[dtype] = takes[:1]
            which = "only target" if len(takes) == 1 else f"first of the targets ({', '.join(takes)})"
            why = f"the {which} whose dtypes include {dtype} (--target to choose)"
        lines.append(f"targets: {', '.join(chosen[dtype])} for the {kind}: {why}")
    unused = [t for t in given if not any(t in targets for targets in chosen.values())]
    if unused and found:
        lines.append(f"targets: --target {' '.join(unused)} takes none of this model's convs "
                     f"({', '.join(found)}): left out")
    return chosen, lines


def _none_given_takes(model: str, kind: str, dtype: str, given: tuple[str, ...], takes: tuple[str, ...],
                      kinds: int) -> str:
    dtypes = "; ".join(f"{t} takes {', '.join(TARGETS[t].dtypes)}" for t in given)
    then = ", or leave --target out" if kinds == 1 else " (each config gets the given targets that take its dtype)"
    return (f"{Path(model).name} has {kind} and no --target given takes {dtype} ({dtypes}); "
            f"{' and '.join(takes)} {'does' if len(takes) == 1 else 'do'}: add --target {takes[0]}{then}")


def _imported_line(path: Path, config) -> str:
    """The config's ops by type (not the Q/DQ nodes around them: source.nodes lists every node) and its convs."""
    counts = Counter(op for op in config.ops if op not in PLUMBING)
    ops = ", ".join(op if n == 1 else f"{op} x{n}" for op, n in counts.items()) or f"{len(config.nodes)} node(s)"
    convs = [node for node, op in zip(config.nodes, config.ops) if op in CONVS]
    where = f": {convs[0]}" if len(convs) == 1 else f": {convs[0]} .. {convs[-1]}" if convs else ""
    return f"imported {path}: {ops}{where}"


def _left_lines(skipped: tuple[tuple[str, str, str], ...], manifest: bool) -> list[str]:
    """What a user must act on: the ops kernelgen did not generate, by type with counts (the Q/DQ plumbing
    between them and the kernels only counted), and the convs it could not take, by reason."""
    counts = Counter(op for _, op, why in skipped if not why and op not in PLUMBING)
    plumbing = sum(op in PLUMBING for _, op, why in skipped if not why)
    where = " (host steps in network.yaml, run by onnxruntime)" if manifest else ""
    lines = []
    if counts or plumbing:
        ops = ", ".join(op if n == 1 else f"{op} x{n}" for op, n in counts.items())
        qdq = f"{plumbing} QuantizeLinear/DequantizeLinear" if plumbing else ""
        lines.append(f"not generated{where}: {ops or 'only ' + qdq}"
                     f"{f' (and the {qdq} around them)' if ops and qdq else ''}")
    refused: dict[tuple[str, str], list[str]] = {}
    for node, op, why in skipped:
        if why:
            refused.setdefault((op, why), []).append(node)
    for (op, why), nodes in refused.items():
        shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        lines.append(f"not imported: {op} {shown}: {why}")
    return lines


def _group_line(cost: GroupCost) -> str:
    budget = f" of a {cost.budget_bytes // 1024} KiB budget" if cost.budget_bytes else " (default schedule)"
    fused, alone = cost.activation_bytes, cost.unfused_activation_bytes
    saved = (f"activations {_size(fused)} against {_size(alone)} op by op ("
             + (f"{_size(alone - fused)} saved), " if fused <= alone else f"{_size(fused - alone)} more), "))
    return (f"executed/useful FLOPs {cost.recompute:.2f}, {saved}{_size(cost.traffic_bytes)} moved in all, "
            f"workspace {cost.workspace_bytes / 1024:.0f} KiB{budget}, {cost.seconds * 1e6:.0f} us estimated")


def _size(count: int) -> str:
    return f"{count / 1e6:.2f} MB" if count >= 1e6 else f"{count / 1e3:.1f} kB"


@contextmanager
def _progress(nodes: int):
    """On a terminal, a progress bar on stderr over the model's nodes while the candidate groups are planned (the
    longest wait: seconds to a minute); yields the callback that moves it (told a node index), or None when stderr
    is piped (nothing is written then)."""
    if not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=nodes, label="planning groups", file=sys.stderr,
                           item_show_func=lambda node: f"node {node + 1}/{nodes}" if node is not None else None
                           ) as bar:
        def reached(node: int) -> None:
            if node + 1 > bar.pos:
                bar.update(node + 1 - bar.pos, node)
        yield reached


def _activations(targets: tuple[str, ...]) -> frozenset[str] | None:
    """The activation kinds every one of the targets computes (None: every kind): what float convs may fold."""
    listed = [TARGETS[t].info().activations for t in targets]
    known = [frozenset(kinds) for kinds in listed if kinds is not None]
    return frozenset.intersection(*known) if known else None


def _plan_problem(group) -> str:
    """Why the planner rejects a candidate group ("" when it plans): for a target without a fusion cost, whose
    chains are not planned while they are cut."""
    from ..api import catalog, plan
    from ..onnx.group_config import config_of

    try:
        plan(config_of(group, catalog()))
    except ConfigError as error:
        problem = error.problems[0]
        return f"{problem.key}: {problem.message}" if problem.key else problem.message
    return ""


def _with_threads(text: str, threads: int) -> str:
    """A config's text with `c: {threads: N}` added where N > 1 and it is a float config for c (the c target's
    OpenMP team; a uint8 config runs one thread)."""
    if threads == 1 or re.search(r"^dtype: uint8$", text, re.MULTILINE) or \
            not re.search(r"^targets: \[(.*, )?c(, .*)?\]$", text, re.MULTILINE):
        return text
    return f"{text}c: {{threads: {threads}}}  # kernelgen import --threads {threads}\n"


@click.command("import")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out_dir", default="configs", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the configs (one per fused group of Conv nodes).")
@click.option("--target", "targets", multiple=True, metavar="NAME",
              help=f"The targets written into each config (repeatable): of those given, the ones that take the "
                   f"config's dtype; a kind of conv none of them takes is exit 2. Default: "
                   f"{', '.join(DEFAULT_FLOAT)} for float convs, "
                   f"{(choose_targets('uint8', (), TARGETS).takers or ('none',))[0]} (the "
                   f"target that takes uint8) for quantized ones. One of: {', '.join(TARGETS)}.")
@click.option("--max-group-ops", "max_ops", type=click.IntRange(min=1), default=DEFAULT_MAX_OPS, show_default=True,
              help="The most convs one kernel fuses.")
@click.option("--cut", "cuts", multiple=True, metavar="NODE",
              help="End a group at this node (its name, or its first output's); repeatable.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="The most OpenMP threads each float c kernel runs: writes `c: {threads: N}` into those configs "
                   "(their caches then hold N copies; the program's --threads picks up to N at run time).")
def import_command(model: str, out_dir: str, targets: tuple[str, ...], max_ops: int, cuts: tuple[str, ...],
                   threads: int) -> None:
    """Read an ONNX model and write one config per fused group of Conv nodes.

    \b
    A chain of Conv nodes in which each result feeds only the next conv may be one kernel; Relu
    and Clip fold into `activation`, an Add of the chain's input or an earlier conv's result into
    `residual`. Where such a chain is cut into kernels is chosen by cost: each candidate group is
    planned (schedule: auto under the first target's budget) and the cuts with the least estimated
    time (executed FLOPs and memory traffic against the target's roofs) win, among groups that fit
    and recompute at most 1.15x their useful FLOPs; one line per group says what was chosen.
    Quantized convs (QLinearConv, QDQ) become uint8 configs. Configs are named after the model's
    module structure (features_3, layer1_0_conv1, features_3_conv_1_to_4_conv_0), else after the
    convs' places (conv_012_to_conv_019). Each config records its model and nodes (`source:`), so
    `kernelgen validate` runs it on the model's own weights and checks it against onnxruntime as
    well. The first lines say which targets each kind of conv got and why; the last ones the ops
    left to onnxruntime (host steps in network.yaml) by type, and each conv that could not be
    imported, with the reason. Exit 0 when at least one conv was imported.
    Example:
      kernelgen import mobilenetv2.onnx -o configs/mobilenetv2 && kernelgen validate configs/mobilenetv2/*.yaml
    """
    from ..api import fusion_coster
    from ..onnx.graph import read_graph
    from ..onnx.importer import Fusion, conv_dtypes, import_graph

    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise click.BadParameter(f"unknown target {unknown[0]!r} (expected one of: {', '.join(TARGETS)})",
                                 param_hint="--target")
    try:
        graph = read_graph(model)
        chosen, lines = _choose_targets(model, tuple(dict.fromkeys(targets)), conv_dtypes(graph))
        for line in lines:
            click.echo(line)
        if graph.uint8_activations:
            click.echo(f"int8 activations: {graph.uint8_activations} tensor(s) held as uint8, each byte and zero point "
                       f"+ 128 (the same values: the hvx kernels move uint8 bytes)")
        floats, quantized = chosen.get("float32", DEFAULT_FLOAT), chosen.get("uint8", ())
        # a filter layout the float targets' dense kernels all read in place (c: OHWI16o): named on those convs
        layouts = {TARGETS[t].info().dense_filter_layout for t in floats}
        fusion = Fusion(coster=fusion_coster(floats[0]), max_ops=max_ops, cut_after=frozenset(cuts),
                        quant_coster=fusion_coster(quantized[0]) if quantized else None, check=_plan_problem,
                        channels_last=all(TARGETS[t].info().channels_last_caches for t in floats),
                        activations=_activations(floats),
                        filter_layout=layouts.pop() if len(layouts) == 1 else "")
        with _progress(len(graph.nodes)) as reached:
            imported = import_graph(graph, out_dir, floats, fusion if reached is None else
                                    replace(fusion, progress=reached), quantized)
        for config in imported.configs:
            path = Path(out_dir) / f"{config.name}.yaml"
            write_if_changed(path, _with_threads(config.text, threads))
            click.echo(_imported_line(path, config))
            if config.group is not None:
                click.echo(f"  {_group_line(config.group)}")
        for note in imported.notes:
            click.echo(f"  {note}")
        if imported.manifest:
            path = Path(out_dir) / "network.yaml"
            write_if_changed(path, imported.manifest)
            hosts = len(re.findall(r"^  - host:", imported.manifest, re.MULTILINE))
            moved = [f"{n} {kind}" for kind in ("concat", "slice", "shuffle", "resize")
                     for n in (len(re.findall(rf"^  - {kind}:", imported.manifest, re.MULTILINE)),) if n]
            between = (f", {', '.join(moved)} step(s) " if moved else " ") + (
                f"and {hosts} host step(s) between them" if hosts else "and no host step")
            nhwc = imported.manifest.count("dtype: float32, layout: NHWC}")
            relaid = f"; {nhwc} tensor(s) NHWC between kernels, as they compute" if nhwc else ""
            click.echo(f"network {path}: {len(imported.configs)} kernel(s){between}, in order{relaid}")
        if fusion.coster is None and "float32" in chosen:
            costed = " or ".join(name for name in TARGETS if fusion_coster(name) is not None)
            click.echo(f"note: the {floats[0]} target has no fusion cost: it runs one kernel per conv2d (intermediates "
                       f"in device memory), so a chain costs the same however it is cut; each chain the graph allows "
                       f"is one config (--target {costed} cut by cost, and take --max-group-ops and --cut)")
    except ConfigError as error:
        echo_problems(error)
        sys.exit(2)
    except OnnxError as error:  # the model as a whole: at its file
        click.echo(f"{display_path(model)}:1:1: error: {error}", err=True)
        sys.exit(error.exit_code)
    except KernelgenError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    if imported.converted:
        shown = ", ".join(imported.converted[:3]) + (f" and {len(imported.converted) - 3} more"
                                                     if len(imported.converted) > 3 else "")
        click.echo(f"converted by kernelgen (convert steps in network.yaml): {shown}")
    if imported.copied:
        kinds = Counter(re.findall(r"^  - (concat|slice|shuffle):", imported.manifest, re.MULTILINE))
        click.echo(f"copied by kernelgen (channels moved, nothing computed: network.c copies them): "
                   f"{len(imported.copied)} node(s) in {', '.join(f'{n} {k}' for k, n in kinds.items())} step(s)")
    if imported.resized:
        steps = len(re.findall(r"^  - resize:", imported.manifest, re.MULTILINE))
        click.echo(f"resized by kernelgen (resize steps, as onnxruntime's Resize): "
                   f"{len(imported.resized)} node(s) in {steps} resize step(s)")
    for line in _left_lines(imported.skipped, bool(imported.manifest)):
        click.echo(line)
    if not imported.configs:
        click.echo(f"error: {model}: no Conv node could be imported", err=True)
        sys.exit(1)
