"""`kernelgen import MODEL.onnx -o DIR`: the command line of the ONNX importer (kernelgen.onnx.importer),
split from cli.py, which registers it. Prints and exits like the other commands."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from ..api import TARGETS
from ..errors import KernelgenError
from ..files import write_if_changed
from ..onnx.fusion import DEFAULT_MAX_OPS, GroupCost


def _group_line(cost: GroupCost) -> str:
    budget = f" of a {cost.budget_bytes // 1024} KiB budget" if cost.budget_bytes else " (default schedule)"
    fused, alone = cost.activation_bytes, cost.unfused_activation_bytes
    saved = (f"activations {_size(fused)} against {_size(alone)} op by op ("
             + (f"{_size(alone - fused)} saved), " if fused <= alone else f"{_size(fused - alone)} more), "))
    return (f"executed/useful FLOPs {cost.recompute:.2f}, {saved}{_size(cost.traffic_bytes)} moved in all, "
            f"workspace {cost.workspace_bytes / 1024:.0f} KiB{budget}, {cost.seconds * 1e6:.0f} us estimated")


def _quantized_coster():
    """The cost of a quantized group on the target that takes uint8 configs (the importer writes them for it)."""
    from ..api import fusion_coster

    takes = next((name for name, target in TARGETS.items() if "uint8" in target.dtypes), None)
    return fusion_coster(takes) if takes else None


def _size(count: int) -> str:
    return f"{count / 1e6:.2f} MB" if count >= 1e6 else f"{count / 1e3:.1f} kB"


@click.command("import")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out_dir", default="configs", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the configs (one per fused group of Conv nodes).")
@click.option("--target", "targets", multiple=True, metavar="NAME", default=("c",), show_default=True,
              help=f"The targets written into each config (repeatable). One of: {', '.join(TARGETS)}.")
@click.option("--max-group-ops", "max_ops", type=click.IntRange(min=1), default=DEFAULT_MAX_OPS, show_default=True,
              help="The most convs one kernel fuses.")
@click.option("--cut", "cuts", multiple=True, metavar="NODE",
              help="End a group at this node (its name, or its first output's); repeatable.")
def import_command(model: str, out_dir: str, targets: tuple[str, ...], max_ops: int, cuts: tuple[str, ...]) -> None:
    """Read an ONNX model and write one config per fused group of Conv nodes.

    \b
    A chain of Conv nodes in which each result feeds only the next conv may be one kernel; Relu
    and Clip fold into `activation`, an Add of the chain's input or an earlier conv's result into
    `residual`. Where such a chain is cut into kernels is chosen by cost: each candidate group is
    planned (schedule: auto under the first target's budget) and the cuts with the least estimated
    time (executed FLOPs and memory traffic against the target's roofs) win, among groups that fit
    and recompute at most 1.15x their useful FLOPs; one line per group says what was chosen. Each config records its model and nodes (`source:`), so `kernelgen validate` runs
    it on the model's own weights and checks it against onnxruntime as well. Every node not
    imported is listed with its op type. Exit 0 when at least one conv was imported.
    Example:
      kernelgen import mobilenetv2.onnx -o configs/mobilenetv2 && kernelgen validate configs/mobilenetv2/*.yaml
    """
    from ..api import fusion_coster
    from ..onnx.importer import Fusion, import_model

    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise click.BadParameter(f"unknown target {unknown[0]!r} (expected one of: {', '.join(TARGETS)})",
                                 param_hint="--target")
    try:
        chosen = tuple(dict.fromkeys(targets))
        fusion = Fusion(coster=fusion_coster(chosen[0]), max_ops=max_ops, cut_after=frozenset(cuts),
                        quant_coster=_quantized_coster())
        imported = import_model(model, out_dir, chosen, fusion)
        for config in imported.configs:
            path = Path(out_dir) / f"{config.name}.yaml"
            write_if_changed(path, config.text)
            click.echo(f"imported {path}: {len(config.nodes)} node(s): {', '.join(config.nodes)}")
            if config.group is not None:
                click.echo(f"  {_group_line(config.group)}")
        for note in imported.notes:
            click.echo(f"  {note}")
        if imported.manifest:
            path = Path(out_dir) / "network.yaml"
            write_if_changed(path, imported.manifest)
            click.echo(f"network {path}: {len(imported.configs)} kernel(s) and the host steps between them, in order")
        if fusion.coster is None and any("dtype: uint8" not in c.text for c in imported.configs):
            click.echo(f"note: the {chosen[0]} target has no fusion cost: it runs one kernel per conv2d (intermediates "
                       f"in device memory), so a chain costs the same however it is cut; each chain the graph allows "
                       f"is one config (--target c or hvx cut by cost, and take --max-group-ops and --cut)")
    except KernelgenError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    for node, op_type, why in imported.skipped:
        click.echo(f"not imported: {node} ({op_type}){': ' + why if why else ''}")
    if not imported.configs:
        click.echo(f"error: {model}: no Conv node could be imported", err=True)
        sys.exit(1)
